"""The floor's checks for database clients and tools (floor.json names them). Pure code.

- the SQL a client is given: after its flag or attached to it (``psql -cDROP…``), as
  sqlite3's operands, and under the SQL keys of a database capability (``q``, ``stmt``, …);
- a client that runs a shell command (``sqlite3 .shell``, ``psql \\!``, ``mysql system``,
  ``COPY … TO PROGRAM``): the command is read as a command, the floor's entries run on it,
  and one it cannot pick out of the text is asked about;
- a client that reads its statements from a pipe, a here-document or a here-string, which
  the floor cannot see;
- a database's own tool that destroys data without SQL (``dropdb``, ``redis-cli FLUSHALL``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import cast

from . import shell as _shell
from .call_view import CallView
from .floor_reading import FloorParams, commands, named, operands, ref_words

#: Keys that hold SQL in a capability whose ref names a database (``db.exec {q: …}``).
DATABASE_SQL_KEYS = ("q", "stmt", "stmts", "statements", "sql_query", "sqlquery", "query_text", "sql_text",
                     "sqls", "queries")
#: Words of a capability's ref that name a database.
DATABASE_WORDS = frozenset({"db", "sql", "database", "databases", "postgres", "postgresql", "pg", "psql", "mysql",
                            "mariadb", "sqlite", "mssql", "oracle", "duckdb", "bigquery", "snowflake", "redshift",
                            "clickhouse", "warehouse", "table", "tables", "supabase", "neon", "prisma"})
#: At most this many commands a client runs are read one by one; more are asked about.
MAX_ESCAPES = 16
_UNREAD_INPUT = frozenset({"pipe", "here-document", "here-string", "substitution"})

#: Where a client's text runs a shell command: the group named `cmd` is the command when the
#: text says it whole; an escape whose command cannot be picked out has no such group.
_ESCAPES = re.compile(
    r"(?im)^[ \t]*\.(?:shell|system)\b[ \t]*(?P<cmd>[^\n]*)"  # sqlite3
    r"|^[ \t]*(?:system|\\!)[ \t]*(?P<cmd2>[^\n]*)"  # mysql, psql at a line's start
    r"|\\!(?P<cmd3>[^\n]*)"  # psql anywhere on a line
    r"|^[ \t]*\.(?:once|output|import|read)\b[ \t]*['\"]?\|"  # sqlite3: to or from a command
    r"|\\(?:o|out|g|gx|w|write|copy)\b[^\n]*\|"  # psql: output or input through a command
    r"|^[ \t]*(?:pager|\\P|edit|\\e)\b"  # mysql: a pager or an editor runs a command
    r"|\\(?:setenv|e|edit|ef|ev)\b"  # psql: an editor, or the environment of later commands
)
#: COPY … TO/FROM PROGRAM 'command' (the server runs it); the quoted command with '' for '.
_PROGRAM = re.compile(r"(?is)\bcopy\b[^;]*?\bprogram\s+(?:e?'(?P<cmd>(?:[^']|'')*)'|(?P<other>\S))")


def _param(params: FloorParams, key: str) -> Mapping[str, Sequence[str]]:
    """A table of this module's entries (its keys are not among FloorParams' shared ones)."""
    return cast("Mapping[str, Mapping[str, Sequence[str]]]", params)[key]


def _attached(value: str, flags: Sequence[str]) -> str | None:
    """The text attached to a short flag (``-cDROP TABLE x``, ``-eDROP DATABASE x``)."""
    for flag in flags:
        if len(flag) == 2 and flag.startswith("-") and value.startswith(flag) and len(value) > 2:
            return value[2:]
    return None


def client_texts(command: _shell.Simple, flags: Sequence[str]) -> Iterator[str]:
    """What a client is given to run: its flags' values, attached or not, and for ``*`` every
    operand (sqlite3 DB "SQL")."""
    words = command.words[1:]
    for i, word in enumerate(words):
        value = word.value or ""
        if value in flags and i + 1 < len(words):
            yield words[i + 1].value or ""
        elif any(value.startswith(f + "=") for f in flags if f.startswith("--")):
            yield value.split("=", 1)[1]
        elif (attached := _attached(value, flags)) is not None:
            yield attached
    if "*" in flags or "+" in flags:
        for word in operands(command):
            if word.value:
                yield word.value


def _clients(view: CallView, programs: Mapping[str, Sequence[str]]) -> Iterator[tuple[_shell.Simple, list[str]]]:
    for command in commands(view):
        name = _shell.basename(command.program)
        if name is not None and name in programs:
            yield command, list(programs[name])


def names_database(view: CallView) -> bool:
    """Whether the capability's ref names a database (``db.exec``, ``postgres.run``)."""
    return bool(DATABASE_WORDS & ref_words(view.ref))


