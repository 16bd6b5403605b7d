"""Labeled datasets: JSON Lines, CSV, and a Hugging Face `datasets` export on disk.

JSON Lines, one case a line (blank lines are skipped)::

    {"fabric-jev-eval": {"tolerance": {"urgency": 0.5}}}     # optional header, line 1 only
    {"id": "t1", "input": {"text": "..."}, "expected": {"queue": "billing"}}

`id` is optional (a string or an integer, unique; default the line number),
`meta` is allowed and ignored, nothing else is. CSV has a header row; a column
is `id`, `input` or `expected` (the whole value), `input.FIELD` or
`expected.FIELD` (one field, dotted for nested objects) or `meta.*`
(ignored). An Arrow or Parquet file, or a folder written by `datasets`'
`save_to_disk`, has the same columns (the `datasets` extra reads them). A cell
is read as the type the program's schema declares for it (booleans as
true/false/yes/no/1/0); an empty cell leaves the field out.

A line that cannot be a case — not JSON, a missing `input`, an input that does
not fit the program's inputSchema, an expected value no result could meet, a
repeated id — is a *bad line*: it is not run, it is counted, and its one-line
message names it. A problem with the file itself (missing, too large, an
unknown column) raises `EvalError`.

Only regular files are read (`_files.open_regular`): a dataset that is a device
(`/dev/zero`, even behind a symlink named `data.jsonl`), a FIFO or a socket is
refused at once, as is a folder of `save_to_disk` that holds one. What is read is
bounded: MAX_DATASET_BYTES in all, MAX_LINE_BYTES a line (a longer line is a bad
line, skipped to its end without being held), MAX_DATASET_LINES lines, blank ones
included; past a bound the read stops with `EvalError` and nothing of it is used.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeGuard

from pydantic import ConfigDict, Field

from .._files import LineLimits, bounded_lines, kind_of, open_within
from .._json import JSONInputError, loads_bounded
from ..contract.values import JsonValue, ValueRejected, check_value, normalize_json
from ..contract.wire_model import WireModel
from ..errors import EvalError
from .compare import EvalSettings, check_expected, parse_settings, schema_at

HEADER_KEY = "fabric-jev-eval"
#: A dataset file over this is refused before it is read.
MAX_DATASET_BYTES = 1 << 30
#: One line: an input (≤ 32 KiB as the host takes it) and its expected value, with room to spare.
MAX_LINE_BYTES = 256 << 10
MAX_CASES = 1_000_000
#: Lines of a JSON Lines or CSV file, blank ones included: a file of newlines ends too.
MAX_DATASET_LINES = 2 * MAX_CASES
#: Files and folders a `save_to_disk` folder may hold (each looked at before the library reads it).
MAX_FOLDER_ENTRIES = 10_000
_JSONL_LIMITS = LineLimits(max_bytes=MAX_DATASET_BYTES, max_line_bytes=MAX_LINE_BYTES, max_lines=MAX_DATASET_LINES)
_LINE_KEYS = frozenset({"id", "input", "expected", "meta"})


class DatasetFormat(StrEnum):
    """How a dataset is stored; its value is what summary.json's `dataset.format` writes."""

    JSONL = "jsonl"
    CSV = "csv"
    PARQUET = "parquet"
    ARROW = "arrow"
    #: a folder written by `datasets`' save_to_disk
    DATASETS = "datasets"


FORMATS = tuple(DatasetFormat)
#: The formats whose lines are table rows, numbered from the first row (not text lines).
_TABLES = frozenset({DatasetFormat.PARQUET, DatasetFormat.ARROW, DatasetFormat.DATASETS})
DATASETS_EXTRA = "pip install 'fabric-jev[datasets]'"

Key = int | str
#: Where a line number points: a text file's line, or a table's row.
Unit = Literal["line", "row"]


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One labeled line: what the program is given and what its result should be."""

    line: int
    key: Key
    input: JsonValue
    expected: JsonValue


class BadLine(WireModel):
    """A line that is not run: its number and why (the message names the line); its JSON, a line
    of results.jsonl, is ``{"line": 7, "bad": "dataset line 7: ..."}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: int
    error: str = Field(serialization_alias="bad")


