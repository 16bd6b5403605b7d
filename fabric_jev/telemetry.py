"""OpenTelemetry traces of runs, evaluations, capability calls and approvals (docs/observability.md).

fabric-jev never imports OpenTelemetry itself. It records spans once the process has
imported `opentelemetry.trace` (an application that sets a tracer provider, or
`opentelemetry-instrument`), through the API only: the SDK and the exporters are the
application's choice. Until then, and whenever the run's span is not sampled, each hook
costs one dictionary lookup and a test of None, and no span of any kind is made.

One run is one trace below the caller's current span:

    invoke_workflow <program>        the run, from launch to its terminal state
    ├── evaluate <model>             one jev.evaluate batch (GenAI attributes, token usage)
    │   └── approve jev.evaluate     only when the decision waited for the classifier or a person
    └── execute_tool <ref>           one tools.call or program.advise
        └── approve <ref>

Every span carries the run's id. Inputs, results, question text, capability arguments,
error messages and approval reasons are recorded only with content capture on
(`CAPTURE_CONTENT_ENV`), and even then redacted (`fabric_jev.redaction`) and cut to
`MAX_CONTENT_CHARS`. Credentials are never recorded: no span attribute is made from a key,
a header or the evaluator's configuration beyond its route and model names.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ._patterns import LazyPattern

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from .contract.budget import RunBudget
    from .contract.evaluation import Evaluation, EvaluationRequest
    from .contract.policy import Policy, PolicyOutcome
    from .contract.program import Program

#: The GenAI conventions' switch for recording content; fabric-jev reads it for every kind of content.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Recorded content (JSON text or a message) is cut to this many characters.
MAX_CONTENT_CHARS = 4_096
TRACER_NAME = "fabric_jev"

RUN_ID = "fabric_jev.run.id"
OPERATION = "gen_ai.operation.name"

#: The guest's own error classes: a run's `error.type` names one of them, never free text.
_JS_ERRORS = frozenset({"Error", "TypeError", "RangeError", "ReferenceError", "SyntaxError", "EvalError",
                        "URIError", "AggregateError", "InternalError"})
_ERROR_CLASS = LazyPattern(r"([A-Za-z]{1,32}): ")

_tracer: Tracer | None = None


def _active_tracer() -> Tracer | None:
    """The tracer, once the process has imported OpenTelemetry's API; None before (the flag)."""
    global _tracer
    if _tracer is None:
        api = sys.modules.get("opentelemetry.trace")
        if api is None:
            return None
        # A proxy until a provider is set: it then hands spans to the provider's tracer.
        _tracer = api.get_tracer(TRACER_NAME)
    return _tracer


def capture_content() -> bool:
    """Whether content is recorded (redacted): the switch's value is `true` (or 1, yes)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


def shown(value: object) -> str:
    """A JSON value as a span may hold it: redacted, as JSON text, cut to MAX_CONTENT_CHARS."""
    from .redaction.redactor import redact

    try:
        redacted, _ = redact(value)
        text = json.dumps(redacted, ensure_ascii=False)
    except ValueError:
        text = "[omitted: not finite JSON]"
    return _cut(text)


def shown_text(text: str) -> str:
    """A message as a span may hold it: redacted, cut to MAX_CONTENT_CHARS."""
    from .redaction.redactor import redact_text

    return _cut(redact_text(text)[0])


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[: MAX_CONTENT_CHARS - 1] + "…"


def run_error_type(state: str, error: str | None, budget_failure: str | None) -> str:
    """A failed run's `error.type`: a category or a guest error class, never the message."""
    if state == "timed_out":
        return "timeout"
    if budget_failure is not None:
        return "budget_exhausted"
    said = error or ""
    if said.startswith("Jev host error"):
        return "host_error"
    if said.startswith("Jev program does not compile"):  # a queued run that failed to load
        return "compile_error"
    found = _ERROR_CLASS.match(said)
    if found is not None and found.group(1) in _JS_ERRORS:
        return found.group(1)
    if said.startswith("output "):  # the result broke the output schema or its size
        return "output_invalid"
    return "failed"


