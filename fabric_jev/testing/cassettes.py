"""Recorded Jev answers for tests, vcrpy style: one JSONL cassette per test, four record modes.

A cassette file is a header line and one line per recorded request::

    {"format":"fabric-jev-cassette","version":1}
    {"digest":"<sha256>","evaluation":{"answers":{...},"model":"...","usage":{...}},"request":{...}}

Lines are JSON with sorted keys and no spaces, in the order the requests were
first recorded, so a cassette diffs well in review. `digest` is the SHA-256 of
the canonical wire request (the same key as the CLI's `cassette:FILE`); the
`request` kept beside it is redacted (docs/observers.md has the rules) and only
serves people and the nearest-request diff. A file is written only when its
text would change.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio

from .._files import atomic_write
from ..contract.evaluation import Evaluation, EvaluationRequest, validate_answers
from ..errors import ConfigError, EvaluationError
from ..evaluators.base import Evaluator, EvaluatorStatus
from ..evaluators.cassette import request_digest

HEADER = {"format": "fabric-jev-cassette", "version": 1}
MAX_CASSETTE_BYTES = 64 << 20
#: Lines of the nearest-request diff shown in a miss.
DIFF_LINES = 40


class RecordMode(StrEnum):
    """What a cassette may do when a test asks Jev something (vcrpy's modes)."""

    #: replay only: a request the cassette does not hold fails the test; nothing is recorded
    NONE = "none"
    #: record when the test has no cassette yet; once it has one, as `none`
    ONCE = "once"
    #: replay what is recorded, record what is not (vcrpy's new_episodes)
    NEW = "new"
    #: record every request anew; the cassette keeps only this run's answers
    ALL = "all"


class CassetteMiss(EvaluationError):
    """A request the cassette does not hold, in a mode that may not record it."""

    def __init__(self, message: str, digest: str) -> None:
        super().__init__(message)
        self.digest = digest


def _line(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _redacted(value: Any) -> Any:
    from ..contract.redaction import redact

    return redact(value)[0]


@dataclass(frozen=True)
class Recording:
    digest: str
    request: dict[str, Any]
    evaluation: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "request": self.request, "evaluation": self.evaluation}


class Cassette:
    """One test's recordings, read from and written to one JSONL file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.recordings: dict[str, Recording] = {}
        #: how many times this cassette wrote its file
        self.writes = 0
        self._text: str | None = None
        if self.path.exists():
            self._text = self._read()

    @property
    def existed(self) -> bool:
        """Whether the file was there when the cassette was opened."""
        return self._text is not None

    def _read(self) -> str:
        from .._json import JSONInputError, loads_bounded

        too_large = f"cassette {self.path} is over {MAX_CASSETTE_BYTES >> 20} MiB"
        try:
            with self.path.open("rb") as f:
                # Refused by its size before it is read: a file named as a cassette may be anything.
                if os.fstat(f.fileno()).st_size > MAX_CASSETTE_BYTES:
                    raise ConfigError(too_large)
                raw = f.read(MAX_CASSETTE_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cassette {self.path} cannot be read: {exc.strerror}") from None
        if len(raw) > MAX_CASSETTE_BYTES:
            raise ConfigError(too_large)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"cassette {self.path} is not UTF-8 text") from None
        if not text.strip():
            raise ConfigError(f"cassette {self.path} is empty (delete it, or record it again)")
        # Lines end at "\n" only: str.splitlines() would also break at U+2028, U+2029 and NEL,
        # which JSON text written with ensure_ascii=False carries unescaped inside strings.
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            try:
                item = loads_bounded(line, what=f"cassette {self.path} line {n}", max_bytes=MAX_CASSETTE_BYTES)
            except JSONInputError as exc:
                raise ConfigError(str(exc)) from None
            if n == 1:
                if item != HEADER:
                    raise ConfigError(f"cassette {self.path} line 1 is not a fabric-jev cassette header "
                                      f"({_line(HEADER)})")
                continue
            if not isinstance(item, dict) or set(item) != {"digest", "request", "evaluation"} \
                    or not isinstance(item["digest"], str) or not isinstance(item["request"], dict) \
                    or not isinstance(item["evaluation"], dict):
                raise ConfigError(f"cassette {self.path} line {n}: a recording is "
                                  "{digest, request, evaluation}")
            self.recordings[item["digest"]] = Recording(item["digest"], item["request"], item["evaluation"])
        return text

    def get(self, digest: str) -> Recording | None:
        return self.recordings.get(digest)

    def add(self, recording: Recording) -> None:
        self.recordings[recording.digest] = recording

    def clear(self) -> None:
        self.recordings.clear()

    def render(self) -> str:
        return "".join(_line(x) + "\n" for x in [HEADER, *(r.to_json() for r in self.recordings.values())])

    def save(self) -> bool:
        """Write the file if its text changed (and it holds something); True if written."""
        if not self.recordings:
            return False  # a test that asked nothing keeps its cassette as it was, or gets none
        text = self.render()
        if text == self._text:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A file to check in, as an editor would write it (the temporary file's own mode is 0600);
        # a cassette that is there keeps its mode.
        try:
            mode = self.path.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        atomic_write(self.path, text, mode=mode)
        self._text = text
        self.writes += 1
        return True

    def nearest(self, request: dict[str, Any]) -> tuple[Recording, list[str]] | None:
        """The recorded request most like `request`, and a unified diff from it to `request`."""
        if not self.recordings:
            return None
        asked = json.dumps(request, sort_keys=True, indent=1, ensure_ascii=False).splitlines()
        best: tuple[float, Recording, list[str]] | None = None
        for rec in self.recordings.values():
            lines = json.dumps(rec.request, sort_keys=True, indent=1, ensure_ascii=False).splitlines()
            ratio = difflib.SequenceMatcher(None, lines, asked, autojunk=False).ratio()
            if best is None or ratio > best[0]:
                best = (ratio, rec, lines)
        assert best is not None
        diff = list(difflib.unified_diff(best[2], asked, "recorded", "asked", n=1, lineterm=""))
        return best[1], diff


class RecordingEvaluator:
    """An evaluator under a record mode: replays a cassette, records from `record_from`.

    `record_from` builds the real evaluator. It is called only when something has
    to be recorded, so `none` mode never builds an HTTP client or looks for a key;
    what it builds belongs to this evaluator, which closes it. Every miss is kept in `misses` (the pytest
    plugin fails the test with them even if the program caught the error).
    """

    def __init__(self, cassette: Cassette | str | Path, mode: RecordMode | str = RecordMode.NONE, *,
                 record_from: Callable[[], Evaluator] | None = None,
                 model: str = "jev-latest") -> None:
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette(cassette)
        try:
            self.mode = RecordMode(mode)
        except ValueError:
            raise ConfigError(f"unknown record mode {mode!r}; expected "
                              + ", ".join(m.value for m in RecordMode)) from None
        self._source = record_from
        self._inner: Evaluator | None = None
        self._model = model
        self.records = self.mode in (RecordMode.NEW, RecordMode.ALL) or (
            self.mode is RecordMode.ONCE and not self.cassette.existed)
        if self.mode is RecordMode.ALL:
            self.cassette.clear()
        self.replayed = 0
        self.recorded = 0
        self.misses: list[CassetteMiss] = []

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller asks nothing
        digest = request_digest(request, self._model)
        found = self.cassette.get(digest)
        if found is not None:
            self.replayed += 1
            await anyio.lowlevel.checkpoint()
            return validate_answers(request, found.evaluation)
        wire = request.to_wire(request.model or self._model)
        if not self.records:
            miss = CassetteMiss(self._miss(digest, wire), digest)
            self.misses.append(miss)
            raise miss
        evaluation = await self._evaluator().evaluate(request, timeout=timeout)
        self.cassette.add(Recording(digest, _redacted(wire), evaluation.to_json()))
        self.recorded += 1
        return evaluation

    def _evaluator(self) -> Evaluator:
        if self._inner is None:
            if self._source is None:
                raise ConfigError("this cassette records, but no evaluator to record from was given")
            self._inner = self._source()
        return self._inner

    def _miss(self, digest: str, wire: dict[str, Any]) -> str:
        where = self.cassette.path
        with contextlib.suppress(ValueError):
            where = where.relative_to(Path.cwd())
        lines = [f"no recorded Jev answer for this request in {where} (record mode {self.mode.value})",
                 f"  request digest: {digest}"]
        if not self.cassette.existed and not self.cassette.recordings:
            lines.append("  the cassette does not exist yet")
        near = self.cassette.nearest(_redacted(wire))
        if near is not None:
            rec, diff = near
            lines.append(f"  nearest recorded request: {rec.digest} "
                         f"(of {len(self.cassette.recordings)} recorded); from it to this one:")
            shown = diff[2:] if len(diff) > 2 else diff  # the ---/+++ names are said above
            lines += ["    " + d for d in shown[:DIFF_LINES]]
            if len(shown) > DIFF_LINES:
                lines.append(f"    … {len(shown) - DIFF_LINES} more diff lines")
        hint = "--jev-record-mode=once" if not self.cassette.existed else "--jev-record-mode=new"
        lines.append(f"  to record it, run the test with {hint} and an evaluator (--jev-evaluator SPEC)")
        return "\n".join(lines)

    def save(self) -> bool:
        """Write the cassette if this evaluator recorded something and the text changed; True if
        written. A replay never writes, even a cassette spelled otherwise than it would be."""
        if not self.recorded:
            return False
        return self.cassette.save()

    def status(self) -> EvaluatorStatus:
        """The cassette's route; the recording evaluator's model and credentials once it was built
        (never built just to answer this: status never looks for a key)."""
        if self._inner is None:
            return EvaluatorStatus("cassette", self._model)
        inner = self._inner.status()
        return EvaluatorStatus("cassette", inner.model, inner.credentials, inner.problem, inner.profile)

    async def aclose(self) -> None:
        """Save the cassette and close the evaluator recorded from (built again if needed)."""
        self.save()
        inner, self._inner = self._inner, None
        if inner is not None:
            await inner.aclose()


__all__ = ["HEADER", "Cassette", "CassetteMiss", "RecordMode", "Recording", "RecordingEvaluator"]
