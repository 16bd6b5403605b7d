"""The browser connector's pytest plugin (entry point `pytest11: fabric_jev_browser`).

The page fixtures ship with the package that owns the browser, as
pytest-playwright's do: `jev_browser` (one headless Chromium for the session),
`jev_page` (a fresh page per test), `jev_page_settings`, `jev_output_path`,
their options (`--jev-output`, `--jev-artifacts`, `--jev-viewport`) and the
artifacts of page tests; see docs/testing.md. fabric-jev's own plugin
(`fabric_jev.testing.plugin`) brings the host, the evaluator and cassettes.

Checks through `fabric_jev.testing` take snapshot sources, never a page: each
`jev_page` is bound to its `PageSource` and to its test's artifacts folder
(`fabric_jev.testing.bind_source`) when it opens.

Loading this plugin must cost a pytest run that never uses it nothing
measurable: this module imports only the standard library and pytest, and the
rest inside the fixtures.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest

if TYPE_CHECKING:
    from .checks import PageSource
    from .page import Page
    from .testing import SessionBrowser

ArtifactMode = Literal["on", "off", "only-on-failure"]
ARTIFACT_MODES: tuple[ArtifactMode, ...] = ("on", "off", "only-on-failure")
#: A folder holding this file was written by the plugin (and may be replaced by it); the file
#: names the run that wrote it.
MARKER = ".fabric-jev-artifacts"

_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_CLEANED = pytest.StashKey[bool]()


@dataclass(frozen=True)
class PageSettings:
    """The page options: the command line wins over `[tool.pytest.ini_options]`."""

    #: where the artifacts of page tests go (a folder per test)
    output: Path
    artifacts: ArtifactMode
    #: the viewport of `jev_page` and the window of the session's Chromium
    viewport: tuple[int, int]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fabric-jev", "fabric-jev (judgment programs and page checks)")
    group.addoption("--jev-output", metavar="DIR", default=None,
                    help="where artifacts of page tests go (default test-results)")
    group.addoption("--jev-artifacts", choices=ARTIFACT_MODES, default=None,
                    help="keep a snapshot and a screenshot of each jev_page test: on, off, "
                         "only-on-failure (the default)")
    group.addoption("--jev-viewport", metavar="WxH", default=None, type=_viewport_option,
                    help="viewport of jev_page (default 1280x800)")
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


def page_settings_of(config: pytest.Config) -> PageSettings:
    """The page options of this session (command line, then ini, then defaults)."""
    def pick(option: str) -> tuple[str | None, bool]:
        given = config.getoption(option)
        if given is not None:
            return str(given), False
        value = str(config.getini(option) or "").strip()
        return (value or None), True

    artifacts = pick("jev_artifacts")[0] or "only-on-failure"
    if artifacts not in ARTIFACT_MODES:
        raise pytest.UsageError(f"jev_artifacts = {artifacts!r}; expected one of {', '.join(ARTIFACT_MODES)}")
    output, from_ini = pick("jev_output")
    folder = (config.rootpath / "test-results" if output is None
              else (config.rootpath / output) if from_ini else (config.invocation_params.dir / output))
    mode: ArtifactMode = "on" if artifacts == "on" else "off" if artifacts == "off" else "only-on-failure"
    return PageSettings(output=folder, artifacts=mode, viewport=_viewport(pick("jev_viewport")[0] or "1280x800"))


def output_path(settings: PageSettings, nodeid: str) -> Path:
    """The test's own folder under --jev-output."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", nodeid).strip("-") or "test"
    if len(slug) > 200:
        slug = f"{slug[:100]}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}-{slug[-60:]}"
    return settings.output / slug


# ---------------------------------------------------------------- hooks

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                               ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # jev_page's teardown reads how the test went (artifacts only on failure).
    if _REPORTS in item.stash:
        item.stash[_REPORTS][report.when] = report
    return report


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def jev_page_settings(pytestconfig: pytest.Config) -> PageSettings:
    """The page options: `--jev-output`, `--jev-artifacts`, `--jev-viewport` (or their ini keys)."""
    return page_settings_of(pytestconfig)


