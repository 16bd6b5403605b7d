"""The floor's checks for destructive and exfiltrating shapes (floor.json names them). Pure code.

Each check reads the call through `floor_reading` (its commands wherever they
are, what each writes) and `places` (paths as the file system would see them,
the working tree and the user's temporary folders); none reads a raw string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from . import floor_databases as _databases
from . import floor_globs as _globs
from . import paths as _paths
from . import shell as _shell
from .call_view import PATH_KEYS, SQL_KEYS, URL_KEYS
from .floor_closed import runs_module, saves_download
from .floor_folders import FOLDER_KEYS, MAYBE_FOLDER_KEYS
from .floor_reading import (
    ANYWHERE,
    WRITE_PATH_KEYS,
    FloorParams,
    commands,
    has_flag,
    named,
    operands,
    paths_named,
    scripts,
    strings_under,
    writes,
)
from .places import expansions, in_places, inside_folder, outside, word_paths

#: A program name that is a glob (`[` alone is the test command).
_GLOB = re.compile(r"[*?]|\[.+\]")
#: What a glob naming a program file would not hold: a string of a list read as an argv may be
#: any text (JSON, a sentence), and exec does not expand globs.
_NOT_A_PATH = re.compile(r"[\s\"'{}=:,;]")
_NOT_A_WORD = re.compile(r"[\s\"':=;]")

if TYPE_CHECKING:
    from .call_view import CallView

_FOLDERS = frozenset(k.replace("_", "").lower() for k in FOLDER_KEYS)
#: A mode (777, u+w, a-x,g+s) is an operand of chmod, not a path.
_MODE = re.compile(r"[0-7]{3,4}|(?:[ugoa]*[+=-][rwxXst]*)(?:,[ugoa]*[+=-][rwxXst]*)*")


@lru_cache(maxsize=64)
def path_regex(patterns: tuple[str, ...], cwd: str, home: str) -> re.Pattern[str]:
    """Many path patterns as one regex (one match per path instead of one per pattern)."""
    where = _paths.Where(cwd, home)
    return re.compile("|".join(f"(?:{_paths.compile_path_pattern(p, where).regex.pattern})" for p in patterns)
                      or r"(?!)", re.DOTALL)


def _matcher(view: CallView, wanted: Sequence[str],
             params: FloorParams) -> Callable[[list[tuple[str, str]] | None], bool]:
    where = view.context.where
    patterns = path_regex(tuple(wanted), where.cwd, where.home)
    excepted = path_regex(tuple(params.get("except", ())), where.cwd, where.home)

    def matches(found: list[tuple[str, str]] | None) -> bool:
        return found is not None and any(patterns.match(p) is not None and excepted.match(p) is None
                                         for pair in found for p in pair)
    return matches


def operands_outside_tree(view: CallView, params: FloorParams) -> bool:
    strict = bool(params.get("strict"))
    for command in commands(view):
        flagged = named(command, params["programs"]) and has_flag(command, params.get("short", ""),
                                                                   params.get("long", ()))
        if not (flagged or named(command, params.get("always", ()))):
            continue
        if any(outside(view, command, w.value, strict=strict) for w in operands(command)
               if not (w.literal and _MODE.fullmatch(w.text))):
            return True
    return False


def find_outside_tree(view: CallView, params: FloorParams) -> bool:
    actions = set(params["actions"])
    for command in commands(view):
        if not named(command, ["find"]):
            continue
        if not actions & {w.text for w in command.words[1:]}:
            continue
        starts = []
        for w in command.words[1:]:
            if w.literal and (w.text.startswith("-") or w.text in ("(", "!")):
                break
            starts.append(w)
        if any(outside(view, command, w.value) for w in starts or [_shell.Word(".")]):
            return True
    return False


def device_write(view: CallView, params: FloorParams) -> bool:
    device = _matcher(view, params["devices"], params)
    for command in commands(view):
        targets = list(writes(command))
        if named(command, params["programs"]):
            targets += operands(command)
        if any(device(word_paths(view, command, t.value)) for t in targets):
            return True
    return False


def programs(view: CallView, params: FloorParams) -> bool:
    return any(named(c, params["programs"]) for c in commands(view))


def download_and_run(view: CallView, params: FloorParams) -> bool:
    for read in scripts(view):
        found = read.script.commands
        if any(named(c, params["downloaders"]) for c in found) and any(
                named(c, params["interpreters"]) and not (runs_module(c) and not saves_download(
                    found, params["downloaders"])) for c in found):
            return True
    return False


#: The SQL keys whose text is SQL whatever it reads like; under the others (`query`) a text is SQL
#: only where it reads as a statement (`reads_as_sql`).
_ALWAYS_SQL = tuple(k for k in SQL_KEYS if k != "query")
_QUERY = ("query",)
_IDENT = r"[\w.\"`\[\]$]+"
_IDENTS = rf"{_IDENT}(?:\s*,\s*{_IDENT})*"
_END = r"\s*(?:;.*)?\Z"
#: A statement's verb at its start (after comments and whitespace).
_VERB = re.compile(r"(?i)(?:select|insert|update|delete|drop|truncate|alter|create|with|merge|replace|upsert|grant"
                   r"|revoke|exec|execute|call|pragma|vacuum|copy|begin|commit|rollback)\b")
#: A destructive statement spelled out in full (lower-case prose that only starts with the verb, as
#: "drop table users migration", is none of them).
_STATEMENT = re.compile(
    r"(?is)(?:drop\s+(?:temporary\s+)?(?:table|database|schema|index|view|materialized\s+view|sequence|type"
    rf"|function|procedure|trigger|user|role|collection|keyspace)\s+(?:if\s+exists\s+)?{_IDENTS}"
    rf"(?:\s+(?:cascade|restrict|purge))?{_END}"
    rf"|truncate\s+(?:table\s+)?(?:only\s+)?{_IDENTS}(?:\s+(?:restart|continue)\s+identity)?"
    rf"(?:\s+(?:cascade|restrict))?{_END}"
    rf"|delete\s+from\s+{_IDENT}(?:\s+as\s+{_IDENT})?(?:\s+(?:where|using|returning|limit|order)\b.*|{_END})"
    rf"|update\s+{_IDENT}(?:\s+(?:as\s+)?{_IDENT})?\s+set\s+{_IDENT}\s*=.*"
    rf"|alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?{_IDENT}\s+.*\bdrop\b.*)")
_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)


def reads_as_sql(text: str) -> bool:
    """Whether a `query` text is a SQL statement, not prose that mentions its words: it starts
    with a verb and ends a statement with `;`, spells its first two words in capitals
    (``DROP TABLE users``) or is a destructive statement in full (``delete from x where …``)."""
    comments = _COMMENTS.match(text)
    body = text[comments.end() if comments else 0:]
    if not _VERB.match(body):
        return False
    words = body.split(None, 2)
    upper = len(words) > 1 and all(w.isupper() for w in words[:2])
    return ";" in body or upper or _STATEMENT.match(body.strip()) is not None


def _sql_texts(view: CallView, params: FloorParams) -> Iterator[str]:
    yield from view.strings(_ALWAYS_SQL)
    # A database's capability (`db.query(query: "delete from users u")`), or one not read-only: a
    # `query` is SQL whatever it reads like; elsewhere (`docs.search`) it must read as SQL.
    database = view.risk != "read" or _databases.names_database(view)
    yield from (text for text in view.strings(_QUERY) if database or reads_as_sql(text))
    yield from _databases.sql_texts(view, params)


def sql(view: CallView, params: FloorParams) -> bool:
    texts = [t for t in _sql_texts(view, params) if t and len(t) <= 100_000]
    if not texts:
        return False
    import sqlparse

    for text in texts:
        statements: Any = sqlparse.parse(text)
        for statement in statements:
            kind = statement.get_type()
            keywords = [t.normalized for t in statement.flatten() if t.is_keyword]
            if kind in ("DROP", "TRUNCATE") or (keywords[:1] == ["TRUNCATE"]):
                return True
            if kind in ("DELETE", "UPDATE") and not any(isinstance(t, sqlparse.sql.Where) for t in statement.tokens):
                return True
            if kind == "ALTER" and "DROP" in keywords:
                return True
    return False


def _path_values(view: CallView) -> Iterator[list[tuple[str, str]] | None]:
    """Every path a call names: path arguments, file URLs, command operands and redirect targets."""
    for value in view.strings(PATH_KEYS):
        yield word_paths(view, None, value)
    for url in view.strings(URL_KEYS):
        if url.lower().startswith("file:"):
            yield word_paths(view, None, re.sub(r"^file:(//[^/]*)?", "", url, flags=re.IGNORECASE))
    for command in commands(view):
        for named_path in paths_named(command):
            yield word_paths(view, command, named_path)


def paths(view: CallView, params: FloorParams) -> bool:
    matches = _matcher(view, params["patterns"], params)
    return any(matches(found) for found in _path_values(view)) or _globs.may_match(
        view, params["patterns"], lambda path: matches([(path, path)]))


def secrets_to_network(view: CallView, params: FloorParams) -> bool:
    secret = re.compile("|".join(".*".join(re.escape(p) for p in s.split("*")) for s in params["secret_names"])
                        + r"\Z")
    uploads = set(params["upload_options"])
    for read in scripts(view):
        found = read.script.commands
        network = [c for c in found if named(c, params["network"])]
        if not network:
            continue
        if any(named(c, params["dumps"]) and len(c.words) == 1 for c in found):
            return True
        for command in found:
            for word in command.words:
                if not word.literal:
                    names = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", word.text)
                    if any(secret.match(n.upper()) for n in names):
                        return True
        for command in network:
            words = command.words[1:]
            for i, word in enumerate(words):
                text = word.text if word.literal else (word.expanded or word.text)
                flag, _, attached = text.partition("=")
                value = None
                if flag in uploads:
                    value = attached or (words[i + 1].value if i + 1 < len(words) else None)
                    if value is None and i + 1 < len(words):
                        return True  # uploading something only the shell knows
                if value is None:
                    continue
                value = value.split("=", 1)[1] if "=" in value and "@" in value else value
                if value in ("@-", "-"):
                    return True
                if (value.startswith("@") or flag in ("-T", "--upload-file", "--post-file", "--body-file")) \
                        and outside(view, command, value.lstrip("@")):
                    return True
    return False


def write_outside_tree(view: CallView, params: FloorParams) -> bool:
    ignored = set(params["ignored_targets"])
    found = list(commands(view))
    for command in found:
        destination = _destination_folder(command)
        for target in writes(command):
            if target.value in ignored or not outside(view, command, target.value):
                continue
            if target is not destination[0] or any(outside(view, command, value)
                                                   for value in inside_folder(view, target.value, destination[1])):
                return True
        # A link out of the tree, made in a call that does more: what comes after it may write
        # through the link, and the floor read the path before the link was there.
        if named(command, ["ln"]) and len({c.words for c in found if not c.via}) > 1 \
                and any(outside(view, command, value) for value in _link_targets(command)):
            return True
    if view.risk == "write":
        # At any depth (`options.path`); the working tree itself only as the folder a call runs
        # in: `fs.delete {path: <the tree>}` is `rm -rf <the tree>`.
        folders = set(strings_under(view, _RUNS_IN_KEYS))
        for value in strings_under(view, WRITE_PATH_KEYS):
            if not in_places(view, word_paths(view, None, value), strict=value not in folders):
                return True
    return False


#: Keys that name the folder a write capability works in, not a place it writes.
_RUNS_IN_KEYS = tuple(k for k in (*FOLDER_KEYS, *MAYBE_FOLDER_KEYS) if k not in ("dir", "directory", "folder"))


def _destination_folder(command: _shell.Simple) -> tuple[_shell.Word | None, list[str | None]]:
    """The last operand of cp/mv/install/ln and the sources before it, when it may be a folder
    the sources go into (no -t or -T)."""
    found = operands(command)
    if not named(command, _COPIES) or len(found) < 2 or has_flag(command, "tT", ("--target-directory",
                                                                                 "--no-target-directory")):
        return None, []
    return found[-1], [w.value for w in found[:-1]]


_COPIES = ("cp", "mv", "install", "ln")


def _link_targets(command: _shell.Simple) -> Iterator[str | None]:
    """What ln's links point to, as paths read from the working directory (a symbolic link's
    target is relative to the link's folder)."""
    found = operands(command)
    if len(found) < 2:
        return
    folder = (found[-1].value or "").rsplit("/", 1)[0] if "/" in (found[-1].value or "") else ""
    symbolic = has_flag(command, "s", ("--symbolic",))
    for target in found[:-1]:
        value = target.value
        if value is not None and symbolic and folder and not value.startswith(("/", "~")):
            value = folder + "/" + value
        yield value


