"""The folder a call's commands run in, as the floor reads it. Pure code.

A shell capability often takes the folder beside the command
(``{cmd: "rm -rf *", cwd: "/"}``, ``{command: …, workdir: …}``,
``{argv: […], dir: …}``). The command's relative paths are read against that
folder, not against the host's working directory:

- a folder key at the top of the arguments replaces the working directory;
  one deeper in them (``steps[1].cwd``) is one more folder the commands may
  run in;
- a folder that cannot be known (an expansion other than ``~``/``$HOME``, a
  value that is not a string) makes every relative path unknown, and the
  floor asks;
- a ``root``, ``workspace`` or ``folder`` argument that holds a path is one
  more folder the commands may run in;
- a ``cd`` in one of several commands of a call (``{commands: ["cd /",
  "rm -rf *"]}``) is a folder the others may run in.

The working tree the floor protects stays the host's working directory: a
call that names ``/`` as its folder does not make ``/`` the tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import paths as _paths

if TYPE_CHECKING:
    from .call_view import CallView

#: Keys that name the folder a call runs its command in (compared without case, `-` or `_`).
FOLDER_KEYS = ("cwd", "workdir", "work_dir", "workingDir", "working_dir", "workingDirectory", "working_directory",
               "dir", "directory", "chdir", "cwdPath", "cwd_path", "runIn", "run_in")
#: Keys that may name that folder too (a `root` or `workspace` argument): one more folder the
#: commands may run in, never in place of the working directory.
MAYBE_FOLDER_KEYS = ("root", "rootDir", "root_dir", "workspace", "workspaceDir", "workspace_dir", "folder",
                     "baseDir", "base_dir", "basedir", "projectDir", "project_dir", "repoDir", "repo_dir")
#: Nested this deep, a folder key is not looked for (the reading of the commands stops there too).
_MAX_DEPTH = 8


def _name(key: object) -> str:
    return str(key).replace("-", "").replace("_", "").lower()


_FOLDER = frozenset(_name(k) for k in FOLDER_KEYS)
_MAYBE = frozenset(_name(k) for k in MAYBE_FOLDER_KEYS)


def start_folders(view: CallView) -> tuple[str, ...] | None:
    """The folders the call's commands may start in (normalised), None when one cannot be known."""
    if "floor folders" not in view._cache:
        view._cache["floor folders"] = _start_folders(view)
    found: tuple[str, ...] | None = view._cache["floor folders"]
    return found


def _start_folders(view: CallView) -> tuple[str, ...] | None:
    context = view.context
    where = _paths.Where(context.cwd, context.home)
    top: list[str] = []
    deeper: list[str] = []
    stack: list[tuple[Any, int]] = [(view.arguments, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, list) and depth < _MAX_DEPTH:
            stack.extend((item, depth + 1) for item in value)
        if not isinstance(value, dict) or depth >= _MAX_DEPTH:
            continue
        for key, item in value.items():
            if _name(key) in _FOLDER and item not in (None, ""):
                folder = _paths.normalise(item, where) if isinstance(item, str) else None
                if folder is None:
                    return None  # `cwd: "$X"`, `dir: 3`: every relative path is unknown
                (top if depth == 0 else deeper).append(folder)
            elif _name(key) in _MAYBE and isinstance(item, str) and item.startswith(("/", "~", ".")):
                folder = _paths.normalise(item, where)
                if folder is not None:
                    deeper.append(folder)
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))
    starts = top or [context.cwd]
    return tuple(dict.fromkeys([*starts, *deeper]))


def pwd(view: CallView) -> str:
    """What ``$PWD`` is in the call's commands: its one start folder, "" when there are several."""
    folders = start_folders(view)
    return folders[0] if folders is not None and len(folders) == 1 else ""
