"""A four-check dictionary compiled once and replayed against a real page, with zero model calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fabric_jev_browser import Page
from fabric_jev_browser.verification import BrowserChannels

from fabric_jev import FixtureEvaluator
from fabric_jev.verification import Observation, VerificationFailed, compile_verification, run_verification
from tests.browser_support import Launched, Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]
ROOT = Path(__file__).resolve().parent.parent

PAGE = """<!doctype html><body>
<div contenteditable="true" aria-label="composer">Review notes</div>
<button>Run task</button>
<p id="status">Draft saved</p>
</body>"""

DICTIONARY = {"id": "draft-review", "version": "1", "checks": [
    {"id": "composer", "description": "The composer is editable and says exactly Review notes",
     "assertion": {"kind": "see", "target": "composer", "options": {"editable": True, "text": "Review notes"}}},
    {"id": "no-error", "description": "Model no longer available stays absent for a moment",
     "assertion": {"kind": "notSee", "target": "Model no longer available", "timeoutMs": 400}},
    {"id": "run-label", "description": "Visible page text contains Run task",
     "assertion": {"kind": "textContains", "text": "Run task", "timeoutMs": 2000}},
    {"id": "draft", "description": "The composer draftText equals Review notes",
     "assertion": {"kind": "observe", "observation": {"id": "composer", "version": "1"},
                   "path": ["draftText"], "predicate": {"kind": "equals", "value": "Review notes"},
                   "timeoutMs": 2000}},
]}
INTENT = ("Verify all four: editable composer says exactly Review notes; Model no longer available stays "
          "absent; visible page text contains Run task; composer draftText equals Review notes.")


def composer_reader(page: Page) -> Observation:
    # A reviewed, read-only projection of the page: what a test author binds by name.
    async def read(cancel: anyio.Event) -> Any:
        return await page.evaluate(
            "({draftText: document.querySelector('[aria-label=composer]').innerText})")

    return Observation("1", read)


async def test_compile_once_replay_three_times_with_zero_model_calls(page: Page, pages: Pages) -> None:
    evaluator = FixtureEvaluator({"answers": {"coverage": {"noul": 0.98},
                                              **{f"check_{i}": {"noul": 0.97} for i in range(4)}}})
    compiled = await compile_verification(INTENT, DICTIONARY, evaluator)
    assert compiled.status == "ready" and compiled.plan is not None and evaluator.calls == 1
    await page.navigate(pages.add("/draft.html", PAGE))
    channels = BrowserChannels(page)
    observations = {"composer": composer_reader(page)}
    for _ in range(3):
        result = await run_verification(compiled.plan, DICTIONARY, observations, channels)
        assert result.status == "passed"
        assert result.check_ids == ("composer", "no-error", "run-label", "draft")
    assert evaluator.calls == 1  # replay made no model call
    assert len(channels.steps) == 12

    # The same plan against a page that changed: it fails, it does not heal.
    await page.evaluate("document.querySelector('[aria-label=composer]').innerText = 'Review'")
    with pytest.raises(VerificationFailed) as err:
        await run_verification(compiled.plan, DICTIONARY, observations, channels)
    assert err.value.check_id == "composer" and "state_mismatch" in err.value.actual
    assert evaluator.calls == 1


def test_cli_verify_run_against_a_live_page(chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    url = pages.add("/draft-cli.html", PAGE)
    static = {**DICTIONARY, "checks": DICTIONARY["checks"][:3]}  # the CLI binds no observation readers
    (tmp_path / "d.json").write_text(json.dumps(static))
    (tmp_path / "f.json").write_text(json.dumps({"answers": {"coverage": {"noul": 0.98},
                                                             **{f"check_{i}": {"noul": 0.97} for i in range(3)}}}))
    compiled = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "verify", "compile", str(tmp_path / "d.json"),
                               "--intent", INTENT, "--evaluator", f"fixture:{tmp_path / 'f.json'}"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert compiled.returncode == 0, compiled.stderr
    (tmp_path / "plan.json").write_text(json.dumps(json.loads(compiled.stdout)["plan"]))
    done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "verify", "run", str(tmp_path / "d.json"),
                           "--plan", str(tmp_path / "plan.json"), "--url", url, "--ws-url", chromium.ws_url],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "passed"


# ---------------------------------------------------------------- the deadline edge (fake source: tests/test_waiting_deadline.py)


class Reveals:
    """The page's source, which shows the Retry button at the first look made at or after `at` seconds
    from the first: the element appears at that moment of the wait however busy the machine is
    (a timer in the page would race the renderer's scheduling)."""

    def __init__(self, page: Page, at: float) -> None:
        from fabric_jev_browser.checks import PageSource

        self.inner, self.page, self.at = PageSource(page), page, at
        self.looks: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def snapshot(self) -> Any:
        import time

        now = time.monotonic()
        self.looks.append(now - self.looks[0] if self.looks else 0.0)
        if self.looks[-1] >= self.at and len(self.looks) > 1:
            await self.page.evaluate("document.getElementById('retry').hidden = false")
        return await self.inner.snapshot()


class RevealingChannels(BrowserChannels):
    revealing: Reveals | None = None

    @property
    def source(self) -> Any:
        assert self.revealing is not None
        return self.revealing


LATE = """<!doctype html><body><button>Other</button><button id="retry" hidden>Retry</button></body>"""


async def test_see_passes_when_its_target_appears_at_95_percent_of_timeout_ms(page: Page, pages: Pages) -> None:
    # see with timeoutMs 3000 once gave up at 2.48 s; its last look is now at 3 s.
    await page.navigate(pages.add("/late-see.html", LATE))
    channels = RevealingChannels(page)
    channels.revealing = Reveals(page, 0.95 * 3.0)
    from fabric_jev.verification.dictionary import SeeOptions

    ok, actual = await channels.see("Retry", SeeOptions(timeout_ms=3000))
    assert ok, actual
    # Seen by the look at the deadline (the one before it was earlier than 95%).
    assert channels.revealing.looks[-1] >= 2.95 and channels.revealing.looks[-2] < 2.85


async def test_not_see_samples_at_the_end_of_its_window(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/late-notsee.html", LATE))
    channels = RevealingChannels(page, sample_ms=200)
    channels.revealing = Reveals(page, 0.95 * 3.0)
    ok, actual = await channels.not_see("Retry", 3000)
    assert not ok and "was visible" in actual
    assert channels.revealing.looks[-1] >= 2.95