@dataclass(frozen=True)
class Dataset:
    """A dataset read and screened against a program's schemas."""

    path: str
    format: DatasetFormat
    cases: tuple[EvalCase, ...]
    bad: tuple[BadLine, ...] = ()
    #: The settings of a JSON Lines header, if it has one.
    settings: EvalSettings | None = None
    #: Where the line numbers point: "line" in a text file, "row" in Arrow and Parquet.
    unit: Unit = "line"

    def __post_init__(self) -> None:
        # A caller that names the format as a string ("jsonl") gets the member; "txt" is refused here.
        object.__setattr__(self, "format", DatasetFormat(self.format))

    @property
    def lines(self) -> int:
        return len(self.cases) + len(self.bad)


@dataclass
class _Screen:
    """Turns raw rows into cases or bad lines, and keeps ids unique."""

    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    unit: Unit = "line"
    cases: list[EvalCase] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    seen: set[Key] = field(default_factory=set)

    def reject(self, line: int, reason: str) -> None:
        self.bad.append(BadLine(line=line, error=f"dataset {self.unit} {line}: {reason}"))

    def add(self, line: int, row: Mapping[str, Any]) -> None:
        if len(self.cases) + len(self.bad) >= MAX_CASES:
            raise EvalError(f"the dataset has more than {MAX_CASES} lines")
        unknown = sorted(set(row) - _LINE_KEYS)
        if unknown:
            self.reject(line, f"unknown key {unknown[0]!r} (a line holds input, expected, id and meta)")
            return
        if "input" not in row:
            self.reject(line, "has no 'input'")
            return
        if "expected" not in row:
            self.reject(line, "has no 'expected'")
            return
        key = row.get("id", line)
        if not _is_key(key):
            self.reject(line, "'id' must be a string of 1-128 characters or an integer")
            return
        if key in self.seen:
            self.reject(line, f"repeats id {key!r}")
            return
        try:
            value = check_value(row["input"], self.input_schema, "input")
            expected = normalize_json(row["expected"], "expected value")
        except ValueRejected as exc:
            self.reject(line, str(exc))
            return
        problem = check_expected(expected, self.output_schema)
        if problem is not None:
            self.reject(line, problem)
            return
        self.seen.add(key)
        self.cases.append(EvalCase(line, key, value, expected))


def _is_key(value: object) -> TypeGuard[Key]:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53 - 1
    return isinstance(value, str) and 1 <= len(value) <= 128


def dataset_format(path: Path) -> DatasetFormat:
    """The format a path names: by its suffix, or `datasets` for a folder."""
    if path.is_dir():
        return DatasetFormat.DATASETS
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return DatasetFormat.JSONL
    if suffix in (".csv", ".tsv"):
        return DatasetFormat.CSV
    if suffix == ".parquet":
        return DatasetFormat.PARQUET
    if suffix == ".arrow":
        return DatasetFormat.ARROW
    raise EvalError(f"dataset {path}: unknown format (use .jsonl, .csv, .tsv, .parquet, .arrow, or a folder "
                    "written by datasets' save_to_disk)")


def read_dataset(path: str | Path, *, input_schema: dict[str, Any], output_schema: dict[str, Any],
                 split: str | None = None) -> Dataset:
    """Read and screen a dataset for a program with these schemas (see the module doc)."""
    path = Path(path)
    try:
        if not path.exists():
            raise EvalError(f"dataset {path} does not exist")
    except OSError as exc:
        raise EvalError(f"cannot read dataset {path}: {exc.strerror}") from None
    kind = dataset_format(path)
    screen = _Screen(input_schema, output_schema, unit="row" if kind in _TABLES else "line")
    settings = None
    if kind is DatasetFormat.DATASETS:
        _check_folder(path)
        _read_rows(_arrow_rows(path, None, kind, split), screen, "row")
    else:
        # Opened once, and every format reads the descriptor that was checked to be a regular file.
        with _open(path) as f:
            if kind is DatasetFormat.JSONL:
                settings = _read_jsonl(path, f, screen)
            elif kind is DatasetFormat.CSV:
                _read_csv(path, f, screen)
            else:
                _read_rows(_arrow_rows(path, f, kind, split), screen, "row")
    if not screen.cases and not screen.bad:
        raise EvalError(f"dataset {path} has no lines")
    return Dataset(str(path), kind, tuple(screen.cases), tuple(screen.bad), settings, screen.unit)


