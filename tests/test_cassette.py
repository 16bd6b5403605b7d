"""The one cassette format (fabric_jev.evaluators.cassette) as the CLI's `cassette:FILE` and
`record:FILE` use it: a recorded request is tied to its digest, and the digest gives away
nothing the line does not show."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import AnswerInvalid, CassetteMiss, ConfigError, HostConfig, evaluator_from_spec
from fabric_jev.contract.evaluation import EvaluationRequest, validate_request
from fabric_jev.evaluators import CassetteEvaluator, RecordingEvaluator, request_digest
from fabric_jev.evaluators import cassette as cassette_format
from fabric_jev.testing import Cassette, ScriptedEvaluator
from tests.upstream import mock

pytestmark = pytest.mark.anyio
KEY = "sk-cassette-key"
HEADER = '{"format":"fabric-jev-cassette","version":2}'
QUESTION = {"type": "noul", "instructions": "Is it safe to run?"}


def req(state: Any) -> EvaluationRequest:
    return validate_request({"state": state, "questions": {"q": QUESTION}})


def wire(state: Any) -> dict[str, Any]:
    return {"state": state, "questions": {"q": QUESTION}, "model": "jev-latest"}


def sha256(value: Any) -> str:
    """The canonical digest, written out here rather than taken from the code under test."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def answer(noul: float) -> dict[str, Any]:
    return {"answers": {"q": {"type": "noul", "noul": noul}}, "usage": {"input_tokens": 1, "output_tokens": 0},
            "model": "jev-1"}


def write(path: Path, *lines: Any, header: str = HEADER) -> Path:
    path.write_text(header + "\n" + "".join(json.dumps(x) + "\n" for x in lines))
    return path


async def record(path: Path, *states: Any, noul: float = 0.9) -> None:
    ev = RecordingEvaluator(path, "new", record_from=ScriptedEvaluator({"q": {"noul": noul}}))
    for state in states:
        await ev.evaluate(req(state), timeout=5)
    await ev.aclose()


