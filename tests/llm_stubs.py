"""Stub servers of the two LLM wires on loopback, judged by the official SDKs.

`ChatStub` speaks OpenAI's Chat Completions at ``/v1/chat/completions`` and
`MessagesStub` Anthropic's Messages at ``/v1/messages``. Every request they
receive is checked against the SDK's own request types (`judge_chat`,
`judge_messages`: unknown fields and wrong shapes fail the test), and every
200 they send is built from the SDK's response models (`ChatCompletion`,
`Message`), so the route under test reads exactly what the SDKs describe.

A stub answers from a *model*: a function of the request's user text (or the
question block) to a next-token distribution ``{token: probability}``. What it
sends back for logprobs is that distribution's top 20 as log-probabilities; a
sample is the most likely label (or the next one, turn by turn, for
`rotate`). Faults are queued per request (`faults`): an HTTP status with
headers, a body cut short, a stall, a response with no logprobs, a body
compressed (`encoding`) or replaced by other bytes (a bomb, say).
"""

from __future__ import annotations

import json
import math
import sys
import threading
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import TypeAdapter

from tests.body_bombs import encode, header
from tests.upstream import serving

Model = Callable[[str], dict[str, float]]


@dataclass
class Fault:
    """What the stub does to one request instead of answering it well."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: Send this many bytes of a longer body, then close the connection.
    truncate: int | None = None
    #: Hold the answer until the stub is released (timeout and cancellation tests).
    stall: bool = False
    #: Answer 200 without logprobs (a server or model that gives none).
    no_logprobs: bool = False
    #: Put this text into the response's model field (a key echoed back, say).
    model: str | None = None
    #: Compress the 200 body with these codings, in order, and say so in Content-Encoding.
    encoding: tuple[str, ...] = ()
    #: Send these bytes as the 200 body instead (with `headers`, a Content-Encoding say).
    body: bytes | None = None
    #: List these (token, log-probability) as a logprobs answer's top tokens, as they are
    #: (duplicates, positive numbers: what an honest model never sends), the first as the chosen one.
    candidates: list[tuple[str, float]] | None = None
    #: Replace these bytes of the 200 body by those (a number no SDK model holds: an int past floats).
    replace: tuple[bytes, bytes] | None = None


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    #: Requests answered before this one arrived (the first of an evaluation goes alone).
    done_before: int = 0


@dataclass
class Stub:
    model: Model
    served_model: str = "stub-model-2025"
    #: Faults for the next requests, in order (a request takes the first one left).
    faults: list[Fault] = field(default_factory=list)
    #: Faults for every request (after the queued ones are used up).
    always: Fault | None = None
    logprobs: bool = True
    rotate: bool = False
    seen: list[Seen] = field(default_factory=list)
    #: What the SDK's types refused in a request (each answered 400): a test asserts it stays empty.
    problems: list[str] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Requests being answered now, the most at once, and those answered.
    in_flight: int = 0
    max_in_flight: int = 0
    done: int = 0
    _turn: int = 0

    def user_texts(self) -> list[str]:
        return [_user_text(s.body) for s in self.seen]

    def next_fault(self) -> Fault:
        with self.lock:
            if self.faults:
                return self.faults.pop(0)
            return self.always or Fault()

    def turn(self) -> int:
        with self.lock:
            self._turn += 1
            return self._turn - 1


def top(dist: dict[str, float], n: int = 20) -> list[tuple[str, float]]:
    """The distribution's n most likely tokens as (token, log-probability)."""
    ranked = sorted(dist.items(), key=lambda kv: -kv[1])[:n]
    return [(t, math.log(p)) for t, p in ranked if p > 0]


def _user_text(body: dict[str, Any]) -> str:
    if "system" in body and isinstance(body["messages"][0]["content"], list):  # Messages: blocks
        return "".join(b["text"] for b in body["messages"][0]["content"])
    return str(body["messages"][-1]["content"])


# ------------------------------------------------------------------ the SDKs as judges

def _keys(td: Any) -> set[str]:
    return set(typing.get_type_hints(td))


@cache
def adapter(tp: Any) -> TypeAdapter[Any]:
    """One adapter per SDK type for the whole session (the SDKs take seconds to import on a busy machine)."""
    return TypeAdapter(tp)


def judge_chat(body: dict[str, Any]) -> None:
    """The body is a Chat Completions request as the openai SDK types it: no unknown field anywhere."""
    from openai.types.chat import ChatCompletionMessageParam, completion_create_params

    params = completion_create_params.CompletionCreateParamsNonStreaming
    extra = set(body) - _keys(params)
    assert not extra, f"fields the openai SDK does not know: {extra}"
    adapter(params).validate_python(body)
    messages = adapter(list[ChatCompletionMessageParam]).validate_python(body["messages"])
    assert messages == body["messages"], "a message carries fields the openai SDK does not know"
    if "response_format" in body:
        fmt = adapter(completion_create_params.ResponseFormat).validate_python(body["response_format"])
        assert fmt == body["response_format"]


def judge_messages(body: dict[str, Any]) -> None:
    """The body is a Messages request as the anthropic SDK types it: no unknown field anywhere."""
    from anthropic.types import MessageParam, TextBlockParam, ToolChoiceParam, ToolParam, message_create_params

    params = message_create_params.MessageCreateParamsNonStreaming
    extra = set(body) - _keys(params)
    assert not extra, f"fields the anthropic SDK does not know: {extra}"
    adapter(params).validate_python(body)
    messages = adapter(list[MessageParam]).validate_python(body["messages"])
    assert [{k: v for k, v in m.items() if k != "content"} for m in messages] == [
        {k: v for k, v in m.items() if k != "content"} for m in body["messages"]]
    for m in body["messages"]:  # content is an iterable the SDK types validate lazily: each block here
        blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        assert adapter(list[TextBlockParam]).validate_python(blocks) == blocks, "an unknown content field"
    if isinstance(body.get("system"), list):
        assert adapter(list[TextBlockParam]).validate_python(body["system"]) == body["system"]
    if "tools" in body:
        assert adapter(list[ToolParam]).validate_python(body["tools"]) == body["tools"]
    if "tool_choice" in body:
        assert adapter(ToolChoiceParam).validate_python(body["tool_choice"]) == body["tool_choice"]


