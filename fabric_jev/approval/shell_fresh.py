"""Temporary paths a script can prove are the user's: ``$TMPDIR`` and what ``mktemp`` just made.

A routine clean-up names its temporary folder through the environment or
through mktemp: ``rm -rf "$TMPDIR/build-cache"``, ``rm -rf ${TMPDIR:-/tmp}/x``,
``rm -rf "$(mktemp -d)"``, ``d=$(mktemp -d) && … && rm -rf "$d"``. The floor
reads them as known only where that is provable:

- ``$TMPDIR`` is the host's (the capability's shell inherits it); unset, it is
  unknown, while ``${TMPDIR:-/tmp}`` and ``${TMPDIR-/tmp}`` are ``/tmp``. A
  script that sets ``TMPDIR`` itself (``TMPDIR=/ …``, ``${TMPDIR:=…}``) makes
  it unknown;
- a word that is exactly ``"$(mktemp …)"`` names a path that did not exist
  before (`FRESH`): deleting it removes nothing else. Unquoted, only when
  ``$TMPDIR`` holds no space or glob (the output is then one word); with
  anything after it (``"$(mktemp -d)/.."``), it is unknown;
- a variable assigned once from such a substitution, at the top of the script
  or first in an ``&&`` chain, and used only plainly (``"$d"``, ``${d}``) after
  it, is fresh too. Any other mention (``read d``, ``${d%/*}``, a second
  assignment, an assignment that may not run) makes it unknown;
- a script nested in a later command (``trap 'rm -rf "$d"' EXIT``,
  ``bash -c "rm -rf $d"``) sees such a variable too, unless it mentions it
  otherwise;
- none of this holds in a script that redefines commands (a function or an
  alias named like ``mktemp``, ``hash``, a changed ``PATH``). Pure code.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .shell_words import Known

if TYPE_CHECKING:
    from tree_sitter import Node  # the grammar's tree, parsed by shell.py

#: What a word made fresh by mktemp expands to: not a path (the NUL makes every path reading
#: refuse it), so only the places that know it read it as a new path.
FRESH = "\x00a path mktemp has just made\x00"
#: Text that sets TMPDIR, or redefines the commands a fresh path relies on.
SETS_TMPDIR = re.compile(r"(?<![\w$={])TMPDIR\b|\$\{TMPDIR:?[=?]|\bmktemp\s*\(|\bfunction\s+mktemp\b|\balias\b"
                         r"|\bhash\b|\benable\b|\bPATH\s*\+?=")
#: Quotes, escapes and braces a name may be spelled with (``TMP""DIR=``, ``{TMP,}DIR=``).
_SPELLING = re.compile(r"[\"'\\{},]")


def sets_tmpdir(command: str) -> bool:
    """Whether a script may set TMPDIR or redefine what a fresh path relies on: read on the raw
    text and on it with quotes, escapes and braces removed (a false alarm only asks more)."""
    return SETS_TMPDIR.search(command) is not None or SETS_TMPDIR.search(_SPELLING.sub("", command)) is not None


_MKTEMP = re.compile(r"\s*(?:/usr)?(?:/bin/)?mktemp(?:\s+(?:-[dqt]+|--directory|--quiet|-p\s+[\w./+-]+"
                     r"|--tmpdir(?:=[\w./+-]+)?|--suffix=[\w.+-]+|/?[\w./+-]*X{3,}[\w.+-]*))*\s*\Z")
_DEFAULT = re.compile(r"\$\{TMPDIR(:?)-([\w./+-]*)\}\Z")
_UNSAFE = re.compile(r"[\s*?\[\]]")


def tmpdir_value(raw: str, known: Known) -> str | None:
    """What ``$TMPDIR``, ``${TMPDIR}`` or ``${TMPDIR:-/tmp}`` expands to, None when unknown."""
    if known.tmpdir is None:
        return None
    if raw in ("$TMPDIR", "${TMPDIR}"):
        return known.tmpdir or None
    match = _DEFAULT.match(raw)
    if match is None:
        return None
    return known.tmpdir or match.group(2) or None


def is_mktemp(inner: str) -> bool:
    """Whether a command substitution's text is one mktemp that makes a new path (not ``-u``)."""
    if _MKTEMP.match(inner) is None:
        return False
    words = inner.split()
    in_tmp = any(w in ("--tmpdir", "-p") or w.startswith("--tmpdir=") or (w[:1] == "-" and w[1:2] != "-" and "t" in w)
                 for w in words)
    relative = any("XXX" in w and not w.startswith(("/", "-")) for w in words[1:]) and not in_tmp
    # A bare template is made in the working directory: a later cd would change what it names.
    relative_dir = any(a == "-p" and not b.startswith("/") for a, b in itertools.pairwise(words))
    return not relative and not relative_dir


