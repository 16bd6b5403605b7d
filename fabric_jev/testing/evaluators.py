"""Evaluators written in the test itself: fixed answers, answers in order, computed answers.

`FixtureEvaluator` (fabric_jev.evaluators.fixture) reads its answers from a
JSON document; `ScriptedEvaluator` takes them from Python, so a test can say in
one place what the model answers, fail an evaluation on purpose, or hold an
answer until the test releases it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias

import anyio

from ..contract.evaluation import Evaluation, EvaluationRequest, validate_answers
from ..contract.provenance import Provenance
from ..errors import AnswerInvalid
from ..evaluators.base import EvaluatorStatus, evaluation_deadline
from ..evaluators.fixture import expand_answer

#: Answers by question id, in the wire form or the fixture's shorthands.
Answers: TypeAlias = Mapping[str, Mapping[str, Any]]
#: One step of a script: answers, an exception to raise, or a function of the request
#: that returns answers (or awaits them).
ScriptedReply: TypeAlias = (Answers | BaseException
                    | Callable[[EvaluationRequest], Answers | Awaitable[Answers]])


class ScriptedEvaluator:
    """Answers each request with the next reply of its script; the last reply repeats.

    ::

        ScriptedEvaluator({"refund": {"noul": 0.96}})                    # every request
        ScriptedEvaluator({"q": {"choice": "a"}}, UpstreamError("down"))  # then failing
        ScriptedEvaluator(lambda request: {"q": {"noul": 0.5}})           # computed

    A function reply receives the `EvaluationRequest`; it may be async (to hold
    an answer until the test sets an event) and may raise; like any evaluator,
    it is abandoned with an `UpstreamError` past the call's `timeout`. Every answer goes
    through the same validation as an upstream answer. `requests` keeps what
    was asked, in order.
    """

    def __init__(self, *replies: ScriptedReply, model: str = "scripted",
                 usage: tuple[int, int] = (0, 0)) -> None:
        if not replies:
            raise ValueError("a scripted evaluator needs at least one reply")
        self._replies = replies
        self._model = model
        self._usage = {"input_tokens": usage[0], "output_tokens": usage[1]}
        self.requests: list[EvaluationRequest] = []
        self.closed = False

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def evaluate(self, request: EvaluationRequest, *, timeout: float) -> Evaluation:
        await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled caller asks nothing
        reply = self._replies[min(len(self.requests), len(self._replies) - 1)]
        self.requests.append(request)
        await anyio.lowlevel.checkpoint()
        if isinstance(reply, BaseException):
            raise reply
        answers: Any = reply
        if callable(reply):
            with evaluation_deadline(timeout):  # as every evaluator: past it, an UpstreamError
                answers = reply(request)
                if inspect.isawaitable(answers):
                    answers = await answers
        if not isinstance(answers, Mapping):
            raise AnswerInvalid(f"scripted reply for request {self.calls} is not answers by question id")
        by_id = {q.id: q for q in request.questions}
        body = {"model": self._model, "usage": dict(self._usage),
                "answers": {qid: expand_answer(by_id[qid], dict(a)) if qid in by_id and isinstance(a, Mapping)
                            else a for qid, a in answers.items()}}
        return validate_answers(request, body, provenance=Provenance(route="scripted", model=self._model[:128],
                                                                     readout="fixture"))

    def status(self) -> EvaluatorStatus:
        return EvaluatorStatus("scripted", self._model)

    async def aclose(self) -> None:
        self.closed = True


__all__ = ["Answers", "ScriptedEvaluator", "ScriptedReply"]
