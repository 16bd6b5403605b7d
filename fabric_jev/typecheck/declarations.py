"""The declarations a program is type-checked against: the guest API and its own contract.

The guest API is declared once, in runtime_js/jev.d.ts beside the prelude
that implements it (read on first use, then kept). What differs between
programs is written here from the program's contract, in the types that
file leaves open: `input` is typed from `inputSchema`, the program's result
from `outputSchema`, `tools.call`'s `ref` from `requires`, and which parts of
`jev` and `program` exist from `requires` and `observe`. `jev.evaluate` is
generic over its questions, so each answer is typed by its question (a
choice by its criteria's keys). Apart from that one read, pure: no I/O.

A program is checked as the body of one function, wrapped on lines of its
own (`wrap`), so the compiler's line and column numbers are the program's own
after one line is taken off.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import Any, Literal, NamedTuple

from .._patterns import LazyPattern
from .._runtime_js import runtime_js_path
from ..contract.languages import Language
from ..contract.program import Program

Side = Literal["input", "output"]

#: The name of the wrapping function; it appears in no message the author sees.
WRAPPER = "__jevProgram"
#: Lines the wrapper adds above the program's first line.
HEADER_LINES = 1
_IDENTIFIER = LazyPattern(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
# A type that needs no parentheses in a union or intersection: a name, a string or number literal.
_ATOM = LazyPattern(r'^(?:[A-Za-z_$][A-Za-z0-9_$]*|"(?:[^"\\]|\\.)*"|-?[0-9][0-9.e+-]*)$')
# Words TypeScript reserves as property names only in odd places; quoting them is always safe.
_RESERVED = frozenset({"constructor", "__proto__"})
# What every object inherits: an optional output property of that name, when the program leaves it
# out, is the inherited member to the compiler, so the inherited type must be allowed too.
_OBJECT_MEMBERS = frozenset({"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty",
                             "isPrototypeOf", "propertyIsEnumerable"})

#: The guest API's declarations, beside the prelude that implements them (runtime_js/jev.d.ts).
DECLARATIONS_FILE = "jev.d.ts"


@cache
def guest_api() -> str:
    """The text of runtime_js/jev.d.ts: read on the first check, then kept."""
    return runtime_js_path(DECLARATIONS_FILE).read_text(encoding="utf-8")


def _literal(value: Any) -> str:
    """The TypeScript literal type of a JSON value (an enum entry or a const)."""
    if isinstance(value, bool) or value is None or isinstance(value, int | float | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "readonly [" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + " ".join(f"readonly {_key(k)}: {_literal(v)};" for k, v in value.items()) + " }"
    return "unknown"


def _key(name: str) -> str:
    return name if _IDENTIFIER.fullmatch(name) and name not in _RESERVED else json.dumps(name, ensure_ascii=False)


def _comment(schema: dict[str, Any], indent: str) -> str:
    """A schema's title and description as a doc comment, so an editor shows them."""
    text = " — ".join(str(schema[k]) for k in ("title", "description") if isinstance(schema.get(k), str))
    if not text:
        return ""
    text = " ".join(text.replace("*/", "*\\/").split())
    return f"{indent}/** {text} */\n"


def _union(parts: Iterable[str], glue: str) -> str:
    unique = list(dict.fromkeys(parts))
    if len(unique) == 1:
        return unique[0]
    return glue.join(p if _ATOM.fullmatch(p) else f"({p})" for p in unique)


