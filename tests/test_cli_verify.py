"""`verify compile` output feeds `verify run --plan` as it is; the examples/verify set works offline."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio
import pytest

from tests.browser_support import Launched, Pages
from tests.cli_support import ROOT, cli
from tests.conftest import wait_gone

EXAMPLE = ROOT / "examples" / "verify"
INTENT = ("The draft review page shows the editable composer with Review notes, no model error, "
          "and the Run task button.")


def _compile() -> str:
    done = cli("verify", "compile", str(EXAMPLE / "dictionary.json"), "--intent", INTENT,
               "--evaluator", f"fixture:{EXAMPLE / 'fixture.json'}")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_example_compiles_offline_to_the_checked_in_plan() -> None:
    assert json.loads(_compile()) == json.loads((EXAMPLE / "plan.json").read_text())


@pytest.mark.browser
def test_compile_output_feeds_verify_run_directly(chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    url = pages.add("/verify-example.html", (EXAMPLE / "page.html").read_text())
    (tmp_path / "compiled.json").write_text(_compile())
    done = cli("verify", "run", str(EXAMPLE / "dictionary.json"), "--plan", str(tmp_path / "compiled.json"),
               "--url", url, "--ws-url", chromium.ws_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "passed"
    assert json.loads(done.stdout)["checkIds"] == ["composer", "no-error", "run-label"]


@pytest.mark.browser
def test_verify_run_launch_starts_chromium_itself_and_leaves_nothing_behind(pages: Pages, tmp_path: Path) -> None:
    url = pages.add("/verify-launch.html", (EXAMPLE / "page.html").read_text())
    # A temporary folder of its own: the Chromium it launches makes its profile there, apart from
    # every other Chromium on the machine.
    # (Short: Chromium's socket paths inside it must stay under the kernel's 108 bytes.)
    private = Path(tempfile.mkdtemp(prefix="fjv-"))
    done = cli("verify", "run", str(EXAMPLE / "dictionary.json"), "--plan", str(EXAMPLE / "plan.json"),
               "--url", url, "--launch", env={"TMPDIR": str(private)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "passed"
    # Its Chromium was closed: the profile folder it made is gone, and none of its processes lives on
    # (one killed a moment ago may still be dying: wait for it by its pidfd, never by polling).
    assert list(private.iterdir()) == []
    theirs = set()
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(private).encode() in cmdline:
            theirs.add(int(proc.name))
    anyio.run(wait_gone, theirs, 10)
    private.rmdir()


def test_verify_run_takes_a_browser_or_launches_one(tmp_path: Path) -> None:
    base = ["verify", "run", str(EXAMPLE / "dictionary.json"), "--plan", str(EXAMPLE / "plan.json"), "--url", "x"]
    done = cli(*base)
    assert done.returncode == 2 and "one of the arguments --ws-url --launch is required" in done.stderr
    done = cli(*base, "--launch", "--ws-url", "ws://127.0.0.1:1/")
    assert done.returncode == 2 and "not allowed with argument" in done.stderr


def test_a_compile_result_that_is_not_ready_is_refused_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"status": "incomplete", "plan": None,
                                                 "reason": "coverage 0.40 is below 0.9"}))
    done = cli("verify", "run", str(EXAMPLE / "dictionary.json"), "--plan", str(tmp_path / "c.json"),
               "--url", "about:blank", "--ws-url", "ws://127.0.0.1:1/")
    assert done.returncode == 2
    assert done.stderr == ("fabric-jev: the compile result is 'incomplete', not ready (coverage 0.40 is below "
                           "0.9); there is no plan to run\n")
