from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from fabric_jev.calibration.labels import (
    labels_from_cassette,
    parse_labels,
    read_labels,
    signature_of,
)
from fabric_jev.calibration.metrics import (
    accuracy,
    brier,
    confidence_threshold,
    coverage_curve,
    ece,
    noul_thresholds,
    outcome,
    reliability,
    summary,
)
from fabric_jev.contract.evaluation import Question
from fabric_jev.errors import LabelsInvalid

NOUL = {"type": "noul", "instructions": "Is it read-only?"}
CHOICE = {"type": "choice", "instructions": "Which queue?", "criteria": {"a": "first", "b": None, "c": "third"}}
SCORE = {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high"]}


def line(**fields: Any) -> str:
    return json.dumps(fields)


# ---------------------------------------------------------------- labels


def test_labels_parse_every_question_type_and_skip_blank_lines() -> None:
    text = "\n".join([
        line(id="n1", state="ls -la", question=NOUL, label=True),
        "",
        line(state={"ticket": "refund please"}, question=CHOICE, label="b"),
        line(state=["disk full"], question=SCORE, label=2),
        "",
    ])
    examples = parse_labels(text, source="set.jsonl")
    assert [e.id for e in examples] == ["n1", "line-3", "line-4"]
    assert [e.label for e in examples] == [True, "b", 2]
    assert [e.class_index for e in examples] == [1, 1, 2]
    assert examples[1].question.criteria == CHOICE["criteria"] and examples[1].question.id == "q"
    assert examples[0].line == 1 and examples[2].line == 4


def test_signature_ignores_question_id_and_depends_on_the_wording() -> None:
    a = Question("x", "noul", "Is it read-only?", None)
    b = Question("y", "noul", "Is it read-only?", None)
    c = Question("x", "noul", "Is it read only?", None)
    assert signature_of(a) == signature_of(b) != signature_of(c)


@pytest.mark.parametrize(("bad", "message"), [
    ("{not json", "set.jsonl line 2 is not valid JSON: Expecting property name"),
    ('{"state": "x", "question": {"type": "noul", "instructions": "q"}, "label": NaN}',
     "set.jsonl line 2 contains NaN, which JSON does not allow"),
    ("[1, 2]", "set.jsonl line 2: an example must be an object {state, question, label, id?}"),
    (line(state="x", question=NOUL), "set.jsonl line 2: missing 'label'"),
    (line(state="x", question=NOUL, label=True, extra=1), "set.jsonl line 2: unknown keys: extra"),
    (line(state="x", question=NOUL, label="yes"), "set.jsonl line 2: a noul label must be true or false"),
    (line(state="x", question=NOUL, label=1), "set.jsonl line 2: a noul label must be true or false"),
    (line(state="x", question=CHOICE, label="d"),
     "set.jsonl line 2: a choice label must be one of the options ('a', 'b', 'c')"),
    (line(state="x", question=SCORE, label=3), "set.jsonl line 2: a score label must be a level index from 0 to 2"),
    (line(state="x", question=SCORE, label=True), "set.jsonl line 2: a score label must be a level index from 0 to 2"),
    (line(state="x", question={"type": "text", "instructions": "why?"}, label=True),
     "set.jsonl line 2: the question has type 'text': choice, score and noul only"),
    (line(state=3, question=NOUL, label=True),
     "set.jsonl line 2: jev.evaluate state must be a string, array or object"),
    (line(id="n1", state="y", question=NOUL, label=False), "set.jsonl line 2: id 'n1' already used on line 1"),
    (line(id="", state="y", question=NOUL, label=False), "set.jsonl line 2: 'id' must be a string of 1-128"),
    ("[" * 100_000, "set.jsonl line 2 nests deeper than 64 levels"),
    ("[" + "1," * 200_000 + "1]", "set.jsonl line 2 is larger than 262144 bytes"),
])
def test_each_bad_line_is_one_line_with_its_number(bad: str, message: str) -> None:
    text = line(id="n1", state="ls", question=NOUL, label=True) + "\n" + bad + "\n"
    with pytest.raises(LabelsInvalid) as info:
        parse_labels(text, source="set.jsonl")
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_labels_file_errors(tmp_path: Path) -> None:
    with pytest.raises(LabelsInvalid, match=r"cannot read labels file .*missing\.jsonl: No such file"):
        read_labels(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(LabelsInvalid, match=r"empty\.jsonl has no examples"):
        read_labels(empty)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(line(state="ok", question=NOUL, label=True).encode() + b"\n" + b'{"state": "caf\xe9"}\n')
    with pytest.raises(LabelsInvalid, match=r"latin\.jsonl line 2: not UTF-8"):
        read_labels(latin)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + line(state="ok", question=NOUL, label=True).encode())
    with pytest.raises(LabelsInvalid, match="byte-order mark"):
        read_labels(bom)


def _digest(request: dict[str, Any]) -> str:
    import hashlib

    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


CASSETTE_REQUEST = {"state": "rm -rf /", "model": "jev-latest",
                    "questions": {"safe": NOUL, "queue": CHOICE, "urgency": SCORE}}
CASSETTE_ANSWER = {"model": "jev-1.13", "usage": {"input_tokens": 1, "output_tokens": 0}, "answers": {
    "safe": {"type": "noul", "noul": 0.5},
    "queue": {"type": "choice", "choice": "c", "confidence": 0.4, "probabilities": {"a": 0.3, "b": 0.2, "c": 0.5}},
    "urgency": {"type": "score", "score": 1.6, "confidence": 0.5, "probabilities": {"0": 0.1, "1": 0.2, "2": 0.7}}}}


def test_a_cassette_is_a_label_source(tmp_path: Path) -> None:
    digest = _digest(CASSETTE_REQUEST)
    recording = {"digest": digest, "request": CASSETTE_REQUEST, "evaluation": copy.deepcopy(CASSETTE_ANSWER)}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"format": "fabric-jev-cassette", "version": 2}) + "\n" + json.dumps(recording) + "\n")
    examples = labels_from_cassette(path)
    d = digest[:12]
    assert [(e.id, e.label) for e in examples] == [(f"{d}:safe", True), (f"{d}:queue", "c"), (f"{d}:urgency", 2)]
    recording["evaluation"]["answers"]["queue"]["choice"] = "z"  # type: ignore[index]
    path.write_text(json.dumps({"format": "fabric-jev-cassette", "version": 2}) + "\n" + json.dumps(recording) + "\n")
    with pytest.raises(LabelsInvalid, match=rf"c.jsonl line 2 \({d}\): .*choice is not one of the options"):
        labels_from_cassette(path)


