"""Approval model keys: `pi-fabric/<route>/<model>`, and legacy `jev/<model>`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ..errors import ConfigError

if TYPE_CHECKING:  # the routes load when a key's route is asked for, not when settings are read
    from ..evaluators.routes import Route

#: Each key's route (by name) and model.
_KEYS: dict[str, tuple[str, str]] = {
    "pi-fabric/typesafe/jev-latest": ("typesafe", "jev-latest"),
    "pi-fabric/typesafe/jev-1.13": ("typesafe", "jev-1.13"),
    "pi-fabric/typesafe/jev-1.13.0": ("typesafe", "jev-1.13.0"),
    "pi-fabric/typesafe/jev-preview": ("typesafe", "jev-preview"),
    "pi-fabric/openrouter/jev-latest": ("openrouter", "jev-latest"),
    "pi-fabric/openrouter/jev-1.13": ("openrouter", "jev-1.13"),
    "pi-fabric/vercel-ai-gateway/jev-latest": ("vercel-ai-gateway", "jev-latest"),
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
    from ..evaluators.routes import get_route

    normalised = model_key(key)
    route, model = _KEYS[normalised]
    return ApprovalModel(normalised, get_route(route), model)


def model_key(key: object) -> str:
    """`parse_model_key(key).key`, without loading the routes."""
    if not isinstance(key, str):
        raise ConfigError("an approval model key must be a string")
    normalised = key.strip()
    if normalised.startswith("jev/"):
        legacy = _LEGACY.get(normalised[4:])
        if legacy is None:
            raise ConfigError(f"unknown legacy approval model {key!r}")
        normalised = legacy
    if normalised not in _KEYS:
        raise ConfigError(f"unknown approval model {key!r}; expected one of: {', '.join(_KEYS)}")
    return normalised
