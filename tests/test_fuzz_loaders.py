"""Fuzzing the file loaders: host configs, local-evaluator profiles, labels files.

Any content gives a loaded object or the loader's documented error
(`ConfigError`, `ProfileInvalid`, `LabelsInvalid`), in one line, never anything
else. Valid files are mutated (a value replaced, a key dropped or added) so the
checks deep inside are reached, not only the first one.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev.calibration.labels import LabeledExample, parse_labels
from fabric_jev.calibration.learn import Prepared, fit_signature
from fabric_jev.contract.config import HostConfig
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.errors import ConfigError, LabelsInvalid, ProfileInvalid
from fabric_jev.evaluators.lexical import term_ids
from fabric_jev.evaluators.profile import FORMAT, Profile
from tests.fuzz_support import NASTY_TEXT, fuzz_timeout, json_texts, json_values, mutated

pytestmark = fuzz_timeout

# ---------------------------------------------------------------- host configs

CONFIG = {"maxConcurrentRuns": 2, "defaults": {"maxTokens": 5, "timeoutMs": 1000},
          "ceilings": {"maxEvaluations": 10}, "model": "jev-latest", "autoApprovalThreshold": 0.7,
          "evaluator": {"kind": "fixture"}}


@given(mutated(CONFIG) | json_values())
@example({**CONFIG, "autoApprovalThreshold": 10**400})  # math.isfinite overflowed on the int
@example({**CONFIG, "maxConcurrentRuns": 10**400})
@example({**CONFIG, "defaults": {"timeoutMs": -(10**400)}})
def test_a_config_is_parsed_or_refused(raw: Any) -> None:
    try:
        HostConfig.parse(raw)
    except ConfigError as exc:
        assert str(exc).startswith("Invalid fabric-jev config")


@given(st.binary(max_size=200) | json_texts().map(lambda t: t.encode("utf-8", "surrogatepass")))
@example(b"\xff{}")  # not UTF-8: was UnicodeDecodeError from read_text
@example(b"1" * 5000)
@example(b"[" * 5000)  # was RecursionError from json.loads
@example(b'{"model": "\\ud800"}')
def test_a_config_file_loads_or_is_refused_in_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_bytes(data)
        try:
            HostConfig.load(path)
        except ConfigError as exc:
            assert "\n" not in str(exc)


# ---------------------------------------------------------------- profiles

SHA = "0" * 64
SAFE = {"type": "noul", "instructions": "Is this safe to auto-approve?"}
QUEUE = {"type": "choice", "instructions": "Which queue?", "criteria": {"ledger": None, "fieldops": None}}


def _prepared(question: dict[str, Any], labels: list[Any], seed: int) -> list[Prepared]:
    q = validate_request({"state": "", "questions": {"q": question}}).questions[0]
    rng = np.random.default_rng(seed)
    out = []
    for i, label in enumerate(labels):
        v = rng.normal(size=384)
        state = f"state {i} {'refund' if i % 2 else 'device'}"
        ex = LabeledExample(id=f"e{seed}-{i}", state=state, question=q, label=label, line=i + 1)
        prior = {"type": "noul", "noul": 0.5} if q.type == "noul" else {
            "type": "choice", "choice": "ledger", "probabilities": {"ledger": 0.5, "fieldops": 0.5},
            "confidence": 0.5}
        out.append(Prepared(ex, prior, (v / np.linalg.norm(v)).astype(np.float32), term_ids(state)))
    return out


def _profile_json() -> dict[str, Any]:
    models = [fit_signature(_prepared(SAFE, [True, False] * 3, 1)),
              fit_signature(_prepared(QUEUE, ["ledger", "fieldops"] * 3, 2))]
    profile = Profile(name="fuzz", embedding_sha256=SHA, models={m.signature: m for m in models},
                      training=frozenset({"0123456789abcdef"}), report={"note": "fuzz"})
    data: dict[str, Any] = json.loads(json.dumps(profile.to_json()))
    assert data["format"] == FORMAT
    return data


PROFILE = _profile_json()


def test_the_fuzzed_profile_is_valid_to_start_with() -> None:
    assert Profile.from_json(PROFILE, source="fuzz", embedding_sha256=SHA).examples == 12


@given(mutated(PROFILE))
@example({**PROFILE, "name": "\ud800"})
@example({**PROFILE, "signatures": [{**PROFILE["signatures"][0], "ridge": 10**400}]})
@example({**PROFILE, "signatures": [{**PROFILE["signatures"][0], "termCounts": [10**400] * 6}]})
def test_a_profile_loads_or_is_refused_in_one_line(data: Any) -> None:
    try:
        profile = Profile.from_json(data, source="p.json", embedding_sha256=SHA)
    except ProfileInvalid as exc:
        assert str(exc).startswith("profile p.json") and "\n" not in str(exc)
        return
    json.dumps(profile.to_json(), allow_nan=False, ensure_ascii=False).encode("utf-8")


# ---------------------------------------------------------------- labels files

LINES = [{"state": "git status", "question": SAFE, "label": True, "id": "a"},
         {"state": ["rm", "-rf", "/"], "question": SAFE, "label": False},
         {"state": {"text": "charged twice"}, "question": QUEUE, "label": "ledger"},
         {"state": "GPS offline", "question": {"type": "score", "instructions": "How bad?",
                                               "criteria": ["fine", "bad", "awful"]}, "label": 2}]


@st.composite
def _labels_texts(draw: st.DrawFn) -> str:
    rows = draw(mutated(LINES))
    rows = rows if isinstance(rows, list) else [rows]
    lines = [json.dumps(row, ensure_ascii=draw(st.booleans())) for row in rows
             ] if draw(st.integers(0, 3)) else [draw(json_texts())]
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(NASTY_TEXT)))
    return draw(st.sampled_from(["\n", "\r\n", "\n\n"])).join(lines)


@given(_labels_texts())
@example('{"state": "x", "question": {"type": "noul", "instructions": "q"}, "label": true, "id": 10}')
@example('{"state": "x", "question": {"type": "choice", "instructions": "q", "criteria": {"a": null}}, '
         '"label": ["a"]}')
@example('{"state": "\\ud800", "question": {"type": "noul", "instructions": "q"}, "label": true}')
@example('{"state": "x", "question": {"type": "noul", "instructions": "q"}, "label": true, "a\\nb": 1}')
def test_a_labels_file_parses_or_names_its_bad_line(text: str) -> None:
    try:
        examples = parse_labels(text, source="l.jsonl")
    except LabelsInvalid as exc:
        assert str(exc).startswith("l.jsonl") and "\n" not in str(exc)
        return
    assert examples and len({e.id for e in examples}) == len(examples)
    for e in examples:
        e.request()  # every accepted example makes a valid evaluation request
        assert e.class_index >= 0


# ---------------------------------------------------------------- cassettes

CASSETTE_REQUEST = {"state": "charged twice", "model": "jev-latest", "questions": {"q": SAFE}}
CASSETTE_LINE = {"digest": "f" * 64, "request": CASSETTE_REQUEST,
                 "evaluation": {"answers": {"q": {"type": "noul", "noul": 0.5}},
                                "usage": {"input_tokens": 1, "output_tokens": 0}}}
CASSETTE_HEADERS = ['{"format":"fabric-jev-cassette","version":2}', '{"format":"fabric-jev-cassette","version":1}']


def _digest(value: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()


@st.composite
def cassette_files(draw: st.DrawFn) -> bytes:
    """A header (either version, or a mutated one) and lines: a mutated recording whose digest is,
    or is not, its request's; hostile text; an older JSON document."""
    if draw(st.booleans()):
        entry = draw(mutated({"request": CASSETTE_REQUEST, "evaluation": CASSETTE_LINE["evaluation"]}))
        key = _digest(entry.get("request")) if draw(st.booleans()) and isinstance(entry, dict) else "x"
        return json.dumps({"version": 1, "entries": {key: entry}}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    lines = [draw(st.sampled_from(CASSETTE_HEADERS) | json_texts())]
    for _ in range(draw(st.integers(0, 3))):
        line = draw(mutated(CASSETTE_LINE) | st.sampled_from(NASTY_TEXT))
        if isinstance(line, dict) and isinstance(line.get("request"), dict) and draw(st.booleans()):
            line["digest"] = _digest(line["request"])
        lines.append(line if isinstance(line, str) else json.dumps(line, ensure_ascii=False))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


@given(cassette_files() | st.binary(max_size=200))
@example(b'{"format":"fabric-jev-cassette","version":2}\n' + b"[" * 5000)
@example(b'{"format":"fabric-jev-cassette","version":true}\n')
@example(b'{"version": 1, "entries": {"a": 1, "a": 2}}')
def test_a_cassette_is_read_or_refused_in_one_line_and_every_line_it_keeps_checks(data: bytes) -> None:
    from fabric_jev.evaluators.cassette import Cassette, digest_of

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tape.jsonl"
        path.write_bytes(data)
        try:
            cassette = Cassette(path)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return
    for digest, recording in cassette.recordings.items():
        assert digest == recording.digest == digest_of(recording.request)
