"""The assertion core on synthetic snapshots: no browser, fully deterministic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_jev.assertions import (
    AssertionFailed,
    Query,
    QuerySyntaxError,
    Snapshot,
    SnapshotDiff,
    VisionFallback,
    all_of,
    any_of,
    check,
    confidence,
    element_count,
    exists,
    is_checked,
    is_collapsed,
    is_disabled,
    is_enabled,
    is_expanded,
    is_mixed,
    is_pressed,
    is_selected,
    is_unchecked,
    nearest,
    not_,
    not_exists,
    url_contains,
    url_matches,
    value_contains,
    value_equals,
    where,
)
from tests.assertion_support import ScriptedSource

pytestmark = pytest.mark.anyio
GOLDEN = Path(__file__).parent / "golden"


def el(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"role": "button", "name": "", "text": "", "visible": True, "in_viewport": True,
                            "bbox": {"x": 10, "y": 10, "width": 80, "height": 30},
                            "viewport_bbox": {"x": 10, "y": 10, "width": 80, "height": 30}}
    base.update(kw)
    return base


def snap(*elements: dict[str, Any], **kw: Any) -> Snapshot:
    base: dict[str, Any] = {"url": "http://127.0.0.1/app", "ready_state": "complete", "node_count": 50,
                            "quiet_ms": 2000, "observed_ms": 5000, "elements": [
                                {"index": i, **e} for i, e in enumerate(elements)]}
    base.update(kw)
    return Snapshot.parse(base)


PAGE = snap(
    el(name="Save", text="Save", testid="save"),
    el(name="Save draft", text="Save draft", disabled=True),
    el(name="Delete", aria_disabled=True),
    el(role="checkbox", name="Agree", checked=False, input_type="checkbox"),
    el(role="checkbox", name="Mixed", aria_checked="mixed"),
    el(role="checkbox", name="On", checked=True),
    el(role="textbox", name="Email", value="bob@example.com", input_type="email"),
    el(role="textbox", name="Password", value="••••••••", value_redacted=True, input_type="password"),
    el(name="Menu", expanded=False),
    el(name="Panel", expanded=True),
    el(name="Bold", pressed=True),
    el(role="tab", name="Tab A", selected=True),
    el(name="Far", in_viewport=False, bbox={"x": 0, "y": 3000, "width": 80, "height": 30},
       viewport_bbox={"x": 0, "y": 2990, "width": 80, "height": 30}),
    el(name="Covered", is_occluded=True, occluded_by="div#overlay"),
    el(name="Hidden", visible=False),
    el(role="heading", name="Settings", level=2, bbox={"x": 0, "y": 200, "width": 300, "height": 40}),
)


# ---------------------------------------------------------------- query language


@pytest.mark.parametrize(("query", "names"), [
    ("role=button", ["Save", "Save draft", "Delete", "Menu", "Panel", "Bold", "Far", "Covered", "Hidden"]),
    ('text~"save"', ["Save", "Save draft"]),
    ('name="Save"', ["Save"]),
    ("name^=save", ["Save", "Save draft"]),
    ("name$=DRAFT", ["Save draft"]),
    ("name!=Save role=button disabled=true", ["Save draft", "Delete"]),
    ("checked=mixed", ["Mixed"]),
    ("checked=false", ["Agree"]),
    ("value~example", ["Email"]),
    ("input_type=password", ["Password"]),
    ("testid=save", ["Save"]),
    ("expanded=false", ["Menu"]),
    ("pressed=true", ["Bold"]),
    ("selected=true", ["Tab A"]),
    ("visible=false", ["Hidden"]),
    ("in_viewport=false", ["Far"]),
    ("occluded=true", ["Covered"]),
    ("level>=2", ["Settings"]),
    ("bbox.y>100", ["Far", "Settings"]),
    ("bbox.y<=10 bbox.width=80 role=checkbox", ["Agree", "Mixed", "On"]),
    ('name="Save \\"all\\""', []),
    ("name=Mixed", ["Mixed"]),
    ("name=true", []),
])
def test_queries_select(query: str, names: list[str]) -> None:
    assert [e.name for e in Query.parse(query).select(PAGE.elements)] == names


@pytest.mark.parametrize(("query", "builder"), [
    ("role=button text~save", where(role="button", text__contains="save")),
    ("disabled=false role=button", where(disabled=False, role="button")),
    ("checked=mixed", where(checked="mixed")),
    ("bbox.y>100", where(bbox_y__gt=100)),
    ("name^=Save name!=Save", where(name__startswith="Save", name__ne="Save")),
    ("level<=2 role=heading", where(level__le=2, role="heading")),
])
def test_text_and_python_forms_agree(query: str, builder: Query) -> None:
    assert Query.parse(query).select(PAGE.elements) == builder.select(PAGE.elements)
    # The builder's own rendering parses back to the same conditions.
    assert Query.parse(str(builder)).conditions == builder.conditions


@pytest.mark.parametrize(("query", "column", "needle"), [
    ('role=button text~"Save', 18, "unterminated string"),
    ("colour=red", 1, "unknown field 'colour'"),
    ("role", 5, "expected an operator"),
    ("role=", 6, "expected a value"),
    ("bbox.y>abc", 8, "needs a number"),
    ('name="a\\q"', 8, "unknown escape"),
    ("   ", 4, "empty query"),
])
def test_parse_errors_point_at_the_column(query: str, column: int, needle: str) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        Query.parse(query)
    assert err.value.column == column and needle in str(err.value)
    assert str(err.value).splitlines()[2] == "  " + " " * (column - 1) + "^"


# ---------------------------------------------------------------- predicates


@pytest.mark.parametrize(("predicate", "passed", "reason"), [
    (exists("name=Save"), True, None),
    (exists("name=Nope"), False, "no_match"),
    (exists("name=Far"), False, "match_offscreen"),
    (exists("name=Covered"), False, "match_occluded"),
    (exists("name=Hidden"), False, "no_match"),
    (not_exists("name=Nope"), True, None),
    (not_exists("name=Hidden"), True, None),
    (not_exists("name=Save"), False, "state_mismatch"),
    (element_count("role=checkbox", min=3, max=3), True, None),
    (element_count("role=checkbox", min=4), False, "state_mismatch"),
    (element_count("role=slider", min=1), False, "no_match"),
    (element_count("role=slider", max=0), True, None),
    (is_enabled("name=Save"), True, None),
    (is_enabled('name="Save draft"'), False, "state_mismatch"),
    (is_disabled('name="Save draft"'), True, None),
    (is_disabled("name=Delete"), True, None),
    (is_enabled("name=Delete"), False, "state_mismatch"),
    (is_checked("name=On"), True, None),
    (is_unchecked("name=Agree"), True, None),
    (is_checked("name=Mixed"), False, "state_mismatch"),
    (is_mixed("name=Mixed"), True, None),
    (value_equals("name=Email", "bob@example.com"), True, None),
    (value_contains("name=Email", "example"), True, None),
    (value_equals("name=Email", "eve@example.com"), False, "state_mismatch"),
    (value_contains("name=Password", "•"), False, "state_mismatch"),
    (is_expanded("name=Panel"), True, None),
    (is_collapsed("name=Menu"), True, None),
    (is_expanded("name=Menu"), False, "state_mismatch"),
    (is_pressed("name=Bold"), True, None),
    (is_selected('name="Tab A"'), True, None),
    (is_enabled("name=Far"), False, "match_offscreen"),
    (url_contains("/app"), True, None),
    (url_matches(r"^http://127\.0\.0\.1/\w+$"), True, None),
    (url_matches("checkout$"), False, "state_mismatch"),
    (all_of(exists("name=Save"), is_checked("name=On")), True, None),
    (all_of(exists("name=Save"), exists("name=Nope")), False, "no_match"),
    (any_of(exists("name=Nope"), exists("name=Save")), True, None),
    (any_of(exists("name=Nope"), exists("name=Far")), False, "no_match"),
    (not_(exists("name=Nope")), True, None),
    (not_(exists("name=Save")), False, "state_mismatch"),
])
def test_predicates(predicate: Any, passed: bool, reason: str | None) -> None:
    out = predicate.assess(PAGE)
    assert (out.passed, out.reason) == (passed, reason), out


def test_dom_and_aria_state_are_normalised() -> None:
    native = snap(el(name="A", disabled=True), el(role="checkbox", name="C", checked=True))
    aria = snap(el(name="A", aria_disabled=True), el(role="checkbox", name="C", aria_checked=True))
    for page in (native, aria):
        assert is_disabled("name=A").assess(page).passed
        assert Query.parse("disabled=true").select(page.elements)[0].name == "A"
        assert is_checked("name=C").assess(page).passed


# ---------------------------------------------------------------- nearest matches


def test_nearest_matches_rank_text_then_role_then_position() -> None:
    page = snap(el(name="Submit order"), el(role="link", name="Save"), el(name="Save changes"),
                el(name="Cancel"), el(name="Save it", in_viewport=False,
                                      viewport_bbox={"x": 0, "y": 4000, "width": 10, "height": 10}))
    ranked = nearest(page, Query.parse('role=button name="Save"'), 3)
    assert [n.element.name for n in ranked] == ["Save changes", "Save it", "Save"]
    assert ranked[0].score > ranked[1].score > ranked[2].score


# ---------------------------------------------------------------- confidence


@pytest.mark.parametrize(("kw", "value", "reason"), [
    ({}, 1.0, "document complete and DOM quiet"),
    ({"ready_state": "loading"}, 0.3, "document is still loading"),
    ({"ready_state": "interactive"}, 0.7, "interactive but not complete"),
    ({"quiet_ms": 20}, 0.5, "DOM changed 20 ms ago"),
    ({"quiet_ms": 200}, 0.8, "settling"),
    ({"node_count": 2, "elements": []}, 0.3, "nearly empty"),
    ({"node_count": 2}, 1.0, "document complete"),  # a tiny page with a control is fine
    ({"elements": []}, 0.6, "no interactive elements"),
])
def test_confidence_is_explained(kw: dict[str, Any], value: float, reason: str) -> None:
    base = {"url": "u", "ready_state": "complete", "node_count": 50, "quiet_ms": 2000,
            "observed_ms": 5000, "elements": [el(name="x")]}
    c = confidence(Snapshot.parse({**base, **kw}))
    assert c.value == value and any(reason in r for r in c.reasons)


def test_fresh_observer_is_not_penalised() -> None:
    # quiet_ms equals observed_ms just after the observer was installed: no mutation seen.
    assert confidence(snap(el(name="x"), quiet_ms=0, observed_ms=0)).value == 1.0


# ---------------------------------------------------------------- escalation


# The escalation table and every action honoured: tests/test_assertions_escalation.py


# ---------------------------------------------------------------- the funnel


class Source(ScriptedSource):
    def __init__(self, *snapshots: Snapshot | Exception, screenshot: bytes = b"\x89PNG fake") -> None:
        super().__init__(*snapshots, screenshot=screenshot)

    def after_scroll(self, element: Any) -> Snapshot:
        return snap(el(name=element.name))


async def run_eventually(c: Any, source: Source, **kw: Any) -> Any:
    return await c.eventually(source, clock=source.clock, sleep=source.sleep, **kw)


DISABLED = snap(el(name="Save", disabled=True), el(name="Save draft"))
ENABLED = snap(el(name="Save"), el(name="Save draft"))


async def test_eventually_passes_when_the_state_arrives() -> None:
    source = Source(DISABLED, DISABLED, ENABLED)
    result = await run_eventually(check(is_enabled("name=Save"), "save enabled"), source, timeout=5, poll=0.1)
    assert result.passed and [a.reason for a in result.attempts] == ["state_mismatch", "state_mismatch", None]
    assert [a.action for a in result.attempts] == ["retry", "retry", "done"]


async def test_backoff_grows_and_timeout_reports_the_last_reason() -> None:
    source = Source(DISABLED)
    result = await run_eventually(check(is_enabled("name=Save"), "save enabled"), source, timeout=1, poll=0.1)
    assert not result.passed and result.reason == "timeout" and result.last_reason == "state_mismatch"
    # Waits 0.1, 0.15, 0.225, then capped at timeout/4: 0.25, 0.25, then the 0.025 left: the
    # seventh try, at the deadline, is the last.
    assert source.now == pytest.approx(1.0) and len(result.attempts) == 7


async def test_eventually_defaults_are_the_seeds() -> None:
    # Seed 002: eventually(timeout_s=10, poll_s=0.25, min_confidence=0.7).
    source = Source(DISABLED)
    result = await run_eventually(check(is_enabled("name=Save"), "save enabled"), source)
    assert result.reason == "timeout"
    # Waits 0.25, 0.375, 0.5625, 0.84375, 1.265625, 1.8984375, then capped at 10/4 = 2.5, then
    # what is left: the last try looks at the page at 10 s (it once stopped at 7.7 s).
    pauses = [0.25 * 1.5 ** k for k in range(6)] + [2.5]
    pauses.append(10 - sum(pauses))
    assert source.now == pytest.approx(10) and len(result.attempts) == len(pauses) + 1
    # A page without interactive elements has confidence 0.6: judged under the old 0.6,
    # not under the seed's 0.7, where, quiet, it is waited for until the deadline (a loading
    # shell) and never called exhausted; an interactive document with a quiet DOM (0.7) is judged.
    bare = snap()
    assert confidence(bare).value == pytest.approx(0.6)
    empty = Source(bare)
    low = await run_eventually(check(not_exists("name=Error"), "no error"), empty)
    assert low.reason == "timeout" and low.last_reason == "low_confidence" and empty.now == pytest.approx(10)
    judged = await run_eventually(check(not_exists("name=Error"), "no error"), Source(bare), min_confidence=0.6)
    assert judged.passed
    fine = snap(el(name="Save"), ready_state="interactive")
    assert confidence(fine).value == pytest.approx(0.7)
    assert (await run_eventually(check(exists("name=Save"), "interactive"), Source(fine))).passed


async def test_offscreen_match_is_scrolled_into_view() -> None:
    far = snap(el(name="Far", in_viewport=False))
    source = Source(far)
    result = await run_eventually(check(exists("name=Far"), "far"), source)
    assert result.passed and source.scrolled == ["Far"]
    assert [a.action for a in result.attempts] == ["scroll", "done"]


async def test_exhaustion_after_n_low_confidence_snapshots() -> None:
    busy = snap(el(name="Save"), quiet_ms=10)
    source = Source(busy)
    result = await run_eventually(check(exists("name=Save"), "busy page"), source, min_confidence=0.6,
                                  max_retries=3)
    assert result.reason == "snapshot_exhausted" and source.taken == 3
    assert [a.reason for a in result.attempts] == ["low_confidence", "low_confidence", "snapshot_exhausted"]


class Vision:
    def __init__(self, answer: bool | None) -> None:
        self.answer = answer
        self.asked: list[tuple[str, bytes]] = []

    async def ask(self, question: str, image: bytes) -> bool | None:
        self.asked.append((question, image))
        return self.answer


@pytest.mark.parametrize(("answer", "passed", "said"), [(True, True, "yes"), (False, False, "no"),
                                                        (None, False, "unsure")])
async def test_vision_fallback_only_decides_exhausted_checks(answer: bool | None, passed: bool, said: str) -> None:
    vision = Vision(answer)
    busy = snap(el(name="Save"), quiet_ms=10)
    c = check(exists("name=Save"), "busy page", vision=VisionFallback(vision, "Is a Save button visible?"))
    result = await run_eventually(c, Source(busy), max_retries=2)
    assert result.passed is passed and result.vision == said
    assert vision.asked == [("Is a Save button visible?", b"\x89PNG fake")]
    # A check that fails for another reason never asks.
    other = Vision(True)
    c2 = check(exists("name=Nope"), "missing", vision=VisionFallback(other, "?"))
    assert not (await run_eventually(c2, Source(ENABLED), timeout=0.5)).passed and other.asked == []


async def test_no_snapshot_is_a_reason() -> None:
    result = await check(exists("name=Save"), "gone").once(Source(RuntimeError("target closed")))
    assert result.reason == "no_snapshot" and "target closed" in result.attempts[0].detail


async def test_once_fails_with_state_mismatch_and_both_polarities_raise_when_required() -> None:
    with pytest.raises(AssertionFailed) as err:
        await check(is_enabled("name=Save"), "save enabled", required=True).once(Source(DISABLED))
    text = str(err.value)
    assert text.startswith('check "save enabled" failed: state_mismatch')
    assert "expected: name=Save to be enabled" in text and 'actual:   button "Save" disabled=true' in text
    with pytest.raises(AssertionFailed) as err2:
        await check(not_(is_enabled("name=Save")), "save stays disabled", required=True).once(Source(ENABLED))
    assert "expected: not: name=Save to be enabled" in str(err2.value)
    assert (await check(not_(is_enabled("name=Save")), "x").once(Source(DISABLED))).passed


def golden(name: str, value: Any) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    assert path.read_text() == text, f"{path} differs; if intended, rewrite it with the new output"


async def test_golden_failure_payloads(tmp_path: Path) -> None:
    traces: list[dict[str, Any]] = []
    c = check(exists('role=button name="Save"'), "Save is visible", on_trace=traces.append)
    page = snap(el(name="Save changes"), el(name="Cancel"), el(role="link", name="Save"))
    result = await run_eventually(c, Source(page), timeout=0.3, poll=0.1)
    golden("no_match_trace", result.trace_event())
    golden("no_match_message", result.message().splitlines())
    assert traces == [result.trace_event()]
    occluded = await check(is_enabled("name=Pay"), "Pay is usable").once(
        Source(snap(el(name="Pay", is_occluded=True, occluded_by="div.modal"))))
    golden("occluded_trace", occluded.trace_event())


async def test_artifacts_on_failure(tmp_path: Path) -> None:
    page = snap(el(role="textbox", name="Password", value="••••••••", value_redacted=True, input_type="password"),
                el(role="textbox", name="Note", value="token: sk-abcdefghijklmnopqrstuv"))
    result = await check(exists("name=Missing"), "Missing button", artifacts_dir=tmp_path).once(Source(page))
    assert result.artifacts == {"snapshot": "missing-button-1.snapshot.json",
                                "screenshot": "missing-button-1.png", "trace": "missing-button-1.trace.json"}
    written = (tmp_path / "missing-button-1.snapshot.json").read_text()
    assert "sk-abcdef" not in written and "[redacted: api key]" in written
    assert (tmp_path / "missing-button-1.png").read_bytes() == b"\x89PNG fake"
    trace = json.loads((tmp_path / "missing-button-1.trace.json").read_text())
    assert trace["reason"] == "no_match" and trace["artifacts"]["trace"] == "missing-button-1.trace.json"
    again = await check(exists("name=Missing"), "Missing button", artifacts_dir=tmp_path).once(Source(page))
    assert again.artifacts["trace"] == "missing-button-2.trace.json"
    passed = await check(exists("name=Note"), "Note", artifacts_dir=tmp_path / "none").once(Source(page))
    assert passed.passed and not (tmp_path / "none").exists()


async def test_trace_artifacts_are_redacted_like_snapshots(tmp_path: Path) -> None:
    page = snap(el(name="API key sk-abcdefghijklmnopqrstuv"), url="https://bob:hunter2pw@app.example/settings")
    result = await check(exists('name="API key sk-abcdefghijklmnopqrstuw"'), "Key shown",
                         artifacts_dir=tmp_path).once(Source(page))
    assert not result.passed and result.nearest
    written = (tmp_path / "key-shown-1.trace.json").read_text()
    assert "sk-abcdefghijklmnopqrstuv" not in written and "hunter2pw" not in written
    assert "[redacted: api key]" in written and "[redacted: url credentials]" in written


async def test_the_failure_message_is_redacted_like_the_trace() -> None:
    page = snap(el(name="API key sk-abcdefghijklmnopqrstuv"), url="https://bob:hunter2pw@app.example/settings")
    result = await check(exists('name="API key sk-abcdefghijklmnopqrstuw"'), "Key shown").once(Source(page))
    message = result.message()
    assert not result.passed and "nearest:" in message
    assert "sk-abcdefghijklmnopqrstu" not in message and "[redacted: api key]" in message


# ---------------------------------------------------------------- diffs


def test_diff_added_removed_modified_and_counts() -> None:
    before = snap(el(name="Add", testid="add"), el(role="checkbox", name="A", checked=False),
                  el(role="listitem", name="one"))
    after = snap(el(name="Add", testid="add"), el(role="checkbox", name="A", checked=True),
                 el(role="listitem", name="one"), el(role="listitem", name="two"), el(role="alert", name="Saved"))
    diff = SnapshotDiff.between(before, after)
    assert diff.counts() == {"added": 2, "removed": 0, "modified": 1}
    assert diff.count_added(role="listitem") >= 1 and diff.count_added(role="alert") == 1
    assert diff.count_modified("checked", role="checkbox") == 1 and diff.count_removed() == 0
    back = SnapshotDiff.between(after, before)
    assert back.count_removed(role="listitem") == 1 and back.counts()["removed"] == 2