def _open(path: Path) -> BinaryIO:
    """The dataset file, if it is a regular file no larger than MAX_DATASET_BYTES."""
    return open_within(path, label=f"dataset {path}", max_bytes=MAX_DATASET_BYTES, error=EvalError,
                       too_large=lambda _size: f"dataset {path} is over {MAX_DATASET_BYTES >> 20} MiB")


def _check_folder(folder: Path) -> None:
    """A `save_to_disk` folder holds only files and folders (the library would open a FIFO
    and wait, or read a device for ever), at most MAX_FOLDER_ENTRIES, each file within the
    dataset's bound. Symlinks are followed, as the library follows them; a folder met again
    through a link is looked at once (a link loop ends)."""
    seen = 0
    stack = [folder]
    visited: set[tuple[int, int]] = set()
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_FOLDER_ENTRIES:
                        raise EvalError(f"dataset {folder} holds more than {MAX_FOLDER_ENTRIES} files and folders")
                    info = entry.stat()
                    if stat.S_ISDIR(info.st_mode):
                        if (info.st_dev, info.st_ino) not in visited:
                            visited.add((info.st_dev, info.st_ino))
                            stack.append(Path(entry.path))
                    elif not stat.S_ISREG(info.st_mode):
                        raise EvalError(f"cannot read dataset {folder}: {entry.path} is {kind_of(info.st_mode)}, "
                                        "not a regular file")
                    elif info.st_size > MAX_DATASET_BYTES:
                        raise EvalError(f"dataset {folder}: {entry.path} is over {MAX_DATASET_BYTES >> 20} MiB")
        except OSError as exc:
            raise EvalError(f"cannot read dataset {folder}: {exc.strerror}") from None


# ---------------------------------------------------------------- JSON Lines

def _read_jsonl(path: Path, f: BinaryIO, screen: _Screen) -> EvalSettings | None:
    settings: EvalSettings | None = None
    lines = bounded_lines(f, label=f"dataset {path}", limits=_JSONL_LIMITS, error=EvalError)
    for number, raw in enumerate(lines, 1):
        if raw is None:
            screen.reject(number, f"is larger than {MAX_LINE_BYTES} bytes")
            continue
        if not raw.strip():
            continue
        try:
            row = loads_bounded(raw, what=f"dataset line {number}", max_bytes=MAX_LINE_BYTES)
        except JSONInputError as exc:
            screen.bad.append(BadLine(line=number, error=str(exc)))
            continue
        if isinstance(row, dict) and HEADER_KEY in row:
            if number != 1 or len(row) != 1:
                screen.reject(number, f"a {HEADER_KEY!r} header belongs alone on line 1")
                continue
            try:
                settings = parse_settings(row[HEADER_KEY], f"dataset {path} line 1")
            except ValueError as exc:
                raise EvalError(str(exc)) from None
            continue
        if not isinstance(row, dict):
            screen.reject(number, "is not an object {input, expected, id?}")
            continue
        screen.add(number, row)
    return settings


# ---------------------------------------------------------------- CSV and Arrow columns

class Side(StrEnum):
    """The part of a dataset line a CSV or Arrow column fills; its value is the line's key."""

    ID = "id"
    INPUT = "input"
    EXPECTED = "expected"
    #: ignored (notes for people)
    META = "meta"


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    side: Side
    path: tuple[str, ...]  # the field inside the side's value; () for the whole value


