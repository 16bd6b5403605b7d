"""A browser check on a real headless Chromium (jev_page), with assertions that explain failures."""

from pathlib import Path

import pytest

from fabric_jev.testing import assert_, check_done, expect

PAGE = (Path(__file__).parent / "page.html").as_uri()


async def element(page, name):
    snapshot = await page.snapshot()
    return next(e for e in snapshot["elements"] if e["name"] == name)


@pytest.mark.anyio
async def test_a_draft_can_be_saved_once_it_has_a_title(jev_page):
    await jev_page.navigate(PAGE)
    await expect(jev_page, 'role=button name="Save"').to_be_disabled()

    await jev_page.type("Quarterly report", target=await element(jev_page, "Title"))
    await assert_(jev_page, 'role=textbox name="Title" value="Quarterly report"')
    await expect(jev_page, 'role=button name="Save"').to_be_enabled()

    await jev_page.click(await element(jev_page, "Save"))
    await check_done('role=status text="Saved"', "draft saved").eventually(jev_page, timeout=5)
