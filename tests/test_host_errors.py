"""Errors that name their cause (issue 39, part 5): a failure of application code during a run
says which call failed and why, through exception groups, cut to 2,000 characters and redacted;
a failing `status()` after a good evaluation does not fail the run. Real hosts and QuickJS
workers, the application's own evaluator classes."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from fabric_jev import JevHost, RunState
from fabric_jev.contract.config import HostConfig
from fabric_jev.contract.evaluation import Evaluation, EvaluationRequest, EvaluationUsage
from fabric_jev.errors import MAX_ERROR_CHARS
from fabric_jev.evaluators.base import EvaluatorStatus
from fabric_jev.host.failures import application_call, describe_failure
from tests.conftest import program

GHP = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
ASK = program("const r = await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}});"
              "return r.answers.q.noul", requires=["jev.evaluate"])


def _answer(request: EvaluationRequest) -> Evaluation:
    return Evaluation({q.id: {"type": "noul", "noul": 0.25} for q in request.questions},
                      EvaluationUsage(3, 1), "own-model", None)


class StatusRaises:
    """An application's evaluator: answers well, names no provenance, and its status() is broken."""

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        return _answer(request)

    def status(self) -> EvaluatorStatus:
        raise TypeError("status() missing 1 required positional argument: 'verbose'")

    async def aclose(self) -> None:
        return None


class StatusReturnsJunk(StatusRaises):
    def status(self) -> Any:
        return {"route": "not a status"}  # no `.route`: reading it raises AttributeError


class MyEvaluator(StatusRaises):
    """Its evaluate fails inside its own task group: the failure reaches the host as a group."""

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        async def upstream() -> None:
            raise ValueError(f"upstream refused key {GHP}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(upstream)
        raise AssertionError("not reached")

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("mine", "own-model")


class Blocks(MyEvaluator):
    def __init__(self) -> None:
        self.started = anyio.Event()

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        self.started.set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")


pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("evaluator", [StatusRaises(), StatusReturnsJunk()])
async def test_a_failing_status_after_a_good_evaluation_leaves_the_run_completed_and_provenance_unknown(
        evaluator: StatusRaises) -> None:
    # Before: "Jev host error: ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)".
    async with JevHost(HostConfig(), evaluator=evaluator) as host:
        env = await host.run(ASK, None)
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == 0.25 and env.error is None
    assert env.to_json()["evaluator"] == {"route": "unknown", "model": "own-model", "readout": "unknown",
                                          "calibration": "none"}


async def test_an_evaluate_failing_inside_its_task_group_names_the_call_and_the_cause() -> None:
    async with JevHost(HostConfig(), evaluator=MyEvaluator()) as host:
        caught = await host.run(program(
            "try { await jev.evaluate({state: 'x', questions: {q: {type: 'noul', instructions: 'y?'}}}); }"
            "catch (e) { return e.message }", requires=["jev.evaluate"]), None)
        uncaught = await host.run(ASK, None)
    assert caught.state is RunState.COMPLETED, caught.error
    assert caught.result.startswith("jev.evaluate failed: evaluate() of MyEvaluator raised ValueError: "
                                    "upstream refused key [redacted: github token]"), caught.result
    assert uncaught.state is RunState.FAILED and uncaught.error is not None
    assert "evaluate() of MyEvaluator raised ValueError: upstream refused key" in uncaught.error
    for env in (caught, uncaught):
        assert GHP not in str(env.to_json()) and "ExceptionGroup" not in str(env.to_json())


async def test_a_listener_failing_ends_the_run_as_a_host_error_that_names_it() -> None:
    def listener(request: EvaluationRequest, evaluation: Evaluation) -> None:
        raise KeyError(f"no slot for {GHP}")

    async with JevHost(HostConfig(), evaluator=StatusRaises()) as host:
        env = await host.run(ASK, None, on_evaluation=listener)
    assert env.state is RunState.FAILED
    assert env.error is not None and env.error.startswith("Jev host error: on_evaluation listener raised KeyError: ")
    assert GHP not in env.error and "[redacted: github token]" in env.error


async def test_cancelling_a_run_whose_evaluation_is_pending_still_cancels_it() -> None:
    evaluator = Blocks()
    async with JevHost(HostConfig(), evaluator=evaluator) as host:
        run = await host.spawn(ASK, None)
        await evaluator.started.wait()
        env = await host.stop(run.id)
    assert env.state is RunState.CANCELLED


# ---------------------------------------------------------------- the one renderer


def _group(*leaves: BaseException) -> BaseExceptionGroup[Any]:
    return BaseExceptionGroup("unhandled errors in a TaskGroup", list(leaves))


def test_a_group_is_unwrapped_to_its_leaves_each_named() -> None:
    nested = _group(ValueError("first"), _group(KeyError("second"), _group(OSError(5, "third"))))
    assert describe_failure(nested, "evaluate() of X") == (
        "evaluate() of X raised 3 errors: ValueError: first; KeyError: 'second'; OSError: [Errno 5] third")
    assert describe_failure(_group(TypeError("only")), "status() of Y") == "status() of Y raised TypeError: only"
    assert describe_failure(RuntimeError()) == "RuntimeError"


def test_many_leaves_are_bounded_and_a_long_message_is_cut_to_the_contracts_length() -> None:
    many = describe_failure(_group(*(ValueError(f"e{i}") for i in range(40))), "c()")
    assert many.startswith("c() raised 40 errors: ValueError: e0; ") and many.endswith("and 35 more")
    long = describe_failure(ValueError("a word " * 2_000), "c()")
    assert len(long) == MAX_ERROR_CHARS and long.endswith("…")


def test_the_rendered_failure_is_redacted() -> None:
    shown = describe_failure(_group(ValueError(f"password={GHP}"), RuntimeError(f"Authorization: Bearer {GHP}")))
    assert GHP not in shown and "[redacted: " in shown


def test_a_wrapped_call_names_itself_and_keeps_the_cause() -> None:
    with pytest.raises(Exception) as info, application_call("status() of Z"):
        raise TypeError("bad")
    assert describe_failure(info.value) == "status() of Z raised TypeError: bad"
    assert isinstance(info.value.__cause__, TypeError)


async def test_a_wrapped_call_lets_cancellation_through() -> None:
    reached = False
    with anyio.move_on_after(0) as scope:
        with application_call("evaluate() of Slow"):
            await anyio.sleep_forever()
        reached = True
    assert scope.cancelled_caught and not reached


async def test_a_served_answer_survives_a_failing_status_and_names_its_route_unknown() -> None:
    import json

    from fabric_jev.serve.handler import JevServer

    server = JevServer(StatusRaises())
    body = json.dumps({"state": "x", "model": "jev-latest",
                       "questions": {"q": {"type": "noul", "instructions": "y?"}}}).encode()
    status, answer = await server.handle("POST", "/v1/systemone", {}, body)
    assert status == 200 and answer["answers"]["q"]["noul"] == 0.25
    assert answer["x_evaluator"] == "unknown"
