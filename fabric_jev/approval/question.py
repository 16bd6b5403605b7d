"""What an approver is asked about a capability call, and what it may answer. Pure code.

One `CapabilityCall` describes a call that needs someone's decision: the
program, the ref and its risk, the policy, the redacted and clipped
arguments, and the classifier's verdict when an `auto` policy handed the call
on. The terminal prompt, the MCP elicitation and a library approver are all
given this same value and show the same facts (`facts`), so all three decide
on the same evidence and are recorded alike in the audit trail.

Everything shown to a person passes `printable`: the arguments come from the
guest, and a control character in them could rewrite the question on a
terminal (move the cursor, clear the line, turn text around).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, PlainSerializer

from ..contract.policy import Policy, Risk, Ruling
from ..contract.wire_model import WireData, omit_empty, omit_none

if TYPE_CHECKING:
    from ..contract.values import JsonValue
else:  # pydantic, writing a call's JSON, cannot follow the recursive alias: the arguments are JSON already
    JsonValue = Any
from ..terminal import terminal_safe

#: Each string inside the arguments is cut to this many characters (in the middle: head and tail stay).
ARGUMENT_STRING_CHARS = 1_000
#: The arguments as shown (compact JSON) are cut to this many characters.
ARGUMENTS_SHOWN_CHARS = 2_000
#: At most this many segments of a compound command get a row of their own.
MAX_SEGMENTS_SHOWN = 32
#: Reasons an approver gives for having no one to ask are cut to this length.
UNAVAILABLE_REASON_CHARS = 200

#: An approver's answer: allow this call; allow this ref for the rest of the run;
#: deny this call; deny it and every later question of the run.
Reply = Literal["allow", "always", "deny", "deny_all"]
REPLIES: tuple[Reply, ...] = ("allow", "always", "deny", "deny_all")

#: What a person types at a terminal prompt, and the reply it stands for.
#: Enter alone denies; `N` (capital) is the only answer that differs by case.
TYPED_REPLIES: dict[str, Reply] = {"y": "allow", "yes": "allow", "a": "always", "always": "always",
                                   "n": "deny", "no": "deny", "": "deny", "N": "deny_all"}


def _probabilities(probabilities: Mapping[str, float] | None) -> dict[str, float]:
    return dict(probabilities or {})


@dataclass(frozen=True, slots=True)
class ClassifierVerdict(WireData):
    """The auto-approval classifier's verdict on the call, as an approver sees it."""

    #: An `auto` call reaches an approver only when this is not "allow".
    decision: Ruling
    reason: str
    #: None when the classifier gave none; the JSON then writes an empty object.
    probabilities: Annotated[Mapping[str, float] | None,
                             PlainSerializer(_probabilities, return_type=dict[str, float])] = None


@dataclass(frozen=True, slots=True)
class Unavailable:
    """An approver's answer when it has no one to ask: the call is refused, and `reason`
    completes the sentence "<risk> requires approval and …" in the audit trail.

    Examples: "there is no terminal to ask on" (standard input or error is not a
    TTY), "the MCP client cannot be asked (it does not support elicitation)".
    """

    reason: str