def test_the_older_json_cassette_is_still_a_label_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"version": 1, "entries": {_digest(CASSETTE_REQUEST): {
        "request": CASSETTE_REQUEST, "evaluation": CASSETTE_ANSWER}}}))
    assert [e.label for e in labels_from_cassette(path)] == [True, "c", 2]
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and "older JSON format" in note and str(path) in note


def test_a_cassette_that_cannot_be_read_is_a_labels_error(tmp_path: Path) -> None:
    with pytest.raises(LabelsInvalid, match="does not exist"):
        labels_from_cassette(tmp_path / "none.jsonl")
    edited = tmp_path / "edited.jsonl"
    edited.write_text(json.dumps({"format": "fabric-jev-cassette", "version": 2}) + "\n" + json.dumps(
        {"digest": "0" * 64, "request": CASSETTE_REQUEST, "evaluation": CASSETTE_ANSWER}) + "\n")
    with pytest.raises(LabelsInvalid, match=r"edited.jsonl line 2: the digest is not its request's"):
        labels_from_cassette(edited)


# ---------------------------------------------------------------- metrics

Q_NOUL = Question("q", "noul", "Is it read-only?", None)
Q_CHOICE = Question("q", "choice", "Which queue?", {"a": "first", "b": None, "c": "third"})
Q_SCORE = Question("q", "score", "How urgent?", ["low", "mid", "high"])


