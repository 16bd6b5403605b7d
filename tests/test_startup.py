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
)


def test_a_trivial_run_loads_only_what_it_uses(tmp_path: Path) -> None:
    program = tmp_path / "trivial.json"
    program.write_text(json.dumps({"name": "trivial", "code": "return {n: 1}", "inputSchema": {},
                                   "outputSchema": {"type": "object", "required": ["n"],
                                                    "properties": {"n": {"type": "integer"}}}}))
    code = "\n".join([
        "import contextlib, io, sys",
        "from fabric_jev.cli import main",
        "out = io.StringIO()",
        "with contextlib.redirect_stdout(out):",
        f"    code = main(['run', {str(program)!r}, '--evaluator', 'local', '--quiet'])",
        "print(code, 'completed' in out.getvalue())",
        f"print([m for m in {NOT_LOADED!r} if m in sys.modules])",
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
    ran, loaded, built = done.stdout.splitlines()
    assert ran == "0 True", done.stderr
    assert loaded == "[]"
    assert built == "[]"
