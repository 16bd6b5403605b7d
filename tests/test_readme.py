"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_python_example_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    [snippet] = re.findall(r"```python\n(.*?)```", readme, re.S)
    done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed 42"


def test_readme_quick_start_names_the_two_scripts() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/demo" in readme and "./scripts/test" in readme
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec ./scripts/test")