async def test_record_from_a_route_then_replay_offline_through_the_specs(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tape.jsonl"
    monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    with mock(key=KEY) as upstream:
        config = HostConfig.parse({"evaluator": {"route": "typesafe", "baseUrls": {"typesafe": upstream}}})
        recorder = evaluator_from_spec(f"record:{path}", config)
        assert recorder.status().mode == "online"  # misses go to the route
        live = await recorder.evaluate(req("one"), timeout=10)
        again = await recorder.evaluate(req("one"), timeout=10)
        await recorder.aclose()
    assert isinstance(recorder, RecordingEvaluator) and (recorder.recorded, recorder.replayed) == (1, 1)
    # The replay is the recording, and says so: who answered it then, replayed now.
    assert live.provenance is not None and live.provenance.readout == "systemone" and not live.provenance.replayed
    replayed = replace(live, provenance=live.provenance.model_copy(update={"replayed": True}))
    assert again == replayed and KEY not in path.read_text()
    assert path.read_text().splitlines()[0] == HEADER
    # The server is gone: replay works offline; a new request is a CassetteMiss that says how to record.
    player = evaluator_from_spec(f"cassette:{path}")
    assert player.status().credentials.source == "not needed"
    assert await player.evaluate(req("one"), timeout=1) == replayed
    with pytest.raises(CassetteMiss, match=f"to record it, use --evaluator record:{path}"):
        await player.evaluate(req("two"), timeout=1)


def test_a_missing_cassette_is_refused_when_replaying() -> None:
    with pytest.raises(ConfigError, match=r"does not exist \(record it first: --evaluator record:none.jsonl\)"):
        evaluator_from_spec("cassette:none.jsonl")


def test_record_refuses_to_record_from_another_cassette(tmp_path: Path) -> None:
    config = HostConfig.parse({"evaluator": {"route": f"cassette:{tmp_path / 'x.jsonl'}"}})
    with pytest.raises(ConfigError, match="not from another cassette"):
        evaluator_from_spec(f"record:{tmp_path / 'tape.jsonl'}", config)


def test_digest_is_canonical() -> None:
    a = validate_request({"state": {"x": 1, "y": 2}, "questions": {"q": {"type": "noul", "instructions": "?"}}})
    b = validate_request({"questions": {"q": {"instructions": "?", "type": "noul"}}, "state": {"y": 2, "x": 1}})
    c = validate_request({"state": {"x": 1, "y": 3}, "questions": {"q": {"type": "noul", "instructions": "?"}}})
    assert request_digest(a, "jev-latest") == request_digest(b, "jev-latest")
    assert request_digest(a, "jev-latest") != request_digest(c, "jev-latest")
    assert request_digest(a, "jev-latest") != request_digest(a, "jev-preview")


async def test_the_digest_gives_away_nothing_the_line_does_not_show(tmp_path: Path) -> None:
    # Round four: the digest was an unsalted SHA-256 of the request before redaction, so
    # guessing the password and hashing each guess found it.
    password = "hunter2-summer"
    asked = f"connect with password={password} and list the tables"
    path = tmp_path / "t.jsonl"
    await record(path, asked)
    line = json.loads(path.read_text().splitlines()[1])
    assert password not in path.read_text() and "[redacted" in line["request"]["state"]
    guesses = [f"connect with password={guess} and list the tables" for guess in ("letmein", password, "x")]
    assert line["digest"] not in {sha256(wire(g)) for g in guesses}, "the right guess gives the digest"
    assert line["digest"] == sha256(line["request"])  # the digest of what the line shows
    # And the request asked still replays.
    assert (await RecordingEvaluator(path, "none").evaluate(req(asked), timeout=5)).answers["q"]["noul"] == 0.9


async def test_an_edited_digest_cannot_replay_an_answer_to_another_question(tmp_path: Path) -> None:
    # A reviewer sees "list the files"; the digest is the one of "rm -rf /": before, the file
    # replayed "safe" for the destructive command, and the test passed.
    path = write(tmp_path / "t.jsonl", {"digest": sha256(wire("rm -rf /")), "request": wire("list the files"),
                                        "evaluation": answer(0.99)})
    with pytest.raises(ConfigError, match=r"t.jsonl line 2: the digest is not its request's \(the line was edited\)"):
        Cassette(path)
    # The other way round: the request edited under a digest it no longer has.
    write(path, {"digest": sha256(wire("list the files")), "request": wire("rm -rf /"), "evaluation": answer(0.99)})
    with pytest.raises(ConfigError, match="line 2: the digest is not its request's"):
        evaluator_from_spec(f"cassette:{path}")


def test_a_digest_recorded_twice_is_refused(tmp_path: Path) -> None:
    # Before, the last line silently won: a reviewer reading the first saw the wrong answer.
    line = {"digest": sha256(wire("x")), "request": wire("x")}
    path = write(tmp_path / "t.jsonl", {**line, "evaluation": answer(0.1)}, {**line, "evaluation": answer(0.9)})
    with pytest.raises(ConfigError, match=r"line 3: digest [0-9a-f]{12}… is already recorded on line 2"):
        Cassette(path)


def test_a_key_twice_in_the_older_json_format_is_refused(tmp_path: Path) -> None:
    entry = json.dumps({"request": wire("x"), "evaluation": answer(0.1)})
    path = tmp_path / "old.json"
    path.write_text(f'{{"version": 1, "entries": {{"{sha256(wire("x"))}": {entry}, "{sha256(wire("x"))}": {entry}}}}}')
    with pytest.raises(ConfigError, match=r"holds the key .* twice"):
        Cassette(path)


async def test_the_older_json_format_is_read_with_one_note_and_written_as_json_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    path = tmp_path / "old.json"
    # As the CLI wrote it: the digest of the request as asked, and the request unredacted.
    path.write_text(json.dumps({"version": 1, "entries": {
        sha256(wire("one")): {"request": wire("one"), "evaluation": answer(0.2)},
        sha256(wire(secret)): {"request": wire(secret), "evaluation": answer(0.7)}}}, indent=1))
    player = evaluator_from_spec(f"cassette:{path}")
    assert (await player.evaluate(req("one"), timeout=1)).answers["q"]["noul"] == 0.2
    assert (await player.evaluate(req(secret), timeout=1)).answers["q"]["noul"] == 0.7
    await player.aclose()
    note = capsys.readouterr().err
    assert note == (f"fabric-jev: note: cassette {path} is in the older JSON format; it is read, and written "
                    "as JSON Lines when something is recorded into it\n")
    assert json.loads(path.read_text())["version"] == 1, "a replay never rewrites"
    recorder = RecordingEvaluator(path, "new", record_from=ScriptedEvaluator({"q": {"noul": 0.5}}))
    await recorder.evaluate(req("two"), timeout=1)
    await recorder.aclose()
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER and len(lines) == 4
    assert "wJalrXUtnFEMI" not in path.read_text()  # the secret the old format kept is redacted now
    assert capsys.readouterr().err == "", "said once"


async def test_version_1_lines_replay_and_one_that_hid_a_secret_says_to_record_it_again(tmp_path: Path) -> None:
    shown = "token=[redacted: secret assignment]"
    path = write(tmp_path / "v1.jsonl",
                 {"digest": sha256(wire("plain")), "request": wire("plain"), "evaluation": answer(0.3)},
                 # version 1 digested the request before redaction: nothing can check this line
                 {"digest": sha256(wire("token=Zq8sKd02LmXw")), "request": wire(shown), "evaluation": answer(0.8)},
                 header='{"format":"fabric-jev-cassette","version":1}')
    player = RecordingEvaluator(path, "none")
    assert (await player.evaluate(req("plain"), timeout=1)).answers["q"]["noul"] == 0.3
    with pytest.raises(CassetteMiss) as caught:
        await player.evaluate(req("token=Zq8sKd02LmXw"), timeout=1)
    assert "(line 3, of 2 recorded): it shows the same request" in str(caught.value)
    assert "recorded by an earlier fabric-jev (cassette version 1)" in str(caught.value)
    # Recording it again writes version 2 and leaves the line that could not be checked behind.
    recorder = RecordingEvaluator(path, "new", record_from=ScriptedEvaluator({"q": {"noul": 0.6}}))
    await recorder.evaluate(req("token=Zq8sKd02LmXw"), timeout=1)
    await recorder.aclose()
    again = Cassette(path)
    assert path.read_text().splitlines()[0] == HEADER and again.unverified == []
    assert sorted(r.evaluation["answers"]["q"]["noul"] for r in again.recordings.values()) == [0.3, 0.6]


def test_a_cassette_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", header='{"format":"fabric-jev-cassette","version":3}')
    with pytest.raises(ConfigError, match="format version 3, written by a newer fabric-jev"):
        Cassette(path)


@pytest.mark.timeout(20)
def test_a_fifo_named_as_a_cassette_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "tape.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"^cannot read cassette .*tape\.jsonl: it is a FIFO, not a regular file$"):
        Cassette(fifo)


async def test_a_recording_that_would_pass_the_size_cap_is_refused_and_the_file_stays_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cassette_format, "MAX_CASSETTE_BYTES", 2048)
    path = tmp_path / "t.jsonl"
    ev = RecordingEvaluator(path, "new", record_from=ScriptedEvaluator({"q": {"noul": 0.5}}))
    await ev.evaluate(req("small"), timeout=1)
    with pytest.raises(ConfigError, match="would grow past"):
        await ev.evaluate(req("many words " * 400), timeout=1)
    await ev.aclose()
    (kept,) = Cassette(path).recordings.values()
    assert kept.request["state"] == "small"


