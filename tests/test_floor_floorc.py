"""The floor fails closed on five more holes (issue 39, a reviewer's round on main).

1. an argv list that holds a number, a boolean or a null, and several argument keys beside one
   program;
2. JSON text in a string past the size or nesting limits;
3. words after a here-document's delimiter (``rm <<EOF -rf ~``);
4. a program given as an argv list beside ``stdin``/``input``;
5. path, URL and SQL keys spelled in another case or nested.

Each hole has named tests that failed before its fix, variants drawn at random, and the
labelled rows of tests/data/floor_actions.jsonl (families below), run through a real host.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev import CapabilityRegistry, HostConfig, JevHost
from fabric_jev.approval.floor import floor_hits
from fabric_jev.approval.floor_reading import MAX_DEPTH, MAX_JSON_CHARS, MAX_STRINGS
from fabric_jev.approval.rules import CallView, RuleContext
from fabric_jev.approval.shell import parse
from tests.conftest import program
from tests.floor_families import assert_families_have_both_labels, run_family_under_allow
from tests.test_floor import CWD, HOME

UNREADABLE = "unreadable-command"
#: This branch's families of the labelled set, and the entry each destructive row must hit
#: (None: any entry; the point is that the call is read at all).
FAMILIES: dict[str, str | None] = {
    "argv-holding-scalars": None,
    "json-past-the-limits": UNREADABLE,
    "heredoc-swallows-arguments": None,
    "argv-program-fed-its-input": "program-from-input",
    "keys-spelled-otherwise": None,
}


def _hits(arguments: Any, ref: str = "shell.exec", risk: str = "execute") -> list[str]:
    return [e.id for e in floor_hits(CallView(ref, risk, arguments, RuleContext.here(CWD, HOME)))]


def _respell(draw: Any, key: str) -> str:
    """A key spelled another way the floor must read the same: case, `-` or `_` between words."""
    style = draw(st.sampled_from(["same", "upper", "title", "dash", "underscore"]))
    if style == "upper":
        return key.upper()
    if style == "title":
        return key[:1].upper() + key[1:]
    if style in ("dash", "underscore") and len(key) > 2:
        cut = draw(st.integers(1, len(key) - 1))
        return key[:cut] + ("-" if style == "dash" else "_") + key[cut:]
    return key


# ---------------------------------------------------------------- 1. an argv holding scalars


@pytest.mark.parametrize(("arguments", "ref", "entry"), [
    ({"cmd": ["rm", "-rf", 1, "/home/user"]}, "shell.exec", "recursive-delete-outside-tree"),
    ({"argv": ["rm", "-rf", True, "/home/u"]}, "tools.invoke", "recursive-delete-outside-tree"),
    ({"command": ["git", "push", "--force", 0, "origin"]}, "tools.invoke", "git-force-push"),
    ({"cmd": ["rm", "-rf", 2.5, "~"]}, "tools.invoke", "recursive-delete-outside-tree"),
    ({"cmd": "rm", "args": ["-rf", None, "/home/user"]}, "tools.invoke", UNREADABLE),
    ({"cmd": ["rm", "-rf", None, "/home/user"]}, "tools.invoke", UNREADABLE),
    ({"cmd": ["rm", "-rf", ["/home/user"]]}, "tools.invoke", UNREADABLE),
    ({"cmd": "rm", "args": ["-rf", {"path": "/home/user"}]}, "tools.invoke", UNREADABLE),
    ({"program": "git", "args": ["push", "origin", "main"], "flags": ["--force"]}, "tools.invoke",
     "git-force-push"),
    ({"program": "rm", "flags": "-rf", "args": ["/home/user"]}, "tools.invoke", "recursive-delete-outside-tree"),
])
def test_an_argv_holding_a_number_a_boolean_or_a_null_is_stopped(arguments: Any, ref: str, entry: str) -> None:
    assert entry in _hits(arguments, ref)


@pytest.mark.parametrize("arguments", [
    {"cmd": ["echo", 1]}, {"cmd": ["sleep", 1.5]}, {"argv": ["ls", "-la", True]},
    {"command": ["git", "log", "-n", 5]}, {"program": "git", "args": ["status"], "flags": ["--short"]},
    {"commands": [{"cmd": "ls"}, "pwd", None]}, {"cmd": "ls", "env": [None, {"A": "1"}]},
])
def test_routine_argvs_with_scalars_are_not_stopped(arguments: Any) -> None:
    assert _hits(arguments, "shell.exec") == [] and _hits(arguments, "tools.invoke") == []


def test_rules_read_numbers_and_booleans_in_an_argv_as_their_json_text() -> None:
    view = CallView("shell.exec", "execute", {"cmd": ["rm", "-rf", 1, True, 2.5, "~"]}, RuleContext(CWD, HOME))
    [script] = view.scripts()
    assert [w.text for w in script.commands[0].words] == ["rm", "-rf", "1", "true", "2.5", "~"]


#: Destructive argvs, and the first index after which a scalar may go without changing what runs.
_ARGVS: list[tuple[list[str], int]] = [
    (["rm", "-rf", "/home/user"], 1), (["rm", "-r", "--force", "~"], 1), (["rm", "-rf", "/etc"], 1),
    (["git", "push", "--force", "origin", "main"], 2), (["dd", "if=/dev/zero", "of=/dev/sda"], 1),
]
_SCALARS = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.floats(allow_nan=False, allow_infinity=False))


@given(st.data(), st.sampled_from(_ARGVS), st.sampled_from(["cmd", "command", "argv", "commandLine", "shell"]),
       st.sampled_from(["shell.exec", "tools.invoke", "terminal.run"]))
def test_variants_an_argv_with_scalars_anywhere_is_stopped(data: Any, argv: tuple[list[str], int], key: str,
                                                           ref: str) -> None:
    words, first = argv
    spelled: list[Any] = list(words)
    for _ in range(data.draw(st.integers(1, 3))):
        spelled.insert(data.draw(st.integers(first, len(spelled))), data.draw(_SCALARS))
    assert _hits({_respell(data.draw, key): spelled}, ref), spelled


@given(st.data(), st.sampled_from(_ARGVS), st.sampled_from([None, [], ["x"], {}, {"a": 1}]),
       st.sampled_from(["cmd", "argv", "command"]))
def test_variants_a_null_or_a_container_in_an_argv_is_unreadable(data: Any, argv: tuple[list[str], int],
                                                                 hole: Any, key: str) -> None:
    words, first = argv
    spelled: list[Any] = list(words)
    spelled.insert(data.draw(st.integers(first, len(spelled))), hole)
    assert UNREADABLE in _hits({_respell(data.draw, key): spelled}, "tools.invoke")
    program, *rest = spelled
    assert UNREADABLE in _hits({"program": program, _respell(data.draw, "args"): rest}, "tools.invoke")


@given(st.data(), st.sampled_from(_ARGVS), st.sampled_from(["program", "cmd", "executable", "tool"]))
def test_variants_argument_keys_beside_one_program_are_one_argv(data: Any, argv: tuple[list[str], int],
                                                                program_key: str) -> None:
    words, _ = argv
    rest = words[1:]
    cut = data.draw(st.integers(1, len(rest) - 1)) if len(rest) > 1 else 1
    keys = data.draw(st.permutations(["args", "flags", "options", "arguments"]))[:2]
    first: Any = rest[:cut] if data.draw(st.booleans()) else " ".join(rest[:cut])
    arguments = {program_key: words[0], keys[0]: first, keys[1]: rest[cut:]}
    assert _hits(arguments, "tools.invoke"), arguments


# ---------------------------------------------------------------- 2. JSON text past the limits


def test_json_text_longer_than_the_limit_is_unreadable() -> None:
    short = json.dumps({"cmd": "rm -rf /home/user", "pad": "x" * 100})
    long = json.dumps({"cmd": "rm -rf /home/user", "pad": "x" * MAX_JSON_CHARS})
    assert "recursive-delete-outside-tree" in _hits({"payload": short}, "tools.invoke")
    assert _hits({"payload": long}, "tools.invoke") == [UNREADABLE]


def test_json_text_nested_past_the_decoder_is_unreadable() -> None:
    for n in (20, 3000):
        text = "[" * n + json.dumps({"cmd": "rm -rf /home/user"}) + "]" * n
        assert UNREADABLE in _hits({"payload": text}, "tools.invoke"), n


def test_long_text_that_is_not_json_is_not_stopped() -> None:
    assert _hits({"content": "x" * (MAX_JSON_CHARS + 10)}, "tools.invoke") == []
    assert _hits({"payload": json.dumps({"message": "hi", "count": 2})}, "tools.invoke") == []


@given(st.integers(1, 4000), st.sampled_from(["payload", "body", "data", "cmd", "request"]),
       st.sampled_from(["object", "array"]), st.booleans(), st.sampled_from(["tools.invoke", "shell.exec", "fs.put"]))
def test_variants_json_text_past_the_size_limit_is_unreadable(extra: int, key: str, shape: str, in_list: bool,
                                                              ref: str) -> None:
    inner = {"note": "y" * (MAX_JSON_CHARS + extra)}
    text = json.dumps(inner if shape == "object" else [inner, 1])
    value: Any = [text] if in_list else text
    assert UNREADABLE in _hits({key: value}, ref)


@given(st.integers(1100, 4000), st.sampled_from(["[", '{"a":']), st.sampled_from(["payload", "options", "x"]))
def test_variants_json_text_nested_past_the_decoder_is_unreadable(depth: int, opener: str, key: str) -> None:
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "1" + closer * depth
    assert UNREADABLE in _hits({key: text}, "tools.invoke")


# ---------------------------------------------------------------- 3. words after a here-document's delimiter


_HEREDOCS = [
    ("rm <<EOF -rf ~\nhi\nEOF", ["rm", "-rf", "~"], "recursive-delete-outside-tree"),
    ("rm <<-EOF -rf /home/user\n\tx\n\tEOF", ["rm", "-rf", "/home/user"], "recursive-delete-outside-tree"),
    ("git <<EOF push --force origin main\nx\nEOF", ["git", "push", "--force", "origin", "main"], "git-force-push"),
    ("dd <<EOF of=/dev/sda\nx\nEOF", ["dd", "of=/dev/sda"], "disk-overwrite"),
    ("chmod <<EOF -R 777 /\nx\nEOF", ["chmod", "-R", "777", "/"], "recursive-permissions-outside-tree"),
    ("find ~ <<EOF -delete\nx\nEOF", ["find", "~", "-delete"], "find-delete-outside-tree"),
    ("cat <<EOF > /tmp/x -rf\nx\nEOF", ["cat", "-rf"], None),
]


@pytest.mark.parametrize(("script", "words", "entry"), _HEREDOCS)
def test_words_after_a_heredoc_delimiter_are_the_commands(script: str, words: list[str], entry: str | None) -> None:
    [command] = parse(script).commands
    assert [w.text for w in command.words] == words
    if entry is not None:
        assert entry in _hits({"cmd": script})


def test_bash_hands_the_words_after_the_delimiter_to_the_command() -> None:
    """The reading is bash's own: bash prints the words `printf` was given."""
    for script in ("printf '%s\\n' <<EOF -rf '~ x' \"y z\"\nbody\nEOF", "printf '%s\\n' <<-'E' a b\n\tbody\n\tE"):
        ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
        [command] = parse(script).commands
        assert ran.stdout.splitlines() == [w.value for w in command.words[2:]]


