"""The eval report in a real headless Chromium: no console error, no request, the summary's numbers.

A screenshot of the report and the open times of a 100-line and a
10,000-line report are kept in test-results/eval-report/ (the open times are
recorded, not asserted: `fabric-jev bench eval` measures them; what is held
here is that the page draws the same bounded number of rows at any size).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import Pages
from tests.cli_support import ROOT
from tests.eval_support import Evaluated, evaluate_example, resolve, shown_matches

pytestmark = [pytest.mark.anyio, pytest.mark.browser]
ARTIFACTS = ROOT / "test-results" / "eval-report"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    return evaluate_example(tmp_path_factory.mktemp("eval-browser"))


class Watched:
    """What a page says and asks for while it loads: console errors, exceptions, requests."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        cdp, sid = page.cdp, page.session_id
        self._removers = [
            cdp.on("Runtime.consoleAPICalled", self._console, session_id=sid),
            cdp.on("Runtime.exceptionThrown", lambda m: self.errors.append(json.dumps(m["params"])[:300]),
                   session_id=sid),
            cdp.on("Log.entryAdded", self._log, session_id=sid),
            cdp.on("Network.requestWillBeSent", lambda m: self.requests.append(m["params"]["request"]["url"]),
                   session_id=sid)]

    def _console(self, message: dict[str, Any]) -> None:
        if message["params"]["type"] in ("error", "warning", "assert"):
            self.errors.append(json.dumps(message["params"]["args"])[:300])

    def _log(self, message: dict[str, Any]) -> None:
        entry = message["params"]["entry"]
        if entry["level"] in ("error", "warning"):
            self.errors.append(f"{entry['source']}: {entry['text']}")

    def close(self) -> None:
        for remove in self._removers:
            remove()


async def test_the_report_renders_with_no_console_error_and_shows_the_summarys_numbers(
        page: Any, pages: Pages, evaluated: Evaluated) -> None:
    url = pages.add("/eval/index.html", evaluated.page.read_text())
    await page.call("Log.enable")
    await page.call("Network.enable")
    watched = Watched(page)
    try:
        await page.navigate(url)
        assert await page.evaluate("window.reportReady === true")
    finally:
        watched.close()
    assert watched.errors == []
    assert watched.requests == [url]  # the page itself, nothing else
    summary = evaluated.summary
    shown = await page.evaluate("""Array.from(document.querySelectorAll('[data-k]')).map(e => ({
        pointer: e.dataset.k, kind: e.dataset.f, text: e.textContent,
        height: e.getAttribute('height'), scale: e.dataset.scale}))""")
    assert isinstance(shown, list) and len(shown) > 150
    for number in shown:
        value = resolve(summary, number["pointer"])
        if number["kind"] == "bar":
            assert abs(float(number["height"]) - value * float(number["scale"])) < 0.006, number
        else:
            assert shown_matches(number["text"], number["kind"], value), (number, value)

    # The worst lines: the summary's, most confident first, for each cell.
    rows = await page.evaluate("""Array.from(document.querySelectorAll('#worst-table tbody tr')).map(tr => ({
        cell: +tr.dataset.cell, line: +tr.dataset.line, confidence: +tr.querySelector('.conf').dataset.v}))""")
    assert isinstance(rows, list)
    for index, cell in enumerate(summary["cells"]):
        mine = [(r["line"], r["confidence"]) for r in rows if r["cell"] == index]
        assert mine[: len(cell["worst"])] == [(w["line"], w["confidence"]) for w in cell["worst"]]
        assert len(mine) == cell["lines"] - cell["passed"]

    # Filters narrow the table to what the results say.
    results = [json.loads(x) for x in (evaluated.out / "results.jsonl").read_text().splitlines()]
    failed = [r for r in results if "bad" not in r and not r["passed"]]
    count = await page.evaluate("""(() => { const s = document.getElementById('f-field'); s.value = 'urgent';
        s.dispatchEvent(new Event('change')); return document.querySelectorAll('#worst-table tbody tr').length; })()""")
    assert count == sum("urgent" in [f for f, v in r["fields"].items() if not v["ok"]] for r in failed)
    count = await page.evaluate("""(() => { const t = document.getElementById('f-text'); t.value = 'OUTAGE';
        t.dispatchEvent(new Event('input')); return document.querySelectorAll('#worst-table tbody tr').length; })()""")
    assert count == sum("outage" in json.dumps(r["input"]).lower() and "urgent" in
                        [f for f, v in r["fields"].items() if not v["ok"]] for r in failed) > 0
    await page.evaluate("""(() => { document.getElementById('f-text').value = ''; const s =
        document.getElementById('f-field'); s.value = ''; s.dispatchEvent(new Event('change')); })()""")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report.png").write_bytes(await page.screenshot())
    assert (ARTIFACTS / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_report_of_ten_thousand_lines_draws_as_much_as_one_of_a_hundred(
        page: Any, tmp_path: Path) -> None:
    from fabric_jev.benchmarks.evals import synthetic_summary
    from fabric_jev.evals import write_report
    from fabric_jev.evals.report import ROWS_SHOWN

    opened: dict[int, list[float]] = {}
    drawn: dict[int, tuple[int, int]] = {}
    for size in (100, 10_000):
        summary, records = synthetic_summary(size)
        written = write_report(summary, tmp_path / str(size), records, charts=False)
        for _ in range(3):
            await page.navigate(written.page.as_uri())
            ready = await page.evaluate("window.reportReadyAt")
            assert isinstance(ready, int | float)
            opened.setdefault(size, []).append(float(ready))
        rows = await page.evaluate("document.querySelectorAll('#worst-table tbody tr').length")
        nodes = await page.evaluate("document.getElementsByTagName('*').length")
        assert isinstance(rows, int) and isinstance(nodes, int)
        drawn[size] = (rows, nodes)
        failed = sum(c.lines - c.passed for c in summary.cells)
        shown = await page.evaluate("document.getElementById('f-count').textContent")
        assert shown == f"{failed} failed lines match" + (f" ({ROWS_SHOWN} shown)" if failed > ROWS_SHOWN else "")
    assert drawn[10_000][0] == ROWS_SHOWN  # at any size the first page of rows, not every row
    assert drawn[10_000][1] <= 1.5 * drawn[100][1]
    medians = {size: sorted(times)[1] for size, times in opened.items()}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "open-times.json").write_text(json.dumps({
        "open_ms_median_of_3": medians, "ratio_10000_to_100": medians[10_000] / medians[100],
        "dom_elements": {size: nodes for size, (_, nodes) in drawn.items()}}, indent=1))
