"""Programs as files: one `.js` or `.ts` file that carries its own contract.

The file starts with a block comment holding the rest of the artifact as
JSON, the code follows it::

    /* @program
    {
      "name": "double",
      "inputSchema": {"type": "integer"},
      "outputSchema": {"type": "integer"}
    }
    */
    return input * 2;

`program_from_source` turns such a text into the JSON artifact, which stays
the wire format. The comment is replaced by blank lines in `code`, so the line
and column of every error still point into the file. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from .._json import JSONInputError, loads_bounded
from .._patterns import LazyPattern
from ..errors import ProgramInvalid

#: What the file's first block comment opens with.
HEADER_TAG = "@program"
#: Suffixes read as program source; everything else named on a command line is the JSON artifact.
SOURCE_SUFFIXES = (".js", ".mjs", ".ts", ".mts")
_OPENING = LazyPattern(r"\A\s*/\*\*?[ \t]*@program\b")
#: The contract comment's keys: the artifact's, without `code`.
HEADER_KEYS = ("name", "inputSchema", "outputSchema", "requires", "limits", "language")
_FORM = ("starts with its contract in a comment: /* @program {\"name\": ..., \"inputSchema\": ..., "
         "\"outputSchema\": ...} */ followed by the code (docs/programs.md, \"Programs as files\")")


def is_source_name(name: str) -> bool:
    """True for a file name that holds program source rather than the JSON artifact."""
    return name.lower().endswith(SOURCE_SUFFIXES)


def looks_like_source(text: str) -> bool:
    """True when `text` opens with a `/* @program` comment (for files without a telling suffix)."""
    return _OPENING.match(text) is not None


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def program_from_source(text: str, *, what: str, default_name: str | None = None) -> dict[str, object]:
    """The JSON artifact of a program file's text.

    `what` names the file in errors; `default_name` is the program's name when
    the comment gives none (the file's stem). Raises `ProgramInvalid` with the
    file's line and column for a comment that is missing or not a JSON object;
    the artifact itself is validated later, by `parse_program`, like any other.
    """
    opening = _OPENING.match(text)
    if opening is None:
        raise ProgramInvalid(f"{what}: a program file {_FORM}")
    start = opening.end()
    end = text.find("*/", start)
    if end < 0:
        line, column = _line_column(text, text.index("/*"))
        raise ProgramInvalid(f"{what}: the @program comment opened at line {line}, column {column} "
                             "is never closed with */")
    # Pad the JSON with the lines and columns before it, so the parser's positions are the file's.
    line, column = _line_column(text, start)
    padded = "\n" * (line - 1) + " " * (column - 1) + text[start:end]
    try:
        header = loads_bounded(padded, what=f"{what}: the @program comment", max_bytes=len(padded) * 4 + 16,
                               unique_keys=True)
    except JSONInputError as exc:
        # A */ inside a JSON string ends the comment early, in the middle of that string.
        note = "; a */ inside a JSON string ends the comment: write it as *\\/" \
            if "Unterminated string" in str(exc) else ""
        raise ProgramInvalid(f"{exc}{note}") from None
    if not isinstance(header, dict):
        raise ProgramInvalid(f"{what}: the @program comment must hold a JSON object with "
                             + ", ".join(HEADER_KEYS))
    if "code" in header:
        raise ProgramInvalid(f"{what}: the @program comment must not hold \"code\": the code is "
                             "the rest of the file")
    body = text[end + 2:]
    if not body.strip():
        raise ProgramInvalid(f"{what}: there is no code after the @program comment")
    # The comment becomes blank lines: the code's line L, column C is the file's line L, column C.
    close_line, close_column = _line_column(text, end + 2)
    first_line_rest = body.split("\n", 1)[0]
    code = "\n" * (close_line - 1) + (" " * (close_column - 1) if first_line_rest.strip() else "") + body
    artifact: dict[str, Any] = {}
    name = header.get("name", default_name)
    if name is not None:
        artifact["name"] = name
    artifact["code"] = code
    for key, value in header.items():
        if key != "name":
            artifact[key] = value
    return artifact
