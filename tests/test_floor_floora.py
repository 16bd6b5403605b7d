"""The floor reads every command (issue 39, round five: reading and parsing).

Variants drawn at random of what the labelled set holds one example of: a `[ … ]` test the
grammar reads past its end, arguments past the reading limits, command keys spelled in
another case, a program beside a string of arguments or fed its program on standard input,
and a command under another key of a shell capability that does not parse. Each is stopped by
the floor; the routine forms beside them are not.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev.approval.floor import floor_hits
from fabric_jev.approval.rules import CallView, RuleContext
from fabric_jev.approval.shell import parse
from tests.test_floor import _CORES, _REFS, _ROUTINE, _TARGETS, _WRAPPERS, CWD, HOME, _quoted

SWALLOWED = "a test [ … ] the parser read past its end"
#: Shell capabilities and one that is not (where only command keys are read).
_ANY_REF = [*_REFS, "tools.invoke"]


def _hits(arguments: dict[str, Any], ref: str = "shell.exec") -> list[str]:
    return [e.id for e in floor_hits(CallView(ref, "execute", arguments, RuleContext.here(CWD, HOME)))]


#: Cores still destructive with more operands after them (`… | sh / ]` runs the file `/`).
_OPERANDS_KEEP = [core for core in _CORES if ("op", "|") not in core]


@st.composite
def destructive_scripts(draw: Any, cores: list[list[tuple[str, str]]] = _CORES) -> str:
    """A destructive command of the labelled set's cores, quoted and wrapped at random."""
    core = draw(st.sampled_from(cores))
    target = draw(st.sampled_from(_TARGETS))
    tokens = []
    for kind, text in core:
        if kind == "t":
            is_expansion = target.startswith(("~", "$")) or "{" in target or "*" in target
            tokens.append(target if is_expansion else _quoted(draw, "w", target))
        else:
            tokens.append(_quoted(draw, kind, text))
    return str(draw(st.sampled_from(_WRAPPERS))) + " ".join(tokens)


# ---------------------------------------------------------------- a test the grammar reads past its end

#: Words tree-sitter-bash reads as an operator inside brackets, which let one test run on.
_FILLERS = ["/", "*", "%", "==", "!=", "^", "**", "~ /", "-o /"]
_TESTS = ["-d /", "-d ~", "-e /", "! -e /", "x != /", "-n x", "1 -eq 1", "-f /etc/passwd"]
_JOINS = ["&&", "||", "|", "&", ";", "\n"]


@st.composite
def swallowing_tests(draw: Any) -> str:
    opener = draw(st.sampled_from(["[", "[["]))
    closer = draw(st.sampled_from(["]", "]]"]))
    inner = "]" if opener == "[" else "]]"
    return (f"{opener} {draw(st.sampled_from(_TESTS))} {inner} {draw(st.sampled_from(_JOINS))} "
            f"{draw(destructive_scripts(_OPERANDS_KEEP))} {draw(st.sampled_from(_FILLERS))} {closer}")


@given(swallowing_tests(), st.sampled_from(["cmd", "code", "script", "CMD"]), st.sampled_from(_REFS))
def test_a_command_after_a_test_is_never_swallowed(script: str, key: str, ref: str) -> None:
    assert _hits({key: script}, ref), script


@pytest.mark.parametrize("script", ["[ -d ~ ] && rm -rf ~ ]]", "[ -d / ] && rm -rf ~ / ]",
                                    "[ -d / ] && rm -rf ~ % ]", "[ -e / ] || rm -rf ~ == ]",
                                    "[ -d / ] | sh -c x ^ ]"])
def test_a_test_the_grammar_reads_on_is_opaque(script: str) -> None:
    assert SWALLOWED in parse(script).opaque


@pytest.mark.parametrize("script", ["[ -f x ] && ls", "[[ $a == b && $c != d ]]", "[[ $x =~ ^(a|b)$ ]] && echo y",
                                    '[ "$a" = "]" ] && echo "x]"', '[ "$(git diff && git status)" = "" ]',
                                    "[[ -n $CI &&\n -d build ]]", "if [ -f x ]; then rm x; fi", "[ $# -eq 0 ]",
                                    "[ -n \"$X\" ] || exit 1", "[ a \\; b ]"])
def test_a_test_that_ends_where_bash_ends_it_is_read(script: str) -> None:
    assert SWALLOWED not in parse(script).opaque


# ---------------------------------------------------------------- words after a redirection's target

_REDIRECTIONS = [">/dev/null", "2>/dev/null", "> /dev/null", "2> /dev/null", ">>/tmp/mine/log", "&>/dev/null"]


@given(destructive_scripts(), st.sampled_from(_REDIRECTIONS), st.sampled_from(_REFS))
def test_words_after_a_redirection_target_are_the_command_s(script: str, redirection: str, ref: str) -> None:
    """The grammar reads `git >/dev/null push -f` as a redirection to three targets; bash runs
    `git push -f`."""
    program, _, rest = script.partition(" ")
    assert _hits({"cmd": f"{program} {redirection} {rest}"}, ref), script


def test_a_redirection_after_a_group_that_reads_on_is_opaque() -> None:
    assert "a redirection the parser read on past its target" in parse("{ ls; } > x rm -rf /").opaque
    assert parse("pytest >/dev/null -q tests/").commands[0].argv() == ["pytest", "-q", "tests/"]


# ---------------------------------------------------------------- the reading limits