@pytest.mark.parametrize("rows", [12_000])
async def test_the_nearest_request_of_a_miss_is_found_in_bounded_time(tmp_path: Path, rows: int) -> None:
    # Round four: 12k short rows took 18.8 s per recorded request (difflib is quadratic in the
    # lines it compares); five such recordings ran past the test's timeout.
    base = [f"row {i % 7}" for i in range(rows)]
    path = tmp_path / "t.jsonl"
    states = [[*base[:k * 100], f"edit {k}", *base[k * 100 + 1:]] for k in range(5)]
    await record(path, *states)
    asked = list(states[3])
    asked[9000] = "a new row"
    with pytest.raises(CassetteMiss) as caught:
        await RecordingEvaluator(path, "none").evaluate(req(asked), timeout=5)
    text = str(caught.value)
    assert f"nearest recorded request: {request_digest(req(states[3]), 'jev-latest')}" in text
    assert '-  "row 5",' in text and '+  "a new row",' in text
    assert "@@ -9009,3 +9009,3 @@" in text  # numbered from the top of the request


def test_a_miss_diff_cuts_each_line_and_says_where_it_stops() -> None:
    from fabric_jev.evaluators.cassette import DIFF_LINE_CHARS, DIFF_WINDOW, Recording

    cassette = Cassette("never-written.jsonl")
    long_rows = [f"{'y' * 500} {i}" for i in range(DIFF_WINDOW + 50)]
    cassette.add(Recording(digest="0" * 64, request={"state": ["a", *long_rows]}, evaluation=answer(0.5)))
    found = cassette.nearest({"state": ["b", *reversed(long_rows)]})
    assert found is not None
    _, diff = found
    assert all(len(line) <= DIFF_LINE_CHARS + 1 for line in diff)
    assert diff[-1] == f"… the requests differ over more than {DIFF_WINDOW} lines; the diff stops there"


