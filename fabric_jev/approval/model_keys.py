"""Approval model keys: `pi-fabric/<route>/<model>`, and legacy `jev/<model>`."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import ConfigError
from ..evaluators.routes import OPENROUTER, TYPESAFE, VERCEL, Route

_KEYS: dict[str, tuple[Route, str]] = {
    "pi-fabric/typesafe/jev-latest": (TYPESAFE, "jev-latest"),
    "pi-fabric/typesafe/jev-1.13": (TYPESAFE, "jev-1.13"),
    "pi-fabric/typesafe/jev-1.13.0": (TYPESAFE, "jev-1.13.0"),
    "pi-fabric/typesafe/jev-preview": (TYPESAFE, "jev-preview"),
    "pi-fabric/openrouter/jev-latest": (OPENROUTER, "jev-latest"),
    "pi-fabric/openrouter/jev-1.13": (OPENROUTER, "jev-1.13"),
    "pi-fabric/vercel-ai-gateway/jev-latest": (VERCEL, "jev-latest"),
}
DEFAULT_KEY = "pi-fabric/typesafe/jev-latest"
# Legacy `jev/<model id>`: the model id names its route the way jev.evaluate's ids do.
_LEGACY = {
    "jev-latest": "pi-fabric/typesafe/jev-latest",
    "jev-1.13": "pi-fabric/typesafe/jev-1.13",
    "jev-1.13.0": "pi-fabric/typesafe/jev-1.13.0",
    "jev-preview": "pi-fabric/typesafe/jev-preview",
    "~typesafe/jev-latest": "pi-fabric/openrouter/jev-latest",
    "typesafe/jev-1.13": "pi-fabric/openrouter/jev-1.13",
    "typesafe-ai/jev": "pi-fabric/vercel-ai-gateway/jev-latest",
}


class ApprovalModel(NamedTuple):
    key: str  # normalised pi-fabric/… key
    route: Route
    model: str


def parse_model_key(key: object) -> ApprovalModel:
    """Accept a pi-fabric key or a legacy jev/<model> one; return it normalised."""
    if not isinstance(key, str):
        raise ConfigError("an approval model key must be a string")
    normalised = key.strip()
    if normalised.startswith("jev/"):
        legacy = _LEGACY.get(normalised[4:])
        if legacy is None:
            raise ConfigError(f"unknown legacy approval model {key!r}")
        normalised = legacy
    found = _KEYS.get(normalised)
    if found is None:
        raise ConfigError(f"unknown approval model {key!r}; expected one of: {', '.join(_KEYS)}")
    return ApprovalModel(normalised, *found)
