"""Type-annotation stripping for programs written in TypeScript (contract §3).

Erasure only: annotations are replaced by spaces (newlines kept), so line
and column numbers in errors still point into the author's code, and
nothing is rewritten. The host tries the code as JavaScript first and strips
only when that fails to compile, so JavaScript is never touched.

Handled: annotations on variables, parameters (including destructured and
optional ones), return types and class fields; `interface` and `type`
declarations; `as` / `satisfies` (and `as const`); non-null `!`; generic
parameters on functions and generic arguments on calls; `implements`;
class member modifiers; `declare` statements. Refused at launch with a
TypeScript error: `enum`, `namespace`, parameter properties and
decorators (they need code generation, not erasure). Annotations are not a
security boundary: runtime validation stays authoritative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import CompileError

_PUNCT = sorted(["=>", "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "...", "**", "++",
                 "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>>", ">>", "**=", "&&=",
                 "||=", "??="], key=len, reverse=True)
_REGEX_BEFORE = set("(,=:[!&|?{};+-*%<>~^") | {"=>", "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "??"}
_REGEX_KEYWORDS = {"return", "typeof", "case", "do", "else", "in", "instanceof", "new", "void", "delete",
                   "throw", "await", "yield"}
_EXPR_END_KEYWORDS = {"this", "super", "null", "true", "false", "undefined"}
_BLOCK_KEYWORDS = {"if", "while", "for", "switch", "catch", "with", "function", "return", "await", "typeof"}
_MODIFIERS = {"public", "private", "protected", "readonly", "abstract", "override", "declare"}
_TYPE_START_KEYWORDS = {"typeof", "keyof", "readonly", "unique", "infer", "new"}
_IDENT = re.compile(r"[A-Za-z_$\u0080-\uffff][\w$\u0080-\uffff]*")
_NUMBER = re.compile(r"(?:0[xXoObB][\da-fA-F_]+|\d[\d_]*\.?[\d_]*(?:[eE][+-]?\d+)?|\.\d[\d_]*(?:[eE][+-]?\d+)?)n?")


class TypeScriptError(CompileError):
    pass


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | punct | string | template | regex | number
    text: str
    start: int
    end: int
    newline_before: bool


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(src)
    newline = False
    while i < n:
        c = src[i]
        if c in " \t\r\ufeff\u00a0":
            i += 1
            continue
        if c == "\n":
            newline = True
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise TypeScriptError("TypeScript: unterminated comment")
            newline = newline or "\n" in src[i:j]
            i = j + 2
            continue
        start = i
        if c in "'\"":
            i += 1
            while i < n and src[i] != c:
                if src[i] == "\\":
                    i += 1
                elif src[i] == "\n":
                    raise TypeScriptError("TypeScript: unterminated string")
                i += 1
            i += 1
            kind = "string"
        elif c == "`":
            i = _skip_template(src, i)
            kind = "template"
        elif c == "/" and _regex_allowed(toks):
            i = _skip_regex(src, i)
            kind = "regex"
        elif m := _IDENT.match(src, i):
            i = m.end()
            kind = "ident"
        elif (m := _NUMBER.match(src, i)) and m.end() > i:
            i = m.end()
            kind = "number"
        else:
            op = next((p for p in _PUNCT if src.startswith(p, i)), c)
            i += len(op)
            kind = "punct"
        toks.append(Tok(kind, src[start:i], start, i, newline))
        newline = False
    return toks


def _scan_template(src: str, i: int) -> tuple[int, list[tuple[int, int]]]:
    """From the backtick at i: the index past the template's end, and the spans of
    its own `${…}` expressions (nested templates are skipped whole)."""
    spans: list[tuple[int, int]] = []
    i += 1
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            return i + 1, spans
        if src.startswith("${", i):
            start, depth, i = i + 2, 1, i + 2
            while i < len(src) and depth:
                ch = src[i]
                if ch == "`":
                    i = _scan_template(src, i)[0]
                    continue
                if ch in "'\"":
                    i += 1
                    while i < len(src) and src[i] != ch:
                        i += 2 if src[i] == "\\" else 1
                elif ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                i += 1
            spans.append((start, i - 1))
            continue
        i += 1
    raise TypeScriptError("TypeScript: unterminated template literal")


def _skip_template(src: str, i: int) -> int:
    return _scan_template(src, i)[0]


def _template_expressions(text: str) -> list[tuple[int, int]]:
    """Spans of the `${…}` expressions directly inside one template literal's text."""
    return _scan_template(text, 0)[1]


