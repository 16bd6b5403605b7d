"""Type erasure for programs written in TypeScript (contract §3), on tree-sitter.

The code is parsed with tree-sitter's TypeScript grammar and every type-only
node is replaced by spaces (line breaks kept), so line and column numbers in
errors still point into the author's code and nothing is rewritten. The host
tries the code as JavaScript first and erases only when that fails to
compile, so JavaScript is never touched.

Erased: annotations on variables, parameters (destructured, optional, rest,
defaults holding arrows of their own), return types, type predicates and
`asserts`; `interface` and `type` declarations; `declare` statements and
fields; function and method overload signatures; `abstract` members and the
`abstract` of a class; index signatures; `as` / `satisfies` (and `as
const`); `<T>x` assertions; non-null `!` and definite-assignment `!`;
optional `?` on parameters, fields and methods; generic parameters and
arguments (calls, `new`, `extends B<T>`, instantiation expressions);
`implements`; `public` / `private` / `protected` / `readonly` / `override`
on class members; a `this` parameter. Refused at launch with a TypeScript
error: `enum`, `namespace` / `module`, parameter properties and decorators
(they need code generation, not erasure). Annotations are not a security
boundary: runtime validation stays authoritative.

Parsing is linear in practice (tree-sitter's error recovery is bounded), and
a time cap checked by tree-sitter's own progress callback bounds it anyway:
past the cap the code is refused, never half-erased. Pure: no I/O; the host
runs it in a worker thread so the event loop keeps serving other runs.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import time
from typing import TYPE_CHECKING

from ..errors import TypeScriptError

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Tree

#: Longest a parse (with its erasure queries) may take before the code is refused.
PARSE_CAP_S = 2.0
_CHUNK = 64 * 1024
_LINE_BREAKS = frozenset("\n\r\u2028\u2029")

# Nodes that exist only for the type checker: erased whole, children unvisited.
_TYPE_ONLY = frozenset({
    "type_annotation", "type_parameters", "type_arguments", "type_predicate_annotation",
    "asserts_annotation", "interface_declaration", "type_alias_declaration", "ambient_declaration",
    "function_signature", "abstract_method_signature", "index_signature", "method_signature",
    "implements_clause", "accessibility_modifier", "override_modifier",
})
# Single tokens erased inside the node that holds them.
_TOKENS = {
    "non_null_expression": frozenset({"!"}),
    "variable_declarator": frozenset({"!"}),
    "public_field_definition": frozenset({"?", "!", "readonly"}),
    "method_definition": frozenset({"?"}),
    "optional_parameter": frozenset({"?"}),
    "abstract_class_declaration": frozenset({"abstract"}),
}
_PARAMETER_PROPERTY = frozenset({"accessibility_modifier", "override_modifier", "readonly"})
_REFUSALS = {
    "enum_declaration": "TypeScript enum declarations are not supported (they need code generation); "
                        "use a plain object",
    "internal_module": "TypeScript namespace declarations are not supported (they need code generation); "
                       "use a plain object",
    "module": "TypeScript module declarations are not supported (they need code generation); "
              "use a plain object",
    "decorator": "TypeScript decorators are not supported",
}
_PARAMETER_REFUSAL = "TypeScript parameter properties are not supported; assign fields in the constructor body"
#: Nodes visited between two looks at the clock.
_CLOCK_EVERY = 4096


@functools.cache
def _language() -> Language:
    import tree_sitter
    import tree_sitter_typescript

    return tree_sitter.Language(tree_sitter_typescript.language_typescript())


class _Clock:
    """The cap shared by the parse and the query, polled from tree-sitter's callbacks."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s
        self.deadline = time.monotonic() + cap_s
        self.expired = False

    def over(self, *_: object) -> bool:
        if time.monotonic() >= self.deadline:
            self.expired = True
        return self.expired

    def refuse(self) -> TypeScriptError:
        return TypeScriptError(f"TypeScript: parsing took longer than {self.cap_s:g} s and was stopped; "
                               "simplify the program or write it as JavaScript")


class _Offsets:
    """Byte offsets (what tree-sitter reports) to character offsets (what we edit)."""

    def __init__(self, code: str, data: bytes) -> None:
        self.ascii = len(code) == len(data)
        self.starts: list[int] = [] if self.ascii else list(itertools.accumulate(
            (len(c.encode("utf-8", "surrogatepass")) for c in code), initial=0))

    def char(self, byte: int) -> int:
        return byte if self.ascii else bisect.bisect_right(self.starts, byte) - 1