class _Writer(NamedTuple):
    """Schema → type. Input arrays are mutable (the program owns its copy); output accepts readonly ones.

    An object's undeclared keys: for input they are not in the type (reading
    one is most likely a misspelling); for output an object that does not set
    `additionalProperties: false` may carry extra keys, as its schema allows.
    """

    side: Side

    def type(self, schema: Any, indent: str = "") -> str:
        if not isinstance(schema, dict):
            return "unknown"
        parts: list[str] = []
        if "const" in schema:
            parts.append(_literal(schema["const"]))
        elif isinstance(schema.get("enum"), list) and schema["enum"]:
            parts.append(_union((_literal(v) for v in schema["enum"]), " | "))
        else:
            base = self._typed(schema, indent)
            if base is not None:
                parts.append(base)
        for keyword, glue in (("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")):
            subs = schema.get(keyword)
            if isinstance(subs, list) and subs:
                parts.append(_union((self.type(s, indent) for s in subs), glue))
        if not parts:
            return "unknown"
        return _union(parts, " & ")

    def _typed(self, schema: dict[str, Any], indent: str) -> str | None:
        kind = schema.get("type")
        if kind is None and ("properties" in schema or "additionalProperties" in schema):
            kind = "object"  # object keywords without a type still only constrain objects
        if kind is None and "items" in schema:
            kind = "array"
        if kind == "null":
            return "null"
        if kind == "boolean":
            return "boolean"
        if kind in ("number", "integer"):
            return "number"
        if kind == "string":  # pattern and format narrow the text, not its type
            return "string"
        if kind == "array":
            item = self.type(schema["items"], indent) if "items" in schema else "unknown"
            item = item if _ATOM.fullmatch(item) else f"({item})"
            return f"readonly {item}[]" if self.side == "output" else f"{item}[]"
        if kind == "object":
            return self._object(schema, indent)
        return None

    def _object(self, schema: dict[str, Any], indent: str) -> str:
        found = schema.get("properties")
        properties: dict[str, Any] = found if isinstance(found, dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)]
        inner = indent + "  "
        lines: list[str] = []
        types: list[str] = []
        optional_keys = False
        for name, sub in properties.items():
            t = self.type(sub, inner)
            types.append(t)
            optional = "" if name in required else "?"
            optional_keys = optional_keys or bool(optional)
            if optional and self.side == "output" and name in _OBJECT_MEMBERS:
                t = _union([t, f"Object[{json.dumps(name)}]"], " | ")
            lines.append(f"{_comment(sub, inner) if isinstance(sub, dict) else ''}{inner}{_key(name)}{optional}: {t};")
        for name in required:
            if name not in properties:
                lines.append(f"{inner}{_key(name)}: unknown;")
                types.append("unknown")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            # An index signature must admit every declared property's type too.
            # (An optional one may be undefined.)
            value = _union([self.type(extra, inner), *types, *(["undefined"] if optional_keys else [])], " | ")
            lines.append(f"{inner}[key: string]: {value};")
        elif (self.side == "output" and extra is not False) or (not properties and extra is not False):
            lines.append(f"{inner}[key: string]: unknown;")
        if not lines:  # no key at all: `{}` would admit any value but null and undefined
            return "{ [key: string]: never }"
        return "{\n" + "\n".join(lines) + f"\n{indent}}}"


def schema_type(schema: object, side: Side) -> str:
    """The TypeScript type of values matching `schema` (the supported subset, plus pattern/format)."""
    return _Writer(side).type(schema)


def program_refs(program: Program) -> list[str]:
    """The refs `tools.call` may name: every required ref but jev.advise (it is `program.advise`)."""
    return [r for r in program.requires if r != "jev.advise"]


def render(program: Program, *, observed: bool) -> str:
    """The declarations for one program: the guest API (jev.d.ts) and what its contract gives it.

    The contract gives the types jev.d.ts leaves to each program: `JevInput`, `JevOutput`, the refs
    `tools.call` takes, and which parts of `jev` and `program` exist. `observed`: the run is spawned
    with `observe`, so `program.nextEvent` exists.
    """
    refs = program_refs(program)
    ref_type = " | ".join(json.dumps(r) for r in refs) if refs else "never"
    parts = ["JevProgramCore"]
    if observed:
        parts.append("JevObserving")
    if "jev.advise" in program.requires:
        parts.append("JevAdvising")
    # ASCII escapes: a name may hold a line terminator (U+2028 ends a `//` comment as \n does).
    return "".join([
        f"// The declarations the Jev program {json.dumps(program.name)} is checked against: fabric-jev's "
        "guest API, then what the program's contract gives it.\n",
        guest_api(),
        "\n// What this program's contract gives it.\n",
        f"/** The program's input (inputSchema). */\ntype JevInput = {schema_type(program.input_schema, 'input')};\n",
        f"/** What the program returns (outputSchema). */\ntype JevOutput = "
        f"{schema_type(program.output_schema, 'output')};\n",
        f"interface JevTools extends JevToolsOf<{ref_type}> {{}}\n",
        "interface Jev extends JevEvaluating {}\n" if "jev.evaluate" in program.requires else "interface Jev {}\n",
        f"interface JevProgram extends {', '.join(parts)} {{}}\n",
    ])


def wrap(code: str, language: Language) -> str:
    """The program as the body of the function the checker sees (return type: the output's)."""
    if language is Language.TYPESCRIPT:
        head = f"async function {WRAPPER}(): Promise<JevOutput> {{"
    else:
        head = f"/** @returns {{Promise<JevOutput>}} */ async function {WRAPPER}() {{"
    return f"{head}\n{code}\n}}\n"
