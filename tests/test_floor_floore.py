"""The floor reads five more parts of a call (issue 39, a red team's round on main).

1. an environment object beside the command (``env: {LD_PRELOAD: …}``, ``TMPDIR``, values that
   are commands);
2. a write capability's place keys spelled otherwise (``folderPath``, ``targets``, ``oldPath``),
   and the working tree itself as the place deleted;
3. more spellings of the folder a command runs in (``wd``, ``current_dir``), ``arg`` beside a
   program, and ``run`` keys that hold a command;
4. prose under a ``query`` key is not SQL (a false positive);
5. a copy or move into a folder operand writes the file inside it (a false positive).

Each has named tests that failed before its fix, variants drawn at random, and the labelled rows
of tests/data/floor_actions.jsonl (families below), run through a real host.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev.approval.floor import floor_hits
from fabric_jev.approval.floor_checks import reads_as_sql
from fabric_jev.approval.floor_folders import environment
from fabric_jev.approval.rules import CallView, RuleContext
from tests.floor_families import run_family_under_allow
from tests.test_floor import CWD, HOME, ROWS

UNREADABLE = "unreadable-command"
#: This branch's families of the labelled set, and the entry each destructive row must hit
#: (None: any entry; the point is that the call is read at all).
FAMILIES: dict[str, str | None] = {
    "env-beside-the-command": None,
    "write-path-keys-by-words": "write-outside-tree",
    "folder-and-command-keys": None,
    "sql-in-a-query": "sql-destroys-data",
    "copy-into-a-folder": "write-outside-tree",
}


def _hits(arguments: Any, ref: str = "shell.exec", risk: str = "execute") -> list[str]:
    return [e.id for e in floor_hits(CallView(ref, risk, arguments, RuleContext.here(CWD, HOME)))]


# ---------------------------------------------------------------- 1. the environment beside a command


@pytest.mark.parametrize(("arguments", "ref"), [
    ({"cmd": "rm -rf \"$TMPDIR/etc\"", "env": {"TMPDIR": "/"}}, "shell.exec"),
    ({"cmd": "git status", "env": {"GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='rm -rf ~'"}}, "shell.exec"),
    ({"cmd": "ls", "env": {"LD_PRELOAD": "/tmp/x.so"}}, "shell.exec"),
    ({"command": "make", "environment": [{"name": "PATH", "value": "/tmp/evil:/usr/bin"}]}, "process.spawn"),
    ({"cmd": "bash build.sh", "env_vars": ["BASH_ENV=/tmp/x.sh"]}, "tools.invoke"),
    ({"options": {"cmd": "node app.js", "envs": {"NODE_OPTIONS": "--require /tmp/x.js"}}}, "tools.invoke"),
    ({"cmd": "make", "env": {"HOOK": "rm -rf ~"}}, "tools.invoke"),
    ({"cmd": "make", "env": 3}, "shell.exec"),
])
def test_an_environment_that_changes_what_runs_is_stopped(arguments: Any, ref: str) -> None:
    assert _hits(arguments, ref), arguments


def test_a_risky_variable_is_an_opaque_read_named_in_the_reason() -> None:
    assert UNREADABLE in _hits({"cmd": "ls", "env": {"LD_PRELOAD": "/tmp/x.so"}})
    found = environment({"cmd": "ls", "env": [{"name": "IFS", "value": "/"}, "PS4=$(id)"]})
    assert found.risky == ("IFS", "PS4")
    assert found.values == ("/", "$(id)")


def test_a_variable_named_beside_a_value_from_elsewhere_is_still_read() -> None:
    found = environment({"env": [{"name": "LD_PRELOAD", "valueFrom": {"secretKeyRef": {"name": "x"}}}]})
    assert found.risky == ("LD_PRELOAD",)
    assert environment({"env": "PATH=/tmp/bin"}).risky == ("PATH",)


def test_tmpdir_given_in_the_environment_replaces_the_hosts() -> None:
    assert environment({"env": {"TMPDIR": "/var//x/"}}).tmpdir == "/var/x"
    assert environment({"env": {"TMPDIR": "$X"}}).tmpdir is None
    assert "recursive-delete-outside-tree" in _hits({"cmd": "rm -rf \"$TMPDIR\"/etc", "env": {"TMPDIR": "/"}})


@pytest.mark.parametrize("arguments", [
    {"cmd": "npm test", "env": {"NODE_ENV": "test"}},
    {"cmd": "pytest -q", "env": {"CI": "1", "LANG": "C.UTF-8"}},
    {"command": "make", "environment": [{"name": "DEBUG", "value": "1"}]},
    {"cmd": "cargo build", "env": ["RUST_LOG=debug"]},
    {"cmd": "make deploy", "env": "production"},
])
def test_routine_environments_are_not_stopped(arguments: Any) -> None:
    assert _hits(arguments) == []


_RISKY = st.sampled_from(["PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "HOME", "GIT_SSH_COMMAND",
                          "GIT_CONFIG_PARAMETERS", "BASH_ENV", "ENV", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS",
                          "PERL5OPT", "RUBYOPT", "IFS", "PS4", "PROMPT_COMMAND"])


@given(name=_RISKY, key=st.sampled_from(["env", "environment", "envs", "env_vars", "envVars", "ENV"]),
       shape=st.sampled_from(["dict", "pairs", "strings"]), nest=st.booleans(),
       ref=st.sampled_from(["shell.exec", "tools.invoke", "ci.dispatch"]))
def test_variants_a_risky_variable_in_any_shape_is_stopped(name: str, key: str, shape: str, nest: bool,
                                                            ref: str) -> None:
    value = "/tmp/x"
    env: Any = {name: value} if shape == "dict" else [{"name": name, "value": value}] if shape == "pairs" \
        else [f"{name}={value}"]
    arguments: Any = {"cmd": "make", key: env}
    if nest:
        arguments = {"options": arguments}
    assert UNREADABLE in _hits(arguments, ref)


# ---------------------------------------------------------------- 2. place keys by their words


@pytest.mark.parametrize(("ref", "arguments"), [
    ("fs.delete", {"folderPath": "/etc"}),
    ("fs.delete", {"pathname": "/etc", "recursive": True}),
    ("fs.delete", {"targets": ["/etc"]}),
    ("fs.delete", {"file_paths": ["/etc/passwd"]}),
    ("fs.delete", {"oldPath": "/etc", "newPath": "/tmp/etc"}),
    ("fs.move", {"oldPath": "/etc", "newPath": "/tmp/etc"}),
    ("fs.move", {"src_uri": "/etc/passwd", "to": "./x"}),
    ("fs.delete", {"fileUri": "file:///etc"}),
])
def test_a_system_place_under_a_key_named_by_its_words_is_stopped(ref: str, arguments: Any) -> None:
    assert "write-outside-tree" in _hits(arguments, ref, "write")


@pytest.mark.parametrize("path", [CWD, CWD + "/", ".", "./"])
def test_deleting_the_working_tree_itself_is_stopped(path: str) -> None:
    assert "write-outside-tree" in _hits({"path": path}, "fs.delete", "write")


@pytest.mark.parametrize(("ref", "arguments"), [
    ("fs.delete", {"filePath": "./build/out.txt"}),
    ("fs.move", {"oldPath": "./a.txt", "newPath": "./b.txt"}),
    ("fs.delete", {"targets": ["./dist", "./build"]}),
    ("fs.write", {"cwd": CWD, "path": "notes.txt", "content": "/etc/passwd"}),
    ("fs.write", {"path": "a.txt", "newContent": "/etc/shadow"}),
])
def test_routine_places_by_their_words_are_not_stopped(ref: str, arguments: Any) -> None:
    assert _hits(arguments, ref, "write") == []


_PLACE_KEYS = st.sampled_from(["folderPath", "folder_path", "pathname", "targets", "target_dir", "filePaths",
                               "file_paths", "destDir", "oldPath", "newPath", "srcFile", "dstFolder", "outputDir",
                               "baseDirs", "oldName", "newLocation"])


@given(key=_PLACE_KEYS, path=st.sampled_from(["/etc", "/etc/passwd", "/usr/bin", "/", "~/.ssh"]),
       listed=st.booleans(), nest=st.booleans(), ref=st.sampled_from(["fs.delete", "fs.move", "files.remove"]))
def test_variants_a_place_outside_under_any_place_key_is_stopped(key: str, path: str, listed: bool, nest: bool,
                                                                  ref: str) -> None:
    arguments: Any = {key: [path] if listed else path}
    if nest:
        arguments = {"options": arguments}
    assert "write-outside-tree" in _hits(arguments, ref, "write")


# ---------------------------------------------------------------- 3. folder and command keys


@pytest.mark.parametrize(("ref", "arguments"), [
    ("shell.exec", {"cmd": "rm -rf *", "wd": "/"}),
    ("shell.exec", {"cmd": "rm -rf *", "current_dir": "/"}),
    ("shell.exec", {"program": "rm", "arg": ["-rf", "/"]}),
    ("tools.invoke", {"run": "rm -rf /"}),
    ("ci.dispatch", {"steps": [{"run": "rm -rf ~"}]}),
    ("tools.invoke", {"exec": ["rm", "-rf", "/"]}),
])
def test_folder_and_command_keys_are_read(ref: str, arguments: Any) -> None:
    assert "recursive-delete-outside-tree" in _hits(arguments, ref)


@pytest.mark.parametrize(("ref", "arguments"), [
    ("shell.exec", {"cmd": "ls", "wd": "./src"}),
    ("tools.invoke", {"run": "npm test"}),
    ("ci.dispatch", {"steps": [{"run": "make build"}, {"run": "pytest -q"}]}),
    ("jobs.start", {"run": "nightly build (fast)"}),
])
def test_routine_folder_and_command_keys_are_not_stopped(ref: str, arguments: Any) -> None:
    assert _hits(arguments, ref) == []


@given(key=st.sampled_from(["wd", "current_dir", "currentDir", "cwd_path", "working_dir", "workingDirectory",
                            "work_dir", "chdir", "cd", "Current-Directory"]),
       folder=st.sampled_from(["/", "/etc", "/usr", "~"]))
def test_variants_any_spelling_of_the_folder_is_the_base_of_relative_paths(key: str, folder: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": "rm -rf *", key: folder})


@given(key=st.sampled_from(["run", "exec", "execute", "entrypoint", "runCommand"]),
       deep=st.integers(0, 3), ref=st.sampled_from(["tools.invoke", "ci.dispatch", "jobs.start"]),
       target=st.sampled_from(["/", "~", "/etc", "$HOME"]))
def test_variants_a_command_under_a_run_key_is_read(key: str, deep: int, ref: str, target: str) -> None:
    arguments: Any = {key: f"rm -rf {target}"}
    for _ in range(deep):
        arguments = {"steps": [arguments]}
    assert "recursive-delete-outside-tree" in _hits(arguments, ref)


# ---------------------------------------------------------------- 4. SQL only where a query reads as SQL


@pytest.mark.parametrize("query", ["postgres truncate table vs delete", "drop table users migration",
                                   "how to drop a column", "update the set of rules", "delete from the list"])
def test_prose_under_a_query_key_is_not_sql(query: str) -> None:
    for ref in ("docs.search", "search.code", "logs.query"):
        assert _hits({"query": query}, ref, "read") == []


@pytest.mark.parametrize("query", ["DROP TABLE users;", "delete from x", "delete from x where 1=1; drop table y",
                                   "-- note\ntruncate table audit_log", "/* x */ DROP TABLE users",
                                   "update users set admin = 1", "alter table t drop column c"])
def test_statements_under_a_query_key_are_stopped(query: str) -> None:
    assert "sql-destroys-data" in _hits({"query": query}, "logs.query", "read")


def test_sql_keyed_text_is_read_whatever_it_reads_like() -> None:
    assert "sql-destroys-data" in _hits({"sql": "drop table users migration"}, "db.run", "execute")


@given(verb=st.sampled_from(["drop table", "truncate table", "delete from"]),
       prefix=st.sampled_from(["", "  ", "\n", "-- c\n", "/* c */ "]),
       upper=st.booleans(), semicolon=st.booleans())
def test_variants_destructive_statements_under_query_are_read(verb: str, prefix: str, upper: bool,
                                                              semicolon: bool) -> None:
    text = prefix + (verb.upper() if upper else verb) + " users" + (";" if semicolon else "")
    assert reads_as_sql(text)
    assert "sql-destroys-data" in _hits({"query": text}, "logs.query", "read")


@given(lead=st.sampled_from(["how to", "postgres", "why does", "difference between", "docs for"]),
       verb=st.sampled_from(["drop table", "truncate", "delete from", "drop column"]),
       tail=st.sampled_from(["", " vs delete", " users migration", " in mysql"]))
def test_variants_prose_that_mentions_sql_words_is_not_sql(lead: str, verb: str, tail: str) -> None:
    assert _hits({"query": f"{lead} {verb}{tail}"}, "docs.search", "read") == []


# ---------------------------------------------------------------- 5. a copy into a folder


@pytest.mark.parametrize("cmd", ["cp file.txt /tmp/", "mv build/out.bin /tmp/", "cp -r dist /tmp/",
                                 "cp a.txt b.txt /tmp/", "cp file.txt /tmp"])
def test_a_copy_into_the_temporary_folder_is_not_stopped(cmd: str) -> None:
    assert _hits({"cmd": cmd}) == []


@pytest.mark.parametrize("cmd", ["cp file.txt /etc/", "mv x /tmp/../etc/", "cp * /tmp/", "cp f /tmp/*/",
                                 "cp f ~/"])
def test_a_copy_into_a_folder_outside_is_stopped(cmd: str) -> None:
    assert "write-outside-tree" in _hits({"cmd": cmd})


@given(program_=st.sampled_from(["cp", "mv", "install", "cp -r"]),
       name=st.from_regex(r"[a-z][a-z0-9_-]{0,8}\.[a-z]{1,3}", fullmatch=True),
       folder=st.sampled_from(["/tmp/", "/var/tmp/", "/etc/", "/usr/lib/", "/"]))
def test_variants_a_copy_into_a_folder_is_the_file_inside_it(program_: str, name: str, folder: str) -> None:
    into = _hits({"cmd": f"{program_} {name} {folder}"})
    named = _hits({"cmd": f"{program_} {name} {folder}{name}"})
    assert ("write-outside-tree" in into) == ("write-outside-tree" in named)
    assert ("write-outside-tree" in into) == (not folder.startswith(("/tmp/", "/var/tmp/")))


# ---------------------------------------------------------------- the labelled rows, through a real host


def test_this_branchs_rows_are_in_the_labelled_set() -> None:
    for family in FAMILIES:
        labels = {row["label"] for row in ROWS if row["family"] == family}
        assert labels == {"destructive", "routine"}, family


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


@pytest.mark.parametrize("statement", ["delete from users u", "with x as (select 1) delete from users",
                                       "drop table users", "truncate orders", "delete from accounts a"])
@pytest.mark.parametrize(("ref", "risk"), [("db.query", "read"), ("postgres.run", "read"), ("db.exec", "write"),
                                           ("warehouse.query", "read")])
def test_a_query_to_a_database_is_sql_whatever_it_reads_like(statement: str, ref: str, risk: str) -> None:
    # Lower case, an alias, no `;`: under a database's capability it is still a statement.
    assert "sql-destroys-data" in _hits({"query": statement}, ref, risk)
