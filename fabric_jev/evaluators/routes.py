"""The three upstream routes (contract §6): endpoints, model ids, key sources."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..errors import ConfigError, RequestInvalid


@dataclass(frozen=True, slots=True)
class Route:
    name: str
    origin: str  # scheme://host, the part a base-URL override replaces
    path: str
    models: frozenset[str]
    aliases: Mapping[str, str] = field(default_factory=dict)
    store_key: str = ""
    env_keys: tuple[str, ...] = ()

    @property
    def base_url_env(self) -> str:
        return "FABRIC_JEV_" + self.name.upper().replace("-", "_") + "_BASE_URL"

    def model_id(self, requested: str) -> str:
        """Map a request's model (or alias) to this route's id, or refuse it."""
        model = self.aliases.get(requested, requested)
        if model not in self.models:
            raise RequestInvalid(
                f"model {requested!r} is not served on the {self.name} route "
                f"(models: {', '.join(sorted(self.models | set(self.aliases)))})")
        return model


TYPESAFE = Route(
    name="typesafe",
    origin="https://api.typesafe.ai",
    path="/v1/systemone",
    models=frozenset({"jev-latest", "jev-1.13", "jev-1.13.0", "jev-preview"}),
    store_key="jev",
    env_keys=("TYPESAFE_API_KEY",),
)
OPENROUTER = Route(
    name="openrouter",
    origin="https://openrouter.ai",
    path="/api/alpha/decisions",
    models=frozenset({"typesafe/jev-1.13", "~typesafe/jev-latest"}),
    aliases={"jev-latest": "~typesafe/jev-latest", "jev-1.13": "typesafe/jev-1.13"},
    store_key="openrouter",
    env_keys=("OPENROUTER_API_KEY", "TYPESAFE_OPENROUTER_API_KEY"),
)
VERCEL = Route(
    name="vercel-ai-gateway",
    origin="https://ai-gateway.vercel.sh",
    path="/typesafe/v1/systemone",
    models=frozenset({"typesafe-ai/jev"}),
    aliases={"jev-latest": "typesafe-ai/jev"},
    store_key="vercel-ai-gateway",
    # The gateway's own name first, then the name the verification seed gives the same key.
    env_keys=("AI_GATEWAY_API_KEY", "JEV_AI_GATEWAY_API_KEY"),
)
ROUTES: dict[str, Route] = {r.name: r for r in (TYPESAFE, OPENROUTER, VERCEL)}
ROUTE_ALIASES = {"jev": "typesafe", "vercel": "vercel-ai-gateway"}


def get_route(name: str) -> Route:
    route = ROUTES.get(ROUTE_ALIASES.get(name, name))
    if route is None:
        raise ConfigError(f"unknown route {name!r}; expected typesafe, openrouter or vercel")
    return route


def route_for_model(model: str) -> Route:
    """The route a model id implies (typesafe/… → OpenRouter, typesafe-ai/… → Vercel)."""
    if model.startswith(("typesafe/", "~typesafe/")):
        return OPENROUTER
    if model.startswith("typesafe-ai/"):
        return VERCEL
    return TYPESAFE


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> str:
    """A base URL override: https anywhere, plain http only to loopback; no credentials."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base URL {url!r} must be an http(s) URL")
    if parts.username or parts.password:
        raise ConfigError("base URL must not carry credentials")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ConfigError(f"plain http is allowed only to loopback, not {parts.hostname}")
    if parts.query or parts.fragment:
        raise ConfigError("base URL must not have a query or fragment")
    return url.rstrip("/")


def endpoint(route: Route, overrides: Mapping[str, str] | None = None,
             environ: Mapping[str, str] | None = None) -> str:
    """The route's URL: a configured base URL (config, then environment) + the route path."""
    environ = os.environ if environ is None else environ
    base = (overrides or {}).get(route.name) or environ.get(route.base_url_env)
    return (check_base_url(base) if base else route.origin) + route.path
