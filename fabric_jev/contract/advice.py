"""A `program.advise` request (contract §8): its shape, checked before anything else. Pure code.

Kept apart from the observe options so that answering a run's host calls does
not load the observer machinery (its pydantic models and redaction rules).
"""

from __future__ import annotations

from typing import NamedTuple

ADVICE_MAX_CHARS = 2_000
ADVICE_SHAPE = (f"program.advise expects {{eventId, message}} with a message of "
                f"1-{ADVICE_MAX_CHARS} characters")


class AdviceRequest(NamedTuple):
    """A well-formed `program.advise` request (contract §8); not yet checked for delivery."""

    event_id: str
    message: str


def parse_advice(raw: object) -> AdviceRequest | None:
    """The advice request in `raw`, or None when it is malformed (see ADVICE_SHAPE)."""
    if (not isinstance(raw, dict) or set(raw) != {"eventId", "message"}
            or not isinstance(raw["eventId"], str) or not isinstance(raw["message"], str)
            or not 1 <= len(raw["message"]) <= ADVICE_MAX_CHARS):
        return None
    return AdviceRequest(raw["eventId"], raw["message"])
