"""`calibrate --report` without the report extra: the text and JSON report are written, the
missing PNGs are named with the extra that draws them. A real command in an environment
without matplotlib."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import OPTIONAL, cli

LABELS = [{"state": f"ticket {n}", "question": {"type": "noul", "instructions": "Is it urgent?"},
           "label": n % 2 == 0} for n in range(8)]


def test_calibrate_report_without_matplotlib_writes_the_text_and_json(tmp_path: Path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(row) + "\n" for row in LABELS))
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"answers": {"q": {"noul": 0.7}}}))
    report = tmp_path / "report"
    done = cli("calibrate", str(labels), "--evaluator", f"fixture:{fixture}", "--report", str(report),
               bare=tmp_path / "bare", without=(*OPTIONAL, "matplotlib", "mpl_toolkits", "pylab"))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == ("calibrate: no reliability.png or coverage.png: PNG reports need "
                                            "matplotlib: pip install 'fabric-jev[report]'")
    assert sorted(p.name for p in report.iterdir()) == ["answers.jsonl", "report.json", "report.txt"]
    data = json.loads((report / "report.json").read_text())
    assert data["examples"] == 8 and data["types"]["noul"]["examples"] == 8
    text = (report / "report.txt").read_text()
    assert text.startswith("calibrate: 8 examples") and "noul         8 examples  accuracy  50 %" in text
    assert done.stdout.startswith(text) and f"wrote {report / 'report.txt'}" in done.stdout
