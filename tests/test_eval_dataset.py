"""Datasets: JSON Lines with its header, CSV, and Hugging Face exports; every bad line named and counted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fabric_jev import EvalError
from fabric_jev.evals import read_dataset

INPUT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"],
         "additionalProperties": False}
OUTPUT = {"type": "object", "additionalProperties": False,
          "properties": {"route": {"enum": ["billing", "technical", "review"]}, "refund": {"type": "boolean"},
                         "urgency": {"type": "number"}, "meta": {"type": "object"}}}


def read(path: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    return read_dataset(path, input_schema=INPUT, output_schema=OUTPUT, **kwargs)  # type: ignore[arg-type]


def write_lines(path: Path, *lines: object) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


def test_json_lines_with_a_header_ids_and_partial_expected_values(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "d.jsonl",
                       {"fabric-jev-eval": {"tolerance": {"urgency": 0.5}, "match": "partial"}},
                       {"id": "a", "input": {"text": "charged twice"}, "expected": {"route": "billing"}},
                       "",
                       {"input": {"text": "it crashes"}, "expected": {"route": "technical", "urgency": 0},
                        "meta": {"source": "forum"}})
    dataset = read(path)
    assert dataset.format == "jsonl" and dataset.bad == ()
    assert [(c.line, c.key) for c in dataset.cases] == [(2, "a"), (4, 4)]  # no id: the line number
    assert dataset.cases[1].expected == {"route": "technical", "urgency": 0}
    assert dataset.settings is not None and dataset.settings.tolerance_for("urgency") == 0.5


def test_every_kind_of_bad_line_is_named_counted_and_not_run(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "d.jsonl",
        {"id": 1, "input": {"text": "ok"}, "expected": {"route": "billing"}},
        '{"input": {"text": "cut"',
        {"expected": {"route": "billing"}},
        {"input": {"text": "no expected"}},
        {"input": {"text": 7}, "expected": {}},
        {"input": {"text": "typo"}, "expected": {"route": "biling"}},
        {"input": {"text": "unknown field"}, "expected": {"queue": "x"}},
        {"id": 1, "input": {"text": "again"}, "expected": {}},
        {"input": {"text": "x"}, "expected": {}, "label": "y"},
        [1, 2],
        {"fabric-jev-eval": {}},
        {"id": True, "input": {"text": "x"}, "expected": {}},
        {"input": {"text": "x" * 300_000}, "expected": {}},
        {"input": {"text": "last, fine"}, "expected": {"refund": False}},
    )
    dataset = read(path)
    assert [c.line for c in dataset.cases] == [1, 14]
    errors = {b.line: b.error for b in dataset.bad}
    assert sorted(errors) == list(range(2, 14))
    assert errors[2].startswith("dataset line 2") and "JSON" in errors[2]
    assert errors[3] == "dataset line 3: has no 'input'"
    assert errors[4] == "dataset line 4: has no 'expected'"
    assert errors[5].startswith("dataset line 5: input does not match its declared schema")
    assert errors[6] == 'dataset line 6: expected route "biling" does not fit the program\'s outputSchema'
    assert errors[7] == "dataset line 7: expected field 'queue' is not in the program's outputSchema"
    assert errors[8] == "dataset line 8: repeats id 1"
    assert errors[9] == "dataset line 9: unknown key 'label' (a line holds input, expected, id and meta)"
    assert errors[10] == "dataset line 10: is not an object {input, expected, id?}"
    assert "belongs alone on line 1" in errors[11]
    assert "'id' must be" in errors[12]
    assert errors[13] == "dataset line 13: is larger than 262144 bytes"


def test_a_file_that_cannot_be_a_dataset_raises_one_line(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="does not exist"):
        read(tmp_path / "none.jsonl")
    with pytest.raises(EvalError, match="unknown format"):
        read(write_lines(tmp_path / "d.txt", {"input": {}, "expected": {}}))
    with pytest.raises(EvalError, match="has no lines"):
        read(write_lines(tmp_path / "empty.jsonl", ""))
    bad_header = write_lines(tmp_path / "h.jsonl", {"fabric-jev-eval": {"tolerance": "wide"}})
    with pytest.raises(EvalError, match="line 1: tolerance must be a number or an object"):
        read(bad_header)


def test_csv_cells_are_read_as_the_schema_declares(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("\ufeffid,input.text,expected.route,expected.refund,expected.urgency,meta.note\n"
                    "t1,\"charged twice, refund please\",billing,yes,0,from mail\n"
                    "t2,it crashes,technical,,1.5,\n"
                    "t3,partial,,false,,\n"
                    "t4,bad bool,billing,maybe,,\n"
                    "t5,too,many,cells,here,x,y\n"
                    "t6,bad number,billing,no,soon,\n", encoding="utf-8")
    dataset = read(path)
    assert [(c.line, c.key, c.expected) for c in dataset.cases] == [
        (2, "t1", {"route": "billing", "refund": True, "urgency": 0.0}),
        (3, "t2", {"route": "technical", "urgency": 1.5}),
        (4, "t3", {"refund": False})]
    assert dataset.cases[0].input == {"text": "charged twice, refund please"}
    errors = {b.line: b.error for b in dataset.bad}
    assert errors == {
        5: "dataset line 5: column expected.refund: 'maybe' is not a boolean (true/false, yes/no, 1/0)",
        6: "dataset line 6: has 7 cells, the header 6",
        7: "dataset line 7: column expected.urgency: 'soon' is not a number"}


def test_csv_whole_columns_hold_json_and_unknown_columns_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text('input,expected\n"{""text"": ""hi""}","{""route"": ""review""}"\n', encoding="utf-8")
    assert read(path).cases[0].expected == {"route": "review"}
    (tmp_path / "e.csv").write_text("input.text,answer\nhi,x\n", encoding="utf-8")
    with pytest.raises(EvalError, match=re.escape("column 'answer' is none of id, input, input.FIELD, expected")):
        read(tmp_path / "e.csv")
    (tmp_path / "f.csv").write_text("input.text\nhi\n", encoding="utf-8")
    with pytest.raises(EvalError, match="no expected column"):
        read(tmp_path / "f.csv")


@pytest.fixture
def hf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The datasets library (the `datasets` extra), its caches kept inside the test's folder."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return pytest.importorskip("datasets", reason="the datasets extra is not installed")


ROWS = [{"id": "r1", "input": {"text": "charged twice"}, "expected": {"route": "billing", "refund": True}},
        {"id": "r2", "input": {"text": "crash"}, "expected": {"route": "technical", "refund": False}},
        {"id": "r3", "input": {"text": "typo"}, "expected": {"route": "biling", "refund": False}}]


def test_a_datasets_export_on_disk_in_every_form(hf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    table = hf.Dataset.from_list(ROWS)
    table.save_to_disk(str(tmp_path / "saved"))
    hf.DatasetDict({"train": table, "test": table.select([0, 1])}).save_to_disk(str(tmp_path / "splits"))
    table.to_parquet(str(tmp_path / "rows.parquet"))
    arrow = next((tmp_path / "saved").glob("*.arrow"))
    for path, kind in ((tmp_path / "saved", "datasets"), (tmp_path / "rows.parquet", "parquet"), (arrow, "arrow")):
        dataset = read(path)
        assert dataset.format == kind and dataset.unit == "row"
        assert [(c.key, c.expected) for c in dataset.cases] == [
            ("r1", {"route": "billing", "refund": True}), ("r2", {"route": "technical", "refund": False})]
        assert [b.error for b in dataset.bad] == [
            'dataset row 3: expected route "biling" does not fit the program\'s outputSchema']
    assert len(read(tmp_path / "splits").cases) == 2  # the test split by default
    assert len(read(tmp_path / "splits", split="train").cases) == 2
    with pytest.raises(EvalError, match="has the splits train, test; choose one with --split"):
        read(tmp_path / "splits", split="validation")


def test_flat_columns_in_parquet_are_fields(hf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    flat = [{"input.text": "charged", "expected.route": "billing", "expected.urgency": "2"},
            {"input.text": "crash", "expected.route": None, "expected.urgency": "0.5"}]
    hf.Dataset.from_list(flat).to_parquet(str(tmp_path / "flat.parquet"))
    dataset = read(tmp_path / "flat.parquet")
    assert [c.expected for c in dataset.cases] == [{"route": "billing", "urgency": 2.0}, {"urgency": 0.5}]


def test_a_csv_column_side_and_the_format_are_closed_sets(tmp_path: Path) -> None:
    from fabric_jev.evals.dataset import Dataset, DatasetFormat

    path = tmp_path / "d.csv"
    path.write_text("id,input.text,expected.route,meta.note\n7,hi,review,why\n", encoding="utf-8")
    dataset = read(path)
    assert dataset.format is DatasetFormat.CSV and dataset.unit == "line"
    assert dataset.cases[0].key == 7 and dataset.cases[0].input == {"text": "hi"}
    # Keys of the line are plain strings, as a JSON Lines line's are.
    assert [type(k) for k in dataset.cases[0].expected] == [str]  # type: ignore[union-attr]
    (tmp_path / "g.csv").write_text("input,input.text,expected\n{},hi,{}\n", encoding="utf-8")
    with pytest.raises(EvalError, match=re.escape("give input either whole (a 'input' column) or by field")):
        read(tmp_path / "g.csv")
    assert Dataset("d.jsonl", "jsonl", ()).format is DatasetFormat.JSONL  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'txt' is not a valid DatasetFormat"):
        Dataset("d.txt", "txt", ())  # type: ignore[arg-type]
