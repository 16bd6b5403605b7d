"""Upstream bodies are decompressed within their cap (issue 39): the decoder on its own, then every
route against a real loopback server that sends gzip bombs, one layer and several.

Each bomb test holds two things: the clear error, and memory. In-process, tracemalloc's peak
(every allocator Python uses, zlib's buffers included, in every thread) over the call; in a fresh
interpreter, the process's peak resident size (`ru_maxrss`) before and after, so nothing Python
does not trace can hide. Before the fix, httpx inflated each network read whole: 130 MiB for the
one-layer bomb.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from fabric_jev import AnswerInvalid
from fabric_jev.assertions import VisionError, vision_provider
from fabric_jev.contract.evaluation import validate_request
from fabric_jev.evaluators import TYPESAFE, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.bounded_body import ACCEPT_ENCODING, MAX_ENCODINGS, STEP, BodyDecoder
from fabric_jev.evaluators.llm import LlmEvaluator
from fabric_jev.evaluators.llm_routes import ANTHROPIC, OLLAMA, OPENAI, LlmRoute
from tests.body_bombs import (
    MiB,
    bomb,
    double_gzip_bomb,
    empty_members_bomb,
    encode,
    gzip_bomb,
    header,
    peak_growth,
)
from tests.llm_stubs import Fault, Stub, letters, stub_server
from tests.upstream import Front, Recorded, front, mock

ROOT = Path(__file__).resolve().parent.parent
CAP = MiB
#: What a bomb may add to the process at its peak: the 1 MiB body, a step per layer, httpx's own.
GROWTH = 4 * MiB
KEY = "sk-bounded-body-canary-5e1d"
REQUEST = validate_request({"state": "Please refund the duplicate charge.",
                            "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}})

CODINGS = ("gzip", "deflate", "raw-deflate")


def decode(data: bytes, codings: list[str] | tuple[str, ...], *, cap: int = CAP, chunk: int = 65536,
           header_value: str | None = None) -> tuple[bytes | AnswerInvalid, BodyDecoder | None]:
    """Feed `data` to a decoder in `chunk`-sized reads, as the network would; its body or its refusal."""
    try:
        decoder = BodyDecoder([header_value if header_value is not None else header(codings)], cap, "the body")
    except AnswerInvalid as exc:
        return exc, None
    try:
        for i in range(0, len(data), chunk):
            decoder.feed(data[i:i + chunk])
        return decoder.finish(), decoder
    except AnswerInvalid as exc:
        return exc, decoder


def within_a_step(decoder: BodyDecoder) -> None:
    """The structural bound: no layer gave out more than a step past its limit."""
    for layer in decoder.layers:
        assert layer.produced <= layer.limit + STEP, (layer.coding, layer.produced, layer.limit)


# ------------------------------------------------------------------ the decoder

@given(body=st.binary(max_size=3000) | st.builds(lambda n, b: b * n, st.integers(1, 400), st.binary(min_size=1, max_size=50)),
       codings=st.lists(st.sampled_from(CODINGS), max_size=MAX_ENCODINGS), chunk=st.integers(1, 700))
@example(body=b"", codings=["gzip"], chunk=1)
@example(body=b"{}", codings=["raw-deflate"], chunk=1)  # one byte: not yet enough to tell zlib from raw
def test_an_honest_body_comes_back_whole_through_any_stack_of_codings(
        body: bytes, codings: list[str], chunk: int) -> None:
    decoded, decoder = decode(encode(body, codings), codings, cap=64 * 1024, chunk=chunk)
    assert decoded == body
    assert decoder is not None and len(decoder.layers) == len(codings)


@given(size=st.integers(4097, 40_000), seed=st.binary(min_size=1, max_size=64),
       codings=st.lists(st.sampled_from(CODINGS), max_size=MAX_ENCODINGS), chunk=st.integers(1, 5000))
def test_a_body_past_its_cap_is_refused_whatever_its_codings(size: int, seed: bytes, codings: list[str],
                                                            chunk: int) -> None:
    body = (seed * (size // len(seed) + 1))[:size]
    refused, decoder = decode(encode(body, codings), codings, cap=4096, chunk=chunk)
    assert isinstance(refused, AnswerInvalid) and "the body exceeds 4 KiB" in str(refused)
    assert decoder is not None
    within_a_step(decoder)


def multi_member() -> bytes:
    """Ten gzip members, each a 20 MiB bomb: each member alone is a fresh start."""
    return bomb("gzip", 20 * MiB) * 10


BOMBS = {
    "gzip, 199 KiB to 200 MiB": (gzip_bomb, ("gzip",)),
    "deflate (zlib)": (lambda: bomb("deflate"), ("deflate",)),
    "deflate (raw)": (lambda: bomb("raw-deflate"), ("raw-deflate",)),
    "gzip, gzip": (double_gzip_bomb, ("gzip", "gzip")),
    "gzip, gzip, gzip": (lambda: gzip.compress(double_gzip_bomb()), ("gzip", "gzip", "gzip")),
    "gzip, deflate": (lambda: zlib.compress(gzip_bomb()), ("gzip", "deflate")),
    "gzip members": (multi_member, ("gzip",)),
    "empty gzip members, gzipped": (empty_members_bomb, ("gzip", "gzip")),
}


@pytest.mark.parametrize("name", BOMBS)
@pytest.mark.parametrize("chunk", [1000, 65536, 1 << 30])
def test_a_bomb_is_refused_within_a_step_of_the_cap(name: str, chunk: int) -> None:
    make, codings = BOMBS[name]
    refused, decoder = decode(make(), codings, chunk=chunk)
    assert isinstance(refused, AnswerInvalid)
    assert str(refused) == "the body exceeds 1 MiB once decompressed"
    assert decoder is not None
    within_a_step(decoder)
    assert decoder.decompressed <= len(codings) * (CAP + CAP // 256 + 4096 + STEP)


@pytest.mark.parametrize("value", ["br", "zstd", "compress", "gzip, br", "sk-live-0123456789abcdef",
                                   "\x1b[31mgzip", "gzip;q=1"])
def test_a_coding_it_cannot_decode_is_refused_without_its_name(value: str) -> None:
    refused, _ = decode(b"\x00" * 10, [], header_value=value)
    assert isinstance(refused, AnswerInvalid)
    assert str(refused) == "the body has a Content-Encoding other than gzip, deflate or identity; refused"


def test_more_layers_than_the_limit_are_refused_before_anything_is_read() -> None:
    codings = ("gzip",) * (MAX_ENCODINGS + 1)
    refused, _ = decode(encode(b"{}", codings), codings)
    assert str(refused) == f"the body is compressed in more than {MAX_ENCODINGS} layers; refused"


@pytest.mark.parametrize(("value", "data"), [
    ("GZIP", gzip.compress(b"{}", mtime=0)),
    ("x-gzip", gzip.compress(b"{}", mtime=0)),
    (" identity , gzip ,", gzip.compress(b"{}", mtime=0)),
    ("identity", b"{}"),
    ("", b"{}"),
])
def test_coding_names_are_read_as_http_reads_them(value: str, data: bytes) -> None:
    assert decode(data, [], header_value=value)[0] == b"{}"


@pytest.mark.parametrize(("codings", "data", "message"), [
    (("gzip",), gzip.compress(b'{"a": 1}', mtime=0)[:-4], "the body ends inside its gzip data"),
    (("gzip",), b"plain text, not gzip", "the body is not valid gzip data"),
    (("deflate",), zlib.compress(b"{}") + b"more", "the body has bytes after its deflate data"),
    (("deflate",), b"x", "the body ends inside its deflate data"),
    (("gzip",), gzip.compress(b"{}", mtime=0) + b"junk after the member", "the body is not valid gzip data"),
    (("gzip", "gzip"), gzip.compress(b"not gzip inside", mtime=0), "the body is not valid gzip data"),
])
def test_broken_compressed_data_is_one_clear_refusal(codings: tuple[str, ...], data: bytes, message: str) -> None:
    assert str(decode(data, codings, chunk=3)[0]) == message


def test_a_body_of_exactly_the_cap_is_read_and_one_byte_more_is_not() -> None:
    body = bytes(range(256)) * (CAP // 256)
    for codings in ((), ("gzip",), ("deflate", "gzip")):
        assert decode(encode(body, codings), codings)[0] == body
        assert isinstance(decode(encode(body + b"x", codings), codings)[0], AnswerInvalid)


# ------------------------------------------------------------------ every route, on loopback

def bomb_answer(data: bytes, codings: tuple[str, ...]) -> Any:
    def answer(rec: Recorded) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json", "Content-Encoding": header(codings)}, data
    return answer


def system_one(url: str) -> HttpEvaluator:
    environ = {TYPESAFE.env_keys[0]: KEY}
    return HttpEvaluator(TYPESAFE, base_urls={TYPESAFE.name: url}, environ=environ,
                         credentials=CredentialResolver(TYPESAFE, environ=environ))


def model_route(kind: LlmRoute, url: str, **options: Any) -> LlmEvaluator:
    return LlmEvaluator(kind, "judge-model", base_urls={kind.name: url}, environ={}, retries=0, **options)


ROUTE_BOMBS = ["gzip, 199 KiB to 200 MiB", "gzip, gzip", "gzip members"]


@pytest.mark.anyio
@pytest.mark.parametrize("name", ROUTE_BOMBS)
async def test_a_system_one_route_refuses_a_bomb_in_a_few_mib(name: str) -> None:
    make, codings = BOMBS[name]
    data = make()
    with front(Front(answer=bomb_answer(data, codings))) as f:
        evaluator = system_one(f.url)
        try:
            refused, growth = await peak_growth(lambda: evaluator.evaluate(REQUEST, timeout=20))
        finally:
            await evaluator.aclose()
    assert growth < GROWTH, f"{growth / MiB:.1f} MiB"
    assert isinstance(refused, AnswerInvalid)
    assert str(refused) == "evaluator response exceeds 1 MiB once decompressed"
    assert f.requests[0].headers["accept-encoding"] == ACCEPT_ENCODING


@pytest.mark.anyio
@pytest.mark.parametrize("name", ROUTE_BOMBS)
@pytest.mark.parametrize(("kind", "options"), [(OPENAI, {}), (OLLAMA, {"readout": "samples"}), (ANTHROPIC, {})])
async def test_a_model_route_refuses_a_bomb_in_a_few_mib(kind: LlmRoute, options: dict[str, Any], name: str) -> None:
    make, codings = BOMBS[name]
    stub = Stub(letters({"Yes": 0.9, "No": 0.1}), always=Fault(body=make(),
                                                                 headers={"Content-Encoding": header(codings)}))
    with stub_server(stub, wire=kind.wire) as served:
        evaluator = model_route(kind, served.url, **options)
        try:
            refused, growth = await peak_growth(lambda: evaluator.evaluate(REQUEST, timeout=20))
        finally:
            await evaluator.aclose()
    assert growth < GROWTH, f"{growth / MiB:.1f} MiB"
    assert isinstance(refused, AnswerInvalid)
    assert str(refused) == f"the {kind.name} server's response exceeds 1 MiB once decompressed"
    assert served.seen[0].headers["accept-encoding"] == ACCEPT_ENCODING


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
async def test_a_vision_provider_refuses_a_bomb_in_a_few_mib(name: str) -> None:
    with front(Front(answer=bomb_answer(double_gzip_bomb(), ("gzip", "gzip")))) as f:
        vision = vision_provider(name, base_url=f.url + ("/v1" if name == "openai" else ""), model="vision-model",
                                 api_key=KEY, environ={}, timeout=20)
        try:
            refused, growth = await peak_growth(lambda: vision.ask("Is it there?", b"\x89PNG"))
        finally:
            await vision.aclose()
    assert growth < GROWTH, f"{growth / MiB:.1f} MiB"
    assert isinstance(refused, VisionError)
    assert str(refused) == "the vision provider's reply exceeds 256 KiB once decompressed"


@pytest.mark.anyio
@pytest.mark.parametrize("codings", [("gzip",), ("raw-deflate",), ("deflate", "gzip")])
async def test_honest_compressed_answers_read_as_plain_ones(codings: tuple[str, ...]) -> None:
    with mock(key=KEY) as upstream, front(Front(upstream=upstream, encoding=codings)) as f:
        evaluator = system_one(f.url)
        try:
            answered = await evaluator.evaluate(REQUEST, timeout=20)
        finally:
            await evaluator.aclose()
    assert 0 <= answered.answers["refund"]["noul"] <= 1
    dist = {"Yes": 0.8, " no": 0.2}
    readings = []
    for fault in (Fault(), Fault(encoding=codings)):
        with stub_server(Stub(letters(dist), always=fault)) as served:
            evaluator = model_route(OPENAI, served.url)
            try:
                readings.append((await evaluator.evaluate(REQUEST, timeout=20)).answers)
            finally:
                await evaluator.aclose()
    assert readings[0] == readings[1] and readings[0]["refund"]["noul"] == pytest.approx(0.8)


# ------------------------------------------------------------------ the process's own peak, in a fresh interpreter

PEAK_SCRIPT = """
import anyio, json, resource, sys
from tests.body_bombs import MiB, double_gzip_bomb, gzip_bomb
from tests.llm_stubs import Fault, Stub, letters, stub_server
from tests.test_bounded_body import REQUEST, model_route
from fabric_jev.evaluators.llm_routes import OPENAI

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