@dataclass(frozen=True, slots=True)
class CapabilityCall(WireData):
    """The capability call an approver is asked about.

    `arguments` are redacted like every other evidence, and each string in them
    is cut to `ARGUMENT_STRING_CHARS`. `classifier` is the classifier's verdict
    when an `auto` policy handed the call on, else None.
    """

    ref: str
    risk: Risk
    policy: Policy
    run_id: str
    #: The program's name (the JSON's ``program``).
    run_name: Annotated[str, Field(alias="program")]
    arguments: JsonValue
    intent: str | None
    classifier: Annotated[ClassifierVerdict | None, Field(exclude_if=omit_none)] = None
    #: Why a person is asked: the rule or floor entry, the risk's policy, or the classifier's verdict.
    asked_because: Annotated[str | None, Field(exclude_if=omit_none)] = None
    #: Every segment of a compound shell command in the arguments (after ;, &&, ||, |), in order.
    commands: Annotated[tuple[str, ...], Field(exclude_if=omit_empty)] = ()
    #: The rule pattern `always` stands for ("always for this pattern"), as the person is shown
    #: it; None when this call offers only "always for this ref" (a floor question offers neither).
    always: Annotated[str | None, Field(exclude_if=omit_none)] = None
    #: The arguments as shown: compact JSON, cut in the middle to ARGUMENTS_SHOWN_CHARS, printable.
    arguments_text: Annotated[str, Field(exclude=True)] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", clip_strings(self.arguments))
        object.__setattr__(self, "arguments_text", shown_arguments(self.arguments))

    @property
    def program(self) -> str:
        """The name of the program whose call this is."""
        return self.run_name

    def facts(self) -> list[tuple[str, str]]:
        """What every approver shows, as (label, printable text) pairs, in order."""
        rows = [("program", printable(self.run_name)),
                ("capability", printable(f"{self.ref} (risk {self.risk}, policy {self.policy})"))]
        # A person never sees less than the classifier: every segment of a compound command,
        # each on its own row, whatever the cut of the arguments hides.
        for n, segment in enumerate(self.commands[:MAX_SEGMENTS_SHOWN], start=1):
            rows.append((f"command {n}/{len(self.commands)}", printable(_clip(segment, ARGUMENT_STRING_CHARS))))
        if len(self.commands) > MAX_SEGMENTS_SHOWN:
            rows.append(("command", f"… and {len(self.commands) - MAX_SEGMENTS_SHOWN} more segments (see arguments)"))
        rows.append(("arguments", self.arguments_text))
        if self.asked_because is not None:
            rows.append(("asked because", printable(_clip(self.asked_because, ARGUMENT_STRING_CHARS))))
        if self.classifier is not None:
            rows.append(("classifier", printable(f"{self.classifier.decision}: {self.classifier.reason}")))
        if self.intent is not None:
            rows.append(("user asked", printable(_clip(self.intent, ARGUMENT_STRING_CHARS))))
        return rows


#: ``async def approver(call: CapabilityCall) -> Reply | Decision | bool | Unavailable``:
#: only an explicit allow (``True``, ``"allow"``, ``"always"`` or a Decision whose
#: ``decision`` is ``"allow"``) allows; ``"always"`` also allows the same ref for the
#: rest of the run, ``"deny_all"`` refuses this and every later question of the run,
#: `Unavailable` says there is no one to ask; anything else, an exception or a timeout
#: refuses. An approver may carry a ``name`` attribute: the audit trail records it.
#: (Defined beside `CapabilityCall`, so the alias resolves wherever it is introspected.)
Approver = Callable[[CapabilityCall], Awaitable[Any]]


def parse_typed_reply(text: str) -> Reply | None:
    """The reply a typed answer line stands for; None for anything unrecognised."""
    line = text.strip()
    if line in TYPED_REPLIES:
        return TYPED_REPLIES[line]
    return TYPED_REPLIES.get(line.lower())


def printable(text: str) -> str:
    """`text` made safe for a terminal: the one renderer, `fabric_jev.terminal.terminal_safe`."""
    return terminal_safe(text)


def _clip(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut in the middle: the head and the tail both stay, so
    a command padded with words cannot hide its end (``…; rm -rf /important``)."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]} …[{len(text) - limit} characters cut]… {text[-tail:]}"


def clip_strings(value: object, limit: int = ARGUMENT_STRING_CHARS) -> object:
    """`value` with every string (keys included) cut to `limit` characters."""
    if isinstance(value, str):
        return _clip(value, limit)
    if isinstance(value, dict):
        return {_clip(str(k), limit): clip_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clip_strings(v, limit) for v in value]
    return value


def shown_arguments(arguments: object) -> str:
    """Arguments as a person sees them: compact JSON, cut, with nothing that steers a terminal."""
    try:
        text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        text = "[arguments that are not JSON]"
    return printable(_clip(text, ARGUMENTS_SHOWN_CHARS))
