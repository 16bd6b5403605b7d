"""Smart assertions against real Chromium pages that change over time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabric_jev_browser import Page
from fabric_jev_browser.checks import PageSource

from fabric_jev.assertions import (
    AssertionFailed,
    EscalationPolicy,
    SnapshotDiff,
    check,
    exists,
    is_enabled,
    is_pressed,
    value_equals,
)
from tests.browser_support import Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]

LATE_BUTTON = """<!doctype html><body>
<button id="save" disabled>Save</button>
<script>
  window.start = () => setTimeout(() => { document.getElementById('save').disabled = false; }, 300);
</script></body>"""


async def test_button_enabled_after_300ms(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/late.html", LATE_BUTTON))
    source = PageSource(page)
    # Looked at before the timer starts: on a loaded machine a snapshot can take 300 ms.
    first = await check(is_enabled("role=button name=Save"), "Save enabled").once(source)
    assert not first.passed and first.reason == "state_mismatch"
    await page.evaluate("start()")
    result = await check(is_enabled("role=button name=Save"), "Save enabled", required=True).eventually(
        source, timeout=5, poll=0.05)
    # How many tries saw it disabled depends on how fast snapshots are; the last one passed.
    assert result.passed and result.attempts[-1].action == "done"


async def test_toggle(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/toggle.html", """<!doctype html><body>
      <button aria-pressed="false" onclick="this.setAttribute('aria-pressed',
        this.getAttribute('aria-pressed') === 'true' ? 'false' : 'true')">Bold</button></body>"""))
    source = PageSource(page)
    before = await source.snapshot()
    assert not (await check(is_pressed("name=Bold"), "bold on").once(source)).passed
    await page.click(next(e for e in before.elements if e.name == "Bold").model_dump())
    assert (await check(is_pressed("name=Bold"), "bold on").eventually(source, timeout=5, poll=0.05)).passed
    diff = SnapshotDiff.between(before, await source.snapshot())
    assert diff.count_modified("pressed", role="button") == 1 and diff.counts()["added"] == 0


