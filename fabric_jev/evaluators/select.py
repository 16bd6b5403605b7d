"""Turn an `--evaluator` spec (or the config's `evaluator` section) into an Evaluator.

Specs: ``local`` (the default when no route is configured; ``--profile FILE``
or the section's ``profile`` adapts it), ``fixture:FILE``,
``cassette:FILE`` (replay only), ``record:FILE`` (replay, recording misses
from the evaluator `record_source` names), ``typesafe``, ``openrouter``,
``vercel``, and the model routes ``openai:MODEL``, ``ollama:MODEL``,
``anthropic:MODEL`` (`llm_routes`; a profile there holds temperatures,
`llm_profile`), and ``gguf:FILE``, a GGUF model file that llama.cpp serves from
a process the host starts (`gguf`). Cassettes are the pytest plugin's JSON Lines (cassette.py).

The config's ``evaluator`` section::

    {"kind": "typesafe", "baseUrls": {"typesafe": "http://127.0.0.1:8000"},
     "credentialCommand": ["pass", "show", "typesafe"], "disabled": ["openrouter"]}
    {"kind": "ollama:qwen3:8b", "baseUrls": {"ollama": "http://127.0.0.1:11434/v1"},
     "readout": "auto", "samples": 5, "concurrency": 4, "retries": 2, "extraBody": {...}}
    {"kind": "gguf:models/qwen2.5-1.5b-instruct-q4_k_m.gguf",
     "gguf": {"contextSize": 8192, "threads": 4, "ports": [8100, 8199]}}

(``route``, the evaluator ``record:FILE`` records from, is any spec but a cassette.)

Which evaluator answers, by the first rule that applies (`select`): the
command line's ``--evaluator``; the section's ``kind``; a configured model id
that names a route (``typesafe/…`` → OpenRouter, ``typesafe-ai/…`` → Vercel);
else the offline local evaluator. A route listed in ``disabled`` (``local``,
``typesafe``, ``openrouter``, ``vercel``, ``openai``, ``ollama``,
``anthropic``, ``gguf``) is never built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, model_validator

from ..contract.config import HostConfig
from ..contract.wire_model import WireModel
from ..errors import ConfigError
from .base import Evaluator

if TYPE_CHECKING:  # each kind's module loads when that kind is built (start-up of `run`)
    from .credentials import AuthStore

_SECTION_KEYS = {"kind", "baseUrls", "credentialCommand", "route", "profile", "disabled",
                 # the model routes' own (llm.py)
                 "readout", "samples", "concurrency", "retries", "extraBody",
                 # the gguf route's server (gguf.py)
                 "gguf"}
_CASSETTE_KINDS = ("cassette", "record")
#: The routes `disabled` may name (besides the aliases `jev` and `vercel-ai-gateway`).
ROUTE_NAMES = ("local", "typesafe", "openrouter", "vercel-ai-gateway", "openai", "ollama", "anthropic", "gguf")
_SPECS = ("local, fixture:FILE, cassette:FILE, record:FILE, typesafe, openrouter, vercel, openai:MODEL, "
          "ollama:MODEL, anthropic:MODEL or gguf:FILE")
#: The spec kind of a GGUF model file served by llama.cpp that the host starts (gguf.py).
GGUF = "gguf"
#: Spec kinds that are neither an HTTP route (routes.py) nor a model route (llm_routes.py): choosing
#: one loads neither table (start-up of `run`).
_NOT_ROUTES = frozenset({"local", "fixture", *_CASSETTE_KINDS, GGUF})


class Selection(WireModel):
    """The evaluator spec the host would use and the rule that picked it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    #: The route's name (`local`, `typesafe`, …), or the spec's kind (`fixture`, …): the spec's, always.
    route: str = ""
    spec: str
    rule: str

    @model_validator(mode="before")
    @classmethod
    def _route_of_spec(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("spec"), str):
            data = {**data, "route": _route_of(data["spec"])}
        return data

    @property
    def model(self) -> str | None:
        """The model a model route's spec names (``ollama:qwen3:8b`` → ``qwen3:8b``; for
        ``gguf:FILE`` the file's name, as the server calls it), else None."""
        kind, _, model = self.spec.partition(":")
        if kind == GGUF and model:
            from .gguf_file import model_name

            return model_name(model)
        return model or None if _is_model_route(kind) else None


