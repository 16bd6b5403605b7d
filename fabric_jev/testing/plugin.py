"""fabric-jev's pytest plugin (entry point `pytest11: fabric_jev`).

Fixtures `jev_host`, `jev_evaluator` (and the pieces they are made of) and
record modes for Jev answers; see docs/testing.md. The page fixtures
(`jev_browser`, `jev_page`), their options and their artifacts ship with the
browser connector, under its own entry point (`pytest11: fabric_jev_browser`),
as pytest-playwright ships its fixtures with the package that owns the browser;
without it, a test that asks for a page is skipped with the install command.

Loading the plugin must cost a pytest run that never uses it nothing
measurable: this module imports only the standard library and pytest, and
everything of fabric-jev is imported inside the fixtures that need it.
"""

from __future__ import annotations

import hashlib
import re
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from fabric_jev.contract.config import HostConfig
    from fabric_jev.host import JevHost

    from .cassettes import RecordingEvaluator

RECORD_MODES = ("none", "once", "new", "all")
#: The browser connector's pytest plugin (the page fixtures), by module.
BROWSER_PLUGIN = "fabric_jev_browser.pytest_plugin"
#: The settings that moved with the page fixtures to the browser's plugin (`jev_page_settings`).
_PAGE_SETTINGS = ("output", "artifacts", "viewport")


@dataclass(frozen=True)
class Settings:
    """The plugin's options: the command line wins over `[tool.pytest.ini_options]`.

    The page options (`output`, `artifacts`, `viewport`) are the browser plugin's
    `jev_page_settings`; reading them here still works, with a DeprecationWarning
    (removed in 0.3.0).
    """

    evaluator: str | None
    record_mode: str
    config_file: Path | None
    _config: pytest.Config | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        if name not in _PAGE_SETTINGS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        warnings.warn(f"jev_settings.{name} is deprecated and will be removed in 0.3.0: the page options are "
                      f"the browser connector's, read jev_page_settings.{name}", DeprecationWarning, stacklevel=2)
        plugin = None if self._config is None else _browser_plugin(self._config)
        if plugin is None:
            raise AttributeError(f"jev_settings.{name}: the browser connector's pytest plugin is not loaded")
        return getattr(plugin.page_settings_of(self._config), name)


@dataclass
class _Session:
    cassettes_written: list[Path] = field(default_factory=list)
    #: Lines other fabric-jev plugins add to the end-of-run section (the browser's kept artifacts).
    kept: list[tuple[str, Path]] = field(default_factory=list)
    #: The run this session belongs to: pytest-xdist's testrunuid, shared by the workers of one
    #: run (each is a session of its own), else this session's own.
    run_id: str = ""


