"""The conservative floor: destructive or exfiltrating shapes never allowed without a person.

The catalogue is data (`floor.json`, beside this module): each entry names one
of the checks below and its parameters, and carries examples that the tests
run. The checks read parsed commands (`fabric_jev.approval.shell`) and
normalised paths (`fabric_jev.approval.paths`), never a regex over the raw
string. A call that hits an entry asks a person, whatever the classifier, the
risk's policy or a broad allow rule says; where no one can be asked it is
refused. Only an allow rule that names the entry (``"lifts": [id]``) and
matches the call lifts it. Pure code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from . import paths as _paths
from . import shell as _shell
from .rules import PATH_KEYS, SQL_KEYS, URL_KEYS, CallView


@dataclass(frozen=True, slots=True)
class FloorEntry:
    id: str
    what: str
    check: str
    params: Mapping[str, Any]
    examples: Mapping[str, Sequence[Any]]

    def hits(self, view: CallView) -> bool:
        return _CHECKS[self.check](view, self.params)


@lru_cache(maxsize=1)
def floor_entries() -> tuple[FloorEntry, ...]:
    """The catalogue, read once from floor.json."""
    data = json.loads(resources.files(__package__).joinpath("floor.json").read_text("utf-8"))
    out = []
    for raw in data["entries"]:
        if raw["check"] not in _CHECKS:
            raise ValueError(f"floor entry {raw['id']} names an unknown check {raw['check']!r}")
        out.append(FloorEntry(raw["id"], raw["what"], raw["check"], raw.get("params", {}), raw.get("examples", {})))
    return tuple(out)


def floor_ids() -> frozenset[str]:
    return frozenset(e.id for e in floor_entries())


def floor_hits(view: CallView) -> list[FloorEntry]:
    """The entries this call hits (none for a call without commands, paths, URLs or SQL)."""
    if not _has_facets(view):
        return []
    return [entry for entry in floor_entries() if entry.hits(view)]


def _has_facets(view: CallView) -> bool:
    return bool(view.scripts() or view.values(PATH_KEYS) or view.values(SQL_KEYS) or view.values(URL_KEYS))


# ---------------------------------------------------------------------------- helpers


@lru_cache(maxsize=512)
def _name_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    # Every alternative anchored at the end: `a|b\Z` would leave all but the last a prefix match.
    return re.compile("(?:" + "|".join(".*".join(re.escape(p) for p in pat.split("*")) for pat in patterns) + r")\Z",
                      re.DOTALL)


def _named(command: _shell.Simple, names: Sequence[str]) -> bool:
    program = _shell.basename(command.program)
    return program is not None and _name_regex(tuple(names)).match(program) is not None


def _commands(view: CallView) -> Iterator[_shell.Simple]:
    for script in view.scripts():
        yield from script.commands


def _operands(command: _shell.Simple) -> list[_shell.Word]:
    return [w for w in command.words[1:] if not (w.literal and w.text.startswith("-") and len(w.text) > 1)]


def _options(command: _shell.Simple) -> list[str]:
    return [w.text for w in command.words[1:] if w.literal and w.text.startswith("-") and len(w.text) > 1]


def _has_flag(command: _shell.Simple, short: str, long: Sequence[str]) -> bool:
    for option in _options(command):
        if option.startswith("--"):
            if option.split("=", 1)[0] in long:
                return True
        elif any(ch in option[1:] for ch in short):
            return True
    return False


def _outside(view: CallView, word: _shell.Word) -> bool:
    """A word read as a path lies outside the working directory, or cannot be known."""
    value = word.value
    if value is None:
        return True
    found = view.path(value)
    if found is None:
        return True
    return not all(_paths.inside(p, view.context.cwd) for p in found)


def _path_values(view: CallView) -> Iterator[str]:
    """Every path a call names: path arguments, file URLs, command operands and redirect targets."""
    yield from view.strings(PATH_KEYS)
    for url in view.strings(URL_KEYS):
        if url.lower().startswith("file:"):
            yield re.sub(r"^file:(//[^/]*)?", "", url, flags=re.IGNORECASE)
    for command in _commands(view):
        for word in command.words[1:]:
            if word.value is None:
                continue
            value: str = word.value
            if value.startswith("-") and "=" in value:
                value = value.split("=", 1)[1]
            elif value.startswith("@"):
                value = value[1:]
            if value:
                yield value
        for redirect in command.redirects:
            if redirect.target.value:
                yield redirect.target.value


# ---------------------------------------------------------------------------- checks


def _operands_outside_tree(view: CallView, params: Mapping[str, Any]) -> bool:
    for command in _commands(view):
        if not (_named(command, params["programs"])
                and _has_flag(command, params.get("short", ""), params.get("long", ()))):
            continue
        # A mode (777, u+w) is an operand of chmod, not a path.
        if any(_outside(view, w) for w in _operands(command)
               if not (w.literal and re.fullmatch(r"[0-7]{3,4}|[ugoa]*[+=-][rwxXst]*", w.text))):
            return True
    return False


def _find_outside_tree(view: CallView, params: Mapping[str, Any]) -> bool:
    actions = set(params["actions"])
    for command in _commands(view):
        if not _named(command, ["find"]):
            continue
        words = [w.text for w in command.words[1:]]
        if not actions & set(words):
            continue
        starts = []
        for w in command.words[1:]:
            if w.literal and (w.text.startswith("-") or w.text in ("(", "!")):
                break
            starts.append(w)
        if not starts or any(_outside(view, w) for w in starts):
            return True
    return False


def _device_write(view: CallView, params: Mapping[str, Any]) -> bool:
    devices = _name_regex(tuple(params["devices"]))
    for command in _commands(view):
        targets = [r.target.value for r in command.redirects if ">" in r.operator and not r.operator.endswith(">&")]
        if _named(command, ["dd"]):
            targets += [w.text[3:] for w in command.words[1:] if w.literal and w.text.startswith("of=")]
        elif _named(command, params["programs"]) or _named(command, ["tee", "cp", "cat"]):
            targets += [w.value for w in _operands(command)]
        if any(t is not None and devices.match(t) for t in targets):
            return True
    return False


def _programs(view: CallView, params: Mapping[str, Any]) -> bool:
    return any(_named(c, params["programs"]) for c in _commands(view))


def _download_and_run(view: CallView, params: Mapping[str, Any]) -> bool:
    for script in view.scripts():
        commands = script.commands
        if any(_named(c, params["downloaders"]) for c in commands) and \
                any(_named(c, params["interpreters"]) for c in commands):
            return True
    return False


def _git_args(command: _shell.Simple) -> list[str] | None:
    """A git command's words after its global options (git -C DIR push → [push, ...])."""
    if not _named(command, ["git"]):
        return None
    words = [w.value or "" for w in command.words[1:]]
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    return words[i:]