@pytest.fixture(scope="session")
def jev_browser(jev_page_settings: PageSettings) -> Iterator[SessionBrowser]:
    """One headless Chromium on 127.0.0.1 for the session (`ws_url`, `pid`), started by
    `fabric-jev browser launch` in a process of its own and stopped at the end."""
    from .testing import session_browser

    width, height = jev_page_settings.viewport
    with session_browser(width=width, height=height) as browser:
        yield browser


@pytest.fixture
def jev_output_path(request: pytest.FixtureRequest, jev_page_settings: PageSettings) -> Path:
    """This test's artifacts folder under --jev-output (created only when something is kept)."""
    return output_path(jev_page_settings, request.node.nodeid)


def _clean_output(config: pytest.Config, settings: PageSettings, run_id: str) -> None:
    """Once a session, before the first page test: remove the folders earlier runs left
    (only those the plugin wrote, which carry its marker file). Folders of this run stay:
    under pytest-xdist another worker may have kept them already."""
    if config.stash.get(_CLEANED, False):
        return
    config.stash[_CLEANED] = True
    if settings.output.is_dir():
        for entry in settings.output.iterdir():
            try:
                mark = (entry / MARKER).read_text(errors="replace")
            except OSError:  # not a folder of the plugin's (or another worker just moved it)
                continue
            if _marker_line(run_id) not in mark.splitlines():
                shutil.rmtree(entry, ignore_errors=True)


@pytest.fixture
async def jev_page(request: pytest.FixtureRequest, jev_browser: SessionBrowser, jev_page_settings: PageSettings,
                   jev_output_path: Path, anyio_backend: str | tuple[str, dict[str, object]]
                   ) -> AsyncIterator[Page]:
    """A fresh page (`fabric_jev_browser.Page`) on the session's Chromium, closed after the test.

    Checks through `fabric_jev.testing` on it see every action from the start (for the
    diff since the last action) and, on failure, write their artifacts for the test.
    """
    backend = anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]
    if backend != "asyncio":
        pytest.skip("jev_page needs anyio's asyncio backend (the CDP client runs on asyncio)")
    from fabric_jev.testing import bind_source, unbind_source
    from fabric_jev.testing.plugin import note_kept, run_id

    from .checks import PageSource
    from .testing import open_page

    run = run_id(request.config)
    _clean_output(request.config, jev_page_settings, run)
    keep = jev_page_settings.artifacts
    scratch = Path(tempfile.mkdtemp(prefix="fabric-jev-artifacts-")) if keep != "off" else None
    request.node.stash[_REPORTS] = {}
    width, height = jev_page_settings.viewport
    try:
        async with open_page(jev_browser.ws_url, width=width, height=height) as page:
            source = PageSource(page)
            bind_source(page, source, artifacts_dir=scratch)
            try:
                yield page
                if scratch is not None:
                    call = request.node.stash[_REPORTS].get("call")
                    failed = call is None or call.failed
                    if keep == "on" or failed:
                        await _page_artifacts(source, scratch, "failed" if failed else "finished")
                        _keep(scratch, jev_output_path, run)
                        note_kept(request.config, "artifacts", jev_output_path)
            finally:
                unbind_source(page)
                source.close()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


async def _page_artifacts(source: PageSource, folder: Path, status: str) -> None:
    """The page as the test left it: its snapshot (redacted) and a screenshot."""
    import json

    def write(path: Path, data: str | bytes) -> None:  # whole or not at all: a temporary file, renamed
        temp = path.with_name(f".{path.name}.tmp")
        if isinstance(data, str):
            temp.write_text(data, encoding="utf-8")
        else:
            temp.write_bytes(data)
        temp.replace(path)

    try:
        snapshot = await source.snapshot()
        write(folder / f"test-{status}.snapshot.json", json.dumps(snapshot.redacted_json(), indent=1,
                                                                   ensure_ascii=False))
        write(folder / f"test-{status}.png", await source.screenshot())
    except Exception as exc:  # a crashed or closed page: say so beside whatever was kept
        write(folder / f"test-{status}.error.txt", f"{type(exc).__name__}: {exc}\n")


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


__all__ = ["ARTIFACT_MODES", "MARKER", "ArtifactMode", "PageSettings", "output_path", "page_settings_of"]
