"""A capability call as rules and the floor read it: its arguments by facet, where it runs. Pure code.

`CallView` reads each facet of the arguments once (the command under the
command keys, parsed; the paths, normalised; the URLs; the SQL), whatever the
number of rules. `RuleContext` says where the call runs: the working
directory, the home folder, the run's origins and, on the host
(`RuleContext.here`), how to resolve symlinks and which temporary folders
are the user's (`fabric_jev.approval.places`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from . import paths as _paths
from . import shell as _shell

#: The arguments each facet reads, at the top level or inside params/args/arguments/input.
COMMAND_KEYS = ("cmd", "command", "commandLine", "command_line", "script", "shellCommand",
                "shell_command", "argv")
PATH_KEYS = ("path", "paths", "file", "files", "filePath", "file_path", "filename", "fileName", "dir",
             "directory", "cwd", "workdir", "src", "source", "dest", "destination", "from", "to",
             "target_file", "targetFile")
URL_KEYS = ("url", "uri", "href", "endpoint")
SQL_KEYS = ("sql", "query", "statement")
_NESTS = ("params", "args", "arguments", "input")
FACETS = {"cmd": COMMAND_KEYS, "path": PATH_KEYS, "url": URL_KEYS, "sql": SQL_KEYS}


def key_name(key: str) -> str:
    """A key as rules and the floor compare it: case and ``-``/``_`` ignored (``CMD``,
    ``Command-Line``, ``file-path``)."""
    return key.replace("-", "").replace("_", "").lower()


#: The last word of a key that names a place written (`folderPath`, `file_paths`, `targets`), and the
#: first words that make a key one (`oldName`, `src_uri`).
_PLACE_ENDS = ("path", "paths", "pathname", "pathnames", "file", "files", "filename", "filenames", "dir", "dirs",
               "directory", "directories", "folder", "folders", "target", "targets", "dest", "dests", "destination",
               "destinations", "dst", "location", "locations", "uri", "uris")
_PLACE_STARTS = frozenset({"old", "new", "src", "dst", "source", "dest"})


def names_a_place(key: str) -> bool:
    """Whether a key's words say it names a place (a key of data written is read apart)."""
    name = key_name(key)
    words = key_words(key)
    return name.endswith(_PLACE_ENDS) or bool(words and words[0] in _PLACE_STARTS)


def key_words(key: str) -> list[str]:
    """The words of a key or a ref: ``sandbox.runPython`` → sandbox, run, python."""
    return [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key).lower()) if w]



@lru_cache(maxsize=64)
def _names(keys: tuple[str, ...]) -> frozenset[str]:
    return frozenset(key_name(k) for k in keys)


@dataclass(slots=True)
class RuleContext:
    """Where the call runs: the working directory, the home folder, the run's origins."""

    cwd: str
    home: str
    origins: frozenset[str] = frozenset()
    #: Resolves symlinks (os.path.realpath on the host); None keeps paths lexical.
    resolve: Callable[[str], str] | None = None
    #: The temporary roots (/tmp, /var/tmp, $TMPDIR) below which a folder the user owns is theirs
    #: to change (fabric_jev.approval.places).
    temporary: tuple[str, ...] = ()
    #: The user id owning a path (os.lstat on the host), None when nothing is there; without it
    #: no temporary folder counts as the user's.
    owner: Callable[[str], int | None] | None = None
    #: The user the host runs as.
    uid: int | None = None
    #: $TMPDIR as the call's shell inherits it: "" when unset, None when unknown (`shell_fresh`).
    tmpdir: str | None = None

    @classmethod
    def here(cls, cwd: str, home: str, origins: frozenset[str] = frozenset()) -> RuleContext:
        """The context of a call made on this machine: symlinks resolved, its temporary roots,
        ownership looked up with lstat, the user the process runs as."""
        import os
        import os.path

        tmpdir = os.environ.get("TMPDIR")
        known_tmpdir = "" if tmpdir is None else os.path.normpath(tmpdir) if tmpdir.startswith("/") else None
        return cls(cwd, home, origins, os.path.realpath, temporary_roots(), owner_of, os.getuid(), known_tmpdir)

    @property
    def where(self) -> _paths.Where:
        return _paths.Where(self.cwd, self.home)

    @property
    def known(self) -> _shell.Known:
        return _shell.Known(self.home, self.cwd, self.tmpdir)


