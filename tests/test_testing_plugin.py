"""The pytest plugin, run as users run it: pytest in a fresh project (pytester), real parts only.

A real `fabric-jev serve` on loopback answers while recording; replay runs with
the server stopped. Browser tests use a real headless Chromium.
"""

from __future__ import annotations

import json
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators import request_digest
from tests.conftest import PLUGIN_ARGS
from tests.test_serve import served

PLUGIN = PLUGIN_ARGS
#: The core's plugin without the browser connector's (the page fixtures).
NO_BROWSER_PLUGIN = [*PLUGIN_ARGS, "-p", "no:fabric_jev_browser"]
KEY = "sk-pytest-plugin-0123456789abcdef"

QUESTIONS = {"refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
             "route": {"type": "choice", "instructions": "Which queue owns this ticket?",
                       "criteria": {"billing": None, "technical": None}}}
PROGRAM = {"name": "triage", "inputSchema": {"type": "string"}, "outputSchema": {}, "requires": ["jev.evaluate"],
           "code": "const r = await jev.evaluate({state: input, questions: " + json.dumps(QUESTIONS) + "});\n"
                   "return {route: r.answers.route.choice, refund: r.answers.refund.noul};"}
FIXTURE = {"answers": {"refund": {"noul": 0.04}, "route": {"choice": "technical"}},
           "rules": [{"question": "refund", "stateContains": "refund", "answer": {"noul": 0.96}},
                     {"question": "route", "stateContains": "charged", "answer": {"choice": "billing"}}]}

TESTS = f'''
import pytest
from fabric_jev import run_program

PROGRAM = {PROGRAM!r}

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_triage(jev_host):
    env = await jev_host.run(PROGRAM, "I was charged twice, refund please")
    assert env.state == "completed", env.error
    assert env.result == {{"route": "billing", "refund": 0.96}}

def test_sync_with_run_program(jev_evaluator):
    env = run_program(PROGRAM, "TICKET_TEXT", evaluator=jev_evaluator)
    assert env.state == "completed", env.error
    assert env.result["route"] == "technical"
'''