async def main():
    growth = {}
    for name, data, coding in (("warm-up", b"", ""), ("gzip", gzip_bomb(), "gzip"),
                               ("gzip, gzip", double_gzip_bomb(), "gzip, gzip")):
        fault = Fault(body=data, headers={"Content-Encoding": coding}) if coding else Fault()
        with stub_server(Stub(letters({"Yes": 0.9, "No": 0.1}), always=fault)) as served:
            evaluator = model_route(OPENAI, served.url)
            before = peak()
            try:
                await evaluator.evaluate(REQUEST, timeout=30)
                outcome = "answered"
            except Exception as exc:
                outcome = str(exc)
            finally:
                await evaluator.aclose()
            growth[name] = [outcome, peak() - before]
    print(json.dumps(growth))

anyio.run(main)
"""


@pytest.mark.timeout(120)
def test_the_process_peak_grows_by_a_few_mib_for_a_bomb() -> None:
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT], capture_output=True, text=True, cwd=ROOT,
                          timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    growth = json.loads(done.stdout)
    assert growth["warm-up"][0] == "answered"
    for name in ("gzip", "gzip, gzip"):
        outcome, grew = growth[name]
        assert grew < 8 * MiB, f"{name}: the peak grew by {grew / MiB:.1f} MiB"
        assert outcome == "the openai server's response exceeds 1 MiB once decompressed"


@pytest.mark.anyio
async def test_a_declared_length_past_the_limit_is_refused_before_a_byte_of_the_body_comes() -> None:
    """The server promises 100 MiB and sends nothing: waiting for the body would end in the timeout."""
    import socketserver
    import threading

    from tests.upstream import serving

    release = threading.Event()

    class Promise(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 104857600\r\n\r\n")
            self.wfile.flush()
            release.wait(30)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Promise)
    server.daemon_threads = True
    with serving(server) as port:
        evaluator = system_one(f"http://127.0.0.1:{port}")
        try:
            with pytest.raises(AnswerInvalid, match=r"^evaluator response exceeds 1 MiB$"):
                await evaluator.evaluate(REQUEST, timeout=30)
        finally:
            release.set()
            await evaluator.aclose()
