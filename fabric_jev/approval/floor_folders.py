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

import posixpath as _posix
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import paths as _paths

if TYPE_CHECKING:
    from .call_view import CallView

#: Keys that name the folder a call runs its command in (compared without case, `-` or `_`).
FOLDER_KEYS = ("cwd", "workdir", "work_dir", "workingDir", "working_dir", "workingDirectory", "working_directory",
               "dir", "directory", "chdir", "cwdPath", "cwd_path", "runIn", "run_in", "wd", "cd", "pwd", "cwdir",
               "current_dir", "currentDir", "current_directory", "currentDirectory", "working_folder",
               "workingFolder", "work_folder", "start_dir", "startDir", "start_in", "startIn", "exec_dir",
               "execDir", "run_dir", "runDir")
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


# ---------------------------------------------------------------------------- the environment a call sets

#: Keys under which a call hands its command environment variables.
ENV_KEYS = ("env", "environment", "envs", "env_vars", "envVars", "environmentVariables", "environment_variables",
            "extraEnv", "extra_env", "envVariables")
#: Variables that change what a command runs or where (compared upper-cased; `*` ends a prefix).
#: One of them set by the call is an opaque read: the floor cannot know what the command then does.
RISKY_VARIABLES = ("PATH", "LD_*", "DYLD_*", "HOME", "GIT_*", "BASH_ENV", "ENV", "BASH_FUNC_*", "PYTHON*",
                   "NODE_OPTIONS", "NODE_PATH", "PERL5*", "PERLLIB", "RUBY*", "IFS", "PS4", "PS1", "PROMPT_COMMAND",
                   "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE", "ZDOTDIR", "PWD", "OLDPWD", "SHELL", "EDITOR",
                   "VISUAL", "PAGER", "LESSOPEN", "LESSCLOSE", "GIT_*", "SSH_*", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
                   "JDK_JAVA_OPTIONS", "CLASSPATH", "GCONV_PATH", "MALLOC_*", "LUA_*", "PHPRC", "NPM_CONFIG_*",
                   "YARN_*", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "DOCKER_HOST", "KUBECONFIG", "CC", "CXX",
                   "MAKEFLAGS", "RUSTC_WRAPPER", "RUSTFLAGS", "CARGO_*", "GOFLAGS", "TERMINFO", "LOCPATH",
                   "HOSTALIASES", "RES_OPTIONS")
_ENV = frozenset(_name(k) for k in ENV_KEYS)


@dataclass(frozen=True, slots=True)
class Environment:
    """What the call's environment objects hold: each variable's value (read as a possible
    command too), the risky names set, and a TMPDIR given there ("" when none, None when it
    cannot be known)."""

    values: tuple[str, ...] = ()
    risky: tuple[str, ...] = ()
    tmpdir: str | None = ""
    unread: bool = False


def environment(arguments: object) -> Environment:
    """Every environment object in the arguments (a dict, a list of ``{name, value}`` or of
    ``K=V`` strings, a string of them), read to MAX_DEPTH."""
    values: list[str] = []
    risky: list[str] = []
    tmpdir: str | None = ""
    unread = False
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= _MAX_DEPTH:
            continue
        if isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        if not isinstance(value, dict):
            continue
        for key, item in value.items():
            if _name(key) in _ENV:
                pairs = _pairs(item)
                if pairs is None:
                    unread = True
                    continue
                for name, text in pairs:
                    values.append(text)
                    upper = name.upper()
                    if upper == "TMPDIR":
                        tmpdir = _posix.normpath(text) if text.startswith("/") and tmpdir == "" else None
                    elif any(upper.startswith(p[:-1]) if p.endswith("*") else upper == p for p in RISKY_VARIABLES):
                        risky.append(name)
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))
    return Environment(tuple(values), tuple(dict.fromkeys(risky)), tmpdir, unread)


def _pairs(value: Any) -> list[tuple[str, str]] | None:
    """(name, value) of an environment object, None when its shape cannot be read."""
    if value in (None, "", [], {}):
        return []
    if isinstance(value, dict):
        if isinstance(value.get("name"), str):  # {name, value} (or valueFrom: the name is what counts)
            return [(value["name"], _env_text(value.get("value")))]
        return [(str(k), _env_text(v)) for k, v in value.items()]
    if isinstance(value, str):
        # "K=V L=W"; a string without `=` names an environment ("production"), no variables.
        return [(part.partition("=")[0], part.partition("=")[2]) for part in value.split() if "=" in part]
    if isinstance(value, list):
        out: list[tuple[str, str]] = []
        for item in value:
            found = _pairs(item)
            if found is None:
                return None
            out.extend(found)
        return out
    return None


def _env_text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