def _route_of(spec: str) -> str:
    kind = spec.partition(":")[0]
    if not _is_http_route(kind):
        return kind
    from .routes import get_route

    return get_route(kind).name


def _selected(spec: str, rule: str) -> Selection:
    # `Selection(spec=spec, rule=rule)` of two strings, without validating them: choosing the
    # evaluator of a trivial run builds no schema (docs/performance.md, "Start-up of run").
    if type(spec) is not str:  # a caller's odd value: pydantic says what is wrong with it
        return Selection(spec=spec, rule=rule)
    return Selection.model_construct(route=_route_of(spec), spec=spec, rule=rule)


def select(spec: str | None, config: HostConfig) -> Selection:
    """Which evaluator `build_evaluator(spec, config)` builds, and why (see the module doc)."""
    section = _section(config)
    if spec:
        return _selected(spec, f"--evaluator {spec}")
    if section.get("kind"):
        return _selected(str(section["kind"]), f"the config's evaluator.kind is {section['kind']!r}")
    if config.model != "jev-latest" and _route_for_model(config.model) != "typesafe":
        route = _route_for_model(config.model)
        return _selected(route, f"the config's model {config.model!r} is served by the {route} route")
    return _selected("local", "no route is configured: the offline local evaluator")


def _route_for_model(model: str) -> str:
    from .routes import route_for_model

    return route_for_model(model).name


def record_source(config: HostConfig) -> Selection:
    """The evaluator `record:FILE` records from: the section's ``route`` (any spec but a
    cassette), else the one the config selects without ``--evaluator``, else local."""
    section = _section(config)
    route = section.get("route")
    if route is not None:
        if not isinstance(route, str) or not route:
            raise ConfigError("evaluator.route must be an evaluator spec such as 'local' or 'typesafe'")
        chosen = Selection(spec=route, rule=f"the config's evaluator.route is {route!r}")
    else:
        kind = str(section.get("kind") or "").partition(":")[0]
        if kind in _CASSETTE_KINDS:  # the section's kind is this very cassette: what is under it
            config = config.model_copy(update={"evaluator": {k: v for k, v in section.items() if k != "kind"}})
        chosen = select(None, config)
    if chosen.spec.partition(":")[0] in _CASSETTE_KINDS:
        raise ConfigError(f"record: records from an evaluator, not from another cassette ({chosen.spec!r}); "
                          "set evaluator.route to the evaluator to record from")
    return chosen


def disabled_routes(config: HostConfig) -> frozenset[str]:
    """The route names the config's evaluator.disabled lists (ConfigError if malformed)."""
    raw = _section(config).get("disabled", [])
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise ConfigError("evaluator.disabled must be a list of route names")
    out = set()
    for name in raw:
        if name in ("local", GGUF) or _is_model_route(name):
            out.add(name)
            continue
        if not _is_http_route(name):
            raise ConfigError(f"evaluator.disabled names an unknown route {name!r}; "
                              "expected local, typesafe, openrouter, vercel, openai, ollama, anthropic or gguf")
        out.add(_route_of(name))
    return frozenset(out)


def _section(config: HostConfig) -> dict[str, Any]:
    section = dict(config.evaluator)
    unknown = set(section) - _SECTION_KEYS
    if unknown:
        raise ConfigError(f"unknown evaluator config keys: {', '.join(sorted(unknown))}")
    return section