async def test_overlay_occludes_then_disappears(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/overlay.html", """<!doctype html><body style="margin:0">
      <button>Pay</button>
      <div id="modal" style="position:fixed;inset:0;background:rgba(0,0,0,.4)"></div>
      <script>window.dismiss = () => setTimeout(() => document.getElementById('modal').remove(), 200);</script>
      </body>"""))
    source = PageSource(page)
    blocked = await check(exists("name=Pay"), "Pay usable").once(source)
    assert blocked.reason == "match_occluded" and "div#modal" in blocked.actual
    await page.evaluate("dismiss()")
    assert (await check(exists("name=Pay"), "Pay usable").eventually(source, timeout=5, poll=0.05)).passed


async def test_offscreen_target_is_scrolled_into_view(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/far.html", """<!doctype html><body>
      <div style="height:4000px"></div><button>Far away</button></body>"""))
    source = PageSource(page)
    assert (await check(exists('name="Far away"'), "far").once(source)).reason == "match_offscreen"
    result = await check(exists('name="Far away"'), "far").eventually(source, timeout=5, poll=0.05)
    assert result.passed and "scroll" in [a.action for a in result.attempts]
    assert await page.evaluate("window.scrollY") > 3000


async def test_a_page_that_keeps_mutating_is_exhausted(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/busy.html", """<!doctype html><body><button>Save</button><p id="t"></p>
      <script>setInterval(() => { document.getElementById('t').textContent = Date.now(); }, 10);</script>
      </body>"""))
    source = PageSource(page)
    await source.snapshot()  # installs the mutation observer
    # Wait (on an event, not a clock) until the page has mutated since then, so
    # the observer has evidence; a fresh observer with none is not penalised.
    await page.evaluate("new Promise(done => new MutationObserver((_, o) => { o.disconnect(); done(); })"
                        ".observe(document.body, {subtree: true, childList: true, characterData: true}))",
                        await_promise=True)
    result = await check(exists("name=Save"), "busy").eventually(source, timeout=10, poll=0.1,
                                                                 min_confidence=0.6, max_retries=3)
    assert result.reason == "snapshot_exhausted" and len(result.attempts) == 3
    assert all("DOM changed" in a.detail for a in result.attempts)


async def test_a_password_never_shows_its_value(page: Page, pages: Pages, tmp_path: Path) -> None:
    await page.navigate(pages.add("/login.html", """<!doctype html><body>
      <label for="pw">Password</label><input id="pw" type="password" value="correct-horse-battery">
      </body>"""))
    source = PageSource(page)
    snap = await source.snapshot()
    assert "correct-horse" not in snap.model_dump_json()
    with pytest.raises(AssertionFailed) as err:
        await check(value_equals("name=Password", "correct-horse-battery"), "password typed",
                    required=True, artifacts_dir=tmp_path).once(source)
    result = err.value.result
    assert result.reason == "state_mismatch" and "value=[redacted]" in result.actual
    texts = [str(err.value), json.dumps(result.trace_event())]
    texts += [p.read_text() for p in tmp_path.glob("*.json")]
    assert all("correct-horse" not in t for t in texts)
    assert (tmp_path / "password-typed-1.png").read_bytes().startswith(b"\x89PNG")


async def test_reload_through_the_page_source_only_when_allowed(page: Page, pages: Pages) -> None:
    # The Ready button exists only after a reload (the first load leaves a mark in sessionStorage).
    await page.navigate(pages.add("/reload.html", """<!doctype html><body><button>Other</button><script>
      if (sessionStorage.getItem('seen')) document.body.insertAdjacentHTML('beforeend', '<button>Ready</button>');
      sessionStorage.setItem('seen', '1');</script></body>"""))
    policy = EscalationPolicy(max_reloads=1, reload_after=1)
    refused = await check(exists("name=Ready"), "ready", policy=policy).eventually(
        PageSource(page), timeout=3, poll=0.05)
    reloads = [a for a in refused.attempts if a.action == "reload"]
    assert not refused.passed and [a.detail for a in reloads] == ["refused by the source"]
    allowed = await check(exists("name=Ready"), "ready", policy=policy).eventually(
        PageSource(page, allow_reload=True), timeout=10, poll=0.05)
    assert allowed.passed, allowed.message()
    assert [a.detail for a in allowed.attempts if a.action == "reload"] == ["reloaded"]


# ---------------------------------------------------------------- one waiting rule (fake source: tests/test_waiting_deadline.py)


async def test_the_deadline_edge_a_button_at_95_percent_of_the_default_timeout(page: Page, pages: Pages) -> None:
    # The seed's defaults (10 s, 0.25 s): the schedule's own looks are at 0, 0.25, ... 5.2 and
    # 7.7 s, and the last one at 10 s. Save appears at 9.5 s: only the look at the deadline sees it,
    # and by then the page has been quiet for long enough to be judged.
    await page.navigate(pages.add("/edge.html", """<!doctype html><body><button>Cancel</button><script>
      window.start = () => setTimeout(() => document.body.insertAdjacentHTML('beforeend',
        '<button>Save</button>'), 9500);</script></body>"""))
    source = PageSource(page)
    await page.evaluate("start()")
    result = await check(exists("name=Save"), "Save shown").eventually(source)
    assert result.passed, result.message()
    # The eight looks of the schedule before 9.5 s failed (the first may find the page just loaded
    # and not trusted yet); the one at 10 s found it.
    assert "no_match" in [a.reason for a in result.attempts[:-1]]
    assert len(result.attempts) >= 9 and result.attempts[-1].action == "done"


async def test_the_loading_shell_renders_its_button_later_and_is_waited_for(page: Page, pages: Pages) -> None:
    # "Loading…", quiet, no controls (confidence 0.6, under the default 0.7): not judged, looked at
    # again until the button renders 1.5 s later — never snapshot_exhausted.
    await page.navigate(pages.add("/shell.html", """<!doctype html><body><p id="s">Loading…</p><script>
      window.start = () => setTimeout(() => { document.getElementById('s').remove();
        document.body.insertAdjacentHTML('beforeend', '<button>Continue</button>'); }, 1500);
      </script></body>"""))
    source = PageSource(page)
    await page.evaluate("start()")
    result = await check(exists("name=Continue"), "Continue shown").eventually(source)
    assert result.passed, result.message()
    low = [a for a in result.attempts if a.reason == "low_confidence"]
    assert low and all("no interactive elements" in a.detail or "nearly empty" in a.detail for a in low)
    assert "snapshot_exhausted" not in [a.reason for a in result.attempts]
