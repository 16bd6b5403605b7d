"""Whether a page script only reads: the `read-only-script` keyword of the browser's default rules.

A program that drives a browser mostly looks: ``Runtime.evaluate`` of an
expression that reads the DOM (``document.querySelectorAll('button')…``).
Such a call should not need a person; one that clicks, types, navigates,
stores or sends should. The script is parsed (tree-sitter's TypeScript
grammar, which reads JavaScript) and judged by allowlist, conservatively:

- calls only of functions declared in the script itself, of a short list of
  globals, or of methods known not to change anything (``querySelector``,
  ``getBoundingClientRect``, ``map``, ``trim``, …);
- no assignment or ``++``/``--`` except to a name the script declares; no
  ``delete``; ``new`` only of Promise, Array, Set, Map, Date, URL, Object, Error;
- no reference to ``eval``, ``Function``, ``fetch``, ``XMLHttpRequest``,
  ``WebSocket``, ``import()``, ``document.cookie``, the storages, the
  clipboard, ``open``, ``postMessage``, timers (which take code as text), ….

Anything the check does not know makes the script "not read-only", and the
call goes on to the classifier or a person: the check can be wrong only by
asking too often.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

MAX_SCRIPT_CHARS = 20_000

_METHODS = frozenset({
    # DOM reads
    "querySelector", "querySelectorAll", "getElementById", "getElementsByClassName",
    "getElementsByTagName", "getElementsByName", "closest", "matches", "contains", "getAttribute",
    "getAttributeNames", "hasAttribute", "hasAttributes", "getBoundingClientRect", "getClientRects",
    "getComputedStyle", "checkVisibility", "getRootNode", "hasChildNodes", "item", "compareDocumentPosition",
    "isEqualNode", "isSameNode", "getPropertyValue", "elementFromPoint", "elementsFromPoint",
    # waiting for the page
    "addEventListener", "removeEventListener", "then", "catch", "finally", "requestAnimationFrame",
    # arrays, strings, numbers, objects, JSON, Math
    "map", "filter", "find", "findIndex", "findLast", "findLastIndex", "some", "every", "forEach",
    "reduce", "reduceRight", "includes", "indexOf", "lastIndexOf", "slice", "concat", "join", "flat",
    "flatMap", "keys", "values", "entries", "from", "of", "isArray", "at", "push", "trim",
    "trimStart", "trimEnd", "toLowerCase", "toUpperCase", "startsWith", "endsWith", "split",
    "substring", "substr", "padStart", "padEnd", "match", "matchAll", "test", "toString", "toFixed",
    "stringify", "parse", "round", "floor", "ceil", "abs", "min", "max", "hypot", "sqrt", "sign",
    "trunc", "fromEntries", "getOwnPropertyNames", "localeCompare", "normalize", "charAt", "charCodeAt",
    "codePointAt", "has", "get", "size", "resolve", "all", "allSettled", "race", "now", "toISOString",
    "getTime", "isFinite", "isInteger", "isNaN", "repeat", "sort", "reverse",
})
_GLOBALS = frozenset({"getComputedStyle", "addEventListener", "removeEventListener", "Number", "String",
                      "Boolean", "parseInt", "parseFloat", "isNaN", "isFinite", "Array", "Object",
                      "requestAnimationFrame", "encodeURIComponent", "decodeURIComponent", "encodeURI",
                      "decodeURI", "Symbol"})
_CONSTRUCTORS = frozenset({"Promise", "Array", "Set", "Map", "Date", "URL", "Object", "Error", "RegExp",
                           "URLSearchParams"})
_FORBIDDEN_NAMES = frozenset({
    # code from text, the network, and what holds credentials (reading them is already too much)
    "eval", "Function", "fetch", "XMLHttpRequest", "WebSocket", "EventSource", "importScripts",
    "localStorage", "sessionStorage", "indexedDB", "caches", "cookieStore", "cookie", "credentials",
    "sendBeacon", "postMessage", "setTimeout", "setInterval", "execCommand", "Worker", "SharedWorker",
    "serviceWorker", "clipboard", "Notification", "open",
})
_ALLOWED = frozenset({
    "program", "expression_statement", "parenthesized_expression", "sequence_expression", "identifier",
    "property_identifier", "shorthand_property_identifier", "shorthand_property_identifier_pattern",
    "member_expression", "subscript_expression", "call_expression", "arguments", "new_expression",
    "arrow_function", "function_expression", "function_declaration", "formal_parameters",
    "required_parameter", "optional_parameter", "statement_block", "lexical_declaration",
    "variable_declaration", "variable_declarator", "return_statement", "if_statement", "else_clause",
    "ternary_expression", "binary_expression", "unary_expression", "update_expression",
    "assignment_expression", "augmented_assignment_expression", "object", "pair", "array",
    "spread_element", "rest_pattern", "object_pattern", "array_pattern", "pair_pattern",
    "assignment_pattern", "object_assignment_pattern", "string", "string_fragment", "escape_sequence",
    "template_string", "template_substitution", "number", "true", "false", "null", "undefined", "this",
    "comment", "await_expression", "for_statement", "for_in_statement", "while_statement",
    "break_statement", "continue_statement", "computed_property_name", "regex", "regex_pattern",
    "regex_flags", "optional_chain", "non_null_expression", "empty_statement", "try_statement",
    "catch_clause", "finally_clause", "switch_statement", "switch_body", "switch_case", "switch_default",
    "method_definition", "property_name", "super",
})


def reads_only(script: str) -> bool:
    """True when `script` passes the allowlist above (cached: a program repeats its observation)."""
    if not isinstance(script, str) or len(script) > MAX_SCRIPT_CHARS:
        return False
    return _reads_only(script)


def _parser() -> Any:
    global _PARSER
    if _PARSER is None:
        import tree_sitter
        import tree_sitter_typescript

        _PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript()))
    return _PARSER


_PARSER: Any = None


@lru_cache(maxsize=256)
def _reads_only(script: str) -> bool:
    source = script.encode("utf-8", "surrogatepass")
    tree = _parser().parse(source)
    root = tree.root_node
    if root.has_error:
        return False

    def text(node: Any) -> str:
        return source[node.start_byte:node.end_byte].decode("utf-8", "replace")

    declared: set[str] = set()
    stack = [root]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append(node)
        if node.is_named and node.type not in _ALLOWED:
            return False
        if node.type == "variable_declarator" or node.type == "function_declaration":
            name = node.child_by_field_name("name")
            if name is not None:
                declared.update(_names(name, text))
        elif node.type in ("formal_parameters", "catch_clause"):
            for child in node.children:
                declared.update(_names(child, text))
        elif node.type == "arrow_function":
            param = node.child_by_field_name("parameter")
            if param is not None:
                declared.update(_names(param, text))
        stack.extend(node.children)
    for node in nodes:
        kind = node.type
        if kind in ("identifier", "property_identifier", "shorthand_property_identifier") \
                and text(node) in _FORBIDDEN_NAMES:
            return False
        if kind == "string_fragment" and text(node) in _FORBIDDEN_NAMES:
            parent = node.parent.parent if node.parent is not None else None
            if parent is not None and parent.type in ("subscript_expression", "computed_property_name"):
                return False
        if kind == "unary_expression" and node.children and node.children[0].type == "delete":
            return False
        if kind in ("assignment_expression", "augmented_assignment_expression", "update_expression"):
            target = node.child_by_field_name("left") or node.child_by_field_name("argument")
            if target is None or target.type != "identifier" or text(target) not in declared:
                return False
        if kind == "new_expression":
            constructor = node.child_by_field_name("constructor")
            if constructor is None or constructor.type != "identifier" or text(constructor) not in _CONSTRUCTORS:
                return False
        if kind == "call_expression":
            callee = node.child_by_field_name("function")
            if callee is None:
                return False
            if callee.type == "identifier":
                name = text(callee)
                if name not in declared and name not in _GLOBALS:
                    return False
            elif callee.type == "member_expression":
                prop = callee.child_by_field_name("property")
                if prop is None or text(prop) not in _METHODS:
                    return False
            elif callee.type not in ("arrow_function", "function_expression", "parenthesized_expression"):
                return False
    return True


def _names(node: Any, text: Any) -> set[str]:
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return {text(node)}
    out: set[str] = set()
    for child in node.children:
        if child.type == "pair_pattern":
            value = child.child_by_field_name("value")
            if value is not None:
                out |= _names(value, text)
        elif child.is_named:
            out |= _names(child, text)
    return out
