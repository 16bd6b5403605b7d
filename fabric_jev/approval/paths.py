"""Paths as the file system would see them, and path patterns, for the approvals' rules and floor.

A path is made absolute against the working directory, ``~`` and ``$HOME``
expanded, ``.`` and ``..`` resolved (`lexical`), and, where the host can look,
symlinks resolved too (`real`). An allow rule must match both; a deny rule
or the floor either, so neither ``..`` nor a symlink slips past a rule.

Patterns: ``./src/**`` and ``src/*.py`` are relative to the working directory,
``~/.ssh`` to the home folder, ``/etc/**`` absolute; a pattern without a
slash (``.env``, ``*.pem``) matches that name in any folder. ``*`` and ``?``
stay within one path component, ``**`` crosses them. A pattern matches the
path itself and everything under it (``~/.ssh`` covers ``~/.ssh/id_rsa``).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class Where:
    """The places a path is read against."""

    cwd: str
    home: str


def normalise(value: str, where: Where) -> str | None:
    """`value` absolute and normalised; None when it cannot be known (another user's ``~``,
    an expansion other than $HOME/$PWD, a NUL)."""
    if not value or "\x00" in value:
        return None
    text = value
    if text.startswith("~"):
        user, slash, rest = text[1:].partition("/")
        if user or not where.home:
            return None
        text = where.home + slash + rest
    if "$" in text:
        for name, known in (("HOME", where.home), ("PWD", where.cwd)):
            text = text.replace("${" + name + "}", known).replace("$" + name, known) if known else text
        if "$" in text:
            return None
    if text.startswith("file://"):
        text = text[len("file://"):]
    if not text.startswith("/"):
        text = posixpath.join(where.cwd or "/", text)
    return posixpath.normpath(text).replace("//", "/")


def inside(path: str, root: str) -> bool:
    """Whether absolute `path` is `root` or lies under it."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


@dataclass(frozen=True, slots=True)
class PathPattern:
    text: str
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        return self.regex.match(path) is not None


def compile_path_pattern(text: str, where: Where) -> PathPattern:
    """The pattern as a regex over absolute normalised paths (cached per working directory and home)."""
    return _compile(text, where.cwd, where.home)


@lru_cache(maxsize=1024)
def _compile(text: str, cwd: str, home: str) -> PathPattern:
    pattern = text.strip()
    anywhere = "/" not in pattern.rstrip("/")
    if anywhere:
        body = _glob(pattern.rstrip("/"))
        return PathPattern(text, re.compile(r"(?:.*/)?" + body + r"(?:/.*)?\Z", re.DOTALL))
    if pattern.startswith("~"):
        pattern = home + pattern[1:]
    elif not pattern.startswith("/"):
        pattern = posixpath.join(cwd or "/", pattern)
    # Normalise the literal part: ./x and x/../y read as the path they name.
    head, star, tail = pattern.partition("*")
    if star:
        base = posixpath.normpath(head.rsplit("/", 1)[0] or "/")
        pattern = base.rstrip("/") + "/" + head.rsplit("/", 1)[1] + star + tail
    else:
        pattern = posixpath.normpath(pattern)
    body = _glob(pattern.rstrip("/") or "/")
    return PathPattern(text, re.compile(body + (r"(?:/.*)?\Z" if body != "/" else r".*\Z"), re.DOTALL))


def _glob(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(r".*")
            i += 2
            continue
        if ch == "*":
            out.append(r"[^/]*")
        elif ch == "?":
            out.append(r"[^/]")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)