def build_route_evaluator(name: str, config: HostConfig, *, store: AuthStore | None = None) -> Evaluator:
    from .credentials import CredentialResolver
    from .http import HttpEvaluator
    from .routes import get_route

    section = _section(config)
    route = get_route(name)
    base_urls = section.get("baseUrls") or {}
    if not isinstance(base_urls, dict):
        raise ConfigError("evaluator.baseUrls must map route names to base URLs")
    resolver = CredentialResolver(route, store=store, command=section.get("credentialCommand"))
    return HttpEvaluator(route, model=config.model, credentials=resolver, base_urls=base_urls)


def build_llm_evaluator(spec: str, config: HostConfig, *, store: AuthStore | None = None) -> Evaluator:
    """An `openai:MODEL`, `ollama:MODEL` or `anthropic:MODEL` evaluator with the config's section."""
    from .credentials import CredentialResolver
    from .llm import DEFAULT_CONCURRENCY, DEFAULT_SAMPLES, LlmEvaluator
    from .llm_routes import parse_llm_spec

    section = _section(config)
    route, model = parse_llm_spec(spec)
    base_urls = section.get("baseUrls") or {}
    if not isinstance(base_urls, dict):
        raise ConfigError("evaluator.baseUrls must map route names to base URLs")
    profile = None
    if section.get("profile") is not None:
        from .llm_profile import LlmProfile

        if not isinstance(section["profile"], str):
            raise ConfigError("evaluator.profile must be a file name")
        profile = LlmProfile.load(section["profile"])
    from .backoff import DEFAULT_RETRIES

    resolver = CredentialResolver(route, store=store, command=section.get("credentialCommand"))
    return LlmEvaluator(route, model, base_urls=base_urls, credentials=resolver,
                        readout=section.get("readout", "auto"), samples=section.get("samples", DEFAULT_SAMPLES),
                        concurrency=section.get("concurrency", DEFAULT_CONCURRENCY),
                        retries=section.get("retries", DEFAULT_RETRIES), extra_body=section.get("extraBody"),
                        profile=profile)


def build_gguf_evaluator(path: str, config: HostConfig) -> Evaluator:
    """A `gguf:FILE` evaluator with the config's section: the file is checked now, the server
    starts at the first evaluation (gguf.py)."""
    from .backoff import DEFAULT_RETRIES
    from .gguf import GgufEvaluator
    from .gguf_file import check_gguf_file, settings_from
    from .llm import DEFAULT_CONCURRENCY, DEFAULT_SAMPLES

    section = _section(config)
    settings = settings_from(section)
    check_gguf_file(path)  # before the profile is read: the file is the first thing a user gets wrong
    profile = None
    if section.get("profile") is not None:
        from .llm_profile import LlmProfile

        if not isinstance(section["profile"], str):
            raise ConfigError("evaluator.profile must be a file name")
        profile = LlmProfile.load(section["profile"])
    return GgufEvaluator(path, settings=settings, readout=section.get("readout", "auto"),
                         samples=section.get("samples", DEFAULT_SAMPLES),
                         concurrency=section.get("concurrency", DEFAULT_CONCURRENCY),
                         retries=section.get("retries", DEFAULT_RETRIES), extra_body=section.get("extraBody"),
                         profile=profile)


