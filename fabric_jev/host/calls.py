"""Host calls from the guest: sleep, emit, evaluate, tools.call, nextEvent, advise.

Each call is counted against the run's budgets first, then answered through
`reply(ok, text)`, which settles the guest's promise at once. Calls that wait
(sleep, evaluate, tools) run as tasks in the run's task group, so stopping
the run cancels them.

`HostCalls` is given what it needs (the evaluator, the capability registry,
the request limits) and knows nothing of the host object or of the wire:
the run's session hands it a `Settle` callback.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from ..contract.evaluation import EvaluationRequest, validate_request
from ..contract.policy import BUILTIN_RISKS, Outcome, Policy, Risk, denial_message
from ..contract.values import ValueRejected, json_bytes, normalize_json
from ..errors import EvaluationError, JevError, clip_error
from ..evaluators.base import Evaluator
from ..sandbox.connection import asyncio_loop
from .policy import CALLER_GRANT, PolicyGate
from .registry import CallContext, CapabilityHandler, CapabilityRegistry
from .run import RunRecord

EMIT_MAX_BYTES = 4_096
CALL_KINDS = frozenset({"sleep", "emit", "evaluate", "tool", "nextEvent", "advise"})

#: Settles one guest promise: (call id, ok, JSON text of the value or the error message).
Settle = Callable[[int, bool, str], None]
Reply = Callable[[bool, str], None]


class HostCalls:
    """Answers a run's host calls, given only what answering needs."""

    def __init__(self, evaluator: Evaluator, capabilities: CapabilityRegistry, *,
                 max_request_bytes: int, request_timeout_s: float,
                 gate: PolicyGate | None = None) -> None:
        self._evaluator = evaluator
        self._capabilities = capabilities
        self._gate = gate
        self._max_request_bytes = max_request_bytes
        self._request_timeout_s = request_timeout_s

    def dispatch(self, record: RunRecord, settle: Settle, calls: anyio.abc.TaskGroup,
                 call_id: int, kind: str, args: Any) -> None:
        def reply(ok: bool, text: str) -> None:
            settle(call_id, ok, text)

        if kind not in CALL_KINDS:
            reply(False, f"unknown host call {kind!r}")
            return
        denied = record.budget.begin_call()
        if denied is not None:
            reply(False, denied)
            return
        if kind == "emit":
            self._emit(record, args, reply)
        elif kind == "sleep":
            self._sleep(record, args, reply, calls)
        elif kind == "evaluate":
            self._checked(record, "jev.evaluate", args, reply, calls,
                          lambda: self._start_evaluation(record, args, reply, calls))
        elif kind == "tool":
            self._start_tool(record, args, reply, calls)
        elif kind == "nextEvent":
            if record.observation is None:
                reply(False, "program.nextEvent needs spawn with observe")
                return
            calls.start_soon(self._guarded, record.observation.next_event(), reply)
        elif kind == "advise":
            if "jev.advise" not in record.program.requires:
                reply(False, "Capability not granted to Jev program: jev.advise")
                return
            observation = record.observation
            assert observation is not None  # launch requires observe for jev.advise
            def advise() -> None:
                calls.start_soon(self._guarded, observation.advise(args), reply)

            self._checked(record, "jev.advise", args, reply, calls, advise)

    # ------------------------------------------------------------------ the policy check

    def _checked(self, record: RunRecord, ref: str, args: Any, reply: Reply,
                 calls: anyio.abc.TaskGroup, proceed: Callable[[], None]) -> None:
        """The single point every capability call passes: its risk's policy, then `proceed`.

        A refused call is a catchable guest error and gives back the host call
        it was counted as, so it consumes no budget.
        """
        if ref not in record.program.requires:
            reply(False, f"Capability not granted to Jev program: {ref}")
            return
        gate = self._gate
        if gate is None:
            proceed()
            return
        risk = BUILTIN_RISKS.get(ref) or self._capabilities.risk(ref)
        outcome = gate.immediate(risk)
        if outcome is not None:  # allow or deny: decided at once, no task
            self._settle_decision(record, ref, risk, gate.policy(risk), outcome, None, reply, proceed)
            return
        calls.start_soon(self._ask_then, gate, record, ref, risk, args, reply, proceed)

    async def _ask_then(self, gate: PolicyGate, record: RunRecord, ref: str, risk: Risk, args: Any,
                        reply: Reply, proceed: Callable[[], None]) -> None:
        policy, outcome, probability = await gate.decide(
            ref, risk, run_id=record.id, run_name=record.program.name, arguments=args,
            intent=record.intent, actions=record.audit.actions())
        self._settle_decision(record, ref, risk, policy, outcome, probability, reply, proceed)

    @staticmethod
    def _settle_decision(record: RunRecord, ref: str, risk: Risk, policy: Policy, outcome: Outcome,
                         probability: float | None, reply: Reply, proceed: Callable[[], None]) -> None:
        record.audit.add(ref, risk, policy, outcome, probability)
        if outcome.allowed:
            proceed()
            return
        record.budget.refund_call()
        reply(False, denial_message(ref, outcome))

    @staticmethod
    async def _guarded(awaitable: Awaitable[Any], reply: Reply) -> None:
        try:
            value = await awaitable
        except JevError as exc:
            reply(False, clip_error(str(exc)))
            return
        reply(True, json.dumps(value))

    def _emit(self, record: RunRecord, value: Any,
              reply: Reply) -> None:
        try:
            value = normalize_json(value, "program.emit value")
        except ValueRejected as exc:
            reply(False, str(exc))
            return
        if not _surely_small(value) and json_bytes(value) > EMIT_MAX_BYTES:
            reply(False, f"program.emit value exceeds {EMIT_MAX_BYTES} bytes")
            return
        record.ring.append(value)
        reply(True, "null")

    @staticmethod
    def _sleep(record: RunRecord, ms: Any, reply: Reply,
               calls: anyio.abc.TaskGroup) -> None:
        if (isinstance(ms, bool) or not isinstance(ms, int | float)
                or not 0 <= ms <= record.limits.timeout_ms):
            reply(False, "Invalid program.sleep duration")
            return
        loop = asyncio_loop()
        if loop is None:
            calls.start_soon(_sleep_then_reply, ms / 1000, reply)
            return
        # On asyncio a loop timer answers the guest directly: far cheaper than a
        # task per sleep, which matters for many paced programs. The run's end
        # cancels whatever is still pending.
        timers = record.timers

        def wake() -> None:
            timers.discard(handle)
            reply(True, "null")

        handle = loop.call_later(ms / 1000, wake)
        timers.add(handle)

    def _start_evaluation(self, record: RunRecord, args: Any,
                          reply: Reply, calls: anyio.abc.TaskGroup) -> None:
        if "jev.evaluate" not in record.program.requires:
            reply(False, "Capability not granted to Jev program: jev.evaluate")
            return
        try:
            request = validate_request(args, max_bytes=self._max_request_bytes)
        except EvaluationError as exc:
            reply(False, str(exc))
            return
        denied = record.budget.begin_evaluation()
        if denied is not None:
            reply(False, denied)
            return
        calls.start_soon(self._evaluate, record, request, reply)

    async def _evaluate(self, record: RunRecord, request: EvaluationRequest,
                        reply: Reply) -> None:
        try:
            evaluation = await self._evaluator.evaluate(request, timeout=self._request_timeout_s)
        except EvaluationError as exc:
            record.budget.end_evaluation()
            reply(False, clip_error(str(exc)))
            return
        except Exception as exc:  # an evaluator bug: the run sees a clean error
            record.budget.end_evaluation()
            reply(False, f"jev.evaluate failed: {type(exc).__name__}")
            return
        denied = record.budget.end_evaluation(evaluation.usage.input_tokens,
                                              evaluation.usage.output_tokens)
        if denied is not None:
            reply(False, denied)
            return
        reply(True, json.dumps(evaluation.to_json()))

    def _start_tool(self, record: RunRecord, args: Any,
                    reply: Reply, calls: anyio.abc.TaskGroup) -> None:
        if not isinstance(args, dict) or not isinstance(args.get("ref"), str) \
                or set(args) - {"ref", "args"}:
            reply(False, "tools.call expects {ref, args?}")
            return
        ref = args["ref"]
        if ref not in record.program.requires:
            reply(False, f"Capability not granted to Jev program: {ref}")
            return
        if ref == "jev.evaluate":
            # The budget already counted this host call once; evaluate is the same path.
            self._checked(record, ref, args.get("args"), reply, calls,
                          lambda: self._start_evaluation(record, args.get("args"), reply, calls))
            return
        handler = self._capabilities.get(ref)
        if handler is None:
            reply(False, f"Capability not granted to Jev program: {ref}")
            return
        self._checked(record, ref, args.get("args"), reply, calls,
                      lambda: self._call_capability(record, ref, handler, args.get("args"), reply, calls))

    def _call_capability(self, record: RunRecord, ref: str, handler: CapabilityHandler,
                         args: Any, reply: Reply, calls: anyio.abc.TaskGroup) -> None:
        """The one place a granted, registered capability is invoked for the guest."""
        ctx = CallContext(run_id=record.id, run_name=record.program.name, ref=ref)
        calls.start_soon(self._tool, handler, args, ctx, reply, frozenset(record.program.requires))

    @staticmethod
    async def _tool(handler: CapabilityHandler, args: Any, ctx: CallContext,
                    reply: Reply, grant: frozenset[str]) -> None:
        # A program launched from inside this handler can hold no more than `grant`.
        CALLER_GRANT.set(grant)
        try:
            value = normalize_json(await handler(args, ctx), f"{ctx.ref} result")
        except JevError as exc:
            reply(False, clip_error(str(exc)))
            return
        except ValueRejected as exc:
            reply(False, str(exc))
            return
        except Exception as exc:  # handler errors reach the guest as messages, not traces
            reply(False, clip_error(f"{ctx.ref} failed: {exc}"))
            return
        reply(True, json.dumps(value))


def _surely_small(value: Any) -> bool:
    """True when `value` cannot exceed EMIT_MAX_BYTES as JSON, known without encoding it:
    a scalar from the guest (numbers are at most 25 characters), or a short string
    (a character takes at most 6 bytes, as an escape)."""
    if value is None or isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and len(value) * 6 + 2 <= EMIT_MAX_BYTES


async def _sleep_then_reply(seconds: float, reply: Reply) -> None:
    await anyio.sleep(seconds)
    reply(True, "null")