@pytest.mark.parametrize("script", ["cat <<EOF\nhi\nEOF", "cat <<'EOF' > notes.txt\nhi\nEOF",
                                    "wc <<-EOF -l\n\ta\n\tEOF", "grep <<EOF -c x\nx\nEOF",
                                    "cat <<EOF | wc -l\na\nEOF", "cat <<EOF && ls\nhi\nEOF"])
def test_routine_heredocs_are_not_stopped(script: str) -> None:
    assert _hits({"cmd": script}) == []


@given(st.sampled_from([(w[0], w[1:], e) for _, w, e in _HEREDOCS if e is not None and w[0] != "find"]),
       st.sampled_from(["EOF", "END", "X1", "_e", "PY"]), st.sampled_from(["plain", "single", "double", "backslash"]),
       st.sampled_from(["<<", "<<-"]), st.sampled_from(["hi", "", "a b c", "$HOME"]),
       st.sampled_from(["cmd", "script", "command"]))
def test_variants_words_after_any_heredoc_delimiter_are_read(core: tuple[str, list[str], str], delimiter: str,
                                                             quoting: str, operator: str, body: str,
                                                             key: str) -> None:
    program_name, words, entry = core
    spelled = {"plain": delimiter, "single": f"'{delimiter}'", "double": f'"{delimiter}"',
               "backslash": "\\" + delimiter}[quoting]
    indent = "\t" if operator == "<<-" else ""
    script = f"{program_name} {operator}{spelled} {' '.join(words)}\n{indent}{body}\n{indent}{delimiter}"
    assert entry in _hits({key: script}), script