def has_database_sql(view: CallView) -> bool:
    """Whether a database capability is given SQL under one of the other keys (``q``, ``stmt``)."""
    return names_database(view) and bool(view.strings(DATABASE_SQL_KEYS))


def sql_texts(view: CallView, params: FloorParams) -> Iterator[str]:
    """The SQL the floor reads beyond the SQL keys: a database capability's other keys and what
    the shell's clients are given."""
    if names_database(view):
        yield from view.strings(DATABASE_SQL_KEYS)
    for command, flags in _clients(view, params["shell_programs"]):
        yield from client_texts(command, flags)


def _escaped(texts: Sequence[str]) -> Iterator[str | None]:
    """The shell commands the texts run; None for one the floor cannot pick out."""
    for text in texts:
        for found in _ESCAPES.finditer(text):
            command = found.group("cmd") or found.group("cmd2") or found.group("cmd3")
            yield command.strip() if command else None
        for found in _PROGRAM.finditer(text):
            yield found.group("cmd").replace("''", "'") if found.group("cmd") is not None else None


def _stopped(view: CallView, command: str | None, stops: Callable[[CallView], bool]) -> bool:
    if command is None or not command.strip():
        return command is None
    return stops(CallView("shell.exec", "execute", {"cmd": command}, view.context))


def client_commands(view: CallView, params: FloorParams, stops: Callable[[CallView], bool]) -> bool:
    """`stops` is the whole floor (`floor.floor_hits`), run on each command a client runs."""
    sql: Mapping[str, Sequence[str]] = params["shell_programs"]
    clients = list(_clients(view, sql))
    texts = [t for command, flags in clients for t in client_texts(command, flags)]
    texts += [t for t in view.strings(("sql", "query", "statement")) if "program" in t.lower()]
    if names_database(view):
        texts += [t for t in view.strings(DATABASE_SQL_KEYS) if "program" in t.lower()]
    escaped = list(itertools.islice(_escaped([t for t in texts if len(t) <= 100_000]), MAX_ESCAPES + 1))
    if len(escaped) > MAX_ESCAPES or any(_stopped(view, command, stops) for command in escaped):
        return True  # more commands than the floor reads one by one: asked
    readers: Mapping[str, Sequence[str]] = {**sql, **_param(params, "input_readers")}
    for command in commands(view):
        name = _shell.basename(command.program)
        if name is None or name not in readers or command.stdin not in _UNREAD_INPUT:
            continue
        spec = readers[name]
        given = len(operands(command)) > (1 if "*" in spec else 0 if "+" in spec else len(command.words))
        if not given and not any(client_texts(command, [f for f in spec if f not in ("*", "+")])):
            return True  # what it runs comes from its input, which the floor cannot read
    return False


def database_tools(view: CallView, params: FloorParams) -> bool:
    words_of = _param(params, "words")
    scripts = _param(params, "scripts")
    destroys = re.compile(cast("Mapping[str, str]", params)["script_pattern"])
    for command in commands(view):
        if named(command, params["always"]):
            return True
        name = _shell.basename(command.program) or ""
        if name in words_of:
            wanted = {w.lower() for w in words_of[name]}
            if any((w.value or "").lower() in wanted for w in command.words[1:]):
                return True
        if name in scripts:
            for word in command.words[1:]:
                value = word.value
                flag = next((f for f in scripts[name] if value == f or (value or "").startswith(f + "=")), None)
                if flag is None:
                    continue
                given = value[len(flag) + 1:] if value and value != flag else None
                if given is None:
                    at = command.words.index(word) + 1
                    given = command.words[at].value if at < len(command.words) else ""
                if given is None or destroys.search(given):
                    return True
    return False
