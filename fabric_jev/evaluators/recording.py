"""An evaluator under a record mode: replays a cassette, records from another evaluator.

The one reader and writer of cassettes (cassette.py) for everything that
replays or records: the pytest plugin's `jev_evaluator`, the CLI's
`--evaluator cassette:FILE` (mode `none`) and `record:FILE` (mode `new`).
Record modes are vcrpy's; docs/testing.md has the table.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.lowlevel

from ..errors import CassetteMiss, ConfigError
from ..terminal import terminal_safe
from .base import NO_CREDENTIALS_NEEDED, Evaluator, EvaluatorStatus
from .cassette import DIFF_LINES, Cassette, Recording, digest_of, redacted, shown_request

if TYPE_CHECKING:
    from ..contract.evaluation import Evaluation, EvaluationRequest


class RecordMode(StrEnum):
    """What a cassette may do when something asks Jev (vcrpy's modes)."""

    #: replay only: a request the cassette does not hold fails; nothing is recorded
    NONE = "none"
    #: record when there is no cassette yet; once there is one, as `none`
    ONCE = "once"
    #: replay what is recorded, record what is not (vcrpy's new_episodes)
    NEW = "new"
    #: record every request anew; the cassette keeps only this run's answers
    ALL = "all"


class RecordingEvaluator:
    """An evaluator under a record mode: replays a cassette, records from `record_from`.

    `record_from` is the evaluator to record from, or a function that builds it:
    a function is called only when something has to be recorded, so `none` mode
    never builds an HTTP client or looks for a key. What it builds belongs to
    this evaluator, which closes it. Every miss is kept in `misses` (the pytest
    plugin fails the test with them even if the program caught the error).

    The cassette is written when this evaluator is closed (or `save()`d), and,
    with `autosave` seconds, also at most that often while it records, so an
    interrupted recording keeps what it had. `how_to_record` ends a miss's
    message (the plugin's hint is the default).
    """

    def __init__(self, cassette: Cassette | str | Path, mode: RecordMode | str = RecordMode.NONE, *,
                 record_from: Callable[[], Evaluator] | Evaluator | None = None,
                 model: str = "jev-latest", autosave: float | None = None,
                 how_to_record: str | None = None) -> None:
        try:
            self.mode = RecordMode(mode)
        except ValueError:
            raise ConfigError(f"unknown record mode {mode!r}; expected "
                              + ", ".join(m.value for m in RecordMode)) from None
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette(cassette)
        self._inner: Evaluator | None = record_from if isinstance(record_from, Evaluator) else None
        self._source = None if isinstance(record_from, Evaluator) else record_from
        self._model = model
        self._autosave = autosave
        self._saved_at = time.monotonic()
        self._how_to_record = how_to_record
        self.records = self.mode in (RecordMode.NEW, RecordMode.ALL) or (
            self.mode is RecordMode.ONCE and not self.cassette.existed)
        if self.mode is RecordMode.ALL:
            self.cassette.clear()
        self.replayed = 0
        self.recorded = 0
        self.misses: list[CassetteMiss] = []

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        from ..contract.evaluation import validate_answers
        from ..contract.provenance import recorded_provenance

        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller asks nothing
        shown = shown_request(request, self._model)
        digest = digest_of(shown)
        found = self.cassette.get(digest)
        if found is not None:
            self.replayed += 1
            await anyio.lowlevel.checkpoint()
            # Who answered then, replayed now (the recording's `evaluator`, or "recorded").
            return validate_answers(request, found.evaluation, provenance=recorded_provenance(found.evaluation))
        if not self.records:
            miss = CassetteMiss(self._miss(digest, shown), digest)
            self.misses.append(miss)
            raise miss
        evaluation = await self._evaluator().evaluate(request, timeout=timeout)
        self.cassette.add(Recording(digest=digest, request=shown, evaluation=evaluation.to_json()))
        self.recorded += 1
        if self._autosave is not None and time.monotonic() - self._saved_at >= self._autosave:
            self.save()
        return evaluation

    def _evaluator(self) -> Evaluator:
        if self._inner is None:
            if self._source is None:
                raise ConfigError("this cassette records, but no evaluator to record from was given")
            self._inner = self._source()
        return self._inner

    def _miss(self, digest: str, shown: dict[str, Any]) -> str:
        cassette = self.cassette
        where = cassette.path
        with contextlib.suppress(ValueError):
            where = where.relative_to(Path.cwd())
        lines = [f"no recorded Jev answer for this request in {terminal_safe(str(where))} "
                 f"(record mode {self.mode.value})",
                 f"  request digest: {digest}"]
        if not cassette.existed and not cassette.recordings:
            lines.append("  the cassette does not exist yet")
        near = cassette.nearest(shown)
        if near is not None:
            rec, diff = near
            total = len(cassette.recordings) + len(cassette.unverified)
            at = cassette.where.get(rec.digest)
            place = f"{at}, " if at else ""
            lines.append(f"  nearest recorded request: {rec.digest} ({place}of {total} recorded)"
                         + ("; from it to this one:" if diff else ": it shows the same request"))
            lines += ["    " + d for d in diff[:DIFF_LINES]]
            if len(diff) > DIFF_LINES:
                lines.append(f"    … {len(diff) - DIFF_LINES} more diff lines")
            if any(rec is u for u in cassette.unverified):
                lines.append("  it was recorded by an earlier fabric-jev (cassette version 1) with a redacted "
                             "secret, so its digest cannot be checked and it is never replayed: record it again")
            elif _redacts_to(rec.request, digest):
                lines.append("  it differs only in text that today's redaction rules remove (a secret "
                             "recorded before the rules knew it): record it again")
        lines.append(f"  {self._how_to_record or self._plugin_hint()}")
        return "\n".join(lines)

    def _plugin_hint(self) -> str:
        mode = "--jev-record-mode=once" if not self.cassette.existed else "--jev-record-mode=new"
        return f"to record it, run the test with {mode} and an evaluator (--jev-evaluator SPEC)"

    def save(self) -> bool:
        """Write the cassette if this evaluator recorded something and the text changed; True if
        written. A replay never writes, even a cassette spelled otherwise than it would be."""
        self._saved_at = time.monotonic()
        if not self.recorded:
            return False
        return self.cassette.save()

    def status(self) -> EvaluatorStatus:
        """The cassette's route; the recording evaluator's model and credentials once it was built
        (never built just to answer this: status never looks for a key)."""
        if self._inner is None:
            return EvaluatorStatus("cassette", self._model, NO_CREDENTIALS_NEEDED)
        # Recording: misses go to the inner evaluator, so its readiness is this one's.
        inner = self._inner.status()
        return EvaluatorStatus("cassette", inner.model, inner.credentials, inner.problem, inner.profile,
                               mode=inner.mode)

    async def aclose(self) -> None:
        """Save the cassette and close the evaluator recorded from."""
        try:
            self.save()
        finally:
            inner, self._inner = self._inner, None
            if inner is not None:
                await inner.aclose()


def _redacts_to(request: dict[str, Any], digest: str) -> bool:
    try:
        return digest_of(redacted(request)) == digest
    except ValueError:  # nested too deep to redact: then not the request asked either
        return False


class CassetteEvaluator(RecordingEvaluator):
    """Deprecated: `RecordingEvaluator(path, "none")` replays, `RecordingEvaluator(path, "new",
    record_from=evaluator)` records; or build either from the spec `cassette:FILE` / `record:FILE`."""

    def __init__(self, path: str | Path, *, record_from: Evaluator | None = None,
                 model: str = "jev-latest") -> None:
        warnings.warn("CassetteEvaluator is deprecated; use RecordingEvaluator(path, 'none') to replay, or "
                      "RecordingEvaluator(path, 'new', record_from=evaluator) to record "
                      "(fabric_jev.testing, fabric_jev.evaluators)", DeprecationWarning, stacklevel=2)
        if record_from is None and not Path(path).exists():
            raise ConfigError(f"cassette {path} does not exist (record it first)")
        super().__init__(path, RecordMode.NEW if record_from is not None else RecordMode.NONE,
                         record_from=record_from, model=model, autosave=0.0)


__all__ = ["CassetteEvaluator", "RecordMode", "RecordingEvaluator"]