# ------------------------------------------------------------------ responses from the SDKs' models

def chat_response(stub: Stub, body: dict[str, Any], fault: Fault) -> bytes:
    from openai.types.chat import ChatCompletion

    dist = stub.model(_user_text(body))
    best = top(dist) if fault.candidates is None or "response_format" in body else fault.candidates
    if "response_format" in body:  # a sample: a label the schema allows, as JSON
        allowed = body["response_format"]["json_schema"]["schema"]["properties"]["label"]["enum"]
        ranked = [t.strip() for t, _ in best if t.strip() in allowed] or [allowed[0]]
        label = ranked[stub.turn() % len(ranked)] if stub.rotate else ranked[0]
        content, logprobs = json.dumps({"label": label}), None
    else:
        content = best[0][0]
        logprobs = None if fault.no_logprobs or not stub.logprobs else {"content": [{
            "token": best[0][0], "logprob": best[0][1], "bytes": list(best[0][0].encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in best]}]}
    completion = ChatCompletion.model_validate({
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 1_760_000_000,
        "model": fault.model or stub.served_model,
        "choices": [{"index": 0, "finish_reason": "length", "logprobs": logprobs,
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 100 + len(_user_text(body)) // 4, "completion_tokens": 1,
                  "total_tokens": 101 + len(_user_text(body)) // 4}})
    return completion.model_dump_json(exclude_unset=True).encode()


def messages_response(stub: Stub, body: dict[str, Any], fault: Fault) -> bytes:
    from anthropic.types import Message

    allowed = body["tools"][0]["input_schema"]["properties"]["label"]["enum"]
    dist = stub.model(_user_text(body))
    ranked = [t.strip() for t, _ in top(dist) if t.strip() in allowed] or [allowed[0]]
    label = ranked[stub.turn() % len(ranked)] if stub.rotate else ranked[0]
    message = Message.model_validate({
        "id": "msg_stub", "type": "message", "role": "assistant", "model": fault.model or stub.served_model,
        "content": [{"type": "tool_use", "id": "toolu_stub", "name": "answer", "input": {"label": label}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 9, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 80}})
    return message.model_dump_json(exclude_unset=True).encode()


#: A minimal request of each wire, written from the APIs' documentation (not by the code under test).
WARM: dict[str, dict[str, Any]] = {
    "chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
    "messages": {"model": "m", "max_tokens": 1, "system": [{"type": "text", "text": "s"}],
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                 "tools": [{"name": "t", "input_schema": {"type": "object"}}],
                 "tool_choice": {"type": "tool", "name": "t"}},
}


@contextmanager
def stub_server(stub: Stub, *, wire: str = "chat") -> Iterator[Stub]:
    """Serve `stub` on 127.0.0.1; `stub.url` is the base URL the SDK would take (…/v1 for chat)."""
    path = "/v1/chat/completions" if wire == "chat" else "/v1/messages"
    judge = judge_chat if wire == "chat" else judge_messages
    respond = chat_response if wire == "chat" else messages_response

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length))
            with stub.lock:
                stub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body, stub.done))
                stub.in_flight += 1
                stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
            stub.arrived.set()
            self.counted, self.extra = False, {}
            try:
                self._answer(body)
            finally:
                self._count()

        def _count(self) -> None:
            """Counted answered before a byte of the answer is sent: its client cannot send the next
            request before this one is counted."""
            if not self.counted:
                self.counted = True
                with stub.lock:
                    stub.in_flight -= 1
                    stub.done += 1

        def _answer(self, body: dict[str, Any]) -> None:
            fault = stub.next_fault()
            if fault.stall:
                stub.release.wait(20)
            if self.path != path:
                status, payload = 404, b'{"error": "not found"}'
            elif fault.status != 200:
                status, payload = fault.status, b'{"error": {"message": "stub fault"}}'
            else:
                try:
                    judge(body)
                except (AssertionError, ValueError) as exc:
                    stub.problems.append(str(exc))
                    status, payload = 400, b'{"error": {"message": "refused by the SDK types"}}'
                else:
                    status, payload = 200, respond(stub, body, fault)
                    if fault.encoding:
                        payload = encode(payload, fault.encoding)
                        self.extra = {"Content-Encoding": header(fault.encoding)}
                    if fault.body is not None:
                        payload = fault.body
                    if fault.replace is not None:
                        payload = payload.replace(*fault.replace)
            self._count()
            self.send_response(status)
            for k, v in {**fault.headers, **getattr(self, "extra", {})}.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            if fault.truncate is not None and status == 200:
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[:fault.truncate])
                self.wfile.flush()
                self.close_connection = True
                return
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            if isinstance(sys.exc_info()[1], ConnectionError):
                return  # a client that gave up before a stalled answer: expected here
            super().handle_error(request, client_address)

    # The SDKs load before the server answers: a client's timeout never pays for their import.
    judge(WARM[wire])
    with serving(Server(("127.0.0.1", 0), Handler)) as port:
        stub.url = f"http://127.0.0.1:{port}" + ("/v1" if wire == "chat" else "")
        try:
            yield stub
        finally:
            stub.release.set()


def letters(dist: dict[str, float]) -> Model:
    """A model that answers every question with the same distribution."""
    return lambda text: dist
