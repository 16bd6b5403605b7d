"""Host calls from the guest: sleep, emit, evaluate, tools.call, nextEvent, advise.

Each call is counted against the run's budgets first, then answered through
`reply(ok, text)`, which writes the settle frame at once. Calls that wait
(sleep, evaluate, tools) run as tasks in the run's task group, so stopping
the run cancels them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..contract.evaluation import validate_request
from ..contract.values import ValueRejected, json_bytes, normalize_json
from ..errors import EvaluationError, JevError, clip_error
from ..sandbox.connection import WorkerConnection, asyncio_loop
from .registry import CallContext
from .run import RunRecord

if TYPE_CHECKING:
    from .host import JevHost

EMIT_MAX_BYTES = 4_096
CALL_KINDS = frozenset({"sleep", "emit", "evaluate", "tool", "nextEvent", "advise"})


class HostCalls:
    def __init__(self, host: JevHost) -> None:
        self._host = host

    def dispatch(self, record: RunRecord, conn: WorkerConnection, calls: anyio.abc.TaskGroup,
                  call_id: int, kind: str, args: Any) -> None:
        def reply(ok: bool, text: str) -> None:
            conn.send(b"S", b"%d %d " % (call_id, ok) + text.encode("utf-8", "surrogatepass"))

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
            self._start_evaluation(record, args, reply, calls)
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
            assert record.observation is not None  # launch requires observe for jev.advise
            calls.start_soon(self._guarded, record.observation.advise(args), reply)

    @staticmethod
    async def _guarded(awaitable: Any, reply: Callable[[bool, str], None]) -> None:
        try:
            value = await awaitable
        except JevError as exc:
            reply(False, clip_error(str(exc)))
            return
        reply(True, json.dumps(value))

    def _emit(self, record: RunRecord, value: Any,
              reply: Callable[[bool, str], None]) -> None:
        try:
            value = normalize_json(value, "program.emit value")
        except ValueRejected as exc:
            reply(False, str(exc))
            return
        if json_bytes(value) > EMIT_MAX_BYTES:
            reply(False, f"program.emit value exceeds {EMIT_MAX_BYTES} bytes")
            return
        record.ring.append(value)
        reply(True, "null")

    @staticmethod
    def _sleep(record: RunRecord, ms: Any, reply: Callable[[bool, str], None],
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
                          reply: Callable[[bool, str], None], calls: anyio.abc.TaskGroup) -> None:
        if "jev.evaluate" not in record.program.requires:
            reply(False, "Capability not granted to Jev program: jev.evaluate")
            return
        try:
            request = validate_request(args, max_bytes=self._host.config.maxRequestBytes)
        except EvaluationError as exc:
            reply(False, str(exc))
            return
        denied = record.budget.begin_evaluation()
        if denied is not None:
            reply(False, denied)
            return
        calls.start_soon(self._evaluate, record, request, reply)

    async def _evaluate(self, record: RunRecord, request: Any,
                        reply: Callable[[bool, str], None]) -> None:
        try:
            evaluation = await self._host.evaluator.evaluate(
                request, timeout=self._host.config.requestTimeoutMs / 1000)
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
                    reply: Callable[[bool, str], None], calls: anyio.abc.TaskGroup) -> None:
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
            self._start_evaluation(record, args.get("args"), reply, calls)
            return
        handler = self._host.capabilities.get(ref)
        if handler is None:
            reply(False, f"Capability not granted to Jev program: {ref}")
            return
        ctx = CallContext(run_id=record.id, run_name=record.program.name, ref=ref)
        calls.start_soon(self._tool, handler, args.get("args"), ctx, reply)

    @staticmethod
    async def _tool(handler: Any, args: Any, ctx: CallContext,
                    reply: Callable[[bool, str], None]) -> None:
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


async def _sleep_then_reply(seconds: float, reply: Callable[[bool, str], None]) -> None:
    await anyio.sleep(seconds)
    reply(True, "null")
