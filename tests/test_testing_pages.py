"""The plugin's jev_page in this suite: checks on a real page, verification plans as tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import PlanInvalid
from fabric_jev.assertions import AssertionFailed, added
from fabric_jev.testing import assert_, assert_eventually, load_plan, plan_checks, replay_plan
from fabric_jev.verification import Plan, dictionary_digest, parse_dictionary

pytestmark = [pytest.mark.anyio, pytest.mark.browser]
VERIFY = Path(__file__).resolve().parent.parent / "examples" / "verify"
DRAFTS = VERIFY / "page.html"


@pytest.mark.parametrize("check", plan_checks(VERIFY / "plan.json", VERIFY / "dictionary.json"))
async def test_each_check_of_the_reviewed_plan_is_a_test(jev_page: Any, check: Any) -> None:
    await jev_page.navigate(DRAFTS.as_uri())
    await check.replay(jev_page)


async def test_jev_page_comes_from_the_browser_distributions_own_entry_point(
        jev_page: Any, request: pytest.FixtureRequest) -> None:
    # The suite loads the browser's plugin by no other way (tests/conftest.py), and without it
    # jev_page is fabric-jev's stand-in, which skips or fails: a page here is the browser's.
    from fabric_jev_browser.page import Page

    by_entry_point = {getattr(plugin, "__name__", None): dist.project_name
                      for plugin, dist in request.config.pluginmanager.list_plugin_distinfo()}
    assert by_entry_point.get("fabric_jev_browser.pytest_plugin") == "fabric-jev-browser"
    assert isinstance(jev_page, Page)


def test_plan_checks_are_named_by_the_checks_ids() -> None:
    assert [p.id for p in plan_checks(VERIFY / "plan.json", VERIFY / "dictionary.json")] == \
           ["composer", "no-error", "run-label"]


def test_a_stale_plan_is_refused_before_any_test_runs(tmp_path: Path) -> None:
    changed = json.loads((VERIFY / "dictionary.json").read_text())
    changed["checks"][0]["description"] += " (edited)"
    with pytest.raises(PlanInvalid, match="digest mismatch"):
        load_plan(VERIFY / "plan.json", changed)
    not_ready = {"status": "incomplete", "plan": None, "reason": "coverage 0.4 is below 0.9"}
    with pytest.raises(PlanInvalid, match=r"not ready \(coverage 0.4"):
        load_plan(not_ready, VERIFY / "dictionary.json")


async def test_replay_plan_reports_every_check_pass_or_fail(jev_page: Any) -> None:
    dictionary = json.loads((VERIFY / "dictionary.json").read_text())
    dictionary["checks"][2]["assertion"] = {"kind": "textContains", "text": "Publish", "timeoutMs": 300}
    dictionary["checks"][2]["description"] = "Visible page text contains Publish"
    parsed = parse_dictionary(dictionary)
    plan = Plan(dictionary_digest(parsed), "the draft page", ("composer", "no-error", "run-label"),
                {"coverage": 0.98})
    await jev_page.navigate(DRAFTS.as_uri())
    with pytest.raises(AssertionError) as caught:
        await replay_plan(jev_page, plan, parsed)
    lines = str(caught.value).splitlines()
    assert lines[0] == "verification plan for 'the draft page': 2 of 3 checks passed"
    assert lines[1].startswith("  PASS composer   ") and lines[2].startswith("  PASS no-error   ")
    assert lines[3] == "  FAIL run-label  Visible page text contains Publish"
    assert lines[4] == "       expected: page text containing 'Publish'"
    outcomes = await replay_plan(jev_page, VERIFY / "plan.json", VERIFY / "dictionary.json")
    assert [o.passed for o in outcomes] == [True, True, True]


TODO = """<!doctype html><body>
<button id="add" onclick="this.insertAdjacentHTML('afterend', '<button>Undo</button>')">Add item</button>
</body>"""


async def test_a_failed_check_on_jev_page_shows_the_change_since_the_last_action(jev_page: Any, pages: Any) -> None:
    await jev_page.navigate(pages.add("/todo.html", TODO))
    await assert_(jev_page, 'name="Add item"')
    snap = await jev_page.snapshot()
    await jev_page.click(next(e for e in snap["elements"] if e["name"] == "Add item"))
    await assert_eventually(jev_page, added("name=Undo"))
    with pytest.raises(AssertionFailed) as caught:
        await assert_(jev_page, "role=listitem")
    assert 'since the last action: 1 added (button "Undo"), 0 removed, 0 modified' in str(caught.value)
