"""What `fabric-jev status` reports: every route, whether it could answer now, and which one is used.

For each route (the offline `local` evaluator, the three System One routes,
the model routes `openai`, `ollama`, `anthropic`, and `gguf`, a model file that
llama.cpp serves from a process the host starts): whether the config enables it, its mode (offline: nothing leaves
the host; online: requests go to an endpoint), where its key would come
from, and — when it is not ready — why, with the fix. Plus the route the
host would pick and the rule that picked it (`select.select`).

Presence only, like every status: it never runs a credential command, never
touches the network, never loads the local model (only checks that its
weights are installed) and never starts a gguf server (only checks that
llama.cpp's server is installed and that the file is a GGUF file); `verified`
is always false.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from ..contract.config import HostConfig
from ..contract.wire_model import WireData, omit_none
from ..errors import ConfigError, RequestInvalid
from .base import NO_CREDENTIALS_NEEDED, EvaluatorStatus, Mode
from .credentials import AuthStore, CredentialResolver
from .llm_routes import LLM_MODEL_RULE, LLM_ROUTES, base_url, is_llm_model, is_loopback_url, key_needed
from .llm_routes import endpoint as llm_endpoint
from .routes import ROUTES, endpoint
from .select import Selection, disabled_routes, select


@dataclass(frozen=True)
class RouteStatus(WireData):
    """One route as the host sees it now (a row of `fabric-jev status --json`'s `routes`)."""

    name: str
    mode: Mode
    enabled: bool
    selected: bool
    ready: bool
    problem: str | None
    credentials: dict[str, Any]
    model: str | None = None
    endpoint: str | None = None
    #: The local route's learned profile, when the config names one.
    profile: Annotated[str | None, Field(exclude_if=omit_none)] = None
    #: The gguf route's model file and how its server would start, when that route is chosen.
    server: Annotated[dict[str, Any] | None, Field(exclude_if=omit_none)] = None


def _local(config: HostConfig, disabled: frozenset[str], selected: bool) -> RouteStatus:
    from .local import MODEL_NAME
    from .local_model import weights_problem

    if "local" in disabled:
        problem: str | None = "disabled in the config (evaluator.disabled)"
    else:
        problem = weights_problem()
    profile = config.evaluator.get("profile")
    return RouteStatus("local", "offline", "local" not in disabled, selected, problem is None, problem,
                       NO_CREDENTIALS_NEEDED.to_json(), model=MODEL_NAME,
                       profile=profile if isinstance(profile, str) else None)


def _http(name: str, config: HostConfig, disabled: frozenset[str], selected: bool, store: AuthStore | None,
          environ: Mapping[str, str] | None) -> RouteStatus:
    route = ROUTES[name]
    section = config.evaluator
    enabled = name not in disabled
    problem: str | None = None if enabled else "disabled in the config (evaluator.disabled)"
    try:
        model: str | None = route.model_id(config.model)
    except RequestInvalid as exc:
        model, problem = None, problem or str(exc)
    base_urls = section.get("baseUrls") or {}
    try:
        url: str | None = endpoint(route, base_urls if isinstance(base_urls, dict) else {}, environ)
    except ConfigError as exc:
        url, problem = None, problem or str(exc)
    try:
        resolver = CredentialResolver(route, store=store, command=section.get("credentialCommand"),
                                      environ=environ)
    except ConfigError as exc:
        return RouteStatus(name, "online", enabled, selected, False, problem or str(exc),
                           {"configured": False, "source": "missing", "verified": False}, model, url)
    found = resolver.status()
    credentials = found.to_json()
    if found.detail:
        credentials["from"] = found.detail
    if problem is None and not found.configured:
        problem = resolver.missing_message()
    return RouteStatus(name, "online", enabled, selected, problem is None, problem, credentials, model, url)


def _llm(name: str, config: HostConfig, disabled: frozenset[str], selection: Selection, store: AuthStore | None,
         environ: Mapping[str, str] | None) -> RouteStatus:
    """A model route: its base URL, where its key would come from (a loopback server needs none)."""
    route = LLM_ROUTES[name]
    section = config.evaluator
    selected = selection.route == name
    enabled = name not in disabled
    problem: str | None = None if enabled else "disabled in the config (evaluator.disabled)"
    model = selection.model if selected else None
    if selected and model is not None and not is_llm_model(model):
        problem = problem or f"model name {model[:140]!r} for the {name} route must be {LLM_MODEL_RULE}"
    base_urls = section.get("baseUrls") or {}
    try:
        base: str | None = base_url(route, base_urls if isinstance(base_urls, dict) else {}, environ)
    except ConfigError as exc:
        base, problem = None, problem or str(exc)
    mode: Mode = "offline" if base is not None and is_loopback_url(base) else "online"
    url = llm_endpoint(route, base) if base is not None else None
    if not route.takes_key:
        return RouteStatus(name, mode, enabled, selected, problem is None, problem,
                           NO_CREDENTIALS_NEEDED.to_json(), model, url)
    try:
        resolver = CredentialResolver(route, store=store, command=section.get("credentialCommand"), environ=environ)
    except ConfigError as exc:
        return RouteStatus(name, mode, enabled, selected, False, problem or str(exc),
                           {"configured": False, "source": "missing", "verified": False}, model, url)
    found = resolver.status()
    credentials = found.to_json() if found.configured or base is None or key_needed(route, base) \
        else NO_CREDENTIALS_NEEDED.to_json()
    if found.detail:
        credentials["from"] = found.detail
    if problem is None and not found.configured and base is not None and key_needed(route, base):
        problem = resolver.missing_message()
    return RouteStatus(name, mode, enabled, selected, problem is None, problem, credentials, model, url)


def _gguf(config: HostConfig, disabled: frozenset[str], selection: Selection) -> RouteStatus:
    """The gguf route: llama.cpp's server installed, and (chosen) the file a GGUF file; nothing started."""
    from .gguf_file import check_gguf_file, describe, model_name, settings_from
    from .gguf_server import extra_problem

    selected = selection.route == "gguf"
    enabled = "gguf" not in disabled
    problem = None if enabled else "disabled in the config (evaluator.disabled)"
    problem = problem or extra_problem()
    model = server = None
    if selected:
        path = selection.spec.partition(":")[2]
        model = model_name(path) if path else None
        server = {"file": path, "started": "at the first evaluation, on 127.0.0.1"}
        try:
            settings = settings_from(config.evaluator)
            server["file"] = str(check_gguf_file(path))
            server["settings"] = describe(settings)
        except ConfigError as exc:
            problem = problem or str(exc)
    return RouteStatus("gguf", "offline", enabled, selected, problem is None, problem,
                       NO_CREDENTIALS_NEEDED.to_json(), model, server=server)


def route_statuses(config: HostConfig, selection: Selection, *, store: AuthStore | None = None,
                   environ: Mapping[str, str] | None = None) -> list[RouteStatus]:
    """Every route, local first, then the System One routes and the model routes (see the module doc)."""
    disabled = disabled_routes(config)
    out = [_local(config, disabled, selection.route == "local")]
    out += [_http(name, config, disabled, selection.route == name, store, environ) for name in ROUTES]
    out += [_llm(name, config, disabled, selection, store, environ) for name in LLM_ROUTES]
    out.append(_gguf(config, disabled, selection))
    return out


def status_report(spec: str | None, config: HostConfig, selected: EvaluatorStatus | None = None, *,
                  store: AuthStore | None = None, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole report (without runs).

    `selected` is the built evaluator's own `status()`, when there is one: it
    decides the top-level `ready`/`problem` (a fixture or cassette has no row
    among the routes; a loaded local model is ready whatever the files say).
    """
    chosen = select(spec, config)
    routes = route_statuses(config, chosen, store=store, environ=environ)
    row = next((r for r in routes if r.selected), None)
    model: str | None
    if selected is not None:
        ready, problem, mode = selected.ready, selected.problem, selected.mode
        credentials, model = selected.credentials.to_json(), selected.model
    elif row is not None:
        ready, problem, mode, credentials, model = row.ready, row.problem, row.mode, row.credentials, row.model
    else:  # a fixture/cassette spec that was not built: status does not read its file
        ready, problem, mode, credentials, model = True, None, "offline", NO_CREDENTIALS_NEEDED.to_json(), None
    report: dict[str, Any] = {
        "ready": ready, "route": chosen.route, "mode": mode, "model": model, "credentials": credentials,
        "selection": chosen.to_json(), "routes": [r.to_json() for r in routes]}
    if problem:
        report["problem"] = problem
    return report


def format_report(report: Mapping[str, Any]) -> str:
    """The text `fabric-jev status` prints without --json."""
    sel = report["selection"]
    lines = [f"{'ready' if report['ready'] else 'NOT READY'}: {sel['route']} ({report['mode']}), "
             f"model {report.get('model') or '-'}",
             f"  chosen because {sel['rule']}"]
    if report.get("problem"):
        lines.append(f"  problem: {report['problem']}")
    lines.append("routes (* chosen):")
    for r in report["routes"]:
        cred = r["credentials"]
        if cred.get("source") == "not needed":
            where = "no key needed"
        elif cred.get("configured"):
            where = f"key from {cred['source']}" + (f" ({cred['from']})" if cred.get("from") else "")
        else:
            where = "no key"
        state = "ready" if r["ready"] else "not ready"
        mark = "*" if r["selected"] else " "
        lines.append(f" {mark} {r['name']:<18} {r['mode']:<8} {'enabled' if r['enabled'] else 'disabled':<9}"
                     f" {state:<10} {where}")
        if r["problem"]:
            lines.append(f"      {r['problem']}")
        if r["name"] in LLM_ROUTES and r.get("endpoint"):  # where its requests would go: base URLs are set per user
            lines.append(f"      {r['endpoint']}")
        if r.get("server"):  # the gguf route's file, and how its server would start
            from ..terminal import one_line

            server = r["server"]
            lines.append(f"      {one_line(server['file'])}: llama.cpp started {server['started']}"
                         + (f" ({server['settings']})" if server.get("settings") else ""))
    lines.append("keys are checked for presence only (never sent, never verified); no server is contacted "
                 "or started")
    runs = report.get("runs")
    if runs is not None:
        lines.append(f"runs: {len(runs)}")
    return "\n".join(lines)


__all__ = ["RouteStatus", "format_report", "route_statuses", "status_report"]