def _columns(names: Iterable[str], where: str) -> list[_Column]:
    columns: list[_Column] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise EvalError(f"{where}: column {name!r} appears twice")
        seen.add(name)
        head, dot, rest = name.partition(".")
        if head == Side.META:
            columns.append(_Column(name, Side.META, ()))
        elif name == Side.ID:
            columns.append(_Column(name, Side.ID, ()))
        elif head in (Side.INPUT, Side.EXPECTED) and (not dot or all(rest.split("."))):
            columns.append(_Column(name, Side(head), tuple(rest.split(".")) if dot else ()))
        else:
            raise EvalError(f"{where}: column {name!r} is none of id, input, input.FIELD, expected, "
                            "expected.FIELD or meta.*")
    for side in (Side.INPUT, Side.EXPECTED):
        whole = any(c.side is side and not c.path for c in columns)
        if whole and any(c.side is side and c.path for c in columns):
            raise EvalError(f"{where}: give {side} either whole (a {side.value!r} column) or by field, not both")
    if not any(c.side is Side.INPUT for c in columns):
        raise EvalError(f"{where}: no input column (input, or input.FIELD)")
    if not any(c.side is Side.EXPECTED for c in columns):
        raise EvalError(f"{where}: no expected column (expected, or expected.FIELD)")
    return columns


_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


def _typed(text: str, schema: dict[str, Any] | None) -> JsonValue:
    """A text cell as the type its schema declares (ValueError says why not)."""
    kind = schema.get("type") if schema else None
    if kind == "string" or (schema is not None and kind is None and "enum" in schema
                            and all(isinstance(v, str) for v in schema["enum"])):
        return text
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"{text!r} is not a boolean (true/false, yes/no, 1/0)")
    if kind in ("number", "integer"):
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        return int(number) if kind == "integer" and number.is_integer() else number
    try:  # object, array, null, or no type given: JSON text, else the text itself
        return loads_bounded(text, what="cell", max_bytes=MAX_LINE_BYTES)  # type: ignore[no-any-return]
    except JSONInputError:
        if kind in ("object", "array", "null"):
            raise ValueError(f"{_clip(text)} is not JSON ({kind})") from None
        return text


def _clip(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _put(target: dict[str, Any], path: tuple[str, ...], value: JsonValue) -> None:
    for key in path[:-1]:
        inner = target.get(key)
        if not isinstance(inner, dict):
            inner = target[key] = {}
        target = inner
    target[path[-1]] = value


def _assemble(columns: list[_Column], cells: Mapping[str, Any], screen: _Screen,
              *, from_text: bool) -> dict[str, Any]:
    """One row's cells as a line {input, expected, id?}; ValueError names the column."""
    row: dict[str, Any] = {}
    for column in columns:
        if column.side is Side.META:
            continue
        value = cells.get(column.name)
        if value is None or (from_text and value == ""):
            continue  # an empty cell leaves its field out
        if column.side is Side.ID:
            if from_text:
                value = int(value) if value.strip().lstrip("-").isdigit() else value
            row["id"] = value
            continue
        schema = screen.input_schema if column.side is Side.INPUT else screen.output_schema
        sub = schema_at(schema, ".".join(column.path)) if column.path else schema
        if isinstance(value, str) and (from_text or (sub is not None and sub.get("type") not in (None, "string"))):
            try:
                value = _typed(value, sub)
            except ValueError as exc:
                raise ValueError(f"column {column.name}: {exc}") from None
        # Keyed by the plain string: the row is read as a JSON Lines line is.
        if column.path:
            _put(row.setdefault(column.side.value, {}), column.path, value)
        else:
            row[column.side.value] = value
    # An expected value given by fields is an object even if every one of its cells is empty.
    if any(c.side is Side.EXPECTED and c.path for c in columns):
        row.setdefault("expected", {})
    if any(c.side is Side.INPUT and c.path for c in columns):
        row.setdefault("input", {})
    return row


def _read_csv(path: Path, f: BinaryIO, screen: _Screen) -> None:
    try:
        raw = f.read(MAX_DATASET_BYTES + 1)
    except OSError as exc:
        raise EvalError(f"cannot read dataset {path}: {exc.strerror}") from None
    if len(raw) > MAX_DATASET_BYTES:  # it grew since it was opened
        raise EvalError(f"dataset {path} is over {MAX_DATASET_BYTES >> 20} MiB")
    try:
        text = raw.decode("utf-8-sig")  # a byte order mark, as spreadsheets write, is not a column name
    except UnicodeDecodeError:
        raise EvalError(f"dataset {path} is not UTF-8 text") from None
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise EvalError(f"dataset {path} line 1: {exc}") from None
    if header is None:
        raise EvalError(f"dataset {path} has no header row")
    columns = _columns([name.strip() for name in header], f"dataset {path}")
    first = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            screen.reject(first, f"is not CSV ({exc})")
            first = reader.line_num + 1
            continue
        if reader.line_num > MAX_DATASET_LINES:
            raise EvalError(f"dataset {path} has more than {MAX_DATASET_LINES} lines")
        line, first = first, reader.line_num + 1
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) != len(columns):
            screen.reject(line, f"has {len(cells)} cells, the header {len(columns)}")
            continue
        try:
            row = _assemble(columns, dict(zip((c.name for c in columns), cells, strict=True)), screen,
                            from_text=True)
        except ValueError as exc:
            screen.reject(line, str(exc))
            continue
        screen.add(line, row)


