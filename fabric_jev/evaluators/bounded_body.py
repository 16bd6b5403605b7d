"""An upstream's response body, read with a cap whether it is compressed or not.

Every body fabric-jev reads from an upstream comes through `read_capped`: the
System One routes (`http.py`), the model routes (`llm.py`), and so what
`fabric-jev serve` forwards, and the vision providers of smart assertions.

httpx would decode a compressed body by itself, a whole network read at a
time: 64 KiB of gzip can inflate to 64 MiB before any cap is looked at. So the
bytes are taken as they came (`aiter_raw`) and `BodyDecoder` undoes each
``Content-Encoding`` layer itself, incrementally, each step giving at most
`STEP` bytes:

- the decoded body is held to the cap (1 MiB for the routes); the bytes on the
  wire, and the output of every layer but the last (compressed data too), to
  the cap plus compression's own overhead (`encoded_limit`), so neither a bomb
  nor a stream of empty members can take more memory or time than that;
- a ``Content-Length`` over that limit is refused before a byte is read;
- ``gzip`` (``x-gzip``, several members too), ``deflate`` (zlib-wrapped, or raw
  as some servers send it) and ``identity`` are decoded, at most
  `MAX_ENCODINGS` layers of them; any other coding (``br``, ``zstd``, ...) is
  refused, and so are more layers. The request asks for `ACCEPT_ENCODING` only.

Peak memory is the cap plus a few steps per layer. An error names neither the
body nor the header's value (contract §6): only what was wrong.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from ..errors import AnswerInvalid

if TYPE_CHECKING:
    import httpx

#: What a request says it can read: the codings `BodyDecoder` decodes.
ACCEPT_ENCODING = "gzip, deflate"
#: Layers of coding one body may have (``gzip, gzip`` is two).
MAX_ENCODINGS = 3
#: The most bytes one decompression step gives.
STEP = 64 * 1024
_CODINGS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


def encoded_limit(cap: int) -> int:
    """How large compressed data that decodes to at most `cap` bytes can honestly be: deflate's
    stored blocks add 5 bytes per 64 KiB, gzip 18 bytes per member; 1/256 and 4 KiB is ample."""
    return cap + cap // 256 + 4096


def size_text(cap: int) -> str:
    """``1 MiB``, ``256 KiB``, or a count of bytes."""
    if cap % (1 << 20) == 0:
        return f"{cap >> 20} MiB"
    if cap % 1024 == 0:
        return f"{cap >> 10} KiB"
    return f"{cap} bytes"


class _Layer:
    """One coding undone, incrementally: `push(data)` yields its output in pieces of at most STEP."""

    def __init__(self, coding: str, limit: int, cap: int, what: str) -> None:
        self.coding, self.limit, self.what = coding, limit, what
        self._refusal = f"{what} exceeds {size_text(cap)} once decompressed"
        self._z: zlib._Decompress | None = None
        self._head = b""  # deflate: the first bytes, until the zlib header can be told from raw data
        self.produced = 0  # bytes given out so far

    def _start(self, data: bytes) -> bytes:
        """The decompressor for a new stream; the bytes it has not seen yet (b"": wait for more)."""
        if self.coding == "gzip":
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
            return data
        data = self._head + data
        if len(data) < 2:
            self._head = data
            return b""
        self._head = b""
        # RFC 9110 deflate is zlib's format (RFC 1950); some servers send the raw stream (RFC 1951).
        zlib_header = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
        self._z = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return data

    def push(self, data: bytes) -> Iterator[bytes]:
        while data:
            if self._z is not None and self._z.eof:  # deflate is one stream: nothing may follow it
                raise AnswerInvalid(f"{self.what} has bytes after its {self.coding} data")
            if self._z is None:
                data = self._start(data)
                if not data:
                    return
            z = self._z
            assert z is not None
            try:
                while True:
                    out = z.decompress(data, STEP)
                    data = z.unconsumed_tail
                    if out:
                        self.produced += len(out)
                        if self.produced > self.limit:
                            raise AnswerInvalid(self._refusal)
                        yield out
                    # A full step may leave output inside zlib with no input left: ask again for it.
                    if z.eof or (not data and len(out) < STEP):
                        break
            except zlib.error:
                raise AnswerInvalid(f"{self.what} is not valid {self.coding} data") from None
            if z.eof:
                data = z.unused_data
                if self.coding == "gzip":
                    self._z = None  # what follows is another member

    def finish(self) -> None:
        if self._head or (self._z is not None and not self._z.eof):
            raise AnswerInvalid(f"{self.what} ends inside its {self.coding} data")


class BodyDecoder:
    """A body's bytes as they came, to its decoded bytes, within `cap` (see the module doc). Pure.

    `content_encoding`: the values of the response's Content-Encoding headers, which list the
    codings in the order they were applied (``deflate, gzip``: deflate first); `what` names the
    body in errors ("the openai server's response").
    """

    def __init__(self, content_encoding: Sequence[str], cap: int, what: str) -> None:
        codings = [c.strip().lower() for value in content_encoding for c in value.split(",")]
        codings = [c for c in codings if c not in ("", "identity")]
        if any(c not in _CODINGS for c in codings):
            raise AnswerInvalid(f"{what} has a Content-Encoding other than gzip, deflate or identity; refused")
        if len(codings) > MAX_ENCODINGS:
            raise AnswerInvalid(f"{what} is compressed in more than {MAX_ENCODINGS} layers; refused")
        self.cap, self.what = cap, what
        self.raw_limit = encoded_limit(cap) if codings else cap
        # The last coding applied is undone first; only the last layer undone gives the body itself.
        order = [_CODINGS[c] for c in reversed(codings)]
        self.layers = [_Layer(c, cap if i == len(order) - 1 else self.raw_limit, cap, what)
                       for i, c in enumerate(order)]
        self.received = 0
        self._body = bytearray()

    def feed(self, raw: bytes) -> None:
        self.received += len(raw)
        if self.received > self.raw_limit:
            raise AnswerInvalid(f"{self.what} exceeds {size_text(self.cap)}")
        for piece in self._through(0, raw):
            if len(self._body) + len(piece) > self.cap:
                raise AnswerInvalid(f"{self.what} exceeds {size_text(self.cap)}")
            self._body += piece

    def _through(self, i: int, data: bytes) -> Iterator[bytes]:
        """`data` through layers i.. in turn: each piece a layer gives is undone by the next before
        the layer is asked for another, so no layer ever holds more than a step of output."""
        if i == len(self.layers):
            yield data
            return
        for piece in self.layers[i].push(data):
            yield from self._through(i + 1, piece)

    def finish(self) -> bytes:
        for layer in self.layers:
            layer.finish()
        return bytes(self._body)

    @property
    def decompressed(self) -> int:
        """Bytes the layers have given out in all (what a test holds to the cap plus a step or so)."""
        return sum(layer.produced for layer in self.layers)


def declared_too_large(headers: httpx.Headers, limit: int) -> bool:
    declared = headers.get("content-length", "").strip()
    return declared.isdigit() and int(declared) > limit


async def read_capped(response: httpx.Response, cap: int, what: str) -> bytes:
    """The decoded body of a streamed `response` (``client.stream(...)``), within `cap`, or an
    `AnswerInvalid` naming `what`. httpx's own decoding is never used (`aiter_raw`)."""
    decoder = BodyDecoder(response.headers.get_list("content-encoding"), cap, what)
    if declared_too_large(response.headers, decoder.raw_limit):
        raise AnswerInvalid(f"{what} exceeds {size_text(cap)}")
    async for chunk in response.aiter_raw():
        decoder.feed(chunk)
    return decoder.finish()


__all__ = ["ACCEPT_ENCODING", "MAX_ENCODINGS", "STEP", "BodyDecoder", "encoded_limit", "read_capped", "size_text"]
