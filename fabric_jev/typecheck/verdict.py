"""A compiler's verdict on one program, and what a launch reports about it. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, NamedTuple

from pydantic import Field

from ..contract.languages import CheckMode, Language, TypeCheckOutcome
from ..contract.wire_model import WireData, omit_none
from .diagnostics import Diagnostic

if TYPE_CHECKING:
    from ..contract.envelope import TypecheckReport

#: Errors listed in a refused launch's message (the rest are counted).
LISTED_IN_ERROR = 10
#: Errors listed in an envelope's `typecheck.diagnostics`.
LISTED_IN_ENVELOPE = 20


@dataclass(frozen=True, slots=True)
class CompilerVerdict(WireData):
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
class Stopped(WireData):
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


class CheckReport(NamedTuple):
    """What was checked at launch; `report()` is what the envelope's `typecheck` shows of it (the
    verdict and the erased code stay with the host)."""

    language: Language | None
    mode: CheckMode
    outcome: TypeCheckOutcome
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

    def report(self) -> TypecheckReport:
        """The envelope's `typecheck`."""
        from ..contract.envelope import TypecheckReport

        verdict = self.verdict
        # The check's own values, of the report's types: made without validating them again.
        return TypecheckReport.model_construct(
            language=self.language, mode=self.mode, outcome=self.outcome, compiler=self.compiler,
            cached=None if self.compiler is None else self.cached,
            errors=None if verdict is None else len(verdict.diagnostics),
            diagnostics=() if verdict is None else tuple(d.text() for d in verdict.diagnostics[:LISTED_IN_ENVELOPE]),
            reason=self.reason)

    def warnings(self, where: str) -> list[str]:
        """What a launch that goes on despite its check should say first, one line each, terminal-safe:
        each type error as `WHERE:LINE:COLUMN: warning TSNNNN: message`, then a line that counts them
        (mode warn), or why the check stopped. Empty for a clean, unchecked or unavailable check."""
        from ..terminal import one_line  # the one renderer: messages quote the program's text

        if self.outcome is TypeCheckOutcome.STOPPED:
            return [one_line(f"{where}: the type check stopped ({self.reason}); the program runs unchecked")]
        verdict = self.verdict
        if self.outcome is not TypeCheckOutcome.ERRORS or verdict is None:
            return []
        lines = [one_line(f"{where}:{d.line}:{d.column}: warning TS{d.code}: {d.message}")
                 for d in verdict.diagnostics[:LISTED_IN_ENVELOPE]]
        more = len(verdict.diagnostics) - LISTED_IN_ENVELOPE
        shown = f" (the first {LISTED_IN_ENVELOPE} shown)" if more > 0 else ""
        lines.append(one_line(f"{where}: {verdict.count()}{shown} ({_reading(verdict.language)}); "
                              f"typecheck.{verdict.language.value} is {self.mode.value}, so it runs anyway"))
        return lines



@dataclass(frozen=True, slots=True)
class CheckResult(WireData):
    """A program checked on request (`fabric-jev check --json`, the MCP tool jev_check), whatever the
    host's modes. A check a cap stopped has `clean` false, no diagnostics, and `stopped` saying why."""

    name: str
    language: Language | None
    #: None only when a check stopped before a compiler was found.
    compiler: str | None
    #: No type errors: the program may run.
    clean: bool
    errors: int
    #: There were more errors than were kept.
    cut: bool
    diagnostics: tuple[Diagnostic, ...]
    #: Why the check stopped (its time or memory cap).
    stopped: Annotated[str | None, Field(exclude_if=omit_none)] = None
