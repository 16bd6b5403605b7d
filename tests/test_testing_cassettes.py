"""Test cassettes (fabric_jev.testing): record modes, a stable file, misses that explain themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import ConfigError, UpstreamError
from fabric_jev.contract.evaluation import EvaluationRequest, validate_request
from fabric_jev.evaluators import request_digest
from fabric_jev.testing import Cassette, CassetteMiss, RecordingEvaluator, RecordMode, ScriptedEvaluator
from fabric_jev.testing.cassettes import HEADER

pytestmark = pytest.mark.anyio
QUESTION = {"type": "choice", "instructions": "Which queue?", "criteria": {"billing": None, "tech": None}}


def ask(state: Any) -> EvaluationRequest:
    return validate_request({"state": state, "questions": {"q": QUESTION}})


class Source:
    """Builds the evaluator a cassette records from, and counts how often it was needed."""

    def __init__(self, *replies: Any) -> None:
        self.built: list[ScriptedEvaluator] = []
        self.replies = replies or ({"q": {"choice": "billing"}},)

    def __call__(self) -> ScriptedEvaluator:
        self.built.append(ScriptedEvaluator(*self.replies))
        return self.built[-1]

    @property
    def asked(self) -> int:
        return sum(e.calls for e in self.built)


async def record(path: Path, mode: str, *states: Any, source: Source | None = None) -> RecordingEvaluator:
    ev = RecordingEvaluator(path, mode, record_from=source or Source())
    for state in states:
        await ev.evaluate(ask(state), timeout=5)
    await ev.aclose()
    return ev


async def test_once_records_a_new_cassette_then_replays_it_without_the_source(tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / "test_mod" / "test_x.jsonl"
    source = Source()
    first = await record(path, "once", "charged twice", "app crashes", source=source)
    assert first.recorded == 2 and source.asked == 2 and len(source.built) == 1 and source.built[0].closed
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == HEADER and len(lines) == 3
    # A second run in `once` mode: the cassette exists, so nothing may be recorded.
    again = RecordingEvaluator(path, "once", record_from=source)
    answer = await again.evaluate(ask("app crashes"), timeout=5)
    assert answer.answers["q"]["choice"] == "billing" and again.replayed == 1 and source.asked == 2
    with pytest.raises(CassetteMiss):
        await again.evaluate(ask("something new"), timeout=5)
    assert len(source.built) == 1, "once with a cassette never builds the evaluator"


async def test_lines_have_sorted_keys_in_recording_order_and_are_not_rewritten_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "b state", "a state")
    text = path.read_text()
    for line in text.splitlines():
        item = json.loads(line)
        assert line == json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert [json.loads(x)["request"]["state"] for x in text.splitlines()[1:]] == ["b state", "a state"]
    before = path.stat().st_mtime_ns
    replay = await record(path, "new", "a state", "b state")  # nothing new: nothing written
    assert replay.recorded == 0 and replay.replayed == 2
    assert path.stat().st_mtime_ns == before and path.read_text() == text
    rerecorded = await record(path, "all", "b state", "a state")  # the same answers again
    assert rerecorded.recorded == 2 and path.stat().st_mtime_ns == before


async def test_text_with_unicode_line_breaks_inside_a_recording_replays(tmp_path: Path) -> None:
    # JSON leaves U+2028, U+2029 and NEL unescaped (ensure_ascii=False); they are line breaks to
    # str.splitlines, not to a JSONL file.
    path = tmp_path / "t.jsonl"
    states = ["one\u2028two", "three\u2029four", "five\x85six"]
    await record(path, "once", *states)
    assert len(path.read_text().split("\n")) == len(states) + 2  # header, recordings, final newline
    ev = RecordingEvaluator(path, "none")
    for state in states:
        assert (await ev.evaluate(ask(state), timeout=5)).answers["q"]["choice"] == "billing"


@pytest.mark.parametrize("mode", ["none", "once", "new"])
async def test_a_replay_leaves_a_hand_formatted_cassette_as_it_is(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "x")
    # Reformatted by a person or an editor: still the same recordings, in another spelling.
    path.write_text("".join(json.dumps(json.loads(line), indent=None) + "\n"
                            for line in path.read_text().splitlines()))
    text, stamp = path.read_text(), path.stat().st_mtime_ns
    ev = await record(path, mode, "x")
    assert ev.replayed == 1 and ev.recorded == 0 and ev.cassette.writes == 0
    assert path.read_text() == text and path.stat().st_mtime_ns == stamp


async def test_a_cassette_is_written_readable_as_a_file_to_check_in_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "one")
    assert path.stat().st_mode & 0o777 == 0o644  # not the private mode of a temporary file
    path.chmod(0o664)
    await record(path, "new", "two")
    assert len(Cassette(path).recordings) == 2 and path.stat().st_mode & 0o777 == 0o664


async def test_new_keeps_what_is_recorded_and_adds_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    source = Source()
    await record(path, "new", "one", source=source)
    ev = await record(path, "new", "one", "two", source=source)
    assert (ev.replayed, ev.recorded, source.asked) == (1, 1, 2)
    assert len(Cassette(path).recordings) == 2


async def test_all_records_everything_again_and_drops_what_this_run_did_not_ask(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "old", "kept")
    source = Source({"q": {"choice": "tech"}})
    ev = await record(path, "all", "kept", "kept", source=source)
    assert ev.recorded == 1 and ev.replayed == 1 and source.asked == 1  # asked twice, recorded once
    states = {r.request["state"]: r.evaluation["answers"]["q"]["choice"] for r in Cassette(path).recordings.values()}
    assert states == {"kept": "tech"}


async def test_all_with_nothing_asked_leaves_the_cassette_as_it_was(tmp_path: Path) -> None:
    # vcrpy's `all` writes only what it recorded: a test that asked nothing this run (one that
    # failed before its first question, say) keeps its cassette rather than losing it.
    path = tmp_path / "t.jsonl"
    await record(path, "new", "old")
    before = path.read_bytes()
    ev = await record(path, "all")
    assert ev.recorded == 0 and not ev.save() and path.read_bytes() == before


async def test_none_never_builds_the_evaluator_and_keeps_every_miss(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "refund please")
    source = Source()
    ev = RecordingEvaluator(path, "none", record_from=source)
    with pytest.raises(CassetteMiss) as caught:
        await ev.evaluate(ask("refund now"), timeout=5)
    digest = request_digest(ask("refund now"), "jev-latest")
    assert caught.value.digest == digest and ev.misses == [caught.value]
    text = str(caught.value)
    assert f"request digest: {digest}" in text and "(record mode none)" in text
    assert '- "state": "refund please"' in text and '+ "state": "refund now"' in text
    assert "--jev-record-mode=new" in text
    assert source.built == [] and not path.with_suffix(".jsonl.tmp").exists()


async def test_a_miss_without_a_cassette_says_so_and_how_to_record(tmp_path: Path) -> None:
    ev = RecordingEvaluator(tmp_path / "none.jsonl", RecordMode.NONE)
    with pytest.raises(CassetteMiss, match="does not exist yet") as caught:
        await ev.evaluate(ask("x"), timeout=5)
    assert "--jev-record-mode=once" in str(caught.value)
    await ev.aclose()
    assert not (tmp_path / "none.jsonl").exists(), "a test that recorded nothing gets no cassette"


async def test_the_nearest_recorded_request_is_the_most_similar_one(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", {"ticket": "charged twice for March", "plan": "pro"},
                 {"ticket": "the app crashes on start", "plan": "free"})
    ev = RecordingEvaluator(path, "none")
    with pytest.raises(CassetteMiss) as caught:
        await ev.evaluate(ask({"ticket": "the app crashes on start", "plan": "team"}), timeout=5)
    near = request_digest(ask({"ticket": "the app crashes on start", "plan": "free"}), "jev-latest")
    assert f"nearest recorded request: {near}" in str(caught.value)
    assert '-  "plan": "free",' in str(caught.value) and '+  "plan": "team",' in str(caught.value)


async def test_credentials_in_a_request_are_redacted_in_the_cassette_and_in_the_miss(tmp_path: Path) -> None:
    key = "sk-live0123456789abcdefABCDEF"
    path = tmp_path / "t.jsonl"
    await record(path, "new", f"deploy with token {key}")
    assert key not in path.read_text() and "[redacted" in path.read_text()
    # The digest is of the request as redacted, so the request asked still replays.
    ev = RecordingEvaluator(path, "none")
    assert (await ev.evaluate(ask(f"deploy with token {key}"), timeout=5)).answers["q"]["choice"] == "billing"
    with pytest.raises(CassetteMiss) as caught:
        await ev.evaluate(ask(f"deploy again with token {key}"), timeout=5)
    assert key not in str(caught.value)


async def test_an_error_from_the_source_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    ev = RecordingEvaluator(path, "once", record_from=Source(UpstreamError("Jev upstream returned HTTP 500")))
    with pytest.raises(UpstreamError):
        await ev.evaluate(ask("x"), timeout=5)
    await ev.aclose()
    assert not path.exists() and ev.misses == []


async def test_a_tampered_recording_is_validated_again(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    await record(path, "new", "x")
    path.write_text(path.read_text().replace('"choice":"billing"', '"choice":"nope"'))
    from fabric_jev import AnswerInvalid

    with pytest.raises(AnswerInvalid, match="not one of the options"):
        await RecordingEvaluator(path, "none").evaluate(ask("x"), timeout=5)


@pytest.mark.parametrize(("content", "message"), [
    ("", "is empty"),
    ('{"format":"something-else","version":1}\n', "line 1 is not a fabric-jev cassette header"),
    (json.dumps(HEADER) + "\n{not json\n", "line 2"),
    (json.dumps(HEADER) + '\n{"digest": "x"}\n', "line 2: a recording is"),
    (b"\xff\xfe", "not UTF-8"),
])
def test_a_broken_cassette_is_refused_naming_the_file_and_line(tmp_path: Path, content: str | bytes,
                                                                message: str) -> None:
    path = tmp_path / "broken.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as caught:
        Cassette(path)
    assert str(path) in str(caught.value)


def test_a_cassette_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.truncate(8 << 30)  # sparse: 8 GiB that a whole read would try to hold in memory
    with pytest.raises(ConfigError, match="is over 64 MiB") as caught:
        Cassette(path)
    assert str(path) in str(caught.value)


def test_an_unknown_record_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="expected none, once, new, all"):
        RecordingEvaluator("x.jsonl", "sometimes")
