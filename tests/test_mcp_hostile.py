"""`fabric-jev mcp` under attack (issue 33, "MCP"): a program schema the client's regex engine
cannot read, a programs folder full of junk, a wait for advice that outlives its session, a line
of millions of empty arrays. The real server in a child process, the official SDK's client."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install -e '.[mcp]')")

from fabric_jev.mcp.lines import CROWDED_MARK, MAX_LINE_VALUES, BoundedLines
from fabric_jev.mcp.programs import SNIFF_BYTES, ProgramCatalog, published
from fabric_jev.program_files import MAX_PROGRAM_FILE_BYTES, load_program
from tests.mcp_support import mcp_client
from tests.test_mcp import RawSession, call_line

FIXTURE = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 3, "output_tokens": 1}}


def write_folder(tmp: Path, files: dict[str, str]) -> Path:
    programs = tmp / "programs"
    programs.mkdir(exist_ok=True)
    for name, text in files.items():
        (programs / name).parent.mkdir(parents=True, exist_ok=True)
        (programs / name).write_text(text)
    (tmp / "fixture.json").write_text(json.dumps(FIXTURE))
    return programs


def args(tmp: Path, *extra: str) -> list[str]:
    return ["--evaluator", f"fixture:{tmp / 'fixture.json'}", "--programs", str(tmp / "programs"), *extra]


# ---------------------------------------------------------------- patterns only RE2 reads

LETTERS = """/* @program
{"name": "letters",
 "inputSchema": {"type": "object", "properties": {"word": {"type": "string", "pattern": "^\\\\pL+\\\\z"},
                                                  "code": {"type": "string", "pattern": "^[A-Z]{2}-\\\\d{3}$"}},
                 "required": ["word"], "additionalProperties": false},
 "outputSchema": {"type": "object", "properties": {"echo": {"type": "string", "pattern": "\\\\p{L}"}}}}
*/
return {echo: input.word};
"""


def test_published_schemas_keep_only_patterns_every_engine_reads() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "pattern": r"^\pL+\z"},
        "b": {"type": "string", "pattern": r"^[A-Z]{2}-\d{3}$"},
        "c": {"type": "array", "items": {"type": "string", "pattern": r"(?i)abc"}},
        "pattern": {"anyOf": [{"type": "string", "pattern": r"\p{Greek}"}, {"const": {"pattern": r"\z"}}]}},
        "additionalProperties": {"type": "string", "pattern": r"[[:alpha:]]"}}
    assert published(schema) == {"type": "object", "properties": {
        "a": {"type": "string"},
        "b": {"type": "string", "pattern": r"^[A-Z]{2}-\d{3}$"},
        "c": {"type": "array", "items": {"type": "string"}},
        "pattern": {"anyOf": [{"type": "string"}, {"const": {"pattern": r"\z"}}]}},  # a value stays as it is
        "additionalProperties": {"type": "string"}}


@pytest.mark.anyio
async def test_an_re2_only_pattern_does_not_break_the_sdk_client(tmp_path: Path) -> None:
    write_folder(tmp_path, {"letters.ts": LETTERS})
    async with mcp_client(tmp_path, *args(tmp_path, "--program-tools")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        properties = tools["letters"].input_schema["properties"]
        assert "pattern" not in properties["word"] and properties["code"]["pattern"] == r"^[A-Z]{2}-\d{3}$"
        done = await client.call_tool("letters", {"word": "héllo"})  # the client validates the result
        refused = await client.call_tool("letters", {"word": "h3llo"})  # the pattern still holds
    assert not done.is_error and done.structured_content is not None
    assert done.structured_content["result"] == {"echo": "héllo"}
    assert refused.is_error and "input does not match its declared schema" in refused.content[0].text


# ---------------------------------------------------------------- a folder full of junk

VALID = """/* @program {"name": "zzz", "inputSchema": {"type": "integer"}, "outputSchema": {"type": "integer"}} */
return input + 1;
"""


def junk_folder(tmp: Path) -> Path:
    """300 junk files of 1 MiB (sparse: nothing is written), half of them opening like JSON, and
    3,000 folders, all sorted before the one valid program."""
    programs = write_folder(tmp, {})
    for i in range(300):
        with open(programs / f"a{i:03}.{'json' if i % 2 else 'ts'}", "wb") as f:
            f.write(b"{" if i % 2 else b"\0")
            f.truncate(1 << 20)
    for i in range(3000):
        (programs / f"d{i:04}").mkdir()
    (programs / "zzz.js").write_text(VALID)
    return programs


def test_a_junk_folder_is_parsed_once_and_the_program_after_it_is_listed(tmp_path: Path) -> None:
    programs = junk_folder(tmp_path)
    catalog = ProgramCatalog(programs.resolve(), lambda p: load_program(programs / p), tools=True,
                             reserved=frozenset())
    assert [p.path for p in catalog.programs()] == ["zzz.js"]
    first = catalog.parsed
    # Only zzz.js opens as a program does: "{" then NULs has no artifact key, NULs no @program comment.
    assert first == 1
    assert sorted(catalog.skipped) == sorted(f"a{i:03}.{'json' if i % 2 else 'ts'}" for i in range(300))
    assert [p.path for p in catalog.programs()] == ["zzz.js"]
    found = catalog.find_tool("zzz")
    assert found is not None and found.program.name == "zzz"
    assert catalog.parsed == first  # nothing unchanged is parsed again
    (programs / "zzz.js").write_text(VALID.replace("input + 1", "input + 2"))
    found = catalog.find_tool("zzz")
    assert found is not None and "input + 2" in found.program.code and catalog.parsed == first + 1


@pytest.mark.anyio
async def test_a_program_after_junk_is_a_tool_the_client_can_call(tmp_path: Path) -> None:
    junk_folder(tmp_path)
    async with mcp_client(tmp_path, *args(tmp_path, "--program-tools")) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        done = await client.call_tool("zzz", {"input": 41})
    assert "zzz" in tools
    assert not done.is_error and done.structured_content is not None and done.structured_content["result"] == 42


def large_junk_folder(tmp: Path) -> Path:
    """256 large files that are no programs (sparse: little is written), sorted before the one
    program: 128 JSON data files just under the program size bound (they used to be read whole
    and parsed at the first listing), 64 JSON files of 1.5 MiB that open like an artifact, and
    64 bundled scripts of 1 MiB, the most a program file may be."""
    programs = write_folder(tmp, {})
    for i in range(256):
        if i < 128:
            name, head, size = f"a{i:03}.json", b'{"rows": [', MAX_PROGRAM_FILE_BYTES - 4096
        elif i < 192:
            name, head, size = f"a{i:03}.json", b'{"name": "big", "code": "', 3 << 19
        else:
            name, head, size = f"a{i:03}.ts", b"/* bundled by a tool */\n", MAX_PROGRAM_FILE_BYTES
        with open(programs / name, "wb") as f:
            f.write(head)
            f.truncate(size)
    (programs / "zzz.js").write_text(VALID)
    return programs


def test_a_folder_of_large_non_programs_is_sniffed_not_read(tmp_path: Path) -> None:
    programs = large_junk_folder(tmp_path)
    loaded: list[str] = []

    def load(path: str) -> Any:
        loaded.append(path)
        return load_program(programs / path)

    catalog = ProgramCatalog(programs.resolve(), load, tools=True, reserved=frozenset())
    assert [p.path for p in catalog.programs()] == ["zzz.js"]
    # Only the program is read whole (after its sniff); of the rest, the head of those under the
    # size bound, and nothing of those over it.
    assert loaded == ["zzz.js"]
    assert catalog.bytes_read == 192 * SNIFF_BYTES + 2 * len(VALID)
    reasons = catalog.skipped
    assert len(reasons) == 256
    assert reasons["a000.json"].startswith("its first key 'rows' is none of a program artifact's (")
    assert reasons["a128.json"] == f"it is larger than {MAX_PROGRAM_FILE_BYTES} bytes ({3 << 19} bytes)"
    assert reasons["a192.ts"] == "it does not open with a /* @program comment"
    # A second listing reads nothing: every file is known by its (mtime, size).
    before = catalog.bytes_read
    assert [p.path for p in catalog.programs()] == ["zzz.js"] and catalog.bytes_read == before


ARTIFACT = {"name": "zzz", "code": "return input + 1;", "inputSchema": {"type": "integer"},
            "outputSchema": {"type": "integer"}, "language": "javascript"}
SPACE = st.text(alphabet=" \t\r\n", max_size=40)


def catalog_of(folder: Path, files: dict[str, bytes]) -> tuple[ProgramCatalog, list[str]]:
    """A catalog of `folder` holding `files` only, and the list of paths it loads whole."""
    for old in folder.iterdir():
        old.unlink()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    loaded: list[str] = []

    def load(path: str) -> Any:
        loaded.append(path)
        return load_program(folder / path)

    return ProgramCatalog(folder.resolve(), load, tools=True, reserved=frozenset()), loaded


@settings(max_examples=40, deadline=None)
@given(st.permutations(list(ARTIFACT)), SPACE, SPACE, st.booleans(), SPACE, st.sampled_from(["/*", "/**"]))
def test_a_program_in_any_layout_passes_the_sniff(tmp_path_factory: pytest.TempPathFactory, keys: list[str],
                                                  before: str, inside: str, indent: bool, lead: str,
                                                  opener: str) -> None:
    """The cheap test lets every real program through: an artifact with its keys in any order and
    any white space (or indented by json.dumps), a source file with white space before its comment."""
    artifact = {key: ARTIFACT[key] for key in keys}
    body = json.dumps(artifact, indent=1 if indent else None)
    header = json.dumps({k: v for k, v in ARTIFACT.items() if k not in ("code", "language")})
    files = {"a.json": (before + "{" + inside + body[1:]).encode(),
             "b.js": f"{lead}{opener} @program {header} */\nreturn input + 1;\n".encode()}
    catalog, loaded = catalog_of(tmp_path_factory.mktemp("layout"), files)
    assert [p.path for p in catalog.programs()] == ["a.json", "b.js"], catalog.skipped
    assert sorted(loaded) == ["a.json", "b.js"]


_WHITE = b" \t\n\r\f\v"
OPENINGS = st.sampled_from(["", "{", '{"rows": [', '{"name": ', '{ "code":', "/*", "/* @program", "/** @programs",
                            "  /*\t@program ", "// @program", "\ufeff/* @program"])


def opens_as_a_program(data: bytes, suffix: str) -> bool:
    """The documented cheap test, written plainly (docs/mcp.md): a source file's first bytes are a
    /* @program comment; a .json file's are `{` and a first key a program artifact has."""
    head = data[:SNIFF_BYTES].removeprefix(b"\xef\xbb\xbf").lstrip(_WHITE)
    if suffix != "json":
        rest = head.removeprefix(b"/**") if head.startswith(b"/**") else head.removeprefix(b"/*")
        if rest is head:
            return False
        rest = rest.lstrip(b" \t")
        after = rest[8:9]  # "@program" ends a word: no ASCII letter, digit or _ after it
        return rest.startswith(b"@program") and not (after.isalnum() or after == b"_")
    if not head.startswith(b"{"):
        return False
    rest = head[1:].lstrip(_WHITE)
    if not rest.startswith(b'"') or b'"' not in rest[1:]:
        return False
    key, _, after = rest[1:].partition(b'"')
    return (key.decode("utf-8", "replace") in {*ARTIFACT, "requires", "limits"} and b"\\" not in key
            and after.lstrip(_WHITE).startswith(b":"))


@settings(max_examples=80, deadline=None)
@given(OPENINGS, st.text(max_size=300), st.sampled_from(["json", "ts", "js", "mjs"]))
def test_text_that_is_no_program_is_read_no_further_than_its_head(tmp_path_factory: pytest.TempPathFactory,
                                                                  opening: str, text: str, suffix: str) -> None:
    """Any text, padded past the sniff: it is never listed, and only if its head opens as a program
    does is it read whole (once, then refused by the loader); otherwise SNIFF_BYTES are read."""
    data = (opening + text).encode("utf-8", "surrogatepass") + b" " * (4 * SNIFF_BYTES) + b"x"
    catalog, loaded = catalog_of(tmp_path_factory.mktemp("junk"), {f"junk.{suffix}": data})
    assert catalog.programs() == []
    assert set(catalog.skipped) == {f"junk.{suffix}"}
    assert bool(loaded) == opens_as_a_program(data, suffix), catalog.skipped
    assert catalog.bytes_read == SNIFF_BYTES + (len(data) if loaded else 0)


@pytest.mark.anyio
async def test_fifos_devices_and_sockets_in_the_folder_are_skipped_and_listing_ends(tmp_path: Path) -> None:
    import socket

    programs = write_folder(tmp_path, {"zzz.js": VALID})
    os.mkfifo(programs / "a.json")  # no writer: opening it would wait for ever
    (programs / "b.ts").symlink_to("/dev/zero")  # opening it would read for ever
    fd = os.open(programs / "a.json", os.O_RDWR | os.O_NONBLOCK)  # ... and a FIFO with a writer
    os.mkfifo(programs / "c.js")
    writer = os.open(programs / "c.js", os.O_RDWR | os.O_NONBLOCK)
    os.write(writer, b"/* @program {}")
    here = os.getcwd()
    with socket.socket(socket.AF_UNIX) as server:
        os.chdir(programs)
        try:
            server.bind("d.mjs")
        finally:
            os.chdir(here)
        try:
            catalog = ProgramCatalog(programs.resolve(), lambda p: load_program(programs / p), tools=True,
                                     reserved=frozenset())
            assert [p.path for p in catalog.programs()] == ["zzz.js"]
            assert catalog.skipped == {"a.json": "it is a FIFO, not a regular file",
                                       "b.ts": "it is a character device, not a regular file",
                                       "c.js": "it is a FIFO, not a regular file",
                                       "d.mjs": "it is a socket, not a regular file"}
            async with mcp_client(tmp_path, *args(tmp_path, "--program-tools")) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                resources = [str(r.uri) for r in (await client.list_resources()).resources]
                by_path = await client.call_tool("jev_run", {"programPath": "a.json", "input": 1})
        finally:
            os.close(fd)
            os.close(writer)
    assert "zzz" in tools and resources == ["fabric-jev://programs/zzz.js"]
    assert by_path.is_error and "no program file 'a.json'" in by_path.content[0].text  # type: ignore[union-attr]


# ---------------------------------------------------------------- a wait that outlives its session


@pytest.mark.anyio
async def test_closing_a_session_ends_a_wait_for_advice_at_once(tmp_path: Path) -> None:
    write_folder(tmp_path, {})
    async with mcp_client(tmp_path, *args(tmp_path)) as client:
        opened = await client.call_tool("jev_session_open", {"sessionId": "s1"})
        assert not opened.is_error
        waited: list[Any] = []

        async def wait_for_advice() -> None:
            waited.append(await client.call_tool("jev_advice", {"sessionId": "s1", "waitMs": 300_000}))

        # Without the close ending it, the wait lasts its whole 300 s: the guard below (and the
        # per-test timeout) fail long before that.
        with anyio.fail_after(45):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_advice)
                await anyio.wait_all_tasks_blocked()
                closed = await client.call_tool("jev_session_close", {"sessionId": "s1"})
    assert not closed.is_error
    [advice] = waited
    assert not advice.is_error, advice.content
    assert advice.structured_content is not None and advice.structured_content["advice"] == []
    assert advice.structured_content["session"]["halted"] is True


# ---------------------------------------------------------------- millions of empty arrays


def test_a_line_of_millions_of_values_is_cut_before_anything_parses_it() -> None:
    crowded = b'{"jsonrpc": "2.0", "id": 3, "params": [' + b"[]," * 400_000 + b"[]]}\n"
    text = b'{"jsonrpc": "2.0", "id": 4, "params": ["' + b"[],:" * 400_000 + b'"]}\n'
    lines = BoundedLines(io.BytesIO(crowded + text))
    cut = lines.readline()
    assert cut.endswith(CROWDED_MARK + "\n") and len(cut) < 5000 and cut.startswith('{"jsonrpc": "2.0", "id": 3')
    assert lines.readline() == text.decode()  # brackets inside a string are text, not values


@pytest.mark.timeout(120)
def test_a_16_mib_line_of_empty_arrays_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    session = RawSession(tmp_path)
    try:
        before = _peak_kib(session.proc.pid)
        arrays = b"[]," * (5_550_000 - 1) + b"[]"
        session.send(call_line(7, "jev_status", b'{"x": [' + arrays + b"]}"))
        refused = session.reply()
        after = _peak_kib(session.proc.pid)
        session.send(b'{"jsonrpc": "2.0", "id": 8, "method": "ping"}')
        fine = session.reply()
    finally:
        session.close()
    assert refused == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32700, "message": f"Parse error: the message holds more than {MAX_LINE_VALUES} JSON values"}}
    assert fine == {"jsonrpc": "2.0", "id": 8, "result": {}}
    # The line itself is read (16 MiB, and a copy while it is counted); 5.6 M lists were ~1 GiB.
    assert after - before < 96 << 10, f"the server's peak grew by {(after - before) >> 10} MiB"


def _peak_kib(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_the_count_of_values_is_an_upper_bound_that_ignores_strings() -> None:
    from fabric_jev._json import values_at_most

    for text in (b"[]", b'{"a": [1, 2, {"b": null}]}', b'["a,b:c[", 3]', b"7"):
        assert values_at_most(text, 0) >= _count(json.loads(text))
    assert values_at_most(b'["' + b"," * 1000 + b'"]', 10) <= 3


def _count(value: Any) -> int:
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(_count(v) for v in value.values())
    return 1