def program_digest(program: Program) -> str:
    return "sha256:" + hashlib.sha256(program.code.encode("utf-8", "surrogatepass")).hexdigest()


def run_started(run_id: str, program: Program, input_json: str, *, background: bool) -> RunTrace | None:
    """The run's trace, its span started below the caller's current span; None when nothing records."""
    tracer = _active_tracer()
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        OPERATION: "invoke_workflow", "gen_ai.workflow.name": program.name, RUN_ID: run_id,
        "fabric_jev.program.name": program.name, "fabric_jev.program.digest": program_digest(program),
        "fabric_jev.run.background": background,
    }
    span = tracer.start_span(f"invoke_workflow {program.name}", kind=SpanKind.INTERNAL, attributes=attributes)
    if not span.is_recording():  # not sampled (or no provider): its children would not be either
        span.end()
        return None
    content = capture_content()
    if content:
        span.set_attribute("fabric_jev.run.input", shown(json.loads(input_json)))
    return RunTrace(tracer, span, run_id, content)


class RunTrace:
    """The spans of one run: its own, and those of its capability calls."""

    __slots__ = ("_open", "_tracer", "content", "run_id", "span")

    def __init__(self, tracer: Tracer, span: Span, run_id: str, content: bool) -> None:
        self._tracer = tracer
        self.span = span
        self.run_id = run_id
        self.content = content
        self._open: set[CallTrace] = set()

    def call(self, ref: str, risk: str, arguments: object, request: EvaluationRequest | None,
             model: str, system: str) -> CallTrace:
        """A capability call's span (a child of the run's), started as it passed validation.
        `model` and `system` are the evaluator's, for a jev.evaluate batch (`request`)."""
        from opentelemetry.trace import SpanKind, set_span_in_context

        parent = set_span_in_context(self.span)
        attributes: dict[str, Any] = {RUN_ID: self.run_id, "fabric_jev.capability.ref": ref,
                                      "fabric_jev.capability.risk": risk}
        if request is not None:
            chosen = request.model or model
            attributes.update({
                OPERATION: "evaluate", "gen_ai.system": system, "gen_ai.provider.name": system,
                "gen_ai.request.model": chosen, "gen_ai.output.type": "json",
                "fabric_jev.evaluation.questions": len(request.questions),
                "fabric_jev.evaluation.question_types": sorted({q.type for q in request.questions}),
            })
            name, kind = f"evaluate {chosen}", SpanKind.CLIENT
            if self.content:
                attributes["fabric_jev.evaluation.request"] = shown(request.to_wire(chosen))
        else:
            attributes.update({OPERATION: "execute_tool", "gen_ai.tool.name": ref, "gen_ai.tool.type": "function"})
            name, kind = f"execute_tool {ref}", SpanKind.INTERNAL
            if self.content:
                attributes["gen_ai.tool.call.arguments"] = shown(arguments)
        span = self._tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        traced = CallTrace(self, span, ref)
        self._open.add(traced)
        return traced

    def ended(self, state: str, error: str | None, result: object, budget: RunBudget) -> None:
        """The run is terminal: what is still open ends as cancelled, then the run's span."""
        for left in list(self._open):
            left.cancelled()
        state = str(state)  # a RunState: its value
        span = self.span
        if not span.is_recording():  # ended already
            return
        span.set_attributes({
            "fabric_jev.run.state": state, "fabric_jev.run.evaluations": budget.evaluations,
            "fabric_jev.run.tool_calls": budget.tool_calls, "gen_ai.usage.input_tokens": budget.input_tokens,
            "gen_ai.usage.output_tokens": budget.output_tokens,
        })
        if state in ("failed", "timed_out"):
            _set_error(span, run_error_type(state, error, budget.failure),
                       shown_text(error) if self.content and error else None)
        elif state == "completed" and self.content:
            span.set_attribute("fabric_jev.run.result", shown(result))
        span.end()