def _read_rows(rows: Iterator[tuple[list[str], Mapping[str, Any]]], screen: _Screen, unit: Unit) -> None:
    columns: list[_Column] | None = None
    for number, (names, cells) in enumerate(rows, 1):
        if columns is None:
            columns = _columns(names, "the dataset")
        try:
            row = _assemble(columns, cells, screen, from_text=False)
        except ValueError as exc:
            screen.reject(number, str(exc))
            continue
        screen.add(number, row)


def _arrow_rows(path: Path, f: BinaryIO | None, kind: DatasetFormat,
                split: str | None) -> Iterator[tuple[list[str], Mapping[str, Any]]]:
    """Rows of an Arrow or Parquet file (read from `f`, its checked descriptor), or of a
    `save_to_disk` folder (the `datasets` extra)."""
    try:
        if kind is DatasetFormat.DATASETS:
            import datasets
        else:
            import pyarrow
    except ImportError:
        raise EvalError(f"reading {path} needs the datasets extra: {DATASETS_EXTRA}") from None
    try:
        if kind is DatasetFormat.DATASETS:
            loaded = datasets.load_from_disk(str(path))
            if isinstance(loaded, datasets.DatasetDict):
                names = list(loaded)
                if split is None:
                    split = "test" if "test" in names else names[0] if len(names) == 1 else None
                if split not in names:
                    raise EvalError(f"dataset {path} has the splits {', '.join(names)}; choose one with --split")
                loaded = loaded[split]
            table = loaded.data.table
        elif kind is DatasetFormat.PARQUET:
            import pyarrow.parquet

            table = pyarrow.parquet.read_table(f)
        else:
            table = _arrow_table(f)
    except EvalError:
        raise
    except Exception as exc:  # a library's own error for a file it cannot read: one line
        first = str(exc).strip().splitlines()
        raise EvalError(f"cannot read dataset {path}: {first[0] if first else type(exc).__name__}") from None
    names = list(table.column_names)
    for batch in table.to_batches(max_chunksize=4096):
        for row in batch.to_pylist():
            yield names, row


def _arrow_table(f: BinaryIO | None) -> Any:
    """An Arrow file: the stream format `datasets` writes, or the random-access file format."""
    import pyarrow
    import pyarrow.ipc

    source = pyarrow.PythonFile(f, mode="r")
    try:
        return pyarrow.ipc.open_stream(source).read_all()
    except pyarrow.ArrowInvalid:
        source.seek(0)
        return pyarrow.ipc.open_file(source).read_all()


def jsonl_line(case: EvalCase) -> str:
    """A case as a JSON Lines dataset line."""
    return json.dumps({"id": case.key, "input": case.input, "expected": case.expected}, ensure_ascii=False)