async def test_the_deprecated_cassette_evaluator_still_records_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "tape.jsonl"
    with pytest.warns(DeprecationWarning, match="use RecordingEvaluator"):
        recorder = CassetteEvaluator(path, record_from=ScriptedEvaluator({"q": {"noul": 0.4}}))
    await recorder.evaluate(req("x"), timeout=1)
    assert path.read_text().splitlines()[0] == HEADER, "saved at once, as it was"
    await recorder.aclose()
    with pytest.warns(DeprecationWarning):
        assert (await CassetteEvaluator(path).evaluate(req("x"), timeout=1)).answers["q"]["noul"] == 0.4
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="does not exist"):
        CassetteEvaluator(tmp_path / "none.json")


async def test_a_tampered_answer_is_validated_again(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", {"digest": sha256(wire("x")), "request": wire("x"), "evaluation": {
        "answers": {"q": {"type": "noul", "noul": 7}}, "usage": {"input_tokens": 1, "output_tokens": 1}}})
    with pytest.raises(AnswerInvalid):
        await evaluator_from_spec(f"cassette:{path}").evaluate(req("x"), timeout=1)


# ---------------------------------------------------------------- the CLI, as a user runs it

def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabric_jev", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.mark.timeout(180)
def test_record_on_the_command_line_records_from_the_local_evaluator_and_redacts(tmp_path: Path) -> None:
    # Round four: the CLI's record:FILE kept the AWS secret and the password as asked.
    state = ("deploy failed: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, "
             "db password: hunter2hunter2")
    (tmp_path / "req.json").write_text(json.dumps({"state": state, "questions": {"q": QUESTION}}))
    home = {"FABRIC_JEV_HOME": str(tmp_path / "home")}
    recorded = cli("evaluate", "req.json", "--evaluator", "record:tape.jsonl", cwd=tmp_path, env=home)
    assert recorded.returncode == 0, recorded.stderr
    text = (tmp_path / "tape.jsonl").read_text()
    assert "wJalrXUtnFEMI" not in text and "hunter2" not in text
    line = json.loads(text.splitlines()[1])
    assert line["evaluation"]["model"].startswith("fabric-jev-local")  # recorded from the local evaluator
    replayed = cli("evaluate", "req.json", "--evaluator", "cassette:tape.jsonl", cwd=tmp_path, env=home)
    assert replayed.returncode == 0, replayed.stderr
    again, first = json.loads(replayed.stdout), json.loads(recorded.stdout)
    assert again == {**first, "evaluator": {**first["evaluator"], "replayed": True}}  # and says it replays
    (tmp_path / "other.json").write_text(json.dumps({"state": "another", "questions": {"q": QUESTION}}))
    missed = cli("evaluate", "other.json", "--evaluator", "cassette:tape.jsonl", cwd=tmp_path, env=home)
    assert missed.returncode == 1
    assert "no recorded Jev answer for this request in tape.jsonl (record mode none)" in missed.stderr
    assert "to record it, use --evaluator record:tape.jsonl" in missed.stderr


async def test_record_is_refused_on_ray_before_any_actor_could_write_its_own_copy(tmp_path: Path) -> None:
    from fabric_jev.batch import run_batch

    async def keep(outcome: object) -> None:
        raise AssertionError("nothing runs")

    program = {"name": "p", "code": "return 1", "inputSchema": {}, "outputSchema": {}}
    with pytest.raises(ConfigError, match="record:FILE cannot be used with Ray"):
        await run_batch(program, [1], keep, evaluator=f"record:{tmp_path / 't.jsonl'}", ray=True)
    assert not (tmp_path / "t.jsonl").exists()


async def test_a_miss_shows_the_requests_text_terminal_safe(tmp_path: Path) -> None:
    # JSON leaves C1 controls, bidi overrides and line separators as they are; the miss lands in
    # pytest's report and on standard error.
    path = tmp_path / "t.jsonl"
    await record(path, "plain text")
    with pytest.raises(CassetteMiss) as caught:
        await RecordingEvaluator(path, "none").evaluate(req("plain \u009b2J text \u202e evil\u2028next"), timeout=1)
    text = str(caught.value)
    assert "\\u009b2J" in text and "\\u202e" in text and "\\u2028" in text
    assert not any(ch in text for ch in "\u009b\u202e\u2028")
