"""The browser's commands: `fabric-jev browser launch` (print the websocket URL, keep the browser
until interrupted) and `fabric-jev verify run` (replay a plan on a page)."""

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


async def verify_command(dictionary: str, *, plan: str, url: str, ws_url: str | None) -> int:
    """`fabric-jev verify run`: replay a plan's checks on `url` in the browser at `ws_url`, or
    (None) in a headless Chromium launched for these checks and closed after them."""
    import json

    from fabric_jev import JevError
    from fabric_jev.verification import VerificationFailed, load_plan, run_verification

    from .verification import verification_channels

    try:
        parsed, checked = load_plan(plan, dictionary)
        async with verification_channels(ws_url, url) as channels:
            result = await run_verification(checked, parsed, {}, channels)
    except VerificationFailed as exc:
        return _fail(str(exc), 1)
    except JevError as exc:
        return _fail(str(exc), 2)
    sys.stdout.write(json.dumps({"status": result.status, "checkIds": list(result.check_ids),
                                 "durationsMs": {k: round(v, 1) for k, v in result.durations_ms.items()}},
                                indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    return 0


def _fail(message: str, code: int) -> int:
    from fabric_jev.protocol import one_line

    sys.stderr.write(f"fabric-jev: {one_line(message)}\n")
    return code