def _first_error(root: Node) -> Node:
    node = root
    while not (node.is_error or node.is_missing):
        child = next((c for c in node.children if c.has_error), None)
        if child is None:
            return node
        node = child
    return node


def _type_spans(root: Node, clock: _Clock) -> list[tuple[int, int]]:
    """Byte ranges of every type-only piece of the tree; raise on what erasure cannot do.

    An explicit stack, not recursion: a program may nest thousands deep. (A
    tree-sitter query would read shorter, but matching is quadratic in depth
    and its progress callback crashes tree-sitter 0.26.1.)
    """
    spans: list[tuple[int, int]] = []
    stack = [root]
    visited = 0
    while stack:
        node = stack.pop()
        visited += 1
        if visited % _CLOCK_EVERY == 0 and clock.over():
            raise clock.refuse()
        kind = node.type
        if kind in _TYPE_ONLY:
            spans.append((node.start_byte, node.end_byte))
            continue
        if kind in _REFUSALS:
            raise TypeScriptError(_REFUSALS[kind])
        children = node.children
        if kind in ("as_expression", "satisfies_expression"):
            # `x as T`: the expression stays, everything after it is the type.
            spans.append((children[0].end_byte, node.end_byte))
            stack.append(children[0])
            continue
        if kind == "public_field_definition" and any(c.type in ("declare", "abstract") for c in children):
            spans.append((node.start_byte, node.end_byte))  # no field exists at run time
            continue
        if kind in ("required_parameter", "optional_parameter"):
            if any(c.type in _PARAMETER_PROPERTY for c in children):
                raise TypeScriptError(_PARAMETER_REFUSAL)
            if children[0].type == "this":  # `this: T` is a type-only parameter, comma and all
                comma = node.next_sibling
                spans.append((node.start_byte, comma.end_byte if comma is not None and comma.type == ","
                              else node.end_byte))
                continue
        tokens = _TOKENS.get(kind)
        if tokens is not None:
            spans.extend((c.start_byte, c.end_byte) for c in children if not c.is_named and c.type in tokens)
        stack.extend(reversed(children))
    return spans


def strip_types(code: str, *, cap_s: float | None = None) -> str:
    """Erase TypeScript annotations from a program body; raise TypeScriptError if unsupported.

    Returns `code` itself when there is nothing to erase (then the JavaScript
    error stands). `cap_s` defaults to PARSE_CAP_S.
    """
    clock = _Clock(PARSE_CAP_S if cap_s is None else cap_s)
    data = code.encode("utf-8", "surrogatepass")
    tree = _parse(data, clock)
    spans = _type_spans(tree.root_node, clock)
    if not spans:
        return code
    _refuse_syntax_error(tree, code, data)
    offsets = _Offsets(code, data)
    out = list(code)
    for a, b in spans:
        for p in range(offsets.char(a), offsets.char(b)):
            if out[p] not in _LINE_BREAKS:
                out[p] = " "
    return "".join(out)


def _parse(data: bytes, clock: _Clock) -> Tree:
    import tree_sitter

    parser = tree_sitter.Parser(_language())
    try:
        tree = parser.parse(lambda at, _point: data[at:at + _CHUNK], progress_callback=clock.over)
    except ValueError:  # "Parsing failed": what tree-sitter raises when the callback stops it
        if clock.expired:
            raise clock.refuse() from None
        raise TypeScriptError("TypeScript: the parser failed") from None
    if clock.expired:
        raise clock.refuse()
    return tree


def _refuse_syntax_error(tree: Tree, code: str, data: bytes) -> None:
    if tree.root_node.has_error:
        offsets = _Offsets(code, data)
        bad = _first_error(tree.root_node)
        line_start = data.rfind(b"\n", 0, bad.start_byte) + 1
        column = offsets.char(bad.start_byte) - offsets.char(line_start) + 1
        raise TypeScriptError(f"TypeScript: syntax error at line {bad.start_point.row + 1}, column {column}")


def check_syntax(code: str, *, cap_s: float | None = None) -> None:
    """Raise TypeScriptError at the first syntax error of a program body (JavaScript or
    TypeScript), found by the same bounded parse as `strip_types`, without any sandbox."""
    clock = _Clock(PARSE_CAP_S if cap_s is None else cap_s)
    data = code.encode("utf-8", "surrogatepass")
    _refuse_syntax_error(_parse(data, clock), code, data)
