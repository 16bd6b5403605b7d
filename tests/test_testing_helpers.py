"""fabric_jev.testing's helpers without a browser: scripted evaluators, assertions on snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import AnswerInvalid, UpstreamError
from fabric_jev.assertions import AssertionFailed, Snapshot, added, exists
from fabric_jev.contract.evaluation import EvaluationRequest, validate_request
from fabric_jev.testing import (
    ScriptedEvaluator,
    assert_,
    assert_eventually,
    check_done,
    expect,
    open_connections,
)
from tests.assertion_support import ScriptedSource

pytestmark = pytest.mark.anyio
HERE = Path(__file__)


def ask(**questions: Any) -> EvaluationRequest:
    return validate_request({"state": "s", "questions": questions})


NOUL = {"type": "noul", "instructions": "?"}
CHOICE = {"type": "choice", "instructions": "?", "criteria": {"a": None, "b": None}}


async def test_scripted_replies_go_in_order_and_the_last_repeats() -> None:
    ev = ScriptedEvaluator({"q": {"noul": 0.2}}, {"q": {"noul": 0.9}})
    got = [(await ev.evaluate(ask(q=NOUL), timeout=1)).answers["q"]["noul"] for _ in range(3)]
    assert got == [0.2, 0.9, 0.9] and ev.calls == 3


async def test_scripted_shorthands_expand_and_answers_are_validated() -> None:
    ev = ScriptedEvaluator({"c": {"choice": "b"}}, {"c": {"choice": "zzz"}}, model="m", usage=(3, 1))
    first = await ev.evaluate(ask(c=CHOICE), timeout=1)
    assert first.answers["c"]["probabilities"] == {"a": 0.0, "b": 1.0} and first.model == "m"
    assert first.usage.input_tokens == 3
    with pytest.raises(AnswerInvalid, match="not one of the options"):
        await ev.evaluate(ask(c=CHOICE), timeout=1)


async def test_scripted_errors_and_computed_replies() -> None:
    release = anyio.Event()

    async def held(request: EvaluationRequest) -> dict[str, Any]:
        await release.wait()
        return {q.id: {"noul": 0.5} for q in request.questions}

    ev = ScriptedEvaluator(UpstreamError("Jev upstream returned HTTP 503"), held)
    with pytest.raises(UpstreamError, match="503"):
        await ev.evaluate(ask(q=NOUL), timeout=1)
    async with anyio.create_task_group() as tg:
        answers: list[Any] = []

        async def asking() -> None:
            answers.append(await ev.evaluate(ask(x=NOUL, y=NOUL), timeout=1))

        tg.start_soon(asking)
        await anyio.wait_all_tasks_blocked()
        assert answers == [], "the answer is held until the test releases it"
        release.set()
    assert answers[0].answers == {"x": {"type": "noul", "noul": 0.5}, "y": {"type": "noul", "noul": 0.5}}
    bad = ScriptedEvaluator(lambda request: ["not", "answers"])  # type: ignore[arg-type,return-value]
    with pytest.raises(AnswerInvalid, match="not answers by question id"):
        await bad.evaluate(ask(q=NOUL), timeout=1)
    with pytest.raises(ValueError, match="at least one reply"):
        ScriptedEvaluator()


async def test_a_scripted_reply_that_never_comes_is_bounded_by_the_timeout() -> None:
    async def never(request: EvaluationRequest) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    with pytest.raises(UpstreamError, match=r"timed out after 0\.05 s"):
        await ScriptedEvaluator(never).evaluate(ask(q=NOUL), timeout=0.05)


def el(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"role": "button", "name": "", "visible": True, "in_viewport": True,
                            "bbox": {"x": 10, "y": 10, "width": 80, "height": 30}}
    return {**base, **kw}


def snap(*elements: dict[str, Any]) -> Snapshot:
    return Snapshot.parse({"url": "http://127.0.0.1/app", "node_count": 50, "quiet_ms": 2000,
                           "observed_ms": 5000, "elements": list(elements)})


PAGE = snap(el(name="Save changes"), el(role="link", name="Save"), el(role="checkbox", name="Agree", checked=False))


async def test_assert_passes_quietly_and_a_query_means_exists() -> None:
    result = await assert_(PAGE, 'role=button name="Save changes"')
    assert result.passed and result.predicate == 'exists(role=button name="Save changes")'


async def test_a_failed_assert_is_an_assertion_error_with_reason_and_nearest_ending_at_the_test() -> None:
    with pytest.raises(AssertionError) as caught:
        await assert_(PAGE, 'role=button name="Save"')
    assert isinstance(caught.value, AssertionFailed)
    text = str(caught.value)
    assert 'failed: no_match' in text and '1. button "Save changes"' in text
    # pytest hides the helpers' frames: the report ends at the test's own line.
    shown = caught.traceback.filter(caught)
    assert Path(str(shown[-1].path)) == HERE


async def test_the_failure_shows_what_changed_since_the_last_action() -> None:
    after = snap(el(name="Save changes"), el(role="checkbox", name="Agree", checked=True), el(name="Undo"))
    with pytest.raises(AssertionFailed) as caught:
        await assert_(after.with_baseline(PAGE), added("role=listitem"))
    assert ('since the last action: 1 added (button "Undo"), 1 removed (link "Save"), '
            '1 modified (checkbox "Agree" (checked))') in str(caught.value)


async def test_assert_eventually_retries_with_fresh_snapshots() -> None:
    source = ScriptedSource(snap(el(name="Saving…")), snap(el(name="Saved")))
    result = await assert_eventually(source, "name=Saved", timeout=5, poll=0.01)
    assert result.passed and source.taken == 2
    with pytest.raises(AssertionFailed, match="failed: timeout"):
        await assert_eventually(ScriptedSource(PAGE), "name=Nothing", timeout=0.05, poll=0.01)


async def test_check_done_is_required_and_labelled() -> None:
    done = check_done(exists("name=Saved"))
    assert (await done.once(snap(el(name="Saved")))).label == "task done"
    with pytest.raises(AssertionFailed, match='check "task done" failed: no_match'):
        await done.once(PAGE)
    source = ScriptedSource(PAGE, snap(el(name="Saved")))
    assert (await check_done("name=Saved", "order placed").eventually(source, poll=0.01)).passed


async def test_expect_reads_like_playwright_and_stays_a_predicate() -> None:
    assert (await expect(PAGE, "name=Agree").to_be_unchecked()).passed
    with pytest.raises(AssertionFailed, match="state_mismatch"):
        await expect(PAGE, "name=Agree", timeout=0.05).to_be_checked()
    assert (await expect(PAGE).to_pass(exists("name=Agree"))).passed
    assert (await expect(PAGE).to_have_url("/app$")).passed
    with pytest.raises(ValueError, match="needs a query"):
        await expect(PAGE).to_be_enabled()


async def test_a_target_that_cannot_take_snapshots_is_refused() -> None:
    with pytest.raises(TypeError, match="cannot take snapshots of int"):
        await assert_(42, "name=Save")


def test_open_connections_reads_a_connectors_public_view() -> None:
    from fabric_jev_browser import BrowserConnector

    connector = BrowserConnector({"wsUrl": "ws://127.0.0.1:9/devtools/browser/x",
                                  "allowedMethods": ["Target.getTargets"]})
    assert open_connections(connector) == {}
    with pytest.raises(TypeError):
        connector.open_connections["run"] = None  # type: ignore[index]  # a read-only view
    with pytest.raises(TypeError, match="does not report its open connections"):
        open_connections(object())


def test_the_testing_module_exports_every_name_it_lists() -> None:
    import fabric_jev.testing as testing

    assert testing.__all__ == sorted(testing.__all__) and len(set(testing.__all__)) == len(testing.__all__)
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name


def test_the_suite_reads_no_private_run_or_connection_state() -> None:
    import re

    # The private state named in the issue, and any private attribute of a host or a connector.
    reach_in = re.compile(r"\._runs\b|\._connections\b|\b(?:host|connector)\._[a-z]")
    offenders = [f"{path.name}:{n}" for path in sorted(HERE.parent.glob("*.py")) if path != HERE
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if reach_in.search(line)]
    assert offenders == [], "use the public API (fabric_jev.testing.worker_pid / open_connections) instead"


# ---------------------------------------------------------------- what checks look at, what plans replay on

class Provider:
    """Like the browser's Page: its own `snapshot()` is data, and it gives a source when asked."""

    def __init__(self, *snapshots: Snapshot) -> None:
        self.given: list[ScriptedSource] = []
        self._snapshots = snapshots

    async def snapshot(self) -> dict[str, Any]:
        return {"not": "a Snapshot"}

    def snapshot_source(self) -> ScriptedSource:
        self.given.append(ScriptedSource(*self._snapshots))
        return self.given[-1]