# ---------------------------------------------------------------- 4. a program as an argv list, fed its input


@pytest.mark.parametrize(("arguments", "ref"), [
    ({"cmd": ["python3"], "stdin": "import shutil\nshutil.rmtree('/home/user')"}, "shell.exec"),
    ({"command": ["bash"], "stdin": "rm -rf ~"}, "tools.invoke"),
    ({"cmd": ["sh", "-s"], "input": "rm -rf ~"}, "tools.invoke"),
    ({"program": ["node", "-"], "stdin_text": "require('fs').rmSync('/', {recursive: true})"}, "tools.invoke"),
])
def test_a_program_given_as_a_list_beside_its_input_is_fed_it(arguments: Any, ref: str) -> None:
    assert "program-from-input" in _hits(arguments, ref)


@pytest.mark.parametrize("arguments", [{"cmd": ["cat"], "stdin": "hello"}, {"cmd": ["grep", "-c", "x"], "input": "a\nx"},
                                       {"cmd": ["wc", "-l"], "stdin": "a\nb\n"}])
def test_routine_programs_given_as_lists_beside_their_input_are_not_stopped(arguments: Any) -> None:
    assert _hits(arguments, "tools.invoke") == [] and _hits(arguments, "shell.exec") == []


@given(st.data(), st.sampled_from([["python3"], ["bash"], ["sh", "-s"], ["node"], ["python3", "-"],
                                   ["bash", "-s", "--"], ["zsh"], ["perl"]]),
       st.sampled_from(["cmd", "command", "program", "executable", "argv"]),
       st.sampled_from(["stdin", "input", "stdin_text", "input_data"]),
       st.sampled_from(["rm -rf ~", "import os; os.system('rm -rf ~')", "x"]),
       st.sampled_from(["shell.exec", "tools.invoke"]))
