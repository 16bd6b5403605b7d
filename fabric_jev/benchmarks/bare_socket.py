"""The least HTTP server there is: an asyncio protocol answering a fixed body (`bench startup`).

Run as ``python -m fabric_jev.benchmarks.bare_socket BODY_FILE``: it answers
every HTTP/1.1 request on a kept-alive connection with the file's bytes as
``application/json``, once it has read the request's head and its
``Content-Length`` bytes of body, and prints its URL once it listens. No
framework, no parser beyond finding the head's end and that one header: what
the kernel, asyncio and a socket cost, with nothing of HTTP's own.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


class _Answer(asyncio.Protocol):
    def __init__(self, answer: bytes) -> None:
        self._answer = answer
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self._buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self._buffer) < end + 4 + length:
                return
            self._buffer = self._buffer[end + 4 + length:]
            assert self._transport is not None
            self._transport.write(self._answer)


async def _main(body: bytes) -> None:
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    loop = asyncio.get_running_loop()
    # asyncio turns Nagle's algorithm off on TCP sockets it creates itself.
    server = await loop.create_server(lambda: _Answer(answer), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"http://127.0.0.1:{port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1]).read_bytes()))
