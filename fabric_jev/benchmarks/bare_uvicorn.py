"""The yardstick for `fabric-jev serve`: a bare uvicorn app answering a fixed body.

Run as ``python -m fabric_jev.benchmarks.bare_uvicorn BODY_FILE``: it serves
the file's bytes as ``application/json`` for any request (after reading the
request's body, as serve does) on 127.0.0.1, started the way uvicorn's own
documentation shows (host and port), with serve's protocol (``http="h11"``) and
without the ``server`` header, as serve answers; it prints its URL once it
accepts connections.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _main(body: bytes) -> None:
    import uvicorn

    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    port = _free_port()
    # The protocol and header settings serve uses (h11, no `server` header): the same parser and
    # the same response bytes, so the ratio is serve's own work and nothing else.
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", http="h11",
                                           server_header=False, log_level="warning", access_log=False))
    serving = asyncio.create_task(server.serve())
    while not server.started:  # a benchmark helper: polling its start is fine here
        if serving.done():
            await serving
            return
        await asyncio.sleep(0.01)
    sys.stdout.write(f"http://127.0.0.1:{port}\n")
    sys.stdout.flush()
    await serving


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]).read_bytes()))