def _regex_allowed(toks: list[Tok]) -> bool:
    if not toks:
        return True
    last = toks[-1]
    if last.kind == "punct":
        return last.text in _REGEX_BEFORE or last.text not in (")", "]", "}")
    return last.kind == "ident" and last.text in _REGEX_KEYWORDS


def _skip_regex(src: str, i: int) -> int:
    i += 1
    in_class = False
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "\n":
            raise TypeScriptError("TypeScript: unterminated regular expression")
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        elif c == "/" and not in_class:
            i += 1
            while i < len(src) and (src[i].isalnum() or src[i] == "_"):
                i += 1
            return i
        i += 1
    raise TypeScriptError("TypeScript: unterminated regular expression")


class _Stripper:
    def __init__(self, src: str) -> None:
        self.src = src
        self.t = tokenize(src)
        self.blank: list[tuple[int, int]] = []
        self.rewrites: list[tuple[int, str]] = []  # (offset, same-length text) for template expressions

    # ------------------------------------------------------------------ helpers

    def text(self, i: int) -> str:
        return self.t[i].text if i < len(self.t) else ""

    def kind(self, i: int) -> str:
        return self.t[i].kind if i < len(self.t) else ""

    def erase(self, i: int, j: int) -> None:
        """Blank tokens i..j-1 (and what lies between them)."""
        if j > i:
            self.blank.append((self.t[i].start, self.t[j - 1].end))

    def match(self, i: int) -> int:
        """Index just past the bracket closing the one at i."""
        pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
        opener = self.text(i)
        closer = pairs[opener]
        depth = 0
        k = i
        while k < len(self.t):
            tx = self.text(k)
            if tx == opener:
                depth += 1
            elif tx == closer or (opener == "<" and tx in (">>", ">>>")):
                depth -= len(tx) if opener == "<" else 1
                if depth <= 0:
                    return k + 1
            elif opener == "<" and tx == ";":
                break  # a comparison, not a type argument list
            k += 1
        raise TypeScriptError(f"TypeScript: unbalanced {opener!r} at offset {self.t[i].start}")

    def skip_type(self, i: int) -> int:
        """Index just past one type expression starting at i."""
        k = i
        while self.text(k) in ("|", "&"):
            k += 1
        k = self._primary(k)
        while True:
            tx = self.text(k)
            if tx == "[" and self.text(k + 1) == "]":
                k += 2
            elif tx == "[":
                k = self.match(k)
            elif tx in ("|", "&"):
                k = self._primary(k + 1)
            elif tx == "extends" and not self.t[k].newline_before:
                k = self.skip_type(k + 1)
                if self.text(k) == "?":
                    k = self.skip_type(k + 1)
                    if self.text(k) == ":":
                        k = self.skip_type(k + 1)
            elif tx == "is" and self.kind(k) == "ident":
                k = self.skip_type(k + 1)
            else:
                return k

    def _primary(self, k: int) -> int:
        tx, kind = self.text(k), self.kind(k)
        if tx in _TYPE_START_KEYWORDS and kind == "ident" and self.kind(k + 1) in ("ident", "punct"):
            return self._primary(k + 1)  # typeof x, keyof T, readonly T[], new () => T, ...
        if tx in ("{", "["):
            return self.match(k)
        if tx == "(":
            end = self.match(k)
            if self.text(end) == "=>":
                return self.skip_type(end + 1)
            return end
        if tx == "<":  # generic function type
            end = self.match(k)
            return self._primary(end)
        if kind in ("string", "number", "template") or tx == "-":
            return k + (2 if tx == "-" else 1)
        if kind == "ident":
            k += 1
            while self.text(k) == "." and self.kind(k + 1) == "ident":
                k += 2
            if self.text(k) == "<":
                k = self.match(k)
            return k
        where = self.t[k].start if k < len(self.t) else len(self.src)
        raise TypeScriptError(f"TypeScript: expected a type at offset {where}")

    def expr_end(self, i: int) -> bool:
        if i < 0:
            return False
        tok = self.t[i]
        if tok.kind in ("string", "number", "template", "regex"):
            return True
        if tok.kind == "ident":
            return tok.text not in _REGEX_KEYWORDS or tok.text in _EXPR_END_KEYWORDS
        return tok.text in (")", "]")

    def statement_start(self, i: int) -> bool:
        return i == 0 or self.text(i - 1) in (";", "{", "}") or self.t[i].newline_before

    # ------------------------------------------------------------------ the pass

    def run(self) -> str:
        i = 0
        brace_stack: list[bool] = []  # True for a class body
        while i < len(self.t):
            tok = self.t[i]
            tx = tok.text
            if tok.kind == "template":
                for a, b in _template_expressions(tx):
                    inner = tx[a:b]
                    stripped = _Stripper(inner).run()
                    if stripped != inner:
                        self.rewrites.append((tok.start + a, stripped))
            if tok.kind == "ident" and self.statement_start(i):
                if tx in ("enum", "namespace", "module") and self.kind(i + 1) == "ident" and \
                        self.text(i + 2) == "{":
                    raise TypeScriptError(f"TypeScript {tx} declarations are not supported (they need code "
                                          "generation); use a plain object")
                if tx == "interface" and self.kind(i + 1) == "ident":
                    k = i + 2
                    while self.text(k) != "{":
                        k += 1
                    end = self.match(k)
                    self.erase(i, end)
                    i = end
                    continue
                if tx == "type" and self.kind(i + 1) == "ident" and self.text(i + 2) in ("=", "<"):
                    k = i + 2
                    if self.text(k) == "<":
                        k = self.match(k)
                    end = self.skip_type(k + 1)
                    if self.text(end) == ";":
                        end += 1
                    self.erase(i, end)
                    i = end
                    continue
                if tx == "declare" and self.kind(i + 1) == "ident":
                    k = i + 1
                    while k < len(self.t) and self.text(k) != ";" and not (
                            k > i + 1 and self.t[k].newline_before):
                        k = self.match(k) if self.text(k) in ("{", "(", "[") else k + 1
                    self.erase(i, k + (1 if self.text(k) == ";" else 0))
                    i = k + 1
                    continue
            if tx == "@" and tok.kind == "punct":
                raise TypeScriptError("TypeScript decorators are not supported")
            if tx in ("let", "const", "var") and tok.kind == "ident":
                i = self._declaration(i + 1)
                continue
            if tx == "function" and tok.kind == "ident":
                k = i + 1
                if self.text(k) == "*":
                    k += 1
                if self.kind(k) == "ident":
                    k += 1
                if self.text(k) == "<":
                    end = self.match(k)
                    self.erase(k, end)
                    k = end
                if self.text(k) == "(":
                    i = self._params(k)
                    continue
            if tx == "class" and tok.kind == "ident":
                k = i + 1
                if self.kind(k) == "ident" and self.text(k) not in ("extends", "implements"):
                    k += 1
                if self.text(k) == "<":
                    end = self.match(k)
                    self.erase(k, end)
                    k = end
                while self.text(k) not in ("{", ""):
                    if self.text(k) == "implements":
                        m = k + 1
                        while self.text(m) != "{":
                            m += 1
                        self.erase(k, m)
                        k = m
                        break
                    if self.text(k) == "<":
                        end = self.match(k)
                        self.erase(k, end)
                        k = end
                        continue
                    k += 1
                brace_stack.append(True)
                i = k + 1
                continue
            if tx == "{":
                brace_stack.append(False)
            elif tx == "}":
                if brace_stack:
                    brace_stack.pop()
            elif brace_stack and brace_stack[-1] and self._class_member_start(i):
                i = self._class_member(i)
                continue
            if tx == "(" and tok.kind == "punct":
                end = self.match(i)
                if self._arrow_after(end) or self._method_params(i, end):
                    i = self._params(i)
                    continue
            if tx == "<" and self.kind(i - 1) == "ident" and i > 0 and self.expr_end(i - 1):
                # f<T>(...): generic arguments on a call.
                try:
                    end = self.match(i)
                    inner_ok = all(self.kind(m) in ("ident", "punct", "string", "number")
                                   and self.text(m) not in (";", "=", "&&", "||", "==", "===")
                                   for m in range(i + 1, end - 1))
                except TypeScriptError:
                    inner_ok, end = False, i
                if inner_ok and self.text(end) == "(":
                    self.erase(i, end)
                    i = end
                    continue
            if tx in ("as", "satisfies") and tok.kind == "ident" and \
                    (self.expr_end(i - 1) or self.text(i - 1) == "}") and not tok.newline_before:
                end = i + 2 if self.text(i + 1) == "const" else self.skip_type(i + 1)
                self.erase(i, end)
                i = end
                continue
            if tx == "!" and self.expr_end(i - 1) and not self.t[i].newline_before and \
                    self.t[i - 1].end == tok.start:
                self.erase(i, i + 1)
            i += 1
        return self._apply()

    def _method_params(self, i: int, end: int) -> bool:
        """`name(a: T): R {` — method shorthand in an object literal."""
        if i == 0 or self.kind(i - 1) != "ident" or self.text(i - 1) in _BLOCK_KEYWORDS:
            return False
        after = end
        if self.text(after) == ":":
            try:
                after = self.skip_type(after + 1)
            except TypeScriptError:
                return False
        return self.text(after) == "{" and self.text(i - 2) in ("{", ",", "async", "get", "set", "*")

    def _arrow_after(self, end: int) -> bool:
        if self.text(end) == "=>":
            return True
        if self.text(end) == ":":
            try:
                after = self.skip_type(end + 1)
            except TypeScriptError:
                return False
            return self.text(after) == "=>"
        return False

    def _declaration(self, i: int) -> int:
        """After let/const/var: `name[!]: Type`, `{...}: Type`, `[...]: Type`, comma-separated.

        Returns at an initialiser's `=` so the main pass strips inside it too; a
        declarator after an initialised one keeps its annotation (and fails to
        compile, reported at launch).
        """
        while True:
            if self.text(i) in ("{", "["):
                i = self.match(i)
            elif self.kind(i) == "ident":
                i += 1
            else:
                return i
            if self.text(i) == "!":
                self.erase(i, i + 1)
                i += 1
            if self.text(i) == ":":
                end = self.skip_type(i + 1)
                self.erase(i, end)
                i = end
            if self.text(i) != ",":
                return i
            i += 1

    def _params(self, i: int) -> int:
        """A parameter list at i ('('): strip annotations and `?`; then a return type."""
        end = self.match(i)
        k = i + 1
        depth = 0
        while k < end - 1:
            tx = self.text(k)
            if tx in ("(", "[", "{"):
                # destructuring pattern or default value: its annotation comes after it
                k = self.match(k)
                if depth == 0 and self.text(k) == ":":
                    stop = self.skip_type(k + 1)
                    self.erase(k, stop)
                    k = stop
                continue
            if depth == 0 and self.kind(k) == "ident" and self.text(k) in _MODIFIERS and \
                    self.kind(k + 1) == "ident":
                raise TypeScriptError("TypeScript parameter properties are not supported; assign fields "
                                      "in the constructor body")
            if depth == 0 and self.kind(k) == "ident" and self.text(k - 1) in ("(", ",", "..."):
                m = k + 1
                if self.text(m) == "?" and self.text(m + 1) in (":", ",", ")", "="):
                    self.erase(m, m + 1)
                    m += 1
                if self.text(m) == ":":
                    stop = self.skip_type(m + 1)
                    self.erase(m, stop)
                    k = stop
                    continue
            k += 1
        # Recurse into default values and nested arrows inside the list.
        if self.text(end) == ":":
            stop = self.skip_type(end + 1)
            self.erase(end, stop)
            return stop
        return end

    def _class_member_start(self, i: int) -> bool:
        prev = self.text(i - 1)
        return prev in ("{", ";", "}") or self.t[i].newline_before

    def _class_member(self, i: int) -> int:
        k = i
        while self.kind(k) == "ident" and self.text(k) in _MODIFIERS and self.kind(k + 1) in ("ident", "punct") \
                and self.text(k + 1) not in ("(", "=", ";", ":"):
            self.erase(k, k + 1)
            k += 1
        if self.text(k) in ("static", "async", "get", "set", "*") and self.text(k + 1) not in ("(", "="):
            k += 1
        if self.text(k) == "[":
            k = self.match(k)
        elif self.kind(k) in ("ident", "string", "number") or self.text(k) == "#":
            k += 2 if self.text(k) == "#" else 1
        else:
            return i + 1
        if self.text(k) in ("?", "!") and self.text(k + 1) in (":", ";", "=", "("):
            self.erase(k, k + 1)
            k += 1
        if self.text(k) == "<":
            end = self.match(k)
            self.erase(k, end)
            k = end
        if self.text(k) == "(":
            return self._params(k)
        if self.text(k) == ":":
            end = self.skip_type(k + 1)
            self.erase(k, end)
            return end
        return k if k > i else i + 1

    def _apply(self) -> str:
        if not self.blank and not self.rewrites:
            return self.src
        out = list(self.src)
        for a, b in self.blank:
            for p in range(a, b):
                if out[p] != "\n":
                    out[p] = " "
        for at, text in self.rewrites:
            out[at:at + len(text)] = list(text)
        return "".join(out)


def strip_types(code: str) -> str:
    """Erase TypeScript annotations from a program body; raise TypeScriptError if unsupported."""
    return _Stripper(code).run()
