"""Judgment sources for jev.evaluate."""

from .base import Evaluator
from .fixture import FixtureEvaluator

__all__ = ["Evaluator", "FixtureEvaluator"]
