"""A glob that may match a path the floor asks about counts as that path (`cat ~/.ss?/id_rsa`). Pure code.

The shell expands a glob before the program runs, so ``~/.[s]sh/id_rsa`` or ``~/.*/id_rsa`` reads
``~/.ssh/id_rsa`` where it exists. A glob operand hits an entry when, segment by segment, it may
match one of the entry's folders under the home folder or the root (``~/.ss*`` matches
``~/.ssh``), or when the glob read with each wildcard as one plain character matches the entry.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from .floor_reading import commands, operands

if TYPE_CHECKING:
    from .call_view import CallView

_GLOB = re.compile(r"[*?]|\[[^\]]+\]")


def _plain(glob: str) -> str:
    """The glob with each wildcard as one character: `[s]` its first member, others `x`."""
    return _GLOB.sub(lambda m: m.group()[1] if m.group().startswith("[") and m.group()[1] != "!" else "x", glob)


def glob_operands(view: CallView) -> Iterator[str]:
    """Every operand of the call's commands that holds a glob, as an absolute path."""
    where = view.context.where
    for command in commands(view):
        for word in operands(command):
            text = word.value
            if text is None or not _GLOB.search(text):
                continue
            if text == "~" or text.startswith("~/"):
                text = where.home + text[1:]
            yield posixpath.normpath(posixpath.join(where.cwd, text))


def may_match(view: CallView, patterns: Sequence[str], matches: Callable[[str], bool]) -> bool:
    """Whether a glob operand may name one of `patterns` (module doc)."""
    home = view.context.where.home
    folders = [(home + p[1:] if p.startswith("~") else p).split("/") for p in patterns if p.startswith(("~/", "/"))]
    for glob in glob_operands(view):
        if matches(_plain(glob)):
            return True
        parts = glob.split("/")
        for folder in folders:
            if len(parts) >= len(folder) and all(fnmatch.fnmatchcase(f, g)
                                                 for f, g in zip(folder, parts, strict=False)):
                return True
    return False
