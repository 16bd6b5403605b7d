"""A reviewed verification plan (verify/, a copy of ../verify/), each check of it a test: zero model calls."""

from pathlib import Path

import pytest

from fabric_jev.testing import plan_checks

VERIFY = Path(__file__).parent / "verify"


@pytest.mark.anyio
@pytest.mark.parametrize("check", plan_checks(VERIFY / "plan.json", VERIFY / "dictionary.json"))
async def test_the_draft_review_page(jev_page, check):
    await jev_page.navigate((VERIFY / "page.html").as_uri())
    await check.replay(jev_page)
