"""Where a command may write without a person: the working tree, and temporary folders the user owns.

The floor reads every path a command names (an operand, a redirection, an
option's value) as the file system would: after brace expansion
(``/tmp/{a,../../etc}`` is ``/tmp/a`` and ``/etc``), against every folder an
earlier ``cd`` may have moved to (``cd / && rm -rf *`` deletes ``/*``), with
``~``, ``$HOME``, ``.`` and ``..`` resolved, and symlinks followed where the
host can look. A path that cannot be known (an expansion, a glob that may
match ``..``) is read as lying anywhere.

A **temporary folder the user owns** is a path below a temporary root
(``/tmp``, ``/var/tmp``, ``$TMPDIR``) — never the root itself — whose first
component below the root is written without a glob (``/tmp/*`` is everyone's
files) and, where it exists, belongs to the user running the host (checked
with lstat, so a symlink planted by someone else is not theirs); both the
path as written and where its symlinks lead must be such a folder. Deleting
or writing there is routine (``rm -rf /tmp/myproject-cache``). Pure code:
the host passes the roots, the owner lookup and its user id
(`fabric_jev.approval.call_view.RuleContext.here`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import floor_folders as _folders
from . import paths as _paths
from .floor_reading import scripts
from .shell import folder_change
from .shell_fresh import FRESH
from .shell_words import Simple

if TYPE_CHECKING:
    from .call_view import CallView

#: A brace expansion is read into at most this many words; more is unknown.
MAX_EXPANSIONS = 64
_GLOB = frozenset("*?[")


def expansions(text: str) -> list[str] | None:
    """`text` after brace expansion (``a{b,c}`` → ``ab``, ``ac``; ``{1..3}``), None when it grows
    past MAX_EXPANSIONS. Quotes are gone by now, so a quoted brace is expanded too: that can only
    make the floor read more paths, never fewer."""
    if "{" not in text:
        return [text]
    out: list[str] = []
    pending = [text]
    while pending:
        current = pending.pop()
        found = _first_brace(current)
        if found is None:
            out.append(current)
        else:
            start, end, items = found
            pending.extend(current[:start] + item + current[end + 1:] for item in reversed(items))
        if len(out) + len(pending) > MAX_EXPANSIONS:
            return None
    return out


def _first_brace(text: str) -> tuple[int, int, list[str]] | None:
    """(start, end, alternatives) of the first brace group that expands, or None."""
    for start, ch in enumerate(text):
        if ch != "{" or (start and text[start - 1] == "$"):
            continue
        depth = 0
        commas: list[int] = []
        for end in range(start, len(text)):
            c = text[end]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    body = text[start + 1:end]
                    if commas:
                        cuts = [start, *commas, end]
                        return start, end, [text[a + 1:b] for a, b in itertools.pairwise(cuts)]
                    sequence = _sequence(body)
                    if sequence is not None:
                        return start, end, sequence
                    break
            elif c == "," and depth == 1:
                commas.append(end)
    return None


def _sequence(body: str) -> list[str] | None:
    match = re.fullmatch(r"(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?", body)
    if match is None:
        return None
    a, b, step = match.group(1), match.group(2), abs(int(match.group(3) or 1)) or 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        lo, hi = int(a), int(b)
        values = range(lo, hi + (1 if hi >= lo else -1), step if hi >= lo else -step)
        return [str(v) for v in values][:MAX_EXPANSIONS + 1]
    if a.isalpha() and b.isalpha():
        lo, hi = ord(a), ord(b)
        return [chr(v) for v in range(lo, hi + (1 if hi >= lo else -1), step if hi >= lo else -step)]
    return None


def bases(view: CallView, command: Simple) -> list[str] | None:
    """The folders the command may run in: the folders the call starts in (`floor_folders`) and
    every folder an earlier cd names (read against the folders before it); None when one cannot
    be known."""
    starts = _folders.start_folders(view)
    shared = shared_dirs(view)
    if command.dirs is None or starts is None or shared is None:
        return None
    context = view.context
    found = list(starts)
    for target in (*shared, *command.dirs):
        grown = []
        for base in found:
            folder = _paths.normalise(target, _paths.Where(base, context.home))
            if folder is None:
                return None
            grown.append(folder)
        found = list(dict.fromkeys([*found, *grown]))
        if len(found) > 16:
            return None
    return found


def word_paths(view: CallView, command: Simple | None, value: str | None) -> list[tuple[str, str]] | None:
    """Every (lexical, real) path a word may name, or None when it cannot be known."""
    if value is None:
        return None
    if value == "" or value.rstrip("/") == FRESH:
        return []  # an empty word names no file (sed -i '' on macOS); mktemp's new one none that was there
    texts = expansions(value)
    if texts is None:
        return None
    folders = _folders.start_folders(view) if command is None else bases(view, command)
    if folders is None:
        return None
    out: list[tuple[str, str]] = []
    for text in texts:
        if any(part.startswith(".") and _GLOB & set(part) for part in text.split("/")):
            return None  # `.*` may match `..`
        relative = not text.startswith(("/", "~", "$", "file:"))
        for base in folders if relative else folders[:1]:
            found = view.path(text) if base == view.context.cwd else _path_from(view, text, base)
            if found is None:
                return None
            out.append(found)
    return out


def _path_from(view: CallView, text: str, base: str) -> tuple[str, str] | None:
    return view.path_from(text, _paths.Where(base, view.context.home))


def in_places(view: CallView, found: Sequence[tuple[str, str]] | None, *, strict: bool = False) -> bool:
    """Every path lies in the working tree (below it, when `strict`: the tree itself is not its
    own contents) or in a temporary folder the user owns."""
    if found is None:
        return False
    cwd = view.context.cwd
    for lexical, real in found:
        in_tree = all(_paths.inside(p, cwd) and not (strict and p.rstrip("/") == cwd.rstrip("/"))
                      for p in (lexical, real))
        if not in_tree and not (own_temporary(view, lexical) and own_temporary(view, real)):
            return False
    return True


def own_temporary(view: CallView, path: str) -> bool:
    """Whether an absolute normalised path lies in a temporary folder the user owns (module doc)."""
    context = view.context
    if context.owner is None or context.uid is None:
        return False  # nothing to check ownership with: not theirs
    for root in context.temporary:
        root = root.rstrip("/")
        if not root or not path.startswith(root + "/"):
            continue
        first = path[len(root) + 1:].split("/", 1)[0]
        if not first or _GLOB & set(first) or first in (".", ".."):
            continue
        try:
            owner = context.owner(root + "/" + first)
        except (OSError, ValueError):
            continue
        if owner is None or owner == context.uid:
            return True
    return False


def outside(view: CallView, command: Simple | None, word_value: str | None, *, strict: bool = False) -> bool:
    """A word read as a path may lie outside the tree and the user's temporary folders."""
    return not in_places(view, word_paths(view, command, word_value), strict=strict)