def tiny_nouls() -> list[Any]:
    # (noul, label) → predicted, confidence, right?, Brier by hand:
    # 0.9 yes → yes 0.9 right 0.01 | 0.8 no → yes 0.8 wrong 0.64 | 0.3 no → no 0.7 right 0.09 | 0.6 yes → yes 0.6 right 0.16
    return [outcome(Q_NOUL, {"type": "noul", "noul": n}, label)
            for n, label in [(0.9, True), (0.8, False), (0.3, False), (0.6, True)]]


def test_noul_metrics_match_hand_computed_values() -> None:
    outs = tiny_nouls()
    assert [o.confidence for o in outs] == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert accuracy(outs) == 0.75
    assert brier(outs) == pytest.approx(0.9 / 4)
    # One pick per bin (9, 8, 7, 6): (|1-.9| + |0-.8| + |1-.7| + |1-.6|) / 4 = 1.6 / 4
    assert ece(outs) == pytest.approx(0.4)
    bins = reliability(outs)
    assert [b.count for b in bins] == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert [b.accuracy for b in bins[6:]] == [1.0, 1.0, 0.0, 1.0]
    curve = coverage_curve(outs)
    assert [p.threshold for p in curve] == pytest.approx([0.9, 0.8, 0.7, 0.6])
    assert [p.coverage for p in curve] == [0.25, 0.5, 0.75, 1.0]
    assert [p.accuracy for p in curve] == pytest.approx([1.0, 0.5, 2 / 3, 0.75])


def test_noul_thresholds_for_a_target_precision() -> None:
    cuts = noul_thresholds(tiny_nouls(), 0.95)
    allow, deny = cuts["allow"], cuts["deny"]
    assert allow is not None and deny is not None
    assert (allow.threshold, allow.precision, allow.coverage, allow.recall) == (0.9, 1.0, 0.25, 0.5)
    assert (deny.threshold, deny.precision, deny.coverage, deny.recall) == (0.3, 1.0, 0.25, 0.5)
    # At 0.6 precision, allowing at noul ≥ 0.6 keeps 2 of 3 yes-picks right and covers 3 of 4.
    loose = noul_thresholds(tiny_nouls(), 0.6)["allow"]
    assert loose is not None and (loose.threshold, loose.coverage) == (0.6, 0.75)
    assert loose.precision == pytest.approx(2 / 3)


def test_choice_and_score_metrics_match_hand_computed_values() -> None:
    choice = outcome(Q_CHOICE, {"type": "choice", "choice": "a", "confidence": 0.25,
                                "probabilities": {"a": 0.5, "b": 0.3, "c": 0.2}}, "b")
    assert (choice.predicted, choice.correct, choice.confidence) == ("a", False, 0.5)
    assert choice.brier == pytest.approx(0.25 + 0.49 + 0.04)
    score = outcome(Q_SCORE, {"type": "score", "score": 1.1, "confidence": 0.6,
                              "probabilities": {"0": 0.1, "1": 0.7, "2": 0.2}}, 1)
    assert (score.predicted, score.correct, score.confidence) == (1, True, 0.7)
    assert score.brier == pytest.approx(0.01 + 0.09 + 0.04)
    both = [choice, score]
    # Bins 5 (0.5, wrong) and 7 (0.7, right): (0.5 + 0.3) / 2
    assert ece(both) == pytest.approx(0.4)
    cut = confidence_threshold(both, 0.9)
    assert cut is not None and (cut.threshold, cut.coverage, cut.recall) == (0.7, 0.5, 1.0)
    assert confidence_threshold([choice], 0.9) is None


def test_summary_is_plain_json() -> None:
    s = summary(tiny_nouls(), 0.95)
    assert json.loads(json.dumps(s)) == s
    assert s["examples"] == 4 and s["thresholds"]["allow"]["threshold"] == 0.9