def test_variants_a_shell_or_interpreter_list_fed_its_input_is_stopped(data: Any, argv: list[str], key: str,
                                                                       input_key: str, text: str, ref: str) -> None:
    arguments = {_respell(data.draw, key): argv, _respell(data.draw, input_key): text}
    assert "program-from-input" in _hits(arguments, ref), arguments


# ---------------------------------------------------------------- 5. path, URL and SQL keys


@pytest.mark.parametrize(("ref", "risk", "arguments", "entry"), [
    ("fs.write", "write", {"Path": "/etc/passwd", "content": "x"}, "system-files"),
    ("fs.write", "write", {"file-path": "/etc/passwd", "content": "x"}, "system-files"),
    ("fs.write", "write", {"options": {"path": "/etc/passwd"}, "content": "x"}, "system-files"),
    ("fs.write", "write", {"a": {"b": [{"File_Name": "/etc/hosts"}]}, "content": "x"}, "system-files"),
    ("db.query", "read", {"SQL": "DROP TABLE users"}, "sql-destroys-data"),
    ("db.query", "read", {"Params": {"Statement": "DROP TABLE users"}}, "sql-destroys-data"),
])
def test_path_and_sql_keys_in_another_spelling_or_nested_are_read(ref: str, risk: str, arguments: Any,
                                                                  entry: str) -> None:
    assert entry in _hits(arguments, ref, risk)


