"""`fabric-jev browser launch`: print the websocket URL, keep the browser until interrupted."""

from __future__ import annotations

import signal
import sys

import anyio

from .launcher import launch_chromium


async def launch_command(*, width: int = 1280, height: int = 800) -> int:
    # The signal receiver is open before the URL is printed: a caller that
    # signals as soon as it reads the URL always gets a clean shutdown.
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        browser = await launch_chromium(window=(width, height))
        try:
            sys.stdout.write(browser.ws_url + "\n")
            sys.stdout.flush()
            async with anyio.create_task_group() as tg:
                async def on_signal() -> None:
                    async for _ in signals:
                        tg.cancel_scope.cancel()
                        return

                async def on_exit() -> None:
                    code = await browser.wait_exit()
                    sys.stderr.write(f"fabric-jev: Chromium exited (code {code})\n")
                    tg.cancel_scope.cancel()

                tg.start_soon(on_signal)
                tg.start_soon(on_exit)
        finally:
            await browser.aclose()
    return 0
