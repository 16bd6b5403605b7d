"""The guest API as TypeScript declarations, generated from one program's own contract.

Pure: no I/O. `input` is typed from `inputSchema`, the program's result from
`outputSchema`, `tools.call`'s `ref` from `requires`, and `jev.evaluate` is
generic over its questions, so each answer is typed by its question (a
choice by its criteria's keys). Only what the guest really has is declared:
the ES2025 library (the compiler's own files), `program`, `console`, the
timers and the few globals the sandbox adds; no DOM, no Node, no `fetch`.

A program is checked as the body of one function, wrapped on lines of its
own (`wrap`), so the compiler's line and column numbers are the program's own
after one line is taken off.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..contract.program import Program
from ..contract.typecheck import Language

Side = Literal["input", "output"]

#: The name of the wrapping function; it appears in no message the author sees.
WRAPPER = "__jevProgram"
#: Lines the wrapper adds above the program's first line.
HEADER_LINES = 1
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
# A type that needs no parentheses in a union or intersection: a name, a string or number literal.
_ATOM = re.compile(r'^(?:[A-Za-z_$][A-Za-z0-9_$]*|"(?:[^"\\]|\\.)*"|-?[0-9][0-9.e+-]*)$')
# Words TypeScript reserves as property names only in odd places; quoting them is always safe.
_RESERVED = frozenset({"constructor", "__proto__"})
# What every object inherits: an optional output property of that name, when the program leaves it
# out, is the inherited member to the compiler, so the inherited type must be allowed too.
_OBJECT_MEMBERS = frozenset({"constructor", "toString", "toLocaleString", "valueOf", "hasOwnProperty",
                             "isPrototypeOf", "propertyIsEnumerable"})

# The part of the declarations that does not depend on the program.
_STATIC = """\
/** Any JSON value. */
type JevJson = null | boolean | number | string | JevJson[] | { [key: string]: JevJson };
/** What `state` and `instructions` may be: text, a list or an object. */
type JevText = string | object;

/** A choice among options: `criteria` maps each option key to its description (or null). */
interface JevChoiceQuestion {
  type: "choice";
  instructions: JevText;
  criteria: { readonly [option: string]: string | null };
}
/** A position on 2-10 ordered levels, described in order. */
interface JevScoreQuestion {
  type: "score";
  instructions: JevText;
  criteria: readonly string[];
}
/** The probability of yes; `criteria` may say what true and false mean. */
interface JevNoulQuestion {
  type: "noul";
  instructions: JevText;
  criteria?: { readonly true?: string | null; readonly false?: string | null };
}
type JevQuestion = JevChoiceQuestion | JevScoreQuestion | JevNoulQuestion;
type JevQuestions = { readonly [id: string]: JevQuestion };

interface JevChoiceAnswer<Option extends string = string> {
  type: "choice";
  /** One of the question's option keys. */
  choice: Option;
  probabilities: { [K in Option]: number };
  confidence: number;
}
interface JevScoreAnswer {
  type: "score";
  /** The probability-weighted level, from 0 to (levels - 1). */
  score: number;
  legend: { [level: string]: string };
  probabilities: { [level: string]: number };
  confidence: number;
}
/** A noul answer: `{type, noul}`. Its probability of yes is the field `noul` (there is no
 *  `probability`); a choice answer has `choice`, `probabilities` and `confidence`. */
interface JevNoulAnswer {
  type: "noul";
  /** The probability of yes, in [0, 1]: the noul answer's one field. */
  noul: number;
}
/** The answer to a question whose type is known only at run time: any of the three shapes, so
 *  every field is there to read (`type` says which are meant). */
interface JevAnyAnswer {
  type: JevQuestion["type"];
  choice: string;
  score: number;
  noul: number;
  legend: { [level: string]: string };
  probabilities: { [key: string]: number };
  confidence: number;
}
/** The answer to a question: its shape follows the question's type. A question whose type is not
 *  known before the call (built at run time) may have any of the three shapes. */
type JevAnswer<Q> = [JevQuestion] extends [Q] ? JevAnyAnswer
  : Q extends { type: "choice"; criteria: infer C } ? JevChoiceAnswer<keyof C & string>
  : Q extends { type: "score" } ? JevScoreAnswer
  : Q extends { type: "noul" } ? JevNoulAnswer
  : never;
interface JevEvaluation<Q> {
  /** One answer per question, keyed by the question's id. */
  answers: { [K in keyof Q]: JevAnswer<Q[K]> };
  usage: { input_tokens: number; output_tokens: number };
  model: string;
}