_SESSION = pytest.StashKey[_Session]()
_EVALUATORS = pytest.StashKey[list["RecordingEvaluator"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fabric-jev", "fabric-jev (judgment programs and page checks)")
    group.addoption("--jev-evaluator", metavar="SPEC", default=None,
                    # The specs are listed once, by the CLI's --evaluator help (a new route adds
                    # itself there, not here too).
                    help="the evaluator answers are recorded from: any spec the CLI's --evaluator "
                         "takes (`fabric-jev run --help` lists them); default: the config's route, "
                         "else local")
    group.addoption("--jev-record-mode", choices=RECORD_MODES, default=None,
                    help="what cassettes may do: none (replay only, the default), once (record tests "
                         "without a cassette), new (record what is missing), all (record everything anew)")
    group.addoption("--jev-config", metavar="FILE", default=None,
                    help="host configuration JSON for jev_host (as the CLI's --config)")
    parser.addini("jev_evaluator", "default for --jev-evaluator", default="")
    parser.addini("jev_record_mode", "default for --jev-record-mode", default="")
    parser.addini("jev_config", "default for --jev-config (relative to the rootdir)", default="")



def pytest_configure(config: pytest.Config) -> None:
    # Without the browser connector's plugin, a test that asks for a page fixture is skipped
    # with the install command (or, when the connector is installed, fails saying why not).
    if _browser_plugin(config) is None:
        from . import _no_browser

        config.pluginmanager.register(_no_browser, "fabric_jev.testing._no_browser")


def _browser_plugin(config: pytest.Config) -> Any:
    module = sys.modules.get(BROWSER_PLUGIN)
    return module if module is not None and config.pluginmanager.is_registered(module) else None


def settings_of(config: pytest.Config) -> Settings:
    """The plugin's settings for this session (command line, then ini, then defaults)."""
    def pick(option: str, ini: str) -> tuple[str | None, bool]:
        given = config.getoption(option)
        if given is not None:
            return str(given), False
        value = str(config.getini(ini) or "").strip()
        return (value or None), True

    def path(option: str, ini: str, default: str | None) -> Path | None:
        value, from_ini = pick(option, ini)
        if value is None:
            return None if default is None else config.rootpath / default
        return (config.rootpath / value) if from_ini else (config.invocation_params.dir / value)

    mode = pick("jev_record_mode", "jev_record_mode")[0] or "none"
    if mode not in RECORD_MODES:
        raise pytest.UsageError(f"jev_record_mode = {mode!r}; expected one of {', '.join(RECORD_MODES)}")
    return Settings(evaluator=pick("jev_evaluator", "jev_evaluator")[0], record_mode=mode,
                    config_file=path("jev_config", "jev_config", None), _config=config)


def run_id(config: pytest.Config) -> str:
    """The run this session belongs to: under pytest-xdist, the id its workers share (each worker
    is a session of its own); else this session's own."""
    return _session(config).run_id


def note_kept(config: pytest.Config, what: str, path: Path) -> None:
    """List `path` at the end of the run, in the `fabric-jev` section, as `what: path`."""
    _session(config).kept.append((what, path))


def _session(config: pytest.Config) -> _Session:
    found = config.stash.get(_SESSION, None)
    if found is None:
        worker = getattr(config, "workerinput", None)
        shared = worker.get("testrunuid") if isinstance(worker, dict) else None
        found = config.stash[_SESSION] = _Session(run_id=str(shared or uuid.uuid4().hex))
    return found


# ---------------------------------------------------------------- hooks

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A cassette miss fails the test even when the program caught the evaluation error."""
    try:
        result = yield
    except Exception as exc:
        text = _misses(item)
        # Said once: not again when the failure already quotes the miss (an envelope's error).
        if text and not _is_miss(exc) and text.splitlines()[0] not in str(exc):
            exc.add_note(text)
        raise
    text = _misses(item)
    if text:
        pytest.fail(text, pytrace=False)
    return result


def _is_miss(exc: BaseException) -> bool:
    from .cassettes import CassetteMiss

    return isinstance(exc, CassetteMiss)


def _misses(item: pytest.Item) -> str:
    evaluators = item.stash.get(_EVALUATORS, None)
    if not evaluators:
        return ""
    misses = [m for ev in evaluators for m in ev.misses]
    if not misses:
        return ""
    head = f"{len(misses)} Jev request(s) had no recorded answer" if len(misses) > 1 else ""
    return "\n".join([head, *(str(m) for m in misses)] if head else [str(misses[0])])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    log = config.stash.get(_SESSION, None)
    if log is None or not (log.cassettes_written or log.kept):
        return
    def shown(path: Path) -> str:
        try:
            return str(path.relative_to(config.invocation_params.dir))
        except ValueError:
            return str(path)

    terminalreporter.section("fabric-jev")
    for path in log.cassettes_written:
        terminalreporter.write_line(f"cassette written: {shown(path)}")
    for what, path in log.kept:
        terminalreporter.write_line(f"{what}: {shown(path)}")


# ---------------------------------------------------------------- names and paths

#: A file name is at most 255 bytes on the usual file systems (not characters: a CJK character
#: is 3 bytes in UTF-8), and the cassette's suffix goes after it.
MAX_NAME_BYTES = 150


def _safe(name: str) -> str:
    """A file name for a test's name: what a file name cannot hold (and a lone surrogate, which
    no file system encodes) becomes `-`; a name over MAX_NAME_BYTES in UTF-8 is cut at a
    character to 100 bytes, plus a digest of the whole name."""
    from .._surrogates import SURROGATES

    safe = re.sub(rf"[<>?%*:|\"'/\\\s\x00-\x1f{SURROGATES}]", "-", name)
    encoded = safe.encode("utf-8")
    if len(encoded) > MAX_NAME_BYTES:
        head = encoded[:100].decode("utf-8", "ignore")  # the character cut in two is dropped whole
        safe = f"{head}-{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return safe


def _test_name(node: Any) -> str:
    """The test's name without anyio's backend: asyncio and trio runs ask Jev the same things,
    so they share one cassette."""
    name = str(node.name)
    spec = getattr(node, "callspec", None)
    backend = spec.params.get("anyio_backend") if spec is not None else None
    if isinstance(backend, tuple):
        backend = backend[0]
    if not isinstance(backend, str) or "[" not in name:
        return name
    base, _, ids = name.partition("[")
    parts = ids.removesuffix("]").split("-")
    for at in (0, -1):  # anyio's own parameter adds its id first or last
        if parts and parts[at] == backend:
            del parts[at]
            break
    return f"{base}[{'-'.join(parts)}]" if parts else base


def cassette_path(request: pytest.FixtureRequest) -> Path:
    """cassettes/<module>/<test>.jsonl beside the test file (Class.test for a method)."""
    node = request.node
    name = _test_name(node)
    if request.cls is not None:
        name = f"{request.cls.__name__}.{name}"
    return Path(node.path).parent / "cassettes" / Path(node.path).stem / f"{_safe(name)}.jsonl"


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def jev_settings(pytestconfig: pytest.Config) -> Settings:
    """The plugin's settings: options, then `[tool.pytest.ini_options]`, then defaults."""
    return settings_of(pytestconfig)


@pytest.fixture
def jev_host_config(jev_settings: Settings) -> HostConfig:
    """The `HostConfig` of `jev_host` (from --jev-config / jev_config); override it to build your own."""
    from fabric_jev.contract.config import HostConfig
    from fabric_jev.errors import ConfigError

    if jev_settings.config_file is None:
        return HostConfig()
    from fabric_jev._json import JSONInputError, read_json_file

    try:
        return HostConfig.parse(read_json_file(jev_settings.config_file, what="jev config", max_bytes=1 << 20))
    except (JSONInputError, ConfigError) as exc:
        pytest.fail(f"jev_config {jev_settings.config_file}: {exc}", pytrace=False)


@pytest.fixture
def jev_cassette_path(request: pytest.FixtureRequest) -> Path:
    """Where this test's answers are recorded; override it to put them elsewhere."""
    return cassette_path(request)


@pytest.fixture
def jev_evaluator(request: pytest.FixtureRequest, jev_settings: Settings, jev_host_config: HostConfig,
                  jev_cassette_path: Path) -> Iterator[RecordingEvaluator]:
    """The evaluator of --jev-evaluator under --jev-record-mode, with this test's cassette."""
    from fabric_jev.errors import ConfigError

    from .cassettes import RecordingEvaluator

    def build() -> Any:
        from fabric_jev.evaluators.select import build_evaluator

        return build_evaluator(jev_settings.evaluator, jev_host_config)

    try:
        evaluator = RecordingEvaluator(jev_cassette_path, jev_settings.record_mode, record_from=build,
                                       model=jev_host_config.model)
    except ConfigError as exc:
        pytest.fail(str(exc), pytrace=False)
    request.node.stash.setdefault(_EVALUATORS, []).append(evaluator)
    yield evaluator
    evaluator.save()  # a host closing the evaluator saved it already; this is for direct use
    if evaluator.cassette.writes:
        _session(request.config).cassettes_written.append(jev_cassette_path)


@pytest.fixture
async def jev_host(jev_evaluator: RecordingEvaluator, jev_host_config: HostConfig) -> AsyncIterator[JevHost]:
    """A `JevHost` for this test, answering `jev.evaluate` with `jev_evaluator`."""
    from fabric_jev.host import JevHost

    async with JevHost(jev_host_config, evaluator=jev_evaluator) as host:
        yield host


def __getattr__(name: str) -> Any:
    # Names that moved with the page fixtures to the browser connector's plugin.
    if name == "MARKER":
        warnings.warn("fabric_jev.testing.plugin.MARKER moved to fabric_jev_browser.pytest_plugin.MARKER; "
                      "this name will be removed in 0.3.0", DeprecationWarning, stacklevel=2)
        return ".fabric-jev-artifacts"
    if name == "output_path":
        warnings.warn("fabric_jev.testing.plugin.output_path moved to fabric_jev_browser.pytest_plugin."
                      "output_path; this name will be removed in 0.3.0", DeprecationWarning, stacklevel=2)
        return _output_path
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _output_path(settings: Any, nodeid: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-") or "test"
    if len(slug) > 200:
        slug = f"{slug[:100]}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}-{slug[-60:]}"
    return Path(settings.output) / slug


__all__ = ["Settings", "cassette_path", "note_kept", "run_id", "settings_of"]
