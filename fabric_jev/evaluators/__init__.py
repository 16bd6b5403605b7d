"""Judgment sources for jev.evaluate."""

from .base import Evaluator
from .cassette import CassetteEvaluator, request_digest
from .credentials import AuthStore, CredentialResolver
from .fixture import FixtureEvaluator
from .http import HttpEvaluator
from .local import LocalEvaluator
from .routes import OPENROUTER, ROUTES, TYPESAFE, VERCEL, Route
from .select import build_evaluator

__all__ = [
    "OPENROUTER", "ROUTES", "TYPESAFE", "VERCEL", "AuthStore", "CassetteEvaluator",
    "CredentialResolver", "Evaluator", "FixtureEvaluator", "HttpEvaluator", "LocalEvaluator",
    "Route", "build_evaluator", "request_digest",
]