def system_writes(view: CallView, params: FloorParams) -> bool:
    system = _matcher(view, params["paths"], params)
    for command in commands(view):
        if params["programs"] and named(command, params["programs"]):  # (an empty list names no program)
            return True
        if named(command, ["crontab"]) and _crontab_changes(command):
            return True
        if named(command, params.get("with_operands", ())) and operands(command):
            return True  # mount DEV DIR, mount --bind / DIR (mount alone lists)
        if any(t.text == ANYWHERE or system(word_paths(view, command, t.value)) for t in writes(command)):
            return True
    if view.risk == "write":
        return any(system(word_paths(view, None, value)) for value in strings_under(view, WRITE_PATH_KEYS))
    if view.risk == "execute":
        # A program run on a path it is given (`{program: "truncate -s0", path: "/etc/passwd"}`);
        # the folder it runs in is not one: its relative paths are read against it instead.
        return any(system(word_paths(view, None, value)) for value in view.strings(_EXECUTE_PATH_KEYS))
    return False


#: The paths an execute capability is given, besides the folder it runs in and what it reads from.
_EXECUTE_PATH_KEYS = tuple(k for k in WRITE_PATH_KEYS if k.replace("_", "").lower() not in _FOLDERS
                           and k not in ("src", "source", "from"))


