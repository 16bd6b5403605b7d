"""fabric-jev's pytest plugin (entry point `pytest11: fabric_jev`).

Fixtures `jev_host`, `jev_evaluator`, `jev_page` (and the pieces they are made
of), record modes for Jev answers and artifacts of failing page tests; see
docs/testing.md. Loading the plugin must cost a pytest run that never uses it
nothing measurable: this module imports only the standard library and pytest,
and everything of fabric-jev is imported inside the fixtures that need it.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import uuid
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
ARTIFACT_MODES = ("on", "off", "only-on-failure")
#: A folder holding this file was written by the plugin (and may be replaced by it); the file
#: names the run that wrote it.
MARKER = ".fabric-jev-artifacts"


@dataclass(frozen=True)
class Settings:
    """The plugin's options: the command line wins over `[tool.pytest.ini_options]`."""

    evaluator: str | None
    record_mode: str
    config_file: Path | None
    output: Path
    artifacts: str
    viewport: tuple[int, int]


@dataclass
class _Session:
    cassettes_written: list[Path] = field(default_factory=list)
    artifacts_kept: list[Path] = field(default_factory=list)
    output_cleaned: bool = False
    #: The run this session belongs to: pytest-xdist's testrunuid, shared by the workers of one
    #: run (each is a session of its own), else this session's own.
    run_id: str = ""


_SESSION = pytest.StashKey[_Session]()
_EVALUATORS = pytest.StashKey[list["RecordingEvaluator"]]()
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fabric-jev", "fabric-jev (judgment programs and page checks)")
    group.addoption("--jev-evaluator", metavar="SPEC", default=None,
                    help="the evaluator answers are recorded from: local, fixture:FILE, typesafe, "
                         "openrouter, vercel, openai:MODEL, ollama:MODEL, anthropic:MODEL (the CLI's "
                         "--evaluator specs; default: the config's route, "
                         "else local)")
    group.addoption("--jev-record-mode", choices=RECORD_MODES, default=None,
                    help="what cassettes may do: none (replay only, the default), once (record tests "
                         "without a cassette), new (record what is missing), all (record everything anew)")
    group.addoption("--jev-config", metavar="FILE", default=None,
                    help="host configuration JSON for jev_host (as the CLI's --config)")
    group.addoption("--jev-output", metavar="DIR", default=None,
                    help="where artifacts of page tests go (default test-results)")
    group.addoption("--jev-artifacts", choices=ARTIFACT_MODES, default=None,
                    help="keep a snapshot and a screenshot of each jev_page test: on, off, "
                         "only-on-failure (the default)")
    group.addoption("--jev-viewport", metavar="WxH", default=None, type=_viewport_option,
                    help="viewport of jev_page (default 1280x800)")
    parser.addini("jev_evaluator", "default for --jev-evaluator", default="")
    parser.addini("jev_record_mode", "default for --jev-record-mode", default="")
    parser.addini("jev_config", "default for --jev-config (relative to the rootdir)", default="")
    parser.addini("jev_output", "default for --jev-output (relative to the rootdir)", default="")
    parser.addini("jev_artifacts", "default for --jev-artifacts", default="")
    parser.addini("jev_viewport", "default for --jev-viewport", default="")


def _viewport(text: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d{3,5})x(\d{3,5})", text.strip())
    if not found or not all(100 <= int(v) <= 10_000 for v in found.groups()):
        raise pytest.UsageError(f"jev viewport {text!r} is not WIDTHxHEIGHT with each 100-10000, e.g. 1280x800")
    return int(found.group(1)), int(found.group(2))


def _viewport_option(text: str) -> str:
    """--jev-viewport checked as the command line is read: a bad value is a usage error."""
    import argparse

    try:
        _viewport(text)
    except pytest.UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("jev viewport ")) from None
    return text


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
    artifacts = pick("jev_artifacts", "jev_artifacts")[0] or "only-on-failure"
    if artifacts not in ARTIFACT_MODES:
        raise pytest.UsageError(f"jev_artifacts = {artifacts!r}; expected one of {', '.join(ARTIFACT_MODES)}")
    output = path("jev_output", "jev_output", "test-results")
    assert output is not None
    return Settings(evaluator=pick("jev_evaluator", "jev_evaluator")[0], record_mode=mode,
                    config_file=path("jev_config", "jev_config", None), output=output,
                    artifacts=artifacts, viewport=_viewport(pick("jev_viewport", "jev_viewport")[0] or "1280x800"))


def _session(config: pytest.Config) -> _Session:
    found = config.stash.get(_SESSION, None)
    if found is None:
        worker = getattr(config, "workerinput", None)
        shared = worker.get("testrunuid") if isinstance(worker, dict) else None
        found = config.stash[_SESSION] = _Session(run_id=str(shared or uuid.uuid4().hex))
    return found


# ---------------------------------------------------------------- hooks

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # jev_page's teardown reads how the test went (artifacts only on failure).
    if _REPORTS in item.stash:
        item.stash[_REPORTS][report.when] = report
    return report


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


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    log = config.stash.get(_SESSION, None)
    if log is None or not (log.cassettes_written or log.artifacts_kept):
        return
    def shown(path: Path) -> str:
        try:
            return str(path.relative_to(config.invocation_params.dir))
        except ValueError:
            return str(path)

    terminalreporter.section("fabric-jev")
    for path in log.cassettes_written:
        terminalreporter.write_line(f"cassette written: {shown(path)}")
    for path in log.artifacts_kept:
        terminalreporter.write_line(f"artifacts: {shown(path)}")


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