def _git(view: CallView, params: Mapping[str, Any]) -> bool:
    options = _name_regex(tuple(params["options"]))
    for command in _commands(view):
        args = _git_args(command)
        if not args or args[0] != params["subcommand"]:
            continue
        for word in args[1:]:
            if word.startswith("--") and options.match(word):
                return True
            if word.startswith("-") and not word.startswith("--") and any(ch in word[1:] for ch in params["short"]):
                return True
            if not word.startswith("-") and any(word.startswith(p) for p in params["refspec_prefixes"]):
                return True
    return False


def _git_discard(view: CallView, params: Mapping[str, Any]) -> bool:
    for command in _commands(view):
        args = _git_args(command)
        if not args:
            continue
        sub, rest = args[0], args[1:]
        if sub == "reset" and "--hard" in rest:
            return True
        if sub == "clean" and any((w.startswith("-") and not w.startswith("--") and "f" in w) or w == "--force"
                                  for w in rest):
            return True
        if sub == "branch" and any(w in ("-D", "--delete") or (w.startswith("-") and "D" in w) for w in rest) \
                and ("-D" in rest or "--force" in rest or any(w.startswith("-") and "D" in w for w in rest)):
            return True
        if (sub in ("checkout", "restore") and ("." in rest or "--worktree" in rest) and sub != "checkout") or \
                (sub == "checkout" and "--" in rest and "." in rest):
            return True
        if sub == "stash" and rest[:1] in (["clear"], ["drop"]):
            return True
    return False


