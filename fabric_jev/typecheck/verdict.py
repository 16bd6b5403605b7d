"""A compiler's verdict on one program, and what a launch reports about it. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..contract.languages import CheckMode, Language
from .diagnostics import Diagnostic

#: Errors listed in a refused launch's message (the rest are counted).
LISTED_IN_ERROR = 10
#: Errors listed in an envelope's `typecheck.diagnostics`.
LISTED_IN_ENVELOPE = 20


@dataclass(frozen=True, slots=True)
class CompilerVerdict:
    """What the compiler said about one program: the same for every launch with the same digest."""

    language: Language
    diagnostics: tuple[Diagnostic, ...]
    compiler: str
    #: The compiler printed more than was kept: there are errors beyond `diagnostics`.
    cut: bool = False
    #: TypeScript with its annotations erased: what the sandbox runs (kept so a relaunch does not erase again).
    erased: str | None = None

    @property
    def clean(self) -> bool:
        return not self.diagnostics and not self.cut

    def count(self) -> str:
        n = len(self.diagnostics)
        return f"{'more than ' if self.cut else ''}{n} error{'' if n == 1 and not self.cut else 's'}"

    def refusal(self) -> str:
        """The launch error's text: the errors, capped, each `line L, column C: message (TSNNNN)`."""
        listed = "; ".join(d.text() for d in self.diagnostics[:LISTED_IN_ERROR])
        more = len(self.diagnostics) - LISTED_IN_ERROR
        tail = f"; and {more} more" if more > 0 else ""
        return f"Jev program has type errors ({_reading(self.language)}, {self.count()}): {listed}{tail}"

    def to_json(self) -> dict[str, Any]:
        return {"language": self.language.value, "compiler": self.compiler, "cut": self.cut,
                "diagnostics": [d.to_json() for d in self.diagnostics], "erased": self.erased}

    @classmethod
    def from_json(cls, data: object) -> CompilerVerdict:
        if not isinstance(data, dict) or not isinstance(data.get("diagnostics"), list):
            raise ValueError("not a verdict")
        compiler, cut, erased = data.get("compiler"), data.get("cut"), data.get("erased")
        if not isinstance(compiler, str) or not isinstance(cut, bool) or not isinstance(erased, str | None):
            raise ValueError("not a verdict")
        return cls(Language(str(data.get("language"))), tuple(Diagnostic.from_json(d) for d in data["diagnostics"]),
                   compiler, cut, erased)


@dataclass(frozen=True, slots=True)
class Stopped:
    """A check that a cap stopped: remembered per digest with the caps it had, so a relaunch under
    caps no larger is answered at once (refused, or run unchecked under warn) instead of paying
    the whole cap again."""

    reason: str
    language: Language | None
    timeout_ms: int
    memory_limit_bytes: int

    def covers(self, timeout_ms: int, memory_limit_bytes: int) -> bool:
        """Whether checking again under these caps would stop again (they are no larger)."""
        return timeout_ms <= self.timeout_ms and memory_limit_bytes <= self.memory_limit_bytes

    def remembered(self) -> str:
        """The reason, as a relaunch says it."""
        return (f"{self.reason}; remembered from an earlier check of this same program, so it was not "
                "checked again (raise typecheck.timeoutMs or typecheck.memoryLimitBytes to try again)")

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "language": None if self.language is None else self.language.value,
                "timeoutMs": self.timeout_ms, "memoryLimitBytes": self.memory_limit_bytes}

    @classmethod
    def from_json(cls, data: object) -> Stopped:
        if not isinstance(data, dict):
            raise ValueError("not a stop")
        reason, language = data.get("reason"), data.get("language")
        timeout, memory = data.get("timeoutMs"), data.get("memoryLimitBytes")
        if (not isinstance(reason, str) or not isinstance(timeout, int) or not isinstance(memory, int)
                or not (language is None or isinstance(language, str))):
            raise ValueError("not a stop")
        return cls(reason, None if language is None else Language(language), timeout, memory)


def _reading(language: Language) -> str:
    return "TypeScript" if language is Language.TYPESCRIPT else "JavaScript, checked by TypeScript"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What was checked at launch, as the envelope's `typecheck` and the host's status show it.

    `outcome`: `clean`; `errors` (reported, not refused: mode warn); `off` (the
    language's mode is off); `unavailable` (no compiler installed; the program
    runs unchecked); `stopped` (the compiler hit a cap or failed; mode warn).
    """

    language: Language | None
    mode: CheckMode
    outcome: str
    compiler: str | None = None
    verdict: CompilerVerdict | None = None
    reason: str | None = None
    #: The verdict came from the cache (memory or disk): no compiler ran for this launch.
    cached: bool = False
    #: The TypeScript program with its annotations erased, when known: the code to run.
    erased: str | None = None

    def code(self, program_code: str) -> str:
        """What the sandbox should load: the erased TypeScript when the check has it, else the code as
        written (the sandbox then reads it as JavaScript first and erases only if that fails)."""
        return self.erased if self.erased is not None else program_code

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"language": None if self.language is None else self.language.value,
                                "mode": self.mode.value, "outcome": self.outcome}
        if self.compiler is not None:
            data["compiler"] = self.compiler
            data["cached"] = self.cached
        if self.verdict is not None:
            data["errors"] = len(self.verdict.diagnostics)
            if self.verdict.diagnostics:
                data["diagnostics"] = [d.text() for d in self.verdict.diagnostics[:LISTED_IN_ENVELOPE]]
        if self.reason is not None:
            data["reason"] = self.reason
        return data

    def warnings(self, where: str) -> list[str]:
        """What a launch that goes on despite its check should say first, one line each, terminal-safe:
        each type error as `WHERE:LINE:COLUMN: warning TSNNNN: message`, then a line that counts them
        (mode warn), or why the check stopped. Empty for a clean, unchecked or unavailable check."""
        from ..terminal import one_line  # the one renderer: messages quote the program's text

        if self.outcome == "stopped":
            return [one_line(f"{where}: the type check stopped ({self.reason}); the program runs unchecked")]
        verdict = self.verdict
        if self.outcome != "errors" or verdict is None:
            return []
        lines = [one_line(f"{where}:{d.line}:{d.column}: warning TS{d.code}: {d.message}")
                 for d in verdict.diagnostics[:LISTED_IN_ENVELOPE]]
        more = len(verdict.diagnostics) - LISTED_IN_ENVELOPE
        shown = f" (the first {LISTED_IN_ENVELOPE} shown)" if more > 0 else ""
        lines.append(one_line(f"{where}: {verdict.count()}{shown} ({_reading(verdict.language)}); "
                              f"typecheck.{verdict.language.value} is {self.mode.value}, so it runs anyway"))
        return lines

