"""The limits `fabric-jev serve` enforces (docs/evaluators.md lists them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServeLimits:
    #: A larger body gets 413 before it is read whole.
    max_body_bytes: int = 4 * 1024 * 1024
    #: Request line plus headers; larger gets 400.
    max_header_bytes: int = 64 * 1024
    #: Open connections. At the cap a newcomer closes the oldest that has sent nothing (then an idle
    #: kept-alive one, then one still sending headers, then one still sending its body); if every
    #: one has its whole request in, it gets a JSON 503.
    max_connections: int = 512
    #: From the connection (or the end of the previous response) to the end of a request's headers.
    header_timeout_s: float = 10.0
    #: From the end of the headers to the end of the body; past it, 408.
    body_timeout_s: float = 30.0
    #: A kept-alive connection with no new request is closed after this.
    idle_timeout_s: float = 5.0
    #: One evaluation, upstream included.
    request_timeout_s: float = 60.0
    #: Evaluations running at once; more requests wait their turn (not refused).
    max_evaluations: int = 4
    #: Seconds given to requests in flight when the server stops.
    shutdown_grace_s: float = 5.0