def unquoted_ok(known: Known) -> bool:
    """Whether mktemp's output, unquoted, stays one word: $TMPDIR has no space or glob in it."""
    return known.tmpdir is not None and _UNSAFE.search(known.tmpdir) is None


def substitution_is_fresh(node: Node, text: Callable[[Node], str]) -> bool:
    raw = text(node)
    return node.type == "command_substitution" and raw.startswith("$(") and is_mktemp(raw[2:-1])


def fresh_names(root: Node, text: Callable[[Node], str], known: Known) -> dict[str, tuple[int, int]]:
    """The variables of a script that provably hold a path mktemp made (module doc), each with
    the span of text after its assignment where it does; those of an enclosing script
    (`Known.fresh`) hold in all of it unless this script mentions them otherwise."""
    if known.tmpdir is None:
        return {}
    assignments: dict[str, list[Any]] = {}
    names: dict[str, list[Any]] = {}
    words: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "variable_assignment":
            named = next((c for c in node.children if c.type == "variable_name"), None)
            if named is not None:
                assignments.setdefault(text(named), []).append(node)
        elif kind == "variable_name":
            names.setdefault(text(node), []).append(node)
        elif kind == "word":
            words.add(text(node).split("=", 1)[0].rstrip("+"))
        stack.extend(node.children)
    found: dict[str, tuple[int, int]] = {}
    for name in known.fresh:
        uses = [n.parent for n in names.get(name, ())]
        if name not in assignments and name not in words and all(_plain_use(u, name, text) for u in uses):
            found[name] = (0, root.end_byte)
    for name, assigned in assignments.items():
        if len(assigned) != 1 or name in words or not _from_mktemp(assigned[0], text):
            continue
        statement = _statement(assigned[0])
        if statement is None:
            continue
        after, scope = statement
        uses = [n.parent for n in names.get(name, ()) if not _same(n.parent, assigned[0])]
        if all(_plain_use(use, name, text) and use.start_byte >= after and scope[0] <= use.start_byte < scope[1]
               for use in uses):
            found[name] = scope
    return found


def _from_mktemp(assignment: Any, text: Callable[[Any], str]) -> bool:
    value = assignment.children[-1] if assignment.children else None
    if value is not None and value.type == "string":
        inner = [c for c in value.children if c.is_named]
        value = inner[0] if len(inner) == 1 else None
    return value is not None and substitution_is_fresh(value, text)


def _plain_use(use: Any, name: str, text: Callable[[Any], str]) -> bool:
    return use is not None and use.type in ("simple_expansion", "expansion") and text(use) in (
        f"${name}", f"${{{name}}}")


def _same(a: Any, b: Any) -> bool:
    return a is not None and b is not None and (a.type, a.start_byte, a.end_byte) == (b.type, b.start_byte, b.end_byte)


def _statement(assignment: Any) -> tuple[int, tuple[int, int]] | None:
    """(where the script reads the variable as assigned from, the span of text in which it surely
    is), None when the assignment may not run before its uses (``a || d=…``, in a loop)."""
    node = assignment
    if node.parent is not None and node.parent.type == "declaration_command":
        node = node.parent  # local d=$(mktemp -d)
    after = node.end_byte
    leftmost = True
    while node.parent is not None and node.parent.type != "program":
        parent = node.parent
        if parent.type != "list" or any(not c.is_named and c.type != "&&" for c in parent.children):
            return None
        leftmost = leftmost and _same(parent.children[0], node)
        node = parent
    if node.parent is None:
        return None
    end = node.parent.end_byte if leftmost else node.end_byte
    return after, (after, end)