def temporary_roots() -> tuple[str, ...]:
    """The temporary roots of this machine: /tmp, /var/tmp and $TMPDIR (an absolute folder that
    neither is nor holds the home folder), each also as its symlinks resolve (/tmp is
    /private/tmp on macOS)."""
    import os
    import posixpath

    roots = ["/tmp", "/var/tmp"]
    tmpdir = os.environ.get("TMPDIR", "")
    if tmpdir.startswith("/"):
        folder = posixpath.normpath(tmpdir)
        if folder != "/" and not _paths.inside(posixpath.normpath(os.path.expanduser("~")), folder):
            roots.append(folder)
    return tuple(dict.fromkeys([*roots, *(os.path.realpath(r) for r in roots)]))


def owner_of(path: str) -> int | None:
    """The user id that owns `path` itself (a symlink's own owner), None when nothing is there."""
    import os

    try:
        return os.lstat(path).st_uid
    except FileNotFoundError:
        return None


@dataclass(slots=True)
class CallView:
    """One capability call's arguments, read once per facet whatever the number of rules."""

    ref: str
    risk: str
    arguments: Any
    context: RuleContext
    _cache: dict[Any, Any] = field(default_factory=dict)

    def values(self, keys: Sequence[str]) -> list[object]:
        """The values of `keys`, at the top level and one level inside params/args/arguments/input,
        keys compared as `key_name` does (``Path``, ``file-path``, ``SQL``)."""
        args = self.arguments
        if not isinstance(args, dict):  # JSON arguments: objects are dicts
            return []
        cached: list[Any] | None = self._cache.get(id(keys))  # keys are the module's constant tuples
        if cached is not None:
            return cached
        wanted = _names(tuple(keys))
        nests = _names(_NESTS)
        out = [value for k, value in args.items() if key_name(str(k)) in wanted]
        for k, inner in args.items():
            if isinstance(inner, dict) and key_name(str(k)) in nests:
                out.extend(value for name, value in inner.items() if key_name(str(name)) in wanted)
        self._cache[id(keys)] = out
        return out

    def get(self, dotted: str) -> tuple[bool, object]:
        value = self.arguments
        for part in dotted.split("."):
            if not isinstance(value, dict) or part not in value:
                return False, None
            value = value[part]
        return True, value

    def scripts(self) -> list[_shell.Script]:
        """The commands in the call (a string is parsed by the shell grammar; a list is an argv)."""
        if "scripts" not in self._cache:
            out = []
            for value in self.values(COMMAND_KEYS):
                if isinstance(value, str):
                    out.append(_shell.parse(value, self.context.known))
                elif isinstance(value, list) and value and all(isinstance(v, str | int | float) for v in value):
                    # numbers and booleans in an argv are their JSON text (`["rm", "-rf", 1, "~"]`)
                    out.append(_shell.parse_argv([v if isinstance(v, str) else json.dumps(v) for v in value],
                                                 self.context.known))
            self._cache["scripts"] = out
        result: list[_shell.Script] = self._cache["scripts"]
        return result

    def paths(self) -> list[tuple[str, str] | None]:
        """Each path argument as (lexical, real); None for one that cannot be known."""
        if "paths" not in self._cache:
            out: list[tuple[str, str] | None] = []
            for value in self.values(PATH_KEYS):
                items = value if isinstance(value, list) else [value]
                for item in items:
                    out.append(self.path(item) if isinstance(item, str) else None)
            self._cache["paths"] = out
        result: list[tuple[str, str] | None] = self._cache["paths"]
        return result

    def path(self, text: str) -> tuple[str, str] | None:
        known: dict[str, tuple[str, str] | None] = self._cache.setdefault("path", {})
        if text in known:
            return known[text]
        found = known[text] = self.path_from(text)
        return found

    def path_from(self, text: str, where: _paths.Where | None = None) -> tuple[str, str] | None:
        """`text` as a path, lexically and resolved, from `where` (the call's own folder by default)."""
        lexical = _paths.normalise(text, self.context.where if where is None else where)
        if lexical is None:
            return None
        resolve = self.context.resolve
        real = lexical
        if resolve is not None:
            try:
                real = resolve(lexical)
            except (OSError, ValueError):
                real = lexical
        return lexical, real

    def strings(self, keys: Sequence[str]) -> list[str]:
        out = []
        for value in self.values(keys):
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, str))
        return out