def project(pytester: pytest.Pytester, *, ini: str = "", ticket: str = "The app crashes on start") -> None:
    pytester.makepyprojecttoml(textwrap.dedent(f"""
        [tool.pytest.ini_options]
        addopts = "-p no:cacheprovider"
        filterwarnings = ["error"]
        {ini}
    """))
    pytester.makepyfile(test_triage=TESTS.replace("TICKET_TEXT", ticket))
    (pytester.path / "answers.json").write_text(json.dumps(FIXTURE))


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No key in the environment and no auth store: what CI has."""
    for name in ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY", "FABRIC_JEV_TYPESAFE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    yield


def cassettes(pytester: pytest.Pytester) -> dict[str, str]:
    folder = pytester.path / "cassettes" / "test_triage"
    return {p.name: p.read_text() for p in sorted(folder.glob("*.jsonl"))} if folder.is_dir() else {}


@pytest.mark.timeout(180)
def test_record_once_against_a_real_server_then_replay_with_it_stopped(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    project(pytester)
    (pytester.path / "served.json").write_text(json.dumps(FIXTURE))
    with served("--evaluator", f"fixture:{pytester.path / 'served.json'}",
                env={"FABRIC_JEV_SERVE_KEY": KEY}) as url:
        monkeypatch.setenv("FABRIC_JEV_TYPESAFE_BASE_URL", url)
        monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
        recording = pytester.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=typesafe")
    recording.assert_outcomes(passed=2)
    recording.stdout.fnmatch_lines(["*cassette written: *test_triage*test_triage.jsonl",
                                    "*cassette written: *test_sync_with_run_program.jsonl"])
    tapes = cassettes(pytester)
    assert set(tapes) == {"test_triage.jsonl", "test_sync_with_run_program.jsonl"}
    for text in tapes.values():
        assert KEY not in text and "Bearer" not in text
        assert json.loads(text.splitlines()[1])["evaluation"]["model"]  # a real answer was kept
    stamps = {p: p.stat().st_mtime_ns for p in (pytester.path / "cassettes").rglob("*.jsonl")}

    # The server is gone and so is the key: the default mode (none) replays offline.
    monkeypatch.delenv("TYPESAFE_API_KEY")
    replay = pytester.runpytest_subprocess(*PLUGIN, "--jev-evaluator=typesafe")
    replay.assert_outcomes(passed=2)
    assert "cassette written" not in replay.stdout.str()
    # `new` has nothing new to record: the files are not rewritten.
    pytester.runpytest_subprocess(*PLUGIN, "--jev-record-mode=new").assert_outcomes(passed=2)
    assert cassettes(pytester) == tapes
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


@pytest.mark.timeout(180)
def test_a_missing_answer_in_none_mode_fails_with_its_digest_and_never_reaches_the_network(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, offline: None) -> None:
    project(pytester, ini='jev_evaluator = "typesafe"\njev_record_mode = "none"')
    pytester.runpytest_subprocess(*PLUGIN, "--jev-record-mode=once", "--jev-evaluator=fixture:answers.json"
                                  ).assert_outcomes(passed=2)
    # The same tests ask something new; a listening socket stands where the route would go.
    ticket = "The export button does nothing"
    project(pytester, ini='jev_evaluator = "typesafe"\njev_record_mode = "none"', ticket=ticket)
    pytester.makepyfile(test_caught='''
        PROGRAM = {"name": "t", "inputSchema": {}, "outputSchema": {}, "requires": ["jev.evaluate"],
                   "code": "try { await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: '?'}}}); }"
                           " catch (e) { return 'caught'; }"}

        def test_a_program_that_catches_the_miss(jev_evaluator):
            from fabric_jev import run_program
            assert run_program(PROGRAM, None, evaluator=jev_evaluator).result == "caught"
    ''')
    with socket.socket() as trap:
        trap.bind(("127.0.0.1", 0))
        trap.listen()
        trap.setblocking(False)
        monkeypatch.setenv("FABRIC_JEV_TYPESAFE_BASE_URL", f"http://127.0.0.1:{trap.getsockname()[1]}")
        monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
        result = pytester.runpytest_subprocess(*PLUGIN)
        with pytest.raises(BlockingIOError):
            trap.accept()  # nobody connected
    result.assert_outcomes(passed=1, failed=2)
    digest = request_digest(validate_request({"state": ticket, "questions": QUESTIONS}), "jev-latest")
    out = result.stdout.str()
    assert f"request digest: {digest}" in out
    assert '- "state": "The app crashes on start"' in out and f'+ "state": "{ticket}"' in out
    assert "no recorded Jev answer for this request in cassettes/test_caught/" \
           "test_a_program_that_catches_the_miss.jsonl (record mode none)" in out
    assert KEY not in out
    assert not (pytester.path / "cassettes" / "test_caught").exists()


def test_settings_from_ini_are_checked(pytester: pytest.Pytester) -> None:
    project(pytester, ini='jev_record_mode = "sometimes"')
    result = pytester.runpytest_subprocess(*PLUGIN, "-k", "sync")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*jev_record_mode = 'sometimes'; expected one of none, once, new, all*"])


def test_a_bad_viewport_on_the_command_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    project(pytester)
    result = pytester.runpytest_subprocess(*PLUGIN, "--jev-viewport=wide")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jev-viewport*'wide' is not WIDTHxHEIGHT with each 100-10000, e.g. 1280x800*"])


def test_jev_host_is_configured_from_the_ini_file_and_the_command_line(pytester: pytest.Pytester,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    project(pytester, ini='jev_config = "conf/host.json"')
    (pytester.path / "test_triage.py").unlink()
    (pytester.path / "conf").mkdir()
    (pytester.path / "conf" / "host.json").write_text('{"maxConcurrentRuns": 2}')
    (pytester.path / "other.json").write_text('{"maxConcurrentRuns": 3}')
    (pytester.path / "broken.json").write_text('{"maxConcurrentRunz": 3}')
    pytester.makepyfile(test_config='''
        import os, pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @pytest.mark.anyio
        async def test_config(jev_host):
            assert jev_host.config.max_concurrent_runs == int(os.environ["WANT"])
    ''')
    monkeypatch.setenv("WANT", "2")
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=1)
    monkeypatch.setenv("WANT", "3")
    pytester.runpytest_subprocess(*PLUGIN, "--jev-config", "other.json").assert_outcomes(passed=1)
    broken = pytester.runpytest_subprocess(*PLUGIN, "--jev-config", "broken.json")
    broken.assert_outcomes(errors=1)
    broken.stdout.fnmatch_lines(["*jev_config *broken.json: *maxConcurrentRunz*"])


def test_the_page_options_read_from_jev_settings_still_work_with_a_deprecation_warning(
        pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makepyfile(test_settings='''
        import pytest
        def test_settings(jev_settings, jev_page_settings):
            assert not hasattr(type(jev_settings), "viewport")
            with pytest.warns(DeprecationWarning, match="read jev_page_settings.viewport"):
                assert jev_settings.viewport == jev_page_settings.viewport == (1024, 700)
            with pytest.warns(DeprecationWarning, match="jev_settings.output is deprecated"):
                assert jev_settings.output == jev_page_settings.output
            assert jev_page_settings.artifacts == "on"
    ''')
    pytester.runpytest_subprocess(*PLUGIN, "--jev-viewport=1024x700", "--jev-artifacts=on").assert_outcomes(passed=1)


PAGE = """<!doctype html><title>Drafts</title><body>
<button>Save changes</button> <a href="#top">Save</a>
<input type="password" aria-label="Password" value="hunter2-secret">
</body>"""

PAGE_TESTS = '''
from pathlib import Path
import pytest
from fabric_jev.testing import assert_, assert_eventually

PAGE = (Path(__file__).parent / "page.html").as_uri()

@pytest.fixture
def anyio_backend():
    return "asyncio"

@pytest.mark.anyio
async def test_passes(jev_page):
    await jev_page.navigate(PAGE)
    await assert_(jev_page, 'role=button name="Save changes"')

@pytest.mark.anyio
async def test_fails(jev_page):
    await jev_page.navigate(PAGE)
    await assert_eventually(jev_page, 'role=button name="Save"', "save button", timeout=1)
'''


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_a_failing_page_assertion_explains_itself_and_leaves_artifacts(pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makepyfile(test_page=PAGE_TESTS)
    (pytester.path / "page.html").write_text(PAGE)
    result = pytester.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*await assert_eventually(jev_page, 'role=button name=\"Save\"', \"save button\", timeout=1)",
        '*AssertionFailed: check "save button" failed: timeout (last: no_match)',
        "*expected: a visible, unobstructed element matching role=button name=\"Save\"",
        "*nearest:",
        '*1. button "Save changes" (text 0.93, role same, in view*',
        '*2. link "Save"*',
        "*artifacts: *test-results*test_page.py-test_fails"])
    kept = pytester.path / "test-results" / "test_page.py-test_fails"
    names = sorted(p.name for p in kept.iterdir())
    assert names == [".fabric-jev-artifacts", "save-button-1.png", "save-button-1.snapshot.json",
                     "save-button-1.trace.json", "test-failed.png", "test-failed.snapshot.json"]
    assert (kept / "test-failed.png").read_bytes().startswith(b"\x89PNG")
    snapshot = json.loads((kept / "save-button-1.snapshot.json").read_text())
    assert any(e["name"] == "Save changes" for e in snapshot["elements"])
    assert all("hunter2" not in p.read_text(errors="replace") for p in kept.glob("*.json"))
    assert not (pytester.path / "test-results" / "test_page.py-test_passes").exists()

    # `on` keeps passing tests too; the last run's folders are replaced, not added to.
    (kept / "stale.txt").write_text("from the last run")
    pytester.runpytest_subprocess(*PLUGIN, "--jev-artifacts=on").assert_outcomes(passed=1, failed=1)
    assert not (kept / "stale.txt").exists()
    passed = pytester.path / "test-results" / "test_page.py-test_passes"
    assert {p.name for p in passed.iterdir()} == {".fabric-jev-artifacts", "test-finished.png",
                                                    "test-finished.snapshot.json"}
    # `off` keeps nothing (and leaves other folders alone).
    (pytester.path / "test-results" / "mine").mkdir()
    pytester.runpytest_subprocess(*PLUGIN, "--jev-artifacts=off").assert_outcomes(passed=1, failed=1)
    assert [p.name for p in (pytester.path / "test-results").iterdir()] == ["mine"]
    # A folder of the same name that the plugin did not write is not replaced: the test says so.
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    clash = pytester.runpytest_subprocess(*PLUGIN)
    clash.assert_outcomes(passed=1, failed=1, errors=1)
    clash.stdout.fnmatch_lines([f"*artifacts not kept: {kept} exists and was not written by fabric-jev's "
                                "pytest plugin (it has no .fabric-jev-artifacts file)*"])
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]


def test_collecting_a_suite_that_does_not_use_the_plugin_imports_none_of_fabric_jev(
        pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makepyfile(**{f"test_plain_{i}": "def test_one():\n    assert True\n" for i in range(3)})
    pytester.makeconftest('''
        import json, sys
        def pytest_collection_finish(session):
            with open("modules.json", "w") as f:
                json.dump(sorted(sys.modules), f)
    ''')
    pytester.runpytest_subprocess(*PLUGIN, "--co").stdout.fnmatch_lines(["*3 tests collected*"])
    loaded = set(json.loads((pytester.path / "modules.json").read_text()))
    assert "fabric_jev.testing.plugin" in loaded, "the plugin is installed and loaded"
    assert "fabric_jev_browser.pytest_plugin" in loaded, "the browser connector's plugin is installed and loaded"
    ours = sorted(m for m in loaded if m.startswith("fabric_jev"))
    assert ours == ["fabric_jev", "fabric_jev._lazy", "fabric_jev.errors", "fabric_jev.testing",
                    "fabric_jev.testing.plugin", "fabric_jev_browser", "fabric_jev_browser.pytest_plugin"], ours
    assert not {"httpx", "numpy", "pydantic", "quickjs", "websockets"} & loaded


def test_jev_page_is_skipped_with_the_install_hint_without_the_browser_connector(
        pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makeconftest('''
        import fabric_jev.plugins as plugins
        # As if fabric-jev-browser were not installed: no connector is declared (and its pytest
        # plugin is not loaded: -p no:fabric_jev_browser below).
        plugins.declared_connectors = dict
    ''')
    pytester.makepyfile(test_page='''
        import pytest
        @pytest.mark.anyio
        async def test_page(jev_page):
            raise AssertionError("not reached")
        def test_browser(jev_browser):
            raise AssertionError("not reached")
    ''')
    result = pytester.runpytest_subprocess(*NO_BROWSER_PLUGIN, "-rs")
    result.assert_outcomes(skipped=3)  # one per anyio backend, and the browser
    assert ("SKIPPED [2] test_page.py:2: the browser connector is not installed; install it with: "
            "pip install --find-links DIR 'fabric-jev[browser]'") in result.stdout.str()
    assert "SKIPPED [1] test_page.py:5: the browser connector is not installed" in result.stdout.str()


def test_an_installed_browser_connector_whose_pytest_plugin_is_not_loaded_fails_its_page_tests_saying_why(
        pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makepyfile(test_page='''
        import pytest
        @pytest.mark.anyio
        async def test_page(jev_page):
            raise AssertionError("not reached")
    ''')
    result = pytester.runpytest_subprocess(*NO_BROWSER_PLUGIN)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*the browser connector is installed but its pytest plugin "
                                 "(fabric_jev_browser.pytest_plugin) is not loaded: it was disabled "
                                 "(-p no:fabric_jev_browser*"])


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_artifacts_kept_by_another_worker_of_the_same_run_are_not_cleaned(pytester: pytest.Pytester,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Under pytest-xdist each worker is a session of its own; the first page test of one must not
    remove what another worker of the same run already kept (xdist's testrunuid is shared)."""
    project(pytester)
    (pytester.path / "test_triage.py").unlink()
    pytester.makepyfile(test_page=PAGE_TESTS)
    (pytester.path / "page.html").write_text(PAGE)
    pytester.makeconftest('''
        import os
        def pytest_configure(config):
            if os.environ.get("RUN_UID"):  # what pytest-xdist gives each worker of one run
                config.workerinput = {"workerid": os.environ["WORKER"], "testrunuid": os.environ["RUN_UID"]}
    ''')
    kept = pytester.path / "test-results" / "test_page.py-test_fails"
    monkeypatch.setenv("RUN_UID", "0123abcd")
    monkeypatch.setenv("WORKER", "gw0")
    pytester.runpytest_subprocess(*PLUGIN, "-k", "fails").assert_outcomes(failed=1)
    assert (kept / "test-failed.png").is_file()
    monkeypatch.setenv("WORKER", "gw1")
    pytester.runpytest_subprocess(*PLUGIN, "-k", "passes").assert_outcomes(passed=1)
    assert (kept / "test-failed.png").is_file(), "another worker of the run removed it"
    # The next run (another testrunuid, or none without xdist) replaces the last run's folders.
    monkeypatch.delenv("RUN_UID")
    pytester.runpytest_subprocess(*PLUGIN, "-k", "passes").assert_outcomes(passed=1)
    assert not kept.exists()


