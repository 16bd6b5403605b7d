import pytest


@pytest.fixture
def anyio_backend() -> str:
    # jev_page drives Chromium on asyncio; the host runs on trio too.
    return "asyncio"
