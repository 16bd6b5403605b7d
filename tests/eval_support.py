"""An eval of the example with bad lines, its report, and how a report's numbers are read back."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio

from tests.cli_support import ROOT

EXAMPLE = ROOT / "examples" / "eval"
BAD_LINES = ['{"input": {"text": "cut off"', '{"input": {"text": "no label"}}',
             '{"input": {"text": "typo"}, "expected": {"route": "biling"}}']


@dataclass(frozen=True)
class Evaluated:
    out: Path
    report: Path

    @property
    def summary(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.out / "summary.json").read_text())
        return loaded

    @property
    def page(self) -> Path:
        return self.report / "index.html"


def evaluate_example(folder: Path) -> Evaluated:
    """The example's 40 tickets and three bad lines, with both wordings, through the fixture evaluator."""
    from fabric_jev.evals import read_results, run_eval, write_report

    data = folder / "tickets.jsonl"
    data.write_text((EXAMPLE / "tickets.jsonl").read_text() + "\n".join(BAD_LINES) + "\n")
    out, report = folder / "out", folder / "report"

    async def main() -> None:
        summary = await run_eval(EXAMPLE / "triage.js", data, evaluators=[f"fixture:{EXAMPLE / 'fixture.json'}"],
                                 variants={"deadline": EXAMPLE / "triage-deadline.js"}, out=out)
        write_report(summary, report, read_results(out / "results.jsonl"))

    anyio.run(main)
    return Evaluated(out, report)


def resolve(document: Any, pointer: str) -> Any:
    """A JSON pointer (RFC 6901) into a JSON document."""
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        document = document[int(key)] if isinstance(document, list) else document[key]
    return document


def shown_matches(text: str, kind: str, value: Any) -> bool:
    """Whether a number as the page shows it is `value`, to the precision it is shown with."""
    text = text.strip()
    if value is None:
        return text == "–"
    if kind == "p" and text == "< 0.001":
        return bool(value < 0.001)
    number = float(re.sub(r"[^0-9.+\-eE]", "", text))
    half = {"pct": 0.0005, "f3": 0.0005, "ms": 0.00005, "s": 0.005, "p": 0.0005, "pts": 0.0005, "int": 0.0,
            "g": 1e-6}[kind]
    scaled = {"pct": number / 100, "pts": number / 100, "ms": number / 1000}.get(kind, number)
    return math.isclose(scaled, float(value), abs_tol=half + 1e-9)


class _Numbers(HTMLParser):
    """Every element of a report that carries a number: (pointer, format, text, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, Any]] = []
        self._open: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "data-k" in a:
            entry = {"pointer": a["data-k"], "kind": a["data-f"], "text": "", "tag": tag, "attrs": a}
            self.found.append(entry)
            self._open.append(entry)
        elif self._open:
            self._open.append({})

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for entry in self._open:
            if entry:
                entry["text"] += data


def numbers_in(page_html: str) -> list[dict[str, Any]]:
    parser = _Numbers()
    parser.feed(page_html)
    return parser.found