def test_keeping_artifacts_that_fails_midway_leaves_the_old_folder_or_none(tmp_path: Path) -> None:
    """A copy cut short (here a FIFO the copy refuses; a Ctrl-C alike) never leaves a folder
    without the plugin's marker, which would block every later run with `artifacts not kept`."""
    import os
    import shutil

    from fabric_jev_browser.pytest_plugin import MARKER, _keep

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "a.png").write_bytes(b"\x89PNG new")
    os.mkfifo(scratch / "z.fifo")
    dest = tmp_path / "out" / "test_x.py-test_y"
    with pytest.raises(shutil.Error):
        _keep(scratch, dest, "run-2")
    assert not dest.exists()
    assert list((tmp_path / "out").iterdir()) == []  # no staging folder left either

    dest.mkdir()
    (dest / MARKER).write_text("written by fabric-jev's pytest plugin\nrun run-1\n")
    (dest / "a.png").write_bytes(b"\x89PNG old")
    with pytest.raises(shutil.Error):
        _keep(scratch, dest, "run-2")
    assert (dest / "a.png").read_bytes() == b"\x89PNG old"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [dest.name]

    (scratch / "z.fifo").unlink()
    _keep(scratch, dest, "run-2")
    assert sorted(p.name for p in dest.iterdir()) == [MARKER, "a.png"]
    assert (dest / "a.png").read_bytes() == b"\x89PNG new"
