"""The evidence the classifier sees (contract §9). Pure, bounded, redacted.

Limits: conversation from the latest user message, each entry ≤ 6,000
characters, ≤ 24,000 in all with the tail kept; session actions newest ≤ 40,
≤ 12,000 characters in all, argument strings ≤ 1,500; the proposed action's
arguments ≤ 16,000 characters of JSON. Every cut sets a flag that is part of
the evidence. Credentials are replaced by markers that name their kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..contract.values import JsonValue
from ..redaction.redactor import redact

ENTRY_CHARS = 6_000
CONVERSATION_CHARS = 24_000
MAX_SESSION_ACTIONS = 40
SESSION_ACTION_CHARS = 12_000
ARGUMENT_STRING_CHARS = 1_500
ACTION_ARGUMENT_CHARS = 16_000


@dataclass(frozen=True)
class ProposedAction:
    ref: str
    risk: str
    description: str
    arguments: JsonValue = None


@dataclass(frozen=True)
class ApprovalRequest:
    user_text: str | None
    action: ProposedAction
    conversation: list[dict[str, str]] = field(default_factory=list)  # [{role, text}]
    session_actions: list[dict[str, Any]] = field(default_factory=list)  # [{ref, arguments, ...}]


def _clip_strings(value: Any, limit: int, flags: dict[str, bool], flag: str) -> Any:
    if isinstance(value, str):
        if len(value) > limit:
            flags[flag] = True
            return value[:limit] + "…"
        return value
    if isinstance(value, list):
        return [_clip_strings(v, limit, flags, flag) for v in value]
    if isinstance(value, dict):
        return {k: _clip_strings(v, limit, flags, flag) for k, v in value.items()}
    return value


def build_evidence(request: ApprovalRequest) -> tuple[dict[str, Any], list[str]]:
    """The classifier's state object, and the credential kinds that were redacted.

    Raises ValueError for malformed evidence (entries that are not {role, text}
    strings, cyclic or non-finite arguments); `classify` turns that into "ask".
    """
    flags = {"conversationEntryTruncated": False, "conversationTruncated": False,
             "sessionActionsTruncated": False, "sessionArgumentTruncated": False,
             "actionArgumentsTruncated": False}
    kinds: list[str] = []

    # Conversation: from the latest user message on; each entry capped; tail kept.
    entries = request.conversation
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("text", ""), str) and isinstance(e.get("role", ""), str)
            for e in entries):
        raise ValueError("the conversation must be a list of {role, text} objects of strings")
    last_user = max((i for i, e in enumerate(entries) if e.get("role") == "user"), default=None)
    if last_user is not None:
        entries = entries[last_user:]
    elif entries:
        entries = []
        flags["conversationTruncated"] = True
    conversation: list[dict[str, str]] = []
    for e in entries:
        text = e.get("text", "")
        if len(text) > ENTRY_CHARS:
            text = text[:ENTRY_CHARS] + "…"
            flags["conversationEntryTruncated"] = True
        conversation.append({"role": str(e.get("role", "")), "text": text})
    total = 0
    kept: list[dict[str, str]] = []
    for e in reversed(conversation):
        total += len(e["text"])
        if total > CONVERSATION_CHARS:
            flags["conversationTruncated"] = True
            break
        kept.append(e)
    conversation = list(reversed(kept))

    # Session actions: newest first up to 40, argument strings capped, 12,000 chars in all.
    actions = request.session_actions
    if not isinstance(actions, list):
        raise ValueError("the session actions must be a list")
    if len(actions) > MAX_SESSION_ACTIONS:
        flags["sessionActionsTruncated"] = True
    projected: list[Any] = []
    used = 0
    for action in reversed(actions[-MAX_SESSION_ACTIONS:]):
        # Redacted first: that also refuses cyclic or over-deep actions (ValueError).
        item = _clip_strings(redact(action)[0], ARGUMENT_STRING_CHARS, flags, "sessionArgumentTruncated")
        size = len(json.dumps(item, ensure_ascii=False, allow_nan=False))
        if used + size > SESSION_ACTION_CHARS:
            flags["sessionActionsTruncated"] = True
            break
        used += size
        projected.append(item)
    projected.reverse()

    # The exact action: its arguments redacted as a structure (so secret-named keys
    # inside them lose their values), then as JSON text, capped.
    arguments, found = redact(request.action.arguments)
    kinds.extend(found)
    args_text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, allow_nan=False)
    if len(args_text) > ACTION_ARGUMENT_CHARS:
        args_text = args_text[:ACTION_ARGUMENT_CHARS] + "…"
        flags["actionArgumentsTruncated"] = True

    evidence: dict[str, Any] = {
        "currentUserText": request.user_text,
        "conversation": conversation,
        "sessionActions": projected,
        "proposedAction": {"ref": request.action.ref, "risk": request.action.risk,
                           "description": request.action.description, "argumentsJson": args_text},
        "truncation": flags,
    }
    redacted, found = redact(evidence)
    kinds.extend(found)
    return redacted, kinds