@given(destructive_scripts(), st.integers(257, 400), st.booleans(), st.sampled_from(_REFS))
def test_a_command_behind_many_strings_is_stopped(script: str, pad: int, first: bool, ref: str) -> None:
    """The guest controls key order: the command before or after the pad is read either way."""
    env = {f"V{i}": f"value {i}" for i in range(pad)}
    arguments = {"cmd": script, "env": env} if first else {"env": env, "cmd": script}
    assert _hits(arguments, ref), script


@given(destructive_scripts(), st.integers(1, 4), st.sampled_from(["shell.exec", "tools.invoke"]))
def test_a_command_nested_past_the_depth_limit_is_stopped(script: str, extra: int, ref: str) -> None:
    node: Any = {"cmd": script}
    for i in range(8 + extra):
        node = {"next": node} if i % 2 else [node]
    assert "unreadable-command" in _hits({"payload": node}, ref)


def test_many_distinct_strings_under_a_shell_capability_are_unreadable() -> None:
    assert "unreadable-command" in _hits({"cmd": "ls", "env": {f"V{i}": f"v{i}" for i in range(300)}})
    assert _hits({"cmd": "ls", "env": {f"V{i}": "1" for i in range(300)}}) == []  # one string, read once


# ---------------------------------------------------------------- keys, program and arguments, input

_KEYS = ["cmd", "command", "commandLine", "command_line", "script", "shellCommand", "cmdline"]


@st.composite
def respelled(draw: Any, key: str) -> str:
    """A key in another case, with `-` or `_` put in or taken out."""
    out = "".join(ch.upper() if draw(st.booleans()) else ch.lower() for ch in key.replace("_", ""))
    if len(out) > 2 and draw(st.booleans()):
        cut = draw(st.integers(1, len(out) - 1))
        out = out[:cut] + draw(st.sampled_from(["-", "_"])) + out[cut:]
    return out


@given(st.sampled_from(_KEYS).flatmap(respelled), destructive_scripts(), st.sampled_from(["tools.invoke", "api.call"]))
def test_command_keys_are_read_in_any_case(key: str, script: str, ref: str) -> None:
    assert _hits({key: script}, ref), (key, script)


_SPLIT = [("rm", "-rf /"), ("rm", "-r --force ~"), ("chmod", "-R 777 /"), ("dd", "if=/dev/zero of=/dev/sda"),
          ("mkfs.ext4", "/dev/sdb1"), ("sudo", "rm -rf /etc"), ("bash", "-c 'rm -rf /'"), ("git", "push --force")]


@given(st.sampled_from(_SPLIT), st.sampled_from(["program", "cmd", "command", "executable", "bin", "Program"]),
       st.sampled_from(["args", "arguments", "argv", "flags", "Args", "arg_list"]), st.sampled_from(_ANY_REF))
def test_a_program_beside_a_string_of_arguments_is_read_as_one_command(
        split: tuple[str, str], program_key: str, args_key: str, ref: str) -> None:
    program, args = split
    assert _hits({program_key: program, args_key: args}, ref), (program, args)


@given(st.sampled_from(["python3", "python", "bash", "sh", "node", "ruby", "perl", "/usr/bin/python3", "sudo bash"]),
       st.sampled_from(["stdin", "input", "Stdin", "stdin_text", "input-data"]),
       st.sampled_from(["cmd", "program", "command", "executable"]), st.sampled_from(_ANY_REF))
def test_an_interpreter_fed_its_input_is_asked_about(program: str, input_key: str, key: str, ref: str) -> None:
    assert "program-from-input" in _hits({key: program, input_key: "import shutil; shutil.rmtree('/')"}, ref)


@pytest.mark.parametrize("code", ["[ -d / ] && rm -rf /", "[ ! -e / ] || rm -rf /", "rm -rf / 'oops",
                                  "/bin/rm -rf / \"", "sudo rm -rf ~ )", "true; rm -rf / ("])
@pytest.mark.parametrize("key", ["code", "steps", "run", "description"])
def test_a_command_that_does_not_parse_is_asked_about_under_any_key_of_a_shell(code: str, key: str) -> None:
    assert _hits({key: code}), code


# ---------------------------------------------------------------- routine forms stay unstopped

@given(st.sampled_from(_ROUTINE), st.sampled_from(["[ -f package.json ] && ", "[[ -d build ]] || ", "[ -n \"$CI\" ]; ",
                                                   "[ \"$(git status --porcelain)\" = \"\" ] && "]),
       st.sampled_from(["cmd", "Command", "CMD", "commandLine"]), st.sampled_from(_REFS))
def test_routine_commands_after_a_test_are_not_stopped(cmd: str, test: str, key: str, ref: str) -> None:
    assert _hits({key: test + cmd, "cwd": "."}, ref) == [], test + cmd


@pytest.mark.parametrize("arguments", [
    {"cmd": "ls", "args": "-la src"}, {"program": "git", "args": "status --short"}, {"cmd": "cat", "stdin": "hello"},
    {"cmd": "python3 scripts/gen.py", "input": "data"}, {"program": "python3", "args": ["-m", "json.tool"], "stdin": "{}"},
    {"cmd": "pytest -q", "description": "don't skip the slow tests"}, {"cmd": "make", "note": "it's the (second) try"},
    {"Command": "git status"}, {"cmd": "npm test", "env": {f"V{i}": "1" for i in range(40)}},
])
def test_routine_calls_are_not_stopped(arguments: dict[str, Any]) -> None:
    assert _hits(arguments) == [] and _hits(arguments, "tools.invoke") == [], arguments
