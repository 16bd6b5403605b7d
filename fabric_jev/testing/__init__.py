"""What tests of judgment programs and pages need (docs/testing.md).

- evaluators: `FixtureEvaluator` (answers from JSON), `ScriptedEvaluator`
  (answers from the test), `RecordingEvaluator` (a cassette under a record mode);
- assertions: `assert_`, `assert_eventually`, `check_done`, `expect`;
- verification dictionaries as tests: `plan_checks`, `replay_plan`;
- what checks look at and plans replay on: snapshot sources and channels, or an
  object that gives them (`SnapshotSourceProvider`, `ChannelsProvider`: the
  browser connector's `Page`); `bind_source` names a target's artifacts folder;
- a whole eval over a labeled dataset: `eval_program` (docs/eval.md);
- the worker seam: `JevHost(workers=...)` takes a `WorkerSource`; `InProcessWorkers`
  runs guests without the process boundary (the floor benchmarks measure against);
- the pytest plugin's fixtures (`jev_host`, `jev_evaluator`) live in
  `fabric_jev.testing.plugin`, loaded by pytest through the `pytest11` entry point;
  the page fixtures (`jev_browser`, `jev_page`) ship with the browser connector
  (`fabric_jev_browser.pytest_plugin`, its own `pytest11` entry point).

Names load on first use, so the plugin costs a suite that does not use it nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ..evaluators.fixture import FixtureEvaluator
    from ..host.run import WorkerSource
    from ..sandbox.inprocess import InProcessWorkers
    from .cassettes import Cassette, CassetteMiss, RecordingEvaluator, RecordMode
    from .checks import DoneCheck, Expectation, assert_, assert_eventually, check_done, expect
    from .evals import eval_program
    from .evaluators import ScriptedEvaluator
    from .plans import CheckOutcome, PlanCheck, load_plan, plan_checks, replay_plan
    from .resources import open_connections, worker_pid
    from .sources import ChannelsProvider, SnapshotSourceProvider, bind_source, unbind_source

_LAZY = {
    "FixtureEvaluator": "..evaluators.fixture",
    "WorkerSource": "..host.run", "InProcessWorkers": "..sandbox.inprocess",
    **dict.fromkeys(("Cassette", "CassetteMiss", "RecordMode", "RecordingEvaluator"), ".cassettes"),
    **dict.fromkeys(("DoneCheck", "Expectation", "assert_", "assert_eventually", "check_done", "expect"),
                    ".checks"),
    "ScriptedEvaluator": ".evaluators",
    "eval_program": ".evals",
    **dict.fromkeys(("CheckOutcome", "PlanCheck", "load_plan", "plan_checks", "replay_plan"), ".plans"),
    **dict.fromkeys(("open_connections", "worker_pid"), ".resources"),
    **dict.fromkeys(("ChannelsProvider", "SnapshotSourceProvider", "bind_source", "unbind_source"), ".sources"),
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "Cassette", "CassetteMiss", "ChannelsProvider", "CheckOutcome", "DoneCheck", "Expectation",
    "FixtureEvaluator", "InProcessWorkers", "PlanCheck", "RecordMode", "RecordingEvaluator", "ScriptedEvaluator",
    "SnapshotSourceProvider", "WorkerSource", "assert_", "assert_eventually", "bind_source", "check_done",
    "eval_program", "expect", "load_plan", "open_connections", "plan_checks", "replay_plan", "unbind_source",
    "worker_pid",
]