async def test_an_object_that_gives_a_snapshot_source_is_asked_once_and_its_source_kept() -> None:
    target = Provider(PAGE)
    await assert_(target, 'role=button name="Save changes"')
    await expect(target, "name=Agree").to_be_unchecked()
    assert len(target.given) == 1 and target.given[0].taken == 2


async def test_a_bound_target_writes_the_artifacts_of_its_failed_checks(tmp_path: Path) -> None:
    from fabric_jev.testing import bind_source, unbind_source

    class Opaque:  # neither a source nor a provider: only its binding makes it checkable
        pass

    target = Opaque()
    bind_source(target, ScriptedSource(PAGE), artifacts_dir=tmp_path)
    with pytest.raises(AssertionFailed):
        await assert_(target, 'role=button name="Save"', "save button")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["save-button-1.png", "save-button-1.snapshot.json",
                                                          "save-button-1.trace.json"]
    unbind_source(target)
    with pytest.raises(TypeError, match="cannot take snapshots of Opaque"):
        await assert_(target, "name=Save")


VERIFY = HERE.parent.parent / "examples" / "verify"


def drafts() -> Any:
    from fabric_jev.verification import MemoryChannels, MemoryElement

    return MemoryChannels([MemoryElement("Review notes", role="textbox", label="composer", editable=True)],
                          page_text="Review notes\nRun task", sample_ms=1)


async def test_plans_replay_on_channels_or_on_what_gives_them() -> None:
    from fabric_jev.testing import plan_checks, replay_plan

    outcomes = await replay_plan(drafts(), VERIFY / "plan.json", VERIFY / "dictionary.json")
    assert [(o.id, o.passed) for o in outcomes] == [("composer", True), ("no-error", True), ("run-label", True)]

    class Gives:
        def __init__(self) -> None:
            self.given: list[Any] = []

        def verification_channels(self) -> Any:
            self.given.append(drafts())
            return self.given[-1]

    target = Gives()
    for param in plan_checks(VERIFY / "plan.json", VERIFY / "dictionary.json"):
        await param.values[0].replay(target)
    # Fresh channels for each check, each check run as a step of its own.
    assert [[step.split(":")[0] for step in channels.steps] for channels in target.given] == [
        ["verify composer"], ["verify no-error"], ["verify run-label"]]
    with pytest.raises(TypeError, match="cannot replay a plan on int"):
        await replay_plan(42, VERIFY / "plan.json", VERIFY / "dictionary.json")  # type: ignore[arg-type]
