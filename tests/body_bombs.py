"""Compressed bodies for the upstream-body tests: honest ones, and bombs.

A bomb is made by streaming zeros through a compressor, so building one never
holds what it inflates to: `gzip_bomb()` is the issue's 199 KiB that inflate to
200 MiB. `peak_growth` measures how much more memory Python held at its peak
while a call ran than before it (tracemalloc traces every allocator Python
uses, zlib's buffers and httpx's included, in every thread).
"""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Sequence
from functools import cache
from typing import TypeVar

MiB = 1 << 20
T = TypeVar("T")


def _stream(compressor: zlib._Compress, total: int, piece: bytes) -> bytes:
    out = bytearray()
    for _ in range(total // len(piece)):
        out += compressor.compress(piece)
    return bytes(out + compressor.flush())


def _compressor(coding: str) -> zlib._Compress:
    if coding == "gzip":
        return zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    if coding == "deflate":
        return zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS)
    assert coding == "raw-deflate"  # what some servers send as `deflate`
    return zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)


@cache
def bomb(coding: str = "gzip", inflates_to: int = 200 * MiB) -> bytes:
    """Zeros, `inflates_to` of them, compressed once with `coding` (gzip, deflate, raw-deflate)."""
    return _stream(_compressor(coding), inflates_to, bytes(MiB))


def gzip_bomb() -> bytes:
    """The issue's bomb: 199 KiB of gzip, 200 MiB of zeros once inflated."""
    return bomb("gzip")


@cache
def double_gzip_bomb() -> bytes:
    """The gzip bomb gzipped again (`Content-Encoding: gzip, gzip`): a few hundred bytes on the wire."""
    return gzip.compress(gzip_bomb(), 9)


@cache
def empty_members_bomb(members: int = 1_000_000) -> bytes:
    """gzip of a stream of empty gzip members: every member inflates to nothing, so a reader that
    only counted the body would decompress the layer below without end."""
    return _stream(_compressor("gzip"), members * 20, gzip.compress(b"", 9, mtime=0) * 1000)


def encode(body: bytes, codings: Sequence[str]) -> bytes:
    """`body` with each coding applied in order (as `Content-Encoding: a, b` lists them)."""
    for coding in codings:
        compressor = _compressor(coding)
        body = compressor.compress(body) + compressor.flush()
    return body


def header(codings: Sequence[str]) -> str:
    return ", ".join("deflate" if c == "raw-deflate" else c for c in codings)


async def peak_growth(call: Callable[[], Awaitable[T]]) -> tuple[T | BaseException, int]:
    """What `call` returned (or raised) and how many bytes more than before it Python held at its peak."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            result: T | BaseException = await call()
        except Exception as exc:
            result = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak - before
