from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabric_jev import HostConfig
from fabric_jev.calibration.labels import LabeledExample, parse_labels, read_labels
from fabric_jev.calibration.learn import Prepared, fit_signature, learn, split
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.errors import ConfigError, ProfileInvalid
from fabric_jev.evaluators.lexical import LexicalIndex, term_ids
from fabric_jev.evaluators.local import MODEL_NAME, LocalEvaluator
from fabric_jev.evaluators.profile import Profile, embedding_fingerprint
from fabric_jev.evaluators.select import build_evaluator
from tests.upstream import mock

ROOT = Path(__file__).resolve().parent.parent
SAFE = {"type": "noul", "instructions": "Is this safe to auto-approve?"}
QUEUE = {"type": "choice", "instructions": "Which queue owns this ticket?",
         "criteria": {"ledger": None, "fieldops": None}}
READS = ["git status", "ls -la src", "cat README.md", "git log --oneline", "grep -rn TODO src", "pytest -q"]
WRITES = ["rm -rf build", "git push --force", "pip install requests", "npm publish", "chmod -R 777 /",
          "git reset --hard"]
MONEY = ["I was charged twice for March", "Please refund my last invoice", "Update my credit card",
         "The invoice shows the wrong VAT number"]
DEVICES = ["The GPS tracker in truck 4 is offline", "The installer never came to fit the unit",
           "Dashcam in van 2 stopped recording", "Please replace the broken temperature sensor"]


def labels_text() -> str:
    rows: list[dict[str, Any]] = [{"state": c, "question": SAFE, "label": True} for c in READS]
    rows += [{"state": c, "question": SAFE, "label": False} for c in WRITES]
    rows += [{"state": t, "question": QUEUE, "label": "ledger"} for t in MONEY]
    rows += [{"state": t, "question": QUEUE, "label": "fieldops"} for t in DEVICES]
    return "\n".join(json.dumps(r) for r in rows) + "\n"


@pytest.fixture(scope="module")
def examples() -> list[LabeledExample]:
    return parse_labels(labels_text(), source="tiny.jsonl")


@pytest.fixture(scope="module")
def local() -> LocalEvaluator:
    return LocalEvaluator()


@pytest.fixture(scope="module")
def learned(local: LocalEvaluator, examples: list[LabeledExample]) -> Any:
    return learn(local, examples, name="tiny", holdout=0.25)


def request(state: str, **questions: dict[str, Any]) -> Any:
    return validate_request({"state": state, "questions": questions})


# ---------------------------------------------------------------- split and fit (no model needed)


def test_split_is_per_signature_deterministic_and_order_free(examples: list[LabeledExample]) -> None:
    train, test = split(examples, 0.25)
    again_train, again_test = split(list(reversed(examples)), 0.25)
    assert {e.id for e in test} == {e.id for e in again_test}
    assert {e.id for e in train} == {e.id for e in again_train}
    # 12 noul → 3 held out; 8 choice → 2 held out.
    assert sorted(e.question.type for e in test) == ["choice", "choice", "noul", "noul", "noul"]
    assert not {e.key for e in train} & {e.key for e in test}
    # Another seed holds out another share of the same size per signature; seed 0 is the default.
    _, other = split(examples, 0.25, seed=3)
    assert {e.id for e in other} != {e.id for e in test}
    assert sorted(e.question.type for e in other) == sorted(e.question.type for e in test)
    assert {e.id for e in split(examples, 0.25, seed=0)[1]} == {e.id for e in test}