class CallTrace:
    """The span of one capability call, and of its approval when that waited."""

    __slots__ = ("_approval", "_run", "ref", "span")

    def __init__(self, run: RunTrace, span: Span, ref: str) -> None:
        self._run = run
        self.span = span
        self.ref = ref
        self._approval: Span | None = None

    def asking(self, policy: Policy) -> AbstractContextManager[Span]:
        """The decision waits for the classifier or a person: its own span, until `decided`,
        current while the gate decides (an approver's own spans are its children)."""
        from opentelemetry.trace import set_span_in_context, use_span

        self._approval = approval = self._run._tracer.start_span(
            f"approve {self.ref}", context=set_span_in_context(self.span),
            attributes={RUN_ID: self._run.run_id, "fabric_jev.capability.ref": self.ref,
                        "fabric_jev.approval.policy": policy})
        return use_span(approval, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def decided(self, policy: Policy, outcome: PolicyOutcome, probability: float | None) -> None:
        """The gate's decision, on the call's span and the approval's; a denial ends the call."""
        attributes: dict[str, Any] = {
            "fabric_jev.approval.policy": policy, "fabric_jev.approval.decided_by": outcome.decided_by,
            "fabric_jev.approval.allowed": outcome.allowed,
        }
        for key, value in (("approver", outcome.approver), ("rule_source", outcome.rule_source),
                           ("floor", outcome.floor), ("probability", probability)):
            if value is not None:
                attributes[f"fabric_jev.approval.{key}"] = value
        if outcome.override is not None:
            attributes["fabric_jev.approval.override"] = True
        if self._run.content:
            attributes["fabric_jev.approval.reason"] = shown_text(outcome.reason)
        self.span.set_attributes(attributes)
        approval, self._approval = self._approval, None
        if approval is not None:
            approval.set_attributes(attributes)
            approval.end()
        if not outcome.allowed:
            self._end_error("denied", None)

    def answered(self, evaluation: Evaluation) -> None:
        """A jev.evaluate batch answered (even one whose answer the token budget withholds)."""
        usage = evaluation.usage
        attributes: dict[str, Any] = {"gen_ai.usage.input_tokens": usage.input_tokens,
                                      "gen_ai.usage.output_tokens": usage.output_tokens}
        if evaluation.model:
            attributes["gen_ai.response.model"] = evaluation.model
        provenance = evaluation.provenance
        if provenance is not None:
            attributes["fabric_jev.evaluation.readout"] = provenance.readout
            attributes["fabric_jev.evaluation.route"] = provenance.route
        if self._run.content:
            attributes["fabric_jev.evaluation.answers"] = shown(evaluation.answers)
        self.span.set_attributes(attributes)

    def succeeded(self, result_json: str | None = None) -> None:
        """The call's answer went back to the guest (a tool's result JSON, recorded with content on)."""
        if result_json is not None and self._run.content:
            self.span.set_attribute("gen_ai.tool.call.result", shown(json.loads(result_json)))
        self._end()

    def failed(self, error_type: str, message: str | None = None) -> None:
        """The call failed: `error_type` is a class or category, `message` recorded with content on."""
        self._end_error(error_type, shown_text(message) if message and self._run.content else None)

    def cancelled(self) -> None:
        """The run ended (stopped, timed out) while the call was still waiting."""
        if self not in self._run._open:
            return
        if self._approval is not None:
            self._approval.set_attribute("fabric_jev.cancelled", True)
            self._approval.end()
            self._approval = None
        self.span.set_attribute("fabric_jev.cancelled", True)
        self._end()

    def current(self) -> AbstractContextManager[Span]:
        """A context manager that makes the call's span current, so spans the target makes
        (an instrumented HTTP client, a handler's own) are its children."""
        from opentelemetry.trace import use_span

        return use_span(self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False)

    def _end_error(self, error_type: str, description: str | None) -> None:
        _set_error(self.span, error_type, description)
        self._end()

    def _end(self) -> None:
        if self in self._run._open:
            self._run._open.discard(self)
            self.span.end()


def _set_error(span: Span, error_type: str, description: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))
