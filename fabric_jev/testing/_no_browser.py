"""The page fixtures when the browser connector's pytest plugin is not loaded.

Registered by fabric-jev's pytest plugin only then, so a test that asks for a
page says why it cannot have one instead of "fixture 'jev_page' not found": it
is skipped with the install command when the connector is not installed, and
fails naming the cause when the connector is installed but its plugin is not
loaded. Imports only pytest until a fixture runs.
"""

from __future__ import annotations

from typing import NoReturn

import pytest


def _without_browser() -> NoReturn:
    from fabric_jev.errors import ConfigError
    from fabric_jev.plugins import load_plugin

    try:
        load_plugin("browser")
    except ConfigError as exc:
        pytest.skip(str(exc))
    pytest.fail("the browser connector is installed but its pytest plugin (fabric_jev_browser.pytest_plugin) "
                "is not loaded: it was disabled (-p no:fabric_jev_browser, PYTEST_DISABLE_PLUGIN_AUTOLOAD), "
                "or fabric-jev-browser was installed before it had one (install it again, or load it with "
                "-p fabric_jev_browser.pytest_plugin)", pytrace=False)


@pytest.fixture(scope="session")
def jev_browser() -> NoReturn:
    """The browser connector's session Chromium (not loaded: see why)."""
    _without_browser()


@pytest.fixture
def jev_page() -> NoReturn:
    """The browser connector's page (not loaded: see why)."""
    _without_browser()