def _crontab_changes(command: _shell.Simple) -> bool:
    """crontab -r removes the table; crontab FILE, crontab - and a bare crontab (which reads the
    new table from its input, ``crontab < jobs``) replace it. Only -l (lists) and -e (edits in
    front of the person) leave it to them."""
    if has_flag(command, "r", ("--remove",)):
        return True
    return not has_flag(command, "le", ())


def hidden_program(view: CallView, params: FloorParams) -> bool:
    for command in commands(view):
        if command.words and not command.words[0].literal and command.words[0].expanded is None:
            return True
        program = command.program
        if program is not None and _GLOB.search(program) and not _NOT_A_PATH.search(program):
            return True  # /bin/r? runs whatever the glob matches first
        if program is not None and "{" in program and not _NOT_A_WORD.search(program) \
                and expansions(program) != [program]:
            return True  # r{m,} -rf /: the braces make rm and r, and rm runs with r as an operand
        if named(command, ["eval"]) and any(not w.literal for w in command.words[1:]):
            return True
    return False


def kill_or_power(view: CallView, params: FloorParams) -> bool:
    for command in commands(view):
        words = [w.value or "" for w in command.words]
        if named(command, params["programs"]):
            return True
        if named(command, ["systemctl"]) and any(w in params["systemctl"] for w in words[1:]):
            return True
        if named(command, ["loginctl"]) and any(w in cast("Mapping[str, Sequence[str]]", params)["loginctl"]
                                                for w in words[1:]):
            return True
        if named(command, ["init", "telinit"]) and any(w in ("0", "6") for w in words[1:]):
            return True
        if named(command, ["kill"]) and (("-1" in words[1:] and words.index("-1") > 1) or "1" in words[1:]):
            return True  # every process, or init
    return False