@pytest.mark.parametrize(("ref", "risk", "arguments"), [
    ("fs.write", "write", {"Path": "./notes.txt", "content": "x"}),
    ("fs.write", "write", {"options": {"path": "src/a.py"}, "content": "x"}),
    ("fs.write", "write", {"File-Path": "docs/x.md", "content": "x", "mode": {"Target": "build/out"}}),
    ("db.query", "read", {"SQL": "SELECT name FROM users WHERE id = 1"}),
])
def test_routine_paths_and_sql_in_another_spelling_are_not_stopped(ref: str, risk: str, arguments: Any) -> None:
    assert _hits(arguments, ref, risk) == []


def test_write_paths_past_the_limits_are_unreadable() -> None:
    many = {"files": [{"path": f"out/{i}.txt"} for i in range(MAX_STRINGS + 1)]}
    assert UNREADABLE in _hits(many, "fs.write", "write")
    deep: Any = {"path": "/etc/passwd"}
    for _ in range(MAX_DEPTH + 1):
        deep = {"options": deep}
    assert UNREADABLE in _hits(deep, "fs.write", "write")
    assert _hits({"files": [{"path": f"out/{i}.txt"} for i in range(10)]}, "fs.write", "write") == []


@given(st.data(), st.sampled_from(["path", "file", "filePath", "dest", "target", "output", "destination", "to"]),
       st.sampled_from(["/etc/passwd", "/etc/hosts", "/usr/bin/python3", "/boot/vmlinuz", "/etc/sudoers.d/x"]),
       st.lists(st.sampled_from(["options", "spec", "opts", "write", "[list]"]), max_size=4))
def test_variants_a_system_path_under_any_spelling_and_depth_is_stopped(data: Any, key: str, path: str,
                                                                        nests: list[str]) -> None:
    value: Any = {_respell(data.draw, key): path}
    for nest in nests:
        value = [value] if nest == "[list]" else {nest: value}
    arguments = value if isinstance(value, dict) else {"items": value}
    assert _hits({**arguments, "content": "x"}, "fs.write", "write"), arguments


@given(st.data(), st.sampled_from(["sql", "query", "statement"]),
       st.sampled_from(["DROP TABLE users", "TRUNCATE orders", "DELETE FROM users"]),
       st.sampled_from(["", "params", "args", "input"]))
def test_variants_destructive_sql_under_any_spelling_is_stopped(data: Any, key: str, sql: str, nest: str) -> None:
    inner = {_respell(data.draw, key): sql}
    arguments = {_respell(data.draw, nest): inner} if nest else inner
    assert "sql-destroys-data" in _hits(arguments, "db.query", "read"), arguments


# ---------------------------------------------------------------- the labelled rows, through a real host


def test_this_branchs_rows_are_in_the_labelled_set() -> None:
    assert_families_have_both_labels(FAMILIES)


@pytest.mark.anyio
@pytest.mark.parametrize("family", sorted(FAMILIES))
async def test_each_family_is_refused_under_allow_and_its_routine_rows_run(family: str) -> None:
    """Under `--policy allow` with no one to ask, every destructive row of the family is refused and
    its capability never runs; every routine row runs."""
    rows = await run_family_under_allow(family)
    entry = FAMILIES[family]
    for row in rows:
        if row["label"] == "destructive" and entry is not None:
            action = row["action"]
            assert entry in _hits(action["arguments"], action["ref"], action["risk"]), action


