"""Turn an `--evaluator` spec (or the config's `evaluator` section) into an Evaluator."""

from __future__ import annotations

from typing import Any

from ..contract.config import HostConfig
from ..errors import ConfigError
from .base import Evaluator
from .fixture import FixtureEvaluator


def build_evaluator(spec: str | None, config: HostConfig) -> Evaluator | None:
    """``fixture:FILE`` reads deterministic answers; None means no evaluator."""
    spec = spec or config.evaluator.get("kind")
    if spec is None:
        return None
    kind, _, arg = spec.partition(":")
    if kind == "fixture":
        if not arg:
            raise ConfigError("--evaluator fixture needs a file: fixture:FILE")
        return FixtureEvaluator.from_file(arg)
    raise ConfigError(f"unknown evaluator {spec!r}; expected fixture:FILE")


def describe(evaluator: Evaluator | None) -> dict[str, Any]:
    return {} if evaluator is None else evaluator.status()