interface JevConsole {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
  debug(...values: unknown[]): void;
}
declare const console: JevConsole;
/** A guest timer (at most 128 pending); the id is for clearTimeout/clearInterval. */
declare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): number;
declare function clearTimeout(id?: number | null): void;
declare function clearInterval(id?: number | null): void;
declare function queueMicrotask(callback: () => void): void;
declare function atob(data: string): string;
declare function btoa(data: string): string;
declare const performance: { now(): number };
"""

_OBSERVED = """\
/** One event of the observed Main session (docs/observers.md). */
interface JevObservedEvent {
  id: string;
  sequence: number;
  event: "input" | "turn_end" | "tool_error" | "agent_end" | "agent_settled";
  source: "main";
  sessionId: string;
  revision: number;
  at: string;
  payload: {
    turnIndex: number;
    automatic?: boolean;
    inputText?: string;
    stopReason?: string | null;
    toolResultCount?: number;
    assistantText?: string[];
    toolResults?: { toolName: string; isError: boolean; text: string }[];
    toolName?: string | null;
    isError?: boolean;
  };
  /** The text was cut to the observer's maxChars. */
  truncated: boolean;
}
"""

_ADVICE_RESULT = ('{ delivered: true } | { delivered: false; reason: "disabled" | "stale" | "duplicate" | '
                  '"budget" | "feedback" | "delivery_failed" }')


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


@dataclass(frozen=True, slots=True)
class _Writer:
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


def schema_type(schema: Any, side: Side) -> str:
    """The TypeScript type of values matching `schema` (the supported subset, plus pattern/format)."""
    return _Writer(side).type(schema)


def program_refs(program: Program) -> list[str]:
    """The refs `tools.call` may name: every required ref but jev.advise (it is `program.advise`)."""
    return [r for r in program.requires if r != "jev.advise"]


def render(program: Program, *, observed: bool) -> str:
    """The declarations for one program: the static guest API plus its own input, output and refs.

    `observed`: the run is spawned with `observe`, so `program.nextEvent` exists.
    """
    # ASCII escapes: a name may hold a line terminator (U+2028 ends a `//` comment as \n does).
    out = [f"// The guest API of the Jev program {json.dumps(program.name)}, "
           "generated from its contract by fabric-jev.\n", _STATIC]
    out.append(f"/** The program's input (inputSchema). */\ntype JevInput = "
               f"{schema_type(program.input_schema, 'input')};\n")
    out.append(f"/** What the program returns (outputSchema). */\ntype JevOutput = "
               f"{schema_type(program.output_schema, 'output')};\n")
    out.append("declare let input: JevInput;\n")
    refs = program_refs(program)
    ref_type = " | ".join(json.dumps(r) for r in refs) if refs else "never"
    out.append("interface JevTools {\n"
               "  /** Calls a capability listed in requires; host errors arrive as a thrown Error. */\n"
               f"  call(request: {{ ref: {ref_type}; args?: unknown }}): Promise<any>;\n}}\n"
               "declare const tools: JevTools;\n")
    if "jev.evaluate" in program.requires:
        out.append("interface Jev {\n"
                   "  /** Asks Jev a batch of typed questions about `state`. */\n"
                   "  evaluate<const Q extends JevQuestions>(request: { state: JevText; questions: Q; "
                   "model?: string }): Promise<JevEvaluation<Q>>;\n}\n")
    else:
        out.append("interface Jev {}\n")
    out.append("declare const jev: Jev;\n")
    members = ["  /** A cancellable wait: ms finite, from 0 to the run's timeout. */\n"
               "  sleep(ms: number): Promise<null>;",
               "  /** One progress event (at most 4,096 bytes of JSON). */\n"
               "  emit(value: unknown): Promise<null>;"]
    if observed:
        out.append(_OBSERVED)
        members.append("  /** The next observed Main-session event. */\n  nextEvent(): Promise<JevObservedEvent>;")
    if "jev.advise" in program.requires:
        members.append("  /** Advice to the Main session about the last event taken. */\n"
                       f"  advise(advice: {{ eventId: string; message: string }}): Promise<{_ADVICE_RESULT}>;")
    out.append("interface JevProgram {\n" + "\n".join(members) + "\n}\ndeclare const program: JevProgram;\n")
    return "".join(out)


def wrap(code: str, language: Language) -> str:
    """The program as the body of the function the checker sees (return type: the output's)."""
    if language is Language.TYPESCRIPT:
        head = f"async function {WRAPPER}(): Promise<JevOutput> {{"
    else:
        head = f"/** @returns {{Promise<JevOutput>}} */ async function {WRAPPER}() {{"
    return f"{head}\n{code}\n}}\n"
