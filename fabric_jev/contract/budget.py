"""Per-run budgets (contract §5, "In a program"). Pure bookkeeping, no I/O."""

from __future__ import annotations

from .config import EffectiveLimits

#: Budget messages name the limit that was reached (`.format(limit=…)`).
TOOL_CALLS_EXHAUSTED = "Jev tool-call budget of {limit} exhausted"
EVALUATIONS_EXHAUSTED = "Jev inference budget of {limit} exhausted"
TOKENS_EXHAUSTED = "Jev reported-token budget of {limit} exhausted"
EVALUATION_IN_FLIGHT = (
    "Only one jev.evaluate may be in flight per program: await the previous evaluation, "
    "or batch questions into one request"
)


class RunBudget:
    """Counts host calls, evaluations and tokens for one run.

    Once a budget fails, `failure` is set for good and every later host call
    gets the same error, so a guest that catches it cannot retry around it.
    """

    __slots__ = ("_limits", "evaluation_in_flight", "evaluations", "failure", "input_tokens",
                 "output_tokens", "tool_calls")

    def __init__(self, limits: EffectiveLimits) -> None:
        self._limits = limits
        self.tool_calls = 0
        self.evaluations = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.evaluation_in_flight = False
        self.failure: str | None = None

    def begin_call(self) -> str | None:
        """Count one host call; return the error to reject it with, if any."""
        if self.failure is not None:
            return self.failure
        if self.tool_calls >= self._limits.max_tool_calls:
            self.failure = TOOL_CALLS_EXHAUSTED.format(limit=self._limits.max_tool_calls)
            return self.failure
        self.tool_calls += 1
        return None

    def refund_call(self) -> None:
        """Give back the host call of a capability call the policy refused."""
        if self.tool_calls > 0:
            self.tool_calls -= 1

    def begin_evaluation(self) -> str | None:
        """Reserve an evaluation slot before anything is sent."""
        if self.evaluation_in_flight:
            return EVALUATION_IN_FLIGHT
        if self.evaluations >= self._limits.max_evaluations:
            self.failure = EVALUATIONS_EXHAUSTED.format(limit=self._limits.max_evaluations)
            return self.failure
        self.evaluations += 1
        self.evaluation_in_flight = True
        return None

    def end_evaluation(self, input_tokens: int = 0, output_tokens: int = 0) -> str | None:
        """Add reported usage; return the token-budget error if it is now exceeded."""
        self.evaluation_in_flight = False
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if self.input_tokens + self.output_tokens > self._limits.max_tokens:
            self.failure = TOKENS_EXHAUSTED.format(limit=self._limits.max_tokens)
            return self.failure
        return None
