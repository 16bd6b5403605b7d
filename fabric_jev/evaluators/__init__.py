"""Judgment sources for jev.evaluate.

Names load on first use: the HTTP client (httpx) and the local encoder (numpy)
cost more to import than a command that never asks them should pay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import Evaluator
    from .cassette import request_digest
    from .credentials import AuthStore, CredentialResolver
    from .fixture import FixtureEvaluator
    from .http import HttpEvaluator
    from .llm import LlmEvaluator
    from .llm_profile import LlmProfile
    from .local import LocalEvaluator
    from .recording import CassetteEvaluator, RecordingEvaluator
    from .routes import OPENROUTER, ROUTES, TYPESAFE, VERCEL, Route
    from .select import build_evaluator, evaluator_from_spec

_LAZY = {
    "Evaluator": ".base",
    "request_digest": ".cassette",
    "CassetteEvaluator": ".recording", "RecordingEvaluator": ".recording",
    "AuthStore": ".credentials", "CredentialResolver": ".credentials",
    "FixtureEvaluator": ".fixture",
    "HttpEvaluator": ".http",
    "LlmEvaluator": ".llm", "LlmProfile": ".llm_profile",
    "LocalEvaluator": ".local",
    **dict.fromkeys(("OPENROUTER", "ROUTES", "TYPESAFE", "VERCEL", "Route"), ".routes"),
    "build_evaluator": ".select", "evaluator_from_spec": ".select",
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "OPENROUTER", "ROUTES", "TYPESAFE", "VERCEL", "AuthStore", "CassetteEvaluator",
    "CredentialResolver", "Evaluator", "FixtureEvaluator", "HttpEvaluator", "LlmEvaluator", "LlmProfile",
    "LocalEvaluator",
    "RecordingEvaluator", "Route", "build_evaluator", "evaluator_from_spec", "request_digest",
]
