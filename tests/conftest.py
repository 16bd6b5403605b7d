from __future__ import annotations

import json
import os
import threading

# Before numpy loads (OpenBLAS reads this once): the local evaluator multiplies small
# matrices, and on a loaded two-core machine OpenBLAS's spinning worker threads made the
# labeled-set test 13x slower (56 s against 4 s with one thread), near the per-test timeout.
# Child processes (workers, CLI runs) inherit it. An explicit setting in the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, settings

from fabric_jev import FixtureEvaluator, HostConfig, JevHost
from fabric_jev.plugins import _declared

# pytester runs pytest in fresh projects (tests/test_testing_plugin.py). fabric-jev's own
# plugin comes through its pytest11 entry point; a venv installed before that entry point
# existed loads it by name. The browser connector's (the page fixtures) comes only through its
# own entry point, never by name: a page test here passes only when fabric-jev-browser is
# installed with it (./scripts/setup), as a user's would.
_BY_NAME = [] if "fabric_jev" in _declared("pytest11") else ["fabric_jev.testing.plugin"]
pytest_plugins = ["pytester", *_BY_NAME]
#: What a pytest started by a test (pytester) is given to load the same plugins.
PLUGIN_ARGS = [arg for module in _BY_NAME for arg in ("-p", module)]

# Property-based fuzzing (tests/test_fuzz_*.py). The suite runs a bounded, derandomized
# number of examples (the same ones every run, no example database: CI cannot flake);
# `FABRIC_JEV_FUZZ=long` (or `--hypothesis-profile=long`) searches far longer, at random.
# No deadline and no too-slow health check: they time examples, and the machine is shared.
settings.register_profile("suite", max_examples=40, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=5_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("FABRIC_JEV_FUZZ", "suite"))


#: Fixtures that start or use Chromium: a test that asks for one is a browser test, marked or not.
BROWSER_FIXTURES = frozenset({"chromium", "jev_browser", "cdp", "jev_page", "pages", "other_pages"})
#: Tests that take more than a few seconds (all their parameters together), one node id a line in
#: tests/slow_tests.txt, measured with `pytest --durations=0`: marked `slow`, so
#: `pytest -m "not browser and not slow and not llm"` is the quick subset (docs/contributing.md).
SLOW = frozenset(line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text().splitlines()
                 if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        if "llama" in getattr(item, "fixturenames", ()):  # the real llama.cpp server: an `llm` test
            item.add_marker(pytest.mark.llm)
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def program(code: str, **extra: Any) -> dict[str, Any]:
    """A minimal valid program around `code`."""
    base: dict[str, Any] = {"name": "test", "code": code, "inputSchema": {}, "outputSchema": {}}
    base.update(extra)
    return base


def seed_starters() -> dict[str, Any]:
    """The starter programs of seed 001 (tests/data/seed-001-starters.js, the seed's own
    JavaScript), evaluated by QuickJS: {"request": ..., "observer": ...}."""
    import quickjs

    source = (Path(__file__).parent / "data" / "seed-001-starters.js").read_text()
    value: dict[str, Any] = json.loads(quickjs.Context().eval(source))
    return value


@pytest.fixture
def fixture_evaluator() -> FixtureEvaluator:
    return FixtureEvaluator({
        "answers": {"q": {"noul": 0.75}},
        "usage": {"input_tokens": 10, "output_tokens": 2},
    })


@pytest.fixture
async def host(fixture_evaluator: FixtureEvaluator) -> AsyncIterator[JevHost]:
    async with JevHost(HostConfig(max_concurrent_runs=16), evaluator=fixture_evaluator) as h:
        yield h


def open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


#: Idle threads of the event loop's own pool (anyio on asyncio, trio): reused across `to_thread` calls
#: and ended by the loop itself (anyio stops them with the loop's root task), so they are no leak.
_POOL_THREADS = ("AnyIO worker thread", "Trio thread ")


def own_threads() -> int:
    """Live threads, leaving out the event loop's thread pool."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith(_POOL_THREADS))


def live_processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) for every process that is not a zombie."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[2]))
    return table


async def wait_gone(pids: Iterable[int], timeout: float = 5) -> None:
    """Wait until every process in `pids` has exited, woken by its pidfd (no polling)."""
    with anyio.fail_after(timeout):
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                await anyio.wait_readable(fd)
            finally:
                os.close(fd)


def child_pids(apart_from: Iterable[int] = ()) -> set[int]:
    """Direct and indirect children of this process that are still alive, leaving out the
    processes in `apart_from` and all they start: a session-wide Chromium keeps starting
    helper processes of its own, at any time, which are no test's leak."""
    me = os.getpid()
    parents = {pid: ppid for pid, (ppid, _) in live_processes().items()}
    skip = set(apart_from)
    found: set[int] = set()
    frontier = {me}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found - skip
        found |= frontier
    return found


from tests.browser_support import cdp, chromium, other_pages, page, pages  # noqa: E402, F401  (shared fixtures)
from tests.llama_server import llama  # noqa: E402, F401  (the real llama.cpp server, one per session)

