"""What `fabric-jev run` of a trivial program loads: only what the run uses, and no pydantic schema
(docs/performance.md, "Command start-up"). Its time is the benchmark's (`fabric-jev bench cli`), never asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Loaded only by what a trivial run never does: refusing a value, asking an approver, asking
#: Jev, a status, a profile, another evaluator kind, a connector, another command.
NOT_LOADED = (
    "jsonschema", "httpx", "numpy", "tree_sitter", "rich", "uvicorn", "fabric_jev_browser",
    "fabric_jev.contract.evaluation", "fabric_jev.approval.question", "fabric_jev.redaction",
    "fabric_jev.contract.observe", "fabric_jev.host.status", "fabric_jev.host.observers",
    "fabric_jev.evaluators.profile", "fabric_jev.evaluators.cassette", "fabric_jev.evaluators.fixture",
    "fabric_jev.evaluators.credentials", "fabric_jev.evaluators.http", "fabric_jev.approval.classifier",
    "fabric_jev.plugins", "fabric_jev.cli.batch", "fabric_jev.cli.learning", "fabric_jev.cli.verification",
    # A verdict from the cache runs no compiler: neither its runner nor its slots, nor the temporary
    # folder it writes the program to; the local evaluator's question kinds load with its first answer;
    # the route tables when a route is chosen (docs/performance.md, "Start-up of run").
    "tempfile", "fabric_jev.typecheck.tsgo", "fabric_jev.typecheck.slots", "fabric_jev.questions",
    "fabric_jev.evaluators.routes", "fabric_jev.evaluators.llm_routes",
)
#: What a trivial TypeScript run loads besides: the parser that erases its types (whose grammar package
#: finds its library through importlib.resources, which loads tempfile).
ERASING = ("tree_sitter", "tempfile")


TRIVIAL = {"name": "trivial", "inputSchema": {},
           "outputSchema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}}


def test_a_trivial_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    program = tmp_path / "trivial.json"
    program.write_text(json.dumps({**TRIVIAL, "code": "return {n: 1}"}))
    ran, loaded, built = _run_twice(program, NOT_LOADED, tmp_path)
    assert ran == "0 True"
    assert loaded == "[]"
    assert built == "[]"


def test_a_trivial_typescript_run_loads_only_its_type_eraser_besides(tmp_path: Path) -> None:
    program = tmp_path / "trivial.ts"
    program.write_text(f"/* @program\n{json.dumps(TRIVIAL)}\n*/\nconst n: number = 1;\nreturn {{n}};\n")
    ran, loaded, built = _run_twice(program, tuple(m for m in NOT_LOADED if m not in ERASING), tmp_path)
    assert ran == "0 True"
    assert loaded == "[]"
    assert built == "[]"


def _run_twice(program: Path, not_loaded: tuple[str, ...], tmp_path: Path) -> list[str]:
    """`fabric-jev run PROGRAM --quiet` in a fresh interpreter, twice: whether it completed, which of
    `not_loaded` the second run loaded, and which models it built."""
    code = "\n".join([
        "import contextlib, io, sys",
        "from fabric_jev.cli import main",
        "out = io.StringIO()",
        "with contextlib.redirect_stdout(out):",
        f"    code = main(['run', {str(program)!r}, '--evaluator', 'local', '--quiet'])",
        "print(code, 'completed' in out.getvalue())",
        f"print([m for m in {not_loaded!r} if m in sys.modules])",
        # A model's validator and serializer are built on first use: a trivial run reads its program
        # and writes its envelope without them (contract/wire_plain.py, Program's plain reader).
        "from pydantic import BaseModel",
        "def kinds(cls):",
        "    for sub in cls.__subclasses__():",
        "        yield sub",
        "        yield from kinds(sub)",
        "print(sorted({k.__qualname__ for k in kinds(BaseModel) if k.__pydantic_complete__}))",
    ])
    # The type check's verdict comes from its disk cache on every run but the first: the first compiles
    # (and reads the code with tree-sitter). The cache is this test's own, warmed by a first run, so
    # what is measured is the everyday run whatever ran before it on this machine.
    env = {**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")}
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, env=env)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          env=env)
    lines: list[str] = done.stdout.splitlines()
    assert len(lines) == 3, done.stderr
    return lines


def test_the_run_command_ending_its_own_process_writes_what_it_wrote_before(tmp_path: Path) -> None:
    # `fabric-jev run` in its own process ends with os._exit once its output is flushed: the whole
    # envelope still arrives through a pipe, and a closed stdout is still an internal error (exit 3).
    program = tmp_path / "trivial.json"
    program.write_text(json.dumps({**TRIVIAL, "code": "return {n: 1}"}))
    env = {**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-m", "fabric_jev", "run", str(program), "--evaluator", "local", "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == {"n": 1}
    assert done.stdout.endswith("}\n")
    closed = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=60, env=env,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 3
    assert closed.stderr.startswith("fabric-jev: internal error: ")
    assert "Traceback" not in closed.stderr
