"""A failure told in words: which call failed and why, for a run's error. Pure code, no I/O.

A run calls application code: its evaluator's `evaluate()`, the run's
`on_evaluation` listener, capability handlers. What such code raises reaches
the host wrapped: anyio's task groups put what a task raised into an
exception group, whose own message ("unhandled errors in a TaskGroup (1
sub-exception)") names no cause. `describe_failure` unwraps (nested) groups
to the errors they hold and names each (at most five, then how many more),
says which call raised them when it is known (`application_call` marks the
call: `status() of MyEvaluator raised TypeError: …`), and gives text fit for
an envelope: redacted (an exception's message may quote a key) and cut to
2,000 characters.

Only `Exception`s are ever wrapped or described here: cancellation is a
`BaseException` and passes through `application_call` as it was raised.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import clip_error

# CallFailed is the host's own marker, never raised to a caller (describe_failure reads it): not exported.
__all__ = ["MAX_NAMED_ERRORS", "application_call", "describe_failure"]

#: The most errors of one group that a description names; the rest are counted.
MAX_NAMED_ERRORS = 5
#: Errors read from one group at most (a hostile group may hold millions); the rest are not counted.
_MOST_READ = 10_000
#: Characters of a description read before redaction (it keeps 2,000 of them).
_MOST_CHARS = 65_536


class CallFailed(Exception):
    """Application code the host called raised: `call` names the call, `error` (also the
    `__cause__`) what it raised."""

    def __init__(self, call: str, error: Exception) -> None:
        super().__init__(call)
        self.call = call
        self.error = error

    def __str__(self) -> str:
        return describe_failure(self)


@contextmanager
def application_call(call: str) -> Iterator[None]:
    """Mark application code: an `Exception` it raises comes out as `CallFailed(call, …)`.

    `call` says which call it was, as a person reads it: `evaluate() of MyEvaluator`.
    """
    try:
        yield
    except Exception as exc:  # never BaseException: a cancellation passes as raised
        raise CallFailed(call, exc) from exc


def _leaves(error: BaseException) -> tuple[list[BaseException], int]:
    """The errors a (nested) group holds, in order (the first `_MOST_READ`), and how many were read."""
    found: list[BaseException] = []
    stack: list[BaseException] = [error]
    read = 0
    while stack and read < _MOST_READ:
        item = stack.pop()
        if isinstance(item, BaseExceptionGroup) and item.exceptions:
            stack.extend(reversed(item.exceptions))
            continue
        read += 1
        found.append(item)
    return found, read


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # an error whose __str__ raises still has a name
        return "(its message could not be read)"


def _one(error: BaseException, with_type: bool = True) -> str:
    """`TypeError: message` for one error (`call raised …` for a marked call), and its explicit cause."""
    if isinstance(error, CallFailed):
        return f"{error.call} raised {_many(error.error)}"
    message = _text(error)
    shown = f"{type(error).__name__}: {message}" if message and with_type else message or type(error).__name__
    cause = error.__cause__
    if cause is not None and not isinstance(cause, BaseExceptionGroup):
        cause_text = _text(cause)
        shown += f" (from {type(cause).__name__}{': ' + cause_text if cause_text else ''})"
    return shown


def _many(error: BaseException, with_type: bool = True) -> str:
    leaves, read = _leaves(error)
    if len(leaves) == 1:
        return _one(leaves[0], with_type)
    named = "; ".join(_one(leaf) for leaf in leaves[:MAX_NAMED_ERRORS])
    more = f"; and {read - MAX_NAMED_ERRORS} more" if read > MAX_NAMED_ERRORS else ""
    return f"{read}{'+' if read >= _MOST_READ else ''} errors: {named}{more}"


def describe_failure(error: BaseException, call: str | None = None, *, with_type: bool = True) -> str:
    """What failed and why, in one redacted line of at most 2,000 characters.

    `call` names the call that raised `error` when the caller knows it (a
    `CallFailed` names its own). `with_type=False` leaves the error's type out
    when it is a single one with a message (a capability handler's message, as
    the guest has always read it).
    """
    from ..redaction.redactor import redact_text  # RE2 and the rules load with a run's first failure

    what = _many(error, with_type)
    text = f"{call} raised {what}" if call else what
    # Redacted before it is cut, so no secret is cut in two and shown in part; what is read is
    # bounded (a message may be megabytes), far past what the cut to 2,000 characters keeps.
    return clip_error(redact_text(text[:_MOST_CHARS])[0])