@pytest.mark.anyio
async def test_json_text_over_the_limit_is_refused_through_a_real_host() -> None:
    """The reviewer's call: the same payload with a long pad ran; it is now refused."""
    ran: list[int] = []
    registry = CapabilityRegistry()

    async def run_it(args: Any, ctx: Any) -> Any:
        ran.append(len(args["payload"]))
        return "ran"

    registry.register("tools.invoke", run_it, "execute")
    code = ("const out = []; for (const n of [100, 70000]) { const payload = JSON.stringify({cmd: 'rm -rf /home/user',"
            " pad: 'x'.repeat(n)}); try { await tools.call({ref: 'tools.invoke', args: {payload}}); out.push('ran'); }"
            " catch (e) { out.push('refused'); } } return out;")
    prog = program(code, name="pad", requires=["tools.invoke"], outputSchema={})
    async with JevHost(HostConfig(approvals={"execute": "allow"}), capabilities=registry) as host:
        envelope = await host.run(prog, None)
    assert envelope.result == ["refused", "refused"], envelope.error
    assert ran == []
    assert [a.floor for a in envelope.approvals] == ["recursive-delete-outside-tree", UNREADABLE]


# ---------------------------------------------------------------- documents written are data

JSON_LEAF = st.one_of(st.integers(), st.booleans(), st.none(), st.text(max_size=8))
DOCUMENTS = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                         max_leaves=30)


def _nested(depth: int) -> Any:
    document: Any = [1]
    for _ in range(depth):
        document = [document]
    return document


@given(DOCUMENTS, st.sampled_from(["content", "data", "text", "body", "new_string", "Contents"]),
       st.integers(min_value=0, max_value=MAX_DEPTH + 4), st.booleans())
def test_a_document_a_write_capability_writes_is_data(document: Any, key: str, depth: int, large: bool) -> None:
    # A large or deep JSON document, or one naming system paths, written into the tree is routine.
    doc = {"doc": document, "deep": _nested(depth), "files": ["/etc/passwd"], "paths": [{"path": "/usr/lib/x"}]}
    text = json.dumps(doc) + (" " * (MAX_JSON_CHARS + 1) if large else "")
    if large:
        text = "{" + text[1:-1] + " " * (MAX_JSON_CHARS + 1) + "}"
    assert _hits({"path": "./out/doc.json", key: text}, "fs.write", "write") == []
    assert _hits({"url": "https://api.example.com/import", key: text}, "http.post", "network") == []


def test_a_document_under_a_capability_that_runs_things_still_fails_closed() -> None:
    big = json.dumps({"pad": "x" * (MAX_JSON_CHARS + 1)})
    deep = json.dumps(_nested(MAX_DEPTH + 2))
    for text in (big, deep):
        assert UNREADABLE in _hits({"payload": text}, "tools.invoke", "execute")
        assert UNREADABLE in _hits({"content": text}, "shell.exec", "execute")
    # A place written named in another argument's JSON text is read, as before.
    assert "system-files" in _hits({"payload": json.dumps({"path": "/etc/passwd"})}, "fs.write", "write")


@pytest.mark.parametrize(("arguments", "stopped"), [
    ({"tool": "search", "params": [{"q": "refund"}, {"limit": 5}]}, False),
    ({"program": "report", "options": [{"format": "csv"}]}, False),
    ({"tool": "rm", "params": [{"q": "x"}, "-rf", "/"]}, True),
    ({"program": "rm", "args": ["-rf", None, "/home/user"]}, True),
    ({"program": "rm", "args": [{"force": True}, None]}, True),
])
def test_a_list_of_objects_beside_a_program_is_named_parameters(arguments: dict[str, Any], stopped: bool) -> None:
    assert (UNREADABLE in _hits(arguments, "tools.invoke", "execute")) is stopped
