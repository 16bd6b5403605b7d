"""Turn an `--evaluator` spec (or the config's `evaluator` section) into an Evaluator.

Specs: ``local`` (the default when no route is configured; ``--profile FILE``
or the section's ``profile`` adapts it), ``fixture:FILE``,
``cassette:FILE`` (replay only), ``record:FILE`` (replay, recording misses
from the configured route), ``typesafe``, ``openrouter``, ``vercel``.

The config's ``evaluator`` section::

    {"kind": "typesafe", "baseUrls": {"typesafe": "http://127.0.0.1:8000"},
     "credentialCommand": ["pass", "show", "typesafe"]}
"""

from __future__ import annotations

from typing import Any

from ..contract.config import HostConfig
from ..errors import ConfigError
from .base import Evaluator
from .cassette import CassetteEvaluator
from .credentials import AuthStore, CredentialResolver
from .fixture import FixtureEvaluator
from .routes import ROUTE_ALIASES, ROUTES, get_route, route_for_model

_SECTION_KEYS = {"kind", "baseUrls", "credentialCommand", "route", "profile"}


def _section(config: HostConfig) -> dict[str, Any]:
    section = dict(config.evaluator)
    unknown = set(section) - _SECTION_KEYS
    if unknown:
        raise ConfigError(f"unknown evaluator config keys: {', '.join(sorted(unknown))}")
    return section


def build_route_evaluator(name: str, config: HostConfig, *, store: AuthStore | None = None) -> Evaluator:
    from .http import HttpEvaluator

    section = _section(config)
    route = get_route(name)
    base_urls = section.get("baseUrls") or {}
    if not isinstance(base_urls, dict):
        raise ConfigError("evaluator.baseUrls must map route names to base URLs")
    resolver = CredentialResolver(route, store=store, command=section.get("credentialCommand"))
    return HttpEvaluator(route, model=config.model, credentials=resolver, base_urls=base_urls)


def build_evaluator(spec: str | None, config: HostConfig, *,
                    store: AuthStore | None = None) -> Evaluator:
    section = _section(config)
    spec = spec or section.get("kind")
    if spec is None:
        # A model id that names a route (typesafe/…, typesafe-ai/…) picks it; otherwise local.
        if config.model != "jev-latest" and route_for_model(config.model).name != "typesafe":
            spec = route_for_model(config.model).name
        else:
            spec = "local"
    kind, _, arg = spec.partition(":")
    profile = section.get("profile")
    if profile is not None and kind != "local":
        raise ConfigError(f"a profile adapts the local evaluator only, not {kind!r}")
    if kind == "local":
        from .local import LocalEvaluator
        from .profile import Profile

        if profile is not None and not isinstance(profile, str):
            raise ConfigError("evaluator.profile must be a file name")
        return LocalEvaluator(profile=Profile.load(profile) if profile else None)
    if kind == "fixture":
        if not arg:
            raise ConfigError("--evaluator fixture needs a file: fixture:FILE")
        return FixtureEvaluator.from_file(arg)
    if kind in ("cassette", "record"):
        if not arg:
            raise ConfigError(f"--evaluator {kind} needs a file: {kind}:FILE")
        inner = None
        if kind == "record":
            inner = build_route_evaluator(section.get("route", "typesafe"), config, store=store)
        return CassetteEvaluator(arg, record_from=inner, model=config.model)
    if kind in ROUTES or kind in ROUTE_ALIASES:
        return build_route_evaluator(kind, config, store=store)
    raise ConfigError(f"unknown evaluator {spec!r}; expected local, fixture:FILE, cassette:FILE, "
                      "record:FILE, typesafe, openrouter or vercel")