def output_path(settings: Settings, nodeid: str) -> Path:
    """The test's own folder under --jev-output."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-") or "test"
    if len(slug) > 200:
        slug = f"{slug[:100]}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}-{slug[-60:]}"
    return settings.output / slug


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


def _browser_hook(name: str) -> Any:
    """A hook of the browser connector; the test is skipped, with the install hint, without it."""
    from fabric_jev.errors import ConfigError
    from fabric_jev.plugins import find_hook

    try:
        return find_hook(name)
    except ConfigError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def jev_browser(jev_settings: Settings) -> Iterator[Any]:
    """One headless Chromium on 127.0.0.1 for the session (`ws_url`, `pid`), from the browser connector."""
    width, height = jev_settings.viewport
    with _browser_hook("session_browser")(width=width, height=height) as browser:
        yield browser


@pytest.fixture
def jev_output_path(request: pytest.FixtureRequest, jev_settings: Settings) -> Path:
    """This test's artifacts folder under --jev-output (created only when something is kept)."""
    return output_path(jev_settings, request.node.nodeid)


def _clean_output(config: pytest.Config, settings: Settings) -> None:
    """Once a session, before the first page test: remove the folders earlier runs left
    (only those the plugin wrote, which carry its marker file). Folders of this run stay:
    under pytest-xdist another worker may have kept them already."""
    log = _session(config)
    if log.output_cleaned:
        return
    log.output_cleaned = True
    if settings.output.is_dir():
        for entry in settings.output.iterdir():
            try:
                mark = (entry / MARKER).read_text(errors="replace")
            except OSError:  # not a folder of the plugin's (or another worker just moved it)
                continue
            if _marker_line(log.run_id) not in mark.splitlines():
                shutil.rmtree(entry, ignore_errors=True)


@pytest.fixture
async def jev_page(request: pytest.FixtureRequest, jev_browser: Any, jev_settings: Settings,
                   jev_output_path: Path, anyio_backend: Any) -> AsyncIterator[Any]:
    """A fresh page on the session's Chromium (the browser connector's `Page`), closed after the test.

    Checks through `fabric_jev.testing` on it see every action from the start (for the
    diff since the last action) and, on failure, write their artifacts for the test.
    """
    backend = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]
    if backend != "asyncio":
        pytest.skip("jev_page needs anyio's asyncio backend (the CDP client runs on asyncio)")
    from .pages import bind, unbind

    _clean_output(request.config, jev_settings)
    open_page, page_source = _browser_hook("open_page"), _browser_hook("page_source")
    keep = jev_settings.artifacts
    scratch = Path(tempfile.mkdtemp(prefix="fabric-jev-artifacts-")) if keep != "off" else None
    request.node.stash[_REPORTS] = {}
    width, height = jev_settings.viewport
    try:
        async with open_page(jev_browser.ws_url, width=width, height=height) as page:
            source = page_source(page)
            bind(page, source, artifacts_dir=scratch)
            try:
                yield page
                if scratch is not None:
                    call = request.node.stash[_REPORTS].get("call")
                    failed = call is None or call.failed
                    if keep == "on" or failed:
                        await _page_artifacts(source, scratch, "failed" if failed else "finished")
                        log = _session(request.config)
                        _keep(scratch, jev_output_path, log.run_id)
                        log.artifacts_kept.append(jev_output_path)
            finally:
                unbind(page)
                source.close()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


async def _page_artifacts(source: Any, folder: Path, status: str) -> None:
    """The page as the test left it: its snapshot (redacted) and a screenshot."""
    import json

    from fabric_jev._files import atomic_write

    try:
        snapshot = await source.snapshot()
        atomic_write(folder / f"test-{status}.snapshot.json",
                     json.dumps(snapshot.redacted_json(), indent=1, ensure_ascii=False))
        atomic_write(folder / f"test-{status}.png", await source.screenshot())
    except Exception as exc:  # a crashed or closed page: say so beside whatever was kept
        atomic_write(folder / f"test-{status}.error.txt", f"{type(exc).__name__}: {exc}\n")


def _marker_line(run_id: str) -> str:
    return f"run {run_id}"


def _keep(scratch: Path, dest: Path, run_id: str) -> None:
    """Put the test's files at `dest`: the folder there before, or the whole new one, never a part.

    They are copied into a staging folder beside `dest` that carries the marker from the start,
    so whatever an interrupted copy leaves is the plugin's and the next run removes it."""
    if dest.exists() and not (dest / MARKER).is_file():  # someone else's: never removed (docs/testing.md)
        pytest.fail(f"artifacts not kept: {dest} exists and was not written by fabric-jev's pytest "
                    f"plugin (it has no {MARKER} file); move it, or choose another --jev-output",
                    pytrace=False)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name[:60]}-", dir=dest.parent))
    try:
        (staging / MARKER).write_text("written by fabric-jev's pytest plugin; replaced on the next run\n"
                                      f"{_marker_line(run_id)}\n")
        shutil.copytree(scratch, staging, dirs_exist_ok=True)
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


__all__ = ["Settings", "cassette_path", "output_path", "settings_of"]