def build_evaluator(spec: str | None, config: HostConfig, *,
                    store: AuthStore | None = None) -> Evaluator:
    section = _section(config)
    chosen = select(spec, config)
    spec = chosen.spec
    if chosen.route in disabled_routes(config):
        raise ConfigError(f"the {chosen.route} route is disabled in the config (evaluator.disabled); "
                          f"it was chosen because {chosen.rule}")
    kind, _, arg = spec.partition(":")
    profile = section.get("profile")
    if profile is not None and kind not in ("local", "record", GGUF) and not _is_model_route(kind):
        # record: the evaluator it records from
        raise ConfigError(f"a profile adapts the local evaluator or a model route (openai, ollama, anthropic, "
                          f"gguf), not {kind!r}")
    if _is_model_route(kind):
        return build_llm_evaluator(spec, config, store=store)
    if kind == GGUF:
        return build_gguf_evaluator(arg, config)
    if kind == "local":
        from .local import LocalEvaluator

        if profile is not None and not isinstance(profile, str):
            raise ConfigError("evaluator.profile must be a file name")
        if not profile:
            return LocalEvaluator()
        from .profile import Profile

        return LocalEvaluator(profile=Profile.load(profile))
    if kind == "fixture":
        from .fixture import FixtureEvaluator

        if not arg:
            raise ConfigError("--evaluator fixture needs a file: fixture:FILE")
        return FixtureEvaluator.from_file(arg)
    if kind in _CASSETTE_KINDS:
        return _cassette(kind, arg, config, store)
    if _is_http_route(kind):
        return build_route_evaluator(kind, config, store=store)
    raise ConfigError(f"unknown evaluator {spec!r}; expected {_SPECS}")


def _is_model_route(kind: str) -> bool:
    if kind in _NOT_ROUTES:
        return False
    from .llm_routes import LLM_ROUTES

    return kind in LLM_ROUTES


def _is_http_route(kind: str) -> bool:
    if kind in _NOT_ROUTES:
        return False
    from .routes import ROUTE_ALIASES, ROUTES

    return kind in ROUTES or kind in ROUTE_ALIASES


def _cassette(kind: str, path: str, config: HostConfig, store: AuthStore | None) -> Evaluator:
    """`cassette:FILE` replays (mode none); `record:FILE` replays and records what it misses (mode
    new), saving at most once a second while it records and when it is closed."""
    from pathlib import Path

    from .cassette import Cassette
    from .recording import RecordingEvaluator

    if not path:
        raise ConfigError(f"--evaluator {kind} needs a file: {kind}:FILE")
    how = f"to record it, use --evaluator record:{path}"
    if kind == "cassette":
        if not Path(path).exists():
            raise ConfigError(f"cassette {path} does not exist (record it first: --evaluator record:{path})")
        return RecordingEvaluator(path, "none", model=config.model, how_to_record=how)
    source = record_source(config)
    cassette = Cassette(path)  # read before the evaluator is built: a bad file leaves nothing to close
    return RecordingEvaluator(cassette, "new", model=config.model, autosave=1.0, how_to_record=how,
                              record_from=build_evaluator(source.spec, config, store=store))


def evaluator_from_spec(spec: str, config: HostConfig | None = None) -> Evaluator:
    """The evaluator an `--evaluator SPEC` names, built as every command builds it.

    `spec` is ``local``, ``fixture:FILE``, ``cassette:FILE``, ``record:FILE``,
    ``typesafe``, ``openrouter``, ``vercel``, ``openai:MODEL``,
    ``ollama:MODEL``, ``anthropic:MODEL`` or ``gguf:FILE``; `config` supplies the model,
    base URLs, credential command, the model routes' settings and the profile
    (its ``evaluator`` section). Raises `ConfigError` for an unknown spec or an unusable file.
    The caller owns the result: ``await evaluator.aclose()`` when done (a
    `JevHost` closes the evaluator it was given).
    """
    if not isinstance(spec, str):
        raise ConfigError("an evaluator spec is a string such as 'local', 'fixture:FILE' or 'ollama:MODEL', "
                          f"not {type(spec).__name__}")
    return build_evaluator(spec, config or HostConfig())


@asynccontextmanager
async def evaluator_for(evaluator: Evaluator | str,
                        config: HostConfig | None = None) -> AsyncIterator[Evaluator]:
    """`evaluator` itself, or the one its spec names: built here and closed on the way out."""
    if not isinstance(evaluator, str):
        yield evaluator
        return
    built = evaluator_from_spec(evaluator, config)
    try:
        yield built
    finally:
        import anyio

        with anyio.CancelScope(shield=True):
            await built.aclose()