def _synthetic(n: int, seed: int) -> list[Prepared]:
    """Two clusters of unit vectors, labeled by cluster; a prior that always says 50/50."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(2, 384))
    out = []
    for i in range(n):
        label = i % 2
        v = centres[label] + rng.normal(scale=0.8, size=384)
        ex = LabeledExample(id=f"s{i}", state=f"state {i}",
                            question=validate_request({"state": "", "questions": {"q": SAFE}}).questions[0],
                            label=bool(label), line=i + 1)
        out.append(Prepared(ex, {"type": "noul", "noul": 0.5}, (v / np.linalg.norm(v)).astype(np.float32),
                            term_ids(ex.state)))
    return out


def test_fit_learns_separable_clusters_with_calibrated_confidence() -> None:
    model = fit_signature(_synthetic(40, 1))
    fresh = _synthetic(40, 1)[:0] or _synthetic(60, 1)[40:]
    right = [np.argmax(model.adapt([0.5, 0.5], p.vector, p.terms)) == p.example.class_index for p in fresh]
    assert sum(right) >= 18
    assert model.prior_weight == 0.0  # a flat prior carries no information, and the fit sees it


def test_word_features_compare_states_by_their_own_words() -> None:
    docs = [term_ids(t) for t in ("The API is down in production", "staging database slow",
                                  "Production outage for ALL customers", "")]
    index = LexicalIndex(docs)
    gram = index.gram()
    for i, doc in enumerate(docs):  # a labeled state compared with the index: its own row of the Gram matrix
        assert index.similarities(doc) == pytest.approx(gram[i])
    assert gram[0, 0] == pytest.approx(1.0) and gram[3, 3] == 0.0 and gram[0, 1] == 0.0
    assert 0 < gram[0, 2] < 1  # "production" is shared, case aside
    # Words no labeled state has match nothing but count toward the state's length, as a labeled
    # state's own rare words do: a state that shares little with the labels scores low.
    short, padded = index.similarities(term_ids("production outage")), index.similarities(
        term_ids("production outage zebra quokka"))
    assert (padded < short)[[0, 2]].all() and np.argmax(padded) == np.argmax(short) == 2
    assert not index.similarities(term_ids("zebra quokka")).any()
    twice = np.concatenate([term_ids("production outage")] * 2)  # repeated ids count once
    assert index.similarities(twice) == pytest.approx(short)
    assert len(term_ids(" ".join(str(i) for i in range(5000)))) == 2 * 512 - 1  # bounded: 512 words and pairs


def _alerts(n: int, seed: int) -> list[Prepared]:
    """Alerts whose label turns on one word (staging vs production) that MiniLM barely weighs."""
    rng = np.random.default_rng(seed)
    topics = ["disk usage high on the build server", "login page slow to load", "certificate expires soon",
              "queue consumer lag growing", "memory leak in the report worker", "nightly backup took long"]
    local = LocalEvaluator()
    out = []
    for i in range(n):
        production = bool(i % 2)
        state = f"{topics[int(rng.integers(len(topics)))]}, environment {'production' if production else 'staging'}"
        ex = LabeledExample(id=f"a{seed}-{i}", state=state, line=i + 1, label=production,
                            question=validate_request({"state": "", "questions": {"q": SAFE}}).questions[0])
        out.append(Prepared(ex, {"type": "noul", "noul": 0.5}, local.state_vector(state), term_ids(state)))
    return out


def test_fit_uses_word_features_when_the_label_turns_on_a_word() -> None:
    model = fit_signature(_alerts(24, 2))
    assert model.lexical_weight > 0 and model.lexical is not None
    fresh = _alerts(20, 3)
    right = [np.argmax(model.adapt([0.5, 0.5], p.vector, p.terms)) == p.example.class_index for p in fresh]
    assert sum(right) >= 18


def test_a_state_unlike_every_labeled_one_is_answered_less_confidently() -> None:
    model = fit_signature(_alerts(24, 2))
    assert 0 < model.support < 1  # the 10th percentile of the training states' nearest-neighbour similarity
    local = LocalEvaluator()
    near = "disk usage high on the build server, environment production"
    far = "Sonnet about the autumn sea and a lighthouse keeper"
    for state, trusted in ((near, True), (far, False)):
        vector, terms = local.state_vector(state), term_ids(state)
        assert (model.trust(model.similarities(vector, terms)) == 1.0) is trusted
    vector, terms = local.state_vector(far), term_ids(far)
    guarded = max(model.adapt([0.5, 0.5], vector, terms))
    unguarded = max(replace(model, support=0.0).adapt([0.5, 0.5], vector, terms))
    assert 0.5 <= guarded < unguarded  # toward the prior (here 50/50), not past it


# ---------------------------------------------------------------- profiles


def test_profile_round_trip_answers_the_same(tmp_path: Path, learned: Any, local: LocalEvaluator) -> None:
    path = tmp_path / "tiny.json"
    size = learned.profile.save(path)
    raw = json.loads(path.read_text())
    assert raw["format"] == "fabric-jev-local-profile" and raw["version"] == 2 and size == path.stat().st_size
    assert raw["embedding"] == {"model": "all-MiniLM-L6-v2", "sha256": embedding_fingerprint()}
    assert len(raw["signatures"]) == 2 and len(raw["training"]) == 15
    loaded = Profile.load(path)
    assert loaded.training == learned.profile.training and set(loaded.models) == set(learned.profile.models)
    req = request("git diff HEAD~1", a=SAFE, b=QUEUE)
    direct = local.adapted(learned.profile).answer_sync(req)
    again = local.adapted(loaded).answer_sync(req)
    assert direct.model == again.model == "fabric-jev-local-minilm+profile:tiny (adapted from labels)"
    assert again.answers["a"]["noul"] == pytest.approx(direct.answers["a"]["noul"], abs=1e-6)
    assert again.answers["b"]["probabilities"] == pytest.approx(direct.answers["b"]["probabilities"], abs=1e-6)


def test_learn_reports_held_out_before_and_after(learned: Any) -> None:
    r = learned.report
    assert (r["examples"], r["trained"], r["heldOut"]) == (20, 15, 5)
    assert r["before"]["examples"] == r["after"]["examples"] == 5
    assert learned.profile.report["after"]["accuracy"] == r["after"]["accuracy"]
    assert {s["type"] for s in r["signatures"]} == {"noul", "choice"}
    cv = r["crossValidated"]  # every example answered once by a profile fitted without it
    assert cv["folds"] == 5 and cv["before"]["examples"] == cv["after"]["examples"] == 20
    assert learned.profile.report["crossValidated"]["after"]["ece"] == cv["after"]["ece"]


def test_a_version_1_profile_is_still_read_without_word_features(tmp_path: Path, learned: Any,
                                                                  local: LocalEvaluator) -> None:
    data = learned.profile.to_json()
    data["version"] = 1
    for sig in data["signatures"]:
        for key in ("lexicalWeight", "terms", "termCounts"):
            sig.pop(key, None)
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    loaded = Profile.load(path)
    assert all(m.lexical is None and m.lexical_weight == 0.0 for m in loaded.models.values())
    answer = local.adapted(loaded).answer_sync(request("git diff HEAD~1", a=SAFE))
    assert answer.model == "fabric-jev-local-minilm+profile:tiny (adapted from labels)"


def test_a_profile_from_other_embedding_weights_is_refused(tmp_path: Path, learned: Any) -> None:
    data = learned.profile.to_json()
    data["embedding"]["sha256"] = "0" * 64
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileInvalid, match=r"built with other embedding weights .*rebuild it with fabric-jev learn"):
        Profile.load(path)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(version=3), "has version 3; this fabric-jev reads versions 1 and 2"),
    (lambda d: d.update(version=True), "has version True"),
    (lambda d: d["signatures"][0].update(terms="AAAA"), "signature 1: terms hold 0 ids, termCounts add up"),
    (lambda d: d["signatures"][0].update(termCounts=[1]), "signature 1: termCounts must be a list of"),
    (lambda d: d["signatures"][0].update(lexicalWeight=2), "signature 1: lexicalWeight must be a number in [0, 1]"),
    (lambda d: d.update(format="pickle"), "is not a fabric-jev local-evaluator profile"),
    (lambda d: d["signatures"][0].update(vectors="AAAA"), "signature 1: vectors hold 3 bytes"),
    (lambda d: d["signatures"][0].update(vectors="AAé="), "signature 1: vectors is not valid base64"),
    (lambda d: d["signatures"][0].update(weights="AAA"), "signature 1: weights is not valid base64"),
    (lambda d: d["signatures"][0].pop("labels"), "signature 1: labels is missing"),
    (lambda d: d.update(version=2.0), "has version 2.0"),
    (lambda d: d["signatures"][0].update(instructions="Changed?"), "signature 1: its signature does not match"),
    (lambda d: d["signatures"][0].update(readoutWeight=float("nan")), "contains NaN"),
    (lambda d: d["signatures"][0]["labels"].__setitem__(0, 7), "signature 1: labels must be class indexes"),
    (lambda d: d.update(name="\ud800"), "contains a lone surrogate"),  # the reader refuses the escape
    (lambda d: d.update(name="two words"), "name must be 1-64 letters, digits"),
    (lambda d: d.update(name="a..b"), "name must be 1-64 letters, digits"),
])
def test_a_damaged_profile_is_refused_in_one_line(tmp_path: Path, learned: Any, change: Any, message: str) -> None:
    data = learned.profile.to_json()
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileInvalid) as info:
        Profile.load(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_profile_with_too_many_word_ids_is_refused(tmp_path: Path, learned: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import fabric_jev.evaluators.profile as profile_module

    path = tmp_path / "p.json"
    learned.profile.save(path)
    monkeypatch.setattr(profile_module, "MAX_PROFILE_IDS", 10)
    with pytest.raises(ProfileInvalid, match=r"signature \d: more word ids than a profile may hold"):
        Profile.load(path)


def test_learn_refuses_what_a_profile_could_not_hold_before_fitting(
        examples: list[LabeledExample], monkeypatch: pytest.MonkeyPatch) -> None:
    import fabric_jev.calibration.learn as learn_module

    class Untouched:  # learn must refuse before it asks the evaluator anything
        def adapted(self, profile: Any) -> Any:
            raise AssertionError("embedded before checking the limits")

    monkeypatch.setattr(learn_module, "MAX_EXAMPLES_PER_SIGNATURE", 5)
    with pytest.raises(ProfileInvalid, match=r"at most 5 training examples per question .* would train 9 for "
                                             r"one question, 15 in all: use fewer examples"):
        learn(Untouched(), examples, name="x", holdout=0.25)  # type: ignore[arg-type]
    monkeypatch.setattr(learn_module, "MAX_EXAMPLES_PER_SIGNATURE", 5_000)
    monkeypatch.setattr(learn_module, "MAX_PROFILE_IDS", 20)
    with pytest.raises(ProfileInvalid, match="word ids; a profile holds at most 20"):
        learn(Untouched(), examples, name="x", holdout=0.25)  # type: ignore[arg-type]


def test_unknown_signatures_fall_back_to_the_heuristic(learned: Any, local: LocalEvaluator) -> None:
    other = {"type": "noul", "instructions": "Is this command read-only?"}  # different wording
    adapted = local.adapted(learned.profile)
    plain = local.adapted(None)
    fallback = adapted.answer_sync(request("git status", q=other))
    assert fallback.model == MODEL_NAME
    assert fallback.answers == plain.answer_sync(request("git status", q=other)).answers
    mixed = adapted.answer_sync(request("git status", known=SAFE, unknown=other))
    assert mixed.model == ("fabric-jev-local-minilm+profile:tiny "
                           "(adapted 1 of 2 questions; the rest heuristic)")
    assert mixed.answers["unknown"] == fallback.answers["q"]


def test_profile_comes_from_config_and_only_for_local(tmp_path: Path, learned: Any) -> None:
    path = tmp_path / "p.json"
    learned.profile.save(path)
    ev = build_evaluator(None, HostConfig(evaluator={"kind": "local", "profile": str(path)}))
    assert isinstance(ev, LocalEvaluator) and ev.profile is not None and ev.profile.name == "tiny"
    fixture = tmp_path / "f.json"
    fixture.write_text(json.dumps({"answers": {}}))
    with pytest.raises(ConfigError, match=r"adapts the local evaluator or a model route \(openai, ollama, anthropic, gguf\), "
                       "not 'fixture'"):
        build_evaluator(f"fixture:{fixture}", HostConfig(evaluator={"profile": str(path)}))
    with pytest.raises(ProfileInvalid, match="cannot read profile"):
        build_evaluator("local", HostConfig(evaluator={"profile": str(tmp_path / "missing.json")}))


@pytest.mark.timeout(900)  # 182 examples through the real encoder; ~1 min on an idle 2-core machine
def test_the_shipped_example_improves_as_documented(local: LocalEvaluator) -> None:
    examples = read_labels(ROOT / "examples" / "learn" / "labels.jsonl")
    assert [sum(e.question.type == t for e in examples) for t in ("noul", "choice", "score")] == [62, 60, 60]
    r = learn(local, examples, name="support").report
    cv = r["crossValidated"]
    # The goal on the held-out share: at least 15 points more accuracy, ECE at most 0.10.
    assert r["after"]["accuracy"] - r["before"]["accuracy"] >= 0.15 and r["after"]["ece"] <= 0.10
    # The figures in docs/evaluators.md ("The shipped example"); a change here must update the docs.
    assert (r["heldOut"], cv["examples"]) == (55, 182)
    assert (round(r["before"]["accuracy"] * 55), round(r["after"]["accuracy"] * 55)) == (20, 47)
    assert (round(cv["before"]["accuracy"] * 182), round(cv["after"]["accuracy"] * 182)) == (72, 157)
    assert r["before"]["ece"] == pytest.approx(0.429, abs=0.005)
    assert r["after"]["ece"] == pytest.approx(0.050, abs=0.005)
    assert cv["before"]["ece"] == pytest.approx(0.384, abs=0.005)
    assert cv["after"]["ece"] == pytest.approx(0.039, abs=0.005)


# ---------------------------------------------------------------- command line


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev.cli", *args], capture_output=True, text=True,
                          timeout=200, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.timeout(240)  # three processes each load the encoder; slow on a busy 2-core machine
def test_learn_then_calibrate_skips_the_training_examples(tmp_path: Path) -> None:
    labels = tmp_path / "tiny.jsonl"
    labels.write_text(labels_text())
    profile = tmp_path / "support.json"
    done = cli("learn", str(labels), "--out", str(profile), "--holdout", "0.25")
    assert done.returncode == 0, done.stderr
    assert "trained on 15, held out 5" in done.stdout and "wrote" in done.stdout
    report = tmp_path / "report"
    done = cli("calibrate", str(labels), "--evaluator", "local", "--profile", str(profile),
               "--report", str(report), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["skippedAsTrainingData"] == 15 and out["examples"] == 5
    assert all(m.startswith("fabric-jev-local-minilm+profile:support") for m in out["answeredBy"])
    for name in ("reliability.png", "coverage.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((report / "answers.jsonl").read_text().splitlines()) == 5
    again = json.loads(cli("calibrate", str(labels), "--profile", str(profile), "--report", str(report),
                           "--json").stdout)
    assert again["cached"] == 5 and again["types"] == out["types"]


def test_calibrate_a_fixture_evaluator_with_thresholds(tmp_path: Path) -> None:
    labels = tmp_path / "l.jsonl"
    labels.write_text("".join(line + "\n" for line in labels_text().splitlines()[:12]))  # the noul ones
    fixture = tmp_path / "f.json"
    fixture.write_text(json.dumps({"answers": {"q": {"noul": 0.2}}, "rules": [
        {"question": "q", "stateContains": text, "answer": {"noul": noul}}
        for text, noul in [("git status", 0.95), ("ls -la", 0.9), ("cat ", 0.85), ("git push", 0.8)]]}))
    done = cli("calibrate", str(labels), "--evaluator", f"fixture:{fixture}")
    assert done.returncode == 0, done.stderr
    # By hand: 3 reads said yes (right), 3 reads 0.2 (wrong), git push 0.8 (wrong), 5 writes 0.2 (right).
    assert "noul        12 examples  accuracy  67 %" in done.stdout
    assert ("auto-allow at noul ≥ 0.85 keeps precision ≥ 0.95 on these labels (1.00), covering 25 % "
            "(recall 50 %)") in done.stdout
    assert "auto-deny: no noul threshold keeps precision ≥ 0.95 on these labels" in done.stdout


def test_calibrate_an_http_route(tmp_path: Path) -> None:
    labels = tmp_path / "l.jsonl"
    labels.write_text(labels_text())
    with mock(key="sk-cal") as upstream:
        done = cli("calibrate", str(labels), "--evaluator", "typesafe", "--json",
                   env={"FABRIC_JEV_TYPESAFE_BASE_URL": upstream, "TYPESAFE_API_KEY": "sk-cal",
                        "FABRIC_JEV_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["answered"] == 20 and set(out["types"]) == {"noul", "choice"}
    assert out["answeredBy"] == {"jevcompat-mock-0.1": 20} and "sk-cal" not in done.stdout


def test_bad_labels_are_one_line_without_a_traceback(tmp_path: Path) -> None:
    labels = tmp_path / "bad.jsonl"
    labels.write_text(labels_text() + '{"state": "x", "question": {"type": "noul", "instructions": "q"}, "label": 3}\n')
    done = cli("calibrate", str(labels), "--evaluator", "local")
    assert done.returncode == 2
    assert done.stderr.strip() == f"fabric-jev: {labels} line 21: a noul label must be true or false"
    done = cli("learn", "--out", str(tmp_path / "p.json"))
    assert done.returncode == 2 and "give a labels file, --from-cassette FILE, or both" in done.stderr


@pytest.mark.parametrize(("option", "message"), [
    (("--holdout", "1"), "--holdout must be in [0, 1)"),
    (("--folds", "1"), "--folds must be 0 (no cross-validation) or from 2 to 50"),
    (("--seed", "-1"), "--seed must be from 0 to 1000000"),
])
def test_learn_options_out_of_range_are_one_line(tmp_path: Path, option: tuple[str, str], message: str) -> None:
    labels = tmp_path / "l.jsonl"
    labels.write_text(labels_text())
    done = cli("learn", str(labels), "--out", str(tmp_path / "p.json"), *option)
    assert done.returncode == 2 and done.stderr.strip() == f"fabric-jev: {message}"
    assert not (tmp_path / "p.json").exists()


def test_a_profile_named_with_a_lone_surrogate_is_one_line_from_evaluate(tmp_path: Path, learned: Any) -> None:
    data = learned.profile.to_json()
    data["name"] = "\ud800"
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))  # the JSON escape \ud800: valid JSON, not Unicode text
    req = tmp_path / "r.json"
    req.write_text(json.dumps({"state": "git status", "questions": {"q": SAFE}}))
    done = cli("evaluate", str(req), "--evaluator", "local", "--profile", str(path))
    assert done.returncode == 2, done.stderr
    # The bounded reader refuses the escape before the name rule sees it (a name given from
    # Python with a lone surrogate meets the name rule).
    assert done.stderr.strip() == (f"fabric-jev: profile {path} contains a lone surrogate (an unpaired "
                                   "\\uD800-\\uDFFF escape), which is not Unicode text")


def test_learn_refuses_a_name_that_cannot_stand_in_a_model_id(tmp_path: Path) -> None:
    labels = tmp_path / "l.jsonl"
    labels.write_text(labels_text())
    done = cli("learn", str(labels), "--out", str(tmp_path / "p.json"), "--name", "my profile")
    assert done.returncode == 2 and done.stderr.strip().startswith("fabric-jev: learn: name must be 1-64 letters")
    assert not (tmp_path / "p.json").exists()