def _sql_texts(view: CallView, params: Mapping[str, Any]) -> Iterator[str]:
    yield from view.strings(SQL_KEYS)
    programs: Mapping[str, Sequence[str]] = params["shell_programs"]
    for command in _commands(view):
        name = _shell.basename(command.program)
        if name is None or name not in programs:
            continue
        flags = programs[name]
        words = command.words[1:]
        for i, word in enumerate(words):
            value = word.value or ""
            if value in flags and i + 1 < len(words):
                yield words[i + 1].value or ""
            elif any(value.startswith(f + "=") for f in flags if f.startswith("--")):
                yield value.split("=", 1)[1]
        if "*" in flags:  # sqlite3 DB "SQL": every operand may be SQL
            for word in _operands(command):
                if word.value:
                    yield word.value


def _sql(view: CallView, params: Mapping[str, Any]) -> bool:
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


@lru_cache(maxsize=64)
def _one_regex(patterns: tuple[str, ...], cwd: str, home: str) -> re.Pattern[str]:
    """Many path patterns as one regex (one match per path instead of one per pattern)."""
    where = _paths.Where(cwd, home)
    return re.compile("|".join(f"(?:{_paths.compile_path_pattern(p, where).regex.pattern})" for p in patterns),
                      re.DOTALL)


def _paths_check(view: CallView, params: Mapping[str, Any]) -> bool:
    where = view.context.where
    patterns = _one_regex(tuple(params["patterns"]), where.cwd, where.home)
    excepted = _one_regex(tuple(params.get("except", ())), where.cwd, where.home) if params.get("except") else None
    for value in _path_values(view):
        found = view.path(value)
        if found is None:
            continue
        for path in dict.fromkeys(found):
            if patterns.match(path) and not (excepted is not None and excepted.match(path)):
                return True
    return False


def _secrets_to_network(view: CallView, params: Mapping[str, Any]) -> bool:
    secret = _name_regex(tuple(params["secret_names"]))
    uploads = set(params["upload_options"])
    for script in view.scripts():
        commands = script.commands
        network = [c for c in commands if _named(c, params["network"])]
        if not network:
            continue
        if any(_named(c, params["dumps"]) and len(c.words) == 1 for c in commands):
            return True
        for command in commands:
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
                if value.startswith("@") or flag in ("-T", "--upload-file", "--post-file", "--body-file"):
                    file_word = _shell.Word(value.lstrip("@"))
                    if _outside(view, file_word):
                        return True
    return False


def _write_outside_tree(view: CallView, params: Mapping[str, Any]) -> bool:
    ignored = set(params["ignored_targets"])
    for command in _commands(view):
        for redirect in command.redirects:
            if ">" in redirect.operator and not redirect.operator.endswith(">&"):
                target = redirect.target
                if target.value not in ignored and _outside(view, target):
                    return True
        if _named(command, params["programs"]):
            operands = _operands(command)
            name = _shell.basename(command.program)
            checked = operands[-1:] if name in ("cp", "install", "rsync", "ln") else operands
            if any(w.value not in ignored and _outside(view, w) for w in checked):
                return True
    if view.risk == "write":
        for value in view.strings(PATH_KEYS):
            found = view.path(value)
            if found is None or not all(_paths.inside(p, view.context.cwd) for p in found):
                return True
    return False


def _hidden_program(view: CallView, params: Mapping[str, Any]) -> bool:
    for command in _commands(view):
        if command.words and not command.words[0].literal and command.words[0].expanded is None:
            return True
        if _named(command, ["eval"]) and any(not w.literal for w in command.words[1:]):
            return True
    return False


def _kill_or_power(view: CallView, params: Mapping[str, Any]) -> bool:
    for command in _commands(view):
        words = [w.value or "" for w in command.words]
        if _named(command, params["programs"]):
            return True
        if _named(command, ["systemctl"]) and any(w in params["systemctl"] for w in words[1:]):
            return True
        if _named(command, ["init", "telinit"]) and any(w in ("0", "6") for w in words[1:]):
            return True
        if _named(command, ["kill"]) and "-1" in words[1:] and words.index("-1") > 1:
            return True
    return False


_CHECKS: dict[str, Callable[[CallView, Mapping[str, Any]], bool]] = {
    "operands-outside-tree": _operands_outside_tree,
    "find-outside-tree": _find_outside_tree,
    "device-write": _device_write,
    "programs": _programs,
    "download-and-run": _download_and_run,
    "git": _git,
    "git-discard": _git_discard,
    "sql": _sql,
    "paths": _paths_check,
    "secrets-to-network": _secrets_to_network,
    "write-outside-tree": _write_outside_tree,
    "hidden-program": _hidden_program,
    "kill-or-power": _kill_or_power,
}
