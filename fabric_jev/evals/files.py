"""An eval's folder (`--out DIR`): manifest.json, results.jsonl and summary.json, each only ever whole.

Before its first record an eval writes manifest.json, what it is made of
(`manifest`); `--resume` reads it first and refuses an eval that differs.
While the eval runs, its lines are appended to `results.jsonl.partial`, one
write each (batch's `AppendLog`: a kill leaves whole lines, `--resume` picks
them up). When every cell is done, results.jsonl is written sorted (bad lines
first, then each cell's lines in order) and summary.json beside it, each
through a temporary file renamed over its place, and the partial file goes.
A reader never sees half of either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .._files import LineLimits, atomic_write, bounded_lines, open_regular
from .._json import JSONInputError, loads_bounded, read_json_file
from ..batch.files import MAX_RECORD_BYTES, AppendLog
from ..errors import EvalError
from .dataset import BadLine, Key
from .manifest import EvalManifest
from .records import EvalRecord, read_line
from .summary import EvalSummary

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
PARTIAL = RESULTS + ".partial"
MANIFEST = "manifest.json"
#: A manifest holds digests, specs and settings: a few kilobytes per cell.
MAX_MANIFEST_BYTES = 16 << 20
#: A summary.json is read back by --compare: it holds at most a few worst lines per cell.
MAX_SUMMARY_BYTES = 64 << 20
#: results.jsonl read back (--compare, the report, --resume of a finished eval).
MAX_RESULTS_BYTES = 4 << 30
_RESULTS_LIMITS = LineLimits(max_bytes=MAX_RESULTS_BYTES, max_line_bytes=MAX_RECORD_BYTES, max_lines=100_000_000)

RecordKey = tuple[str, str, Key]


def record_key(record: EvalRecord) -> RecordKey:
    return record.evaluator, record.variant, record.id


def _parse(data: object) -> tuple[RecordKey, EvalRecord]:
    record = EvalRecord.from_json(data)
    return record_key(record), record


class ResultsFolder:
    """The --out folder of one eval."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.log = AppendLog[RecordKey, EvalRecord](self.folder / PARTIAL, parse=_parse, error=EvalError,
                                                    what="eval record")

    def recorded(self, *, resume: bool) -> dict[RecordKey, EvalRecord]:
        """What the folder holds already (with `resume`), read without changing anything in it."""
        finished, partial, manifest = self.folder / RESULTS, self.folder / PARTIAL, self.folder / MANIFEST
        self._check_folder()
        if not resume:
            held = next((p for p in (finished, partial, manifest) if p.exists()), None)
            if held is not None:
                raise EvalError(f"{self.folder} already holds an eval ({held.name}); pass --resume to continue "
                                "it, or choose another --out")
            return {}
        if not manifest.exists() and (finished.exists() or partial.exists()):
            raise EvalError(f"{self.folder} holds an eval without a {MANIFEST} (written by a fabric-jev that "
                            "did not record what an eval was made of): whether it is this eval cannot be "
                            "checked, so it is not resumed; start a new --out")
        earlier: dict[RecordKey, EvalRecord] = {}
        for path in (finished, partial):
            if path.exists():
                for item in read_results(path, whole_lines_only=path == partial):
                    if isinstance(item, EvalRecord):
                        earlier.setdefault(record_key(item), item)
        return earlier

    def _check_folder(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            raise EvalError(f"--out {self.folder} is not a folder")

    def manifest(self) -> EvalManifest | None:
        """The manifest the folder's eval was started with; None in a folder without one."""
        self._check_folder()
        path = self.folder / MANIFEST
        if not path.exists():
            return None
        try:
            raw = read_json_file(path, what=str(path), max_bytes=MAX_MANIFEST_BYTES)
            return EvalManifest.from_json(raw)
        except (JSONInputError, ValueError) as exc:
            raise EvalError(f"{path} is not an eval manifest ({exc}); not resuming") from None

    def open(self, *, resume: bool, manifest: EvalManifest) -> None:
        """Make the folder if needed, write its manifest unless it has one (a resume checked it),
        and open the partial file for appending."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not (self.folder / MANIFEST).exists():
                atomic_write(self.folder / MANIFEST, json.dumps(manifest.to_json(), indent=1,
                                                                ensure_ascii=False) + "\n")
        except OSError as exc:
            raise EvalError(f"cannot make --out folder {self.folder}: {exc.strerror}") from None
        self.log.open(resume=resume)

    def append(self, record: EvalRecord) -> None:
        self.log.append(record)

    def close(self) -> None:
        self.log.close()

    def finish(self, bad: Iterable[BadLine], records: Iterable[EvalRecord], summary: EvalSummary) -> None:
        """results.jsonl and summary.json, whole; then the partial file goes."""
        lines = [json.dumps(b.to_json(), ensure_ascii=False, separators=(",", ":")) for b in bad]
        lines += [json.dumps(r.to_json(), ensure_ascii=False, separators=(",", ":")) for r in records]
        try:
            atomic_write(self.folder / RESULTS, "".join(line + "\n" for line in lines))
            write_summary(self.folder / SUMMARY, summary)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.folder / PARTIAL)
        except OSError as exc:
            raise EvalError(f"cannot write {self.folder}: {exc.strerror}; rerun with --resume") from None


def file_digest(path: str | Path) -> str | None:
    """sha256 of a regular file's bytes, read in blocks; None when it is not one or cannot be read
    (the evaluator that reads it will say why)."""
    try:  # the opened descriptor is the one checked: a FIFO swapped in after a stat would block
        with open_regular(path, label=str(path), error=ValueError) as f:
            digest = hashlib.sha256()
            while block := f.read(1 << 20):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
    except (OSError, ValueError):
        return None


def write_summary(path: Path, summary: EvalSummary) -> None:
    atomic_write(path, json.dumps(summary.to_json(), indent=1, ensure_ascii=False) + "\n")


def read_results(path: str | Path, *, whole_lines_only: bool = False) -> Iterator[EvalRecord | BadLine]:
    """The lines of a results.jsonl file; EvalError names a line that is not one. With
    `whole_lines_only` (a partial file), a last line without its newline is left out: a kill
    cut it, and its line runs again."""
    path = Path(path)
    f = open_regular(path, label=str(path), error=EvalError)  # a device or FIFO: refused at once
    with f:
        if os.fstat(f.fileno()).st_size > MAX_RESULTS_BYTES:
            raise EvalError(f"{path} is over {MAX_RESULTS_BYTES >> 30} GiB")
        for number, raw in enumerate(bounded_lines(f, label=str(path), limits=_RESULTS_LIMITS, error=EvalError), 1):
            if raw is None:
                raise EvalError(f"{path} line {number} is not an eval results line: it is larger than "
                                f"{MAX_RECORD_BYTES} bytes")
            if whole_lines_only and not raw.endswith(b"\n"):
                return
            if not raw.strip():
                continue
            try:
                yield read_line(loads_bounded(raw, what=f"{path} line {number}", max_bytes=MAX_RECORD_BYTES))
            except (JSONInputError, ValueError) as exc:
                raise EvalError(f"{path} line {number} is not an eval results line: {exc}") from None


def read_summary(path: str | Path) -> EvalSummary:
    """A summary.json (or the summary.json of an --out folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / SUMMARY
    try:
        raw: Any = read_json_file(path, what=str(path), max_bytes=MAX_SUMMARY_BYTES)
    except JSONInputError as exc:
        raise EvalError(str(exc)) from None
    return EvalSummary.from_json(raw, where=str(path))


def results_beside(summary_path: str | Path) -> Path | None:
    """The results.jsonl written with a summary.json, if it is there."""
    path = Path(summary_path)
    folder = path if path.is_dir() else path.parent
    found = folder / RESULTS
    return found if found.is_file() else None
