"""The one terminal-safe renderer: a program's text, a file name and a compiler's diagnostics reach
a person's terminal escaped (OSC 52, CSI 2J, C1 controls, bidi overrides), and one progress line
stays one row, so it cannot wrap into rows that pass for a question."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from fabric_jev.terminal import fit_row, one_line, terminal_safe
from tests.cli_support import cli
from tests.conftest import program
from tests.pty_support import Terminal

#: OSC 52 (sets the clipboard), CSI 2J (clears the screen), a one-byte C1 CSI, a bidi override.
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e"
RAW = re.compile("[\x1b\x07\x9b\u202e]")


def test_the_renderer_escapes_every_steering_character_and_keeps_plain_text() -> None:
    assert terminal_safe("plain text, ünïcode 中文") == "plain text, ünïcode 中文"
    assert terminal_safe(HOSTILE) == "\\u001b]52;c;ZXZpbA==\\u0007\\u001b[2J\\u009b31m\\u202e"
    assert terminal_safe("ref\n") == "ref\\u000a"
    assert one_line("a\n  b\u2028c") == "a b c"  # U+2028 is whitespace to str.split
    assert one_line("", "(none)") == "(none)"


def test_fit_row_cuts_by_cells_so_a_line_never_wraps() -> None:
    from rich.cells import cell_len

    assert fit_row("short", 80) == "short"
    cut = fit_row("x" * 200, 80)
    assert cell_len(cut) == 79 and cut.endswith("…")
    wide = fit_row("中" * 100, 80)
    assert cell_len(wide) <= 79 and wide.endswith("…")


def _hostile_program(tmp_path: Path, suffix: str = ".json") -> str:
    code = f"const m = await import({json.dumps(HOSTILE)});\nreturn 1;"
    path = tmp_path / f"hostile{suffix}"
    path.write_text(json.dumps(program(code, name="hostile", outputSchema={"type": "number"})))
    return str(path)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"FABRIC_JEV_HOME": str(tmp_path / "home")}


def test_check_prints_a_compiler_diagnostic_quoting_the_program_escaped(tmp_path: Path,
                                                                        home: dict[str, str]) -> None:
    done = cli("check", _hostile_program(tmp_path), env=home)
    assert done.returncode == 1, done.stderr
    assert "\\u001b]52" in done.stdout  # the specifier is quoted, escaped
    assert not RAW.search(done.stdout + done.stderr)


def test_run_launch_error_and_batch_dry_run_escape_the_diagnostic(tmp_path: Path, home: dict[str, str]) -> None:
    path = _hostile_program(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"typecheck": {"javascript": "error"}}))
    run = cli("run", path, "--config", str(config), env=home)
    assert run.returncode == 2 and "launch rejected" in run.stderr
    assert "\\u001b]52" in run.stderr and not RAW.search(run.stderr)
    inputs = tmp_path / "inputs.jsonl"
    inputs.write_text("null\n")
    warn = tmp_path / "warn.json"
    warn.write_text(json.dumps({"typecheck": {"javascript": "warn"}}))
    dry = cli("batch", path, "--inputs", str(inputs), "--dry-run", "--config", str(warn), env=home)
    assert "type check (warn)" in dry.stderr and "\\u001b]52" in dry.stderr
    assert not RAW.search(dry.stderr)


def test_a_program_file_name_reaches_standard_error_escaped(tmp_path: Path, home: dict[str, str]) -> None:
    name = str(tmp_path / "evil\x1b]52;c;eA==\x07\u202e.json")
    for command in ("check", "run"):
        done = cli(command, name, env=home)
        assert done.returncode == 2
        assert "evil\\u001b]52" in done.stderr and not RAW.search(done.stderr)


EMITTER = """
await program.emit(input.pad);
return 1;
"""


def test_a_progress_line_padded_to_the_edge_stays_one_row(tmp_path: Path) -> None:
    """A line padded with spaces to the terminal's width would wrap, and its next rows would
    start at the left edge and read as a question fabric-jev asks."""
    forged = "fabric-jev: a program asks to use a capability"
    pad = "x" + " " * 60 + forged + " " * 40 + "  program     trusted" + " " * 60 + "Allow? [y/a/n/N]"
    (tmp_path / "p.json").write_text(json.dumps(program(
        EMITTER, name="emitter", outputSchema={"type": "number"},
        inputSchema={"type": "object", "properties": {"pad": {"type": "string"}}, "required": ["pad"]})))
    with Terminal([sys.executable, "-m", "fabric_jev.cli", "run", str(tmp_path / "p.json"),
                   "--input-json", json.dumps({"pad": pad})],
                  env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")}, columns=80) as term:
        code, envelope, screen = term.finish()
    assert code == 0 and envelope["events"][0]["value"] == pad  # the envelope keeps the text
    rows = [row for row in screen.replace("\r\n", "\n").split("\n") if row]
    assert rows and all(len(row) < 80 for row in rows), rows
    assert forged not in screen and "Allow?" not in screen