def shared_dirs(view: CallView) -> tuple[str, ...] | None:
    """The folders a cd in one of the call's several commands names (``{commands: ["cd /",
    "rm -rf *"]}``): the others may run there. None when one cannot be known."""
    cached = view._cache.get("floor shared dirs", False)
    if cached is not False:
        found: tuple[str, ...] | None = cached
        return found
    reads = scripts(view)
    dirs: list[str] | None = []
    if len(reads) > 1:
        for read in reads:
            for command in read.script.commands:
                changes, target = folder_change(command)
                if changes and (target is None or dirs is None or len(dirs) >= 16):
                    dirs = None
                elif changes and dirs is not None and target:
                    dirs.append(target)
            if dirs is None:
                break
    result = view._cache["floor shared dirs"] = None if dirs is None else tuple(dict.fromkeys(dirs))
    return result


def inside_folder(view: CallView, folder: str | None, sources: Sequence[str | None]) -> list[str | None]:
    """What a copy or move writes when its destination is a folder (``cp f.txt /tmp/``, also a
    temporary root named without its slash): the file of each source's name inside it. Anything
    else, or a source whose name cannot be known, is the destination as written."""
    if folder is None or not sources:
        return [folder]
    root = folder.rstrip("/")
    if not folder.endswith("/") and root not in {r.rstrip("/") for r in view.context.temporary}:
        return [folder]
    out: list[str | None] = []
    for source in sources:
        name = (source or "").rstrip("/").rsplit("/", 1)[-1]
        if not name or name in (".", "..") or _GLOB & set(name) or "{" in name or "$" in name:
            return [folder]
        out.append(root + "/" + name)
    return out
