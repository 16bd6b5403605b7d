"""Commands carried in an option: a program that runs a command it was handed as a value.

``tar --to-command='rm -rf /' -xf a.tar`` runs ``rm -rf /`` for each member;
so do tar's ``--checkpoint-action=exec=…``, ``--use-compress-program`` (``-I``),
``--rsh-command``, ``--info-script``; ssh's ``-o ProxyCommand=…`` (and
``LocalCommand``, ``KnownHostsCommand``, ``RemoteCommand``), scp's and sftp's
``-S``; rsync's ``-e``/``--rsh`` and ``--rsync-path``; zip's ``-TT``/
``--unzip-command``; git's ``--upload-pack``, ``--receive-pack``, ``--exec``,
``rebase --exec``, ``bisect run``, ``submodule foreach`` and an ``ext::`` URL;
man's ``-P``; ncat's ``-e``/``-c``/``--sh-exec``; socat's ``EXEC:``/``SYSTEM:``
addresses; a pager's or an editor's ``+!…`` (less, vim), ``fd -x``, ``rg --pre``,
``git config alias.x '!…'`` and sed's ``e`` command; sed's ``w FILE`` and
``r FILE`` are read as the write or read they are. `carried` yields each such script, and `shell_wrappers.effective`
reads it as a command of its own: its verdict counts. A script the floor
cannot read — sed's ``e`` flag of ``s///`` or a bare ``e`` (they run the
text being edited), an editor's ex command, a sed script that does not
parse — is None: the call then fails closed. Long options may be shortened
(``--to-com=…``), as GNU's option parsers accept. Pure code.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

from .git_settings import runs_command
from .shell_words import Word

#: Per program: long options (shortened spellings accepted) and short ones whose value is a script.
_OPTION_SCRIPTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "tar": (("--to-command", "--use-compress-program", "--rsh-command", "--info-script", "--new-volume-script"),
            ("-I", "-F")),
    "gtar": (("--to-command", "--use-compress-program", "--rsh-command", "--info-script", "--new-volume-script"),
             ("-I", "-F")),
    "rsync": (("--rsh", "--rsync-path"), ("-e",)),
    "scp": ((), ("-S",)),
    "sftp": ((), ("-S", "-D")),
    "zip": (("--unzip-command",), ("-TT",)),
    "man": (("--pager", "--html"), ("-P", "-H")),
    "ncat": (("--exec", "--sh-exec", "--lua-exec"), ("-e", "-c")),
    "nc": (("--exec", "--sh-exec"), ("-e", "-c")),
    "netcat": (("--exec", "--sh-exec"), ("-e", "-c")),
    "mosh": (("--ssh",), ()),
    "tcpdump": ((), ("-z",)),
    "wget": (("--use-askpass",), ()),
    "rg": (("--pre",), ()),
}
#: ssh options (-o KEY=VALUE) whose value is a command.
_SSH_COMMANDS = frozenset({"proxycommand", "localcommand", "knownhostscommand", "remotecommand"})
_SSH = frozenset({"ssh", "scp", "sftp", "autossh", "sshfs"})
#: git subcommands and their options whose value is a command (long ones may be shortened).
_GIT_OPTIONS: dict[str, tuple[str, ...]] = {
    "clone": ("--upload-pack", "-u"), "fetch": ("--upload-pack",), "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack",), "archive": ("--exec",), "push": ("--receive-pack", "--exec"),
    "send-pack": ("--receive-pack", "--exec"), "rebase": ("--exec", "-x"), "difftool": ("--extcmd", "-x"),
    "grep": ("--open-files-in-pager", "-O"),
}
_GIT_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"})
_EDITORS = frozenset({"vim", "vi", "nvim", "view", "ex", "vimdiff", "gvim", "rvim", "nvi", "elvis"})
_PAGERS = frozenset({"less", "more", "most"})
_SED = frozenset({"sed", "gsed"})
_CLUSTER = re.compile(r"-[A-Za-z]{2,}")

def carried(name: str, words: Sequence[Word]) -> Iterator[str | None]:
    """Each script the command holds in an option or operand (module doc); None for one the floor
    cannot read."""
    if name in _OPTION_SCRIPTS:
        long, short = _OPTION_SCRIPTS[name]
        yield from _option_values(words, long, short, prefixes=name in ("tar", "gtar", "man", "wget"))
        if name in ("tar", "gtar"):
            for value in _option_values(words, ("--checkpoint-action",), (), prefixes=True):
                if value is not None and value.startswith("exec="):
                    yield value[len("exec="):]
    if name in _SSH:
        yield from _ssh_commands(words)
    if name == "git":
        yield from _git_commands(words)
    if name in _SED:
        yield from _sed_commands(words)
    if name in _EDITORS or name in _PAGERS:
        yield from _plus_commands(words, editor=name in _EDITORS)
    if name in _EDITORS:  # ex -c '!rm -rf /'; other ex code cannot be read
        for value in _option_values(words, ("--cmd",), ("-c",), prefixes=False):
            yield value[1:] if value is not None and value.startswith("!") else None
    if name in ("fd", "fdfind"):
        yield from _fd_commands(words)
    if name == "socat":
        for word in words[1:]:
            text = text_of(word)
            kind, colon, rest = text.partition(":")
            if colon and kind.lower() in ("exec", "system"):
                yield rest.split(",", 1)[0]
                if "," in rest:
                    yield rest


#: fd's options that take a value (`--search-path` names a folder it searches).
_FD_VALUES = frozenset({"-e", "--extension", "-t", "--type", "-E", "--exclude", "-d", "--max-depth", "--min-depth",
                        "--exact-depth", "-j", "--threads", "-S", "--size", "--changed-within", "--changed-before",
                        "-o", "--owner", "-c", "--color", "--base-directory", "--path-separator", "--ignore-file",
                        "--max-results", "--batch-size", "--search-path", "--format"})
#: What fd puts the path it found in: itself, its name, its folder, without its extension.
_FD_PLACEHOLDER = re.compile(r"\{(?:/?/?\.?)\}")
_FD_EXEC = ("-x", "--exec", "-X", "--exec-batch")


def _fd_commands(words: Sequence[Word]) -> Iterator[str | None]:
    """fd -x CMD …: the words after it, up to `;`, run on what fd finds under each folder it
    searches; a `{}` (or none: fd adds the path) is read as a path under that folder."""
    operands: list[Word] = []
    folders: list[Word] = []
    actions: list[list[str]] = []
    i = 1
    while i < len(words):
        word = words[i]
        text = word.text if word.literal else ""
        if text in _FD_EXEC or any(text.startswith(f"{o}=") for o in _FD_EXEC[1::2]):
            after = [text.split("=", 1)[1]] if "=" in text else []
            after += [text_of(w) for w in words[i + 1:]]
            end = after.index(";") if ";" in after else len(after)
            actions.append(after[:end])
            i += end + (1 if "=" in text else 2)
            continue
        if text == "--search-path" and i + 1 < len(words):
            folders.append(words[i + 1])
        if text in _FD_VALUES:
            i += 2
            continue
        if not (text.startswith("-") and len(text) > 1):
            operands.append(word)
        i += 1
    folders += operands[1:] or ([] if folders else [Word(".")])
    for action in actions:
        if not action:
            yield None
            continue
        for folder in folders[:8]:
            if folder.value is None:
                yield None
                continue
            path = _quoted(folder.value.rstrip("/") + "/{}")
            found = [_FD_PLACEHOLDER.sub(path.replace("\\", "\\\\"), a) for a in action]
            yield " ".join(found if found != action else [*found, path])


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def text_of(word: Word) -> str:
    """A word's value, or its text as written when an expansion is in it (read as written)."""
    if word.value is not None:
        return word.value
    text = word.text
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def _option_values(words: Sequence[Word], long: Sequence[str], short: Sequence[str], *,
                   prefixes: bool) -> Iterator[str | None]:
    """The values of the options (``--opt=V``, ``--opt V``, ``-o V``, ``-oV``)."""
    for i, word in enumerate(words[1:], start=1):
        text = text_of(word)  # --to-command="rm -rf $HOME": the option holds an expansion
        following = text_of(words[i + 1]) if i + 1 < len(words) else None
        if text.startswith("--"):
            option, eq, value = text.partition("=")
            if len(option) > 3 and any(option == o or (prefixes and o.startswith(option) and len(option) >= 5)
                                       for o in long):
                yield value if eq else following
        elif text.startswith("-"):
            for o in short:
                if text == o or (len(o) == 2 and _CLUSTER.fullmatch(text) and text.endswith(o[1])):
                    yield following  # -e CMD, and rsync -avze CMD: the last flag of a cluster takes it
                elif text.startswith(o) and len(text) > len(o) and not (len(o) == 2 and text[:3] == o + o[1]):
                    yield text[len(o):].removeprefix("=")


def _ssh_commands(words: Sequence[Word]) -> Iterator[str | None]:
    for i, word in enumerate(words[1:], start=1):
        text = text_of(word)
        if text == "-o":
            setting = text_of(words[i + 1]) if i + 1 < len(words) else ""
        elif text.startswith("-o") and len(text) > 2:
            setting = text[2:]
        else:
            continue
        key, value = _ssh_setting(setting)
        if key in _SSH_COMMANDS and value.lower() != "none":
            yield value


def _ssh_setting(text: str) -> tuple[str, str]:
    """An ssh_config line: ``Key=Value``, ``Key Value`` or ``Key = "Value"``."""
    match = re.match(r"\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)\Z", text, re.DOTALL)
    if match is None:
        return "", ""
    value = match.group(2).strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return match.group(1).lower(), value


def _git_commands(words: Sequence[Word]) -> Iterator[str | None]:
    i = 1
    while i < len(words) and (words[i].value or "").startswith("-"):
        i += 2 if (words[i].value or "") in _GIT_GLOBAL_VALUES else 1
    sub = words[i].value if i < len(words) else None
    rest = list(words[i + 1:])
    for word in rest:  # git clone 'ext::sh -c …'
        text = text_of(word)
        if text.startswith("ext::"):
            yield re.sub(r"%(.)", lambda m: {"S": "git-upload-pack", " ": " ", "%": "%"}.get(m.group(1), ""),
                         text[5:])
    if sub in _GIT_OPTIONS:
        options = _GIT_OPTIONS[sub]
        yield from _option_values([Word("git"), *rest], [o for o in options if o.startswith("--")],
                                  [o for o in options if not o.startswith("--")], prefixes=True)
    if sub == "config":  # git config alias.x '!rm -rf /' (also --global, --add …): run by a later git
        values = [w for w in rest if not (w.literal and w.text.startswith("-"))]
        for key, value in itertools.pairwise(values):
            name = (key.value or "").lower()
            text = text_of(value)
            if runs_command(name, text):
                yield text.removeprefix("!")
            elif name == "core.hookspath":
                yield None  # the hooks there are only known to the file system
    for word in words[1:i]:
        text = text_of(word)
        setting = text[13:].split("=", 1)[0].lower()
        if text.startswith("--config-env=") and (runs_command(setting, "!") or setting == "core.hookspath"):
            yield None  # the command is the value of an environment variable
    if sub == "filter-branch":
        yield from _option_values([Word("git"), *rest], ("--tree-filter", "--index-filter", "--msg-filter",
                                  "--env-filter", "--commit-filter", "--parent-filter", "--tag-name-filter"), (),
                                  prefixes=True)
    if sub == "bisect" and rest and rest[0].value == "run":
        yield " ".join(text_of(w) for w in rest[1:]) or None
    if sub == "submodule" and rest and rest[0].value == "foreach":
        operands = [w for w in rest[1:] if not (w.literal and w.text.startswith("-"))]
        yield " ".join(text_of(w) for w in operands) or None


def _plus_commands(words: Sequence[Word], *, editor: bool) -> Iterator[str | None]:
    """``less '+!cmd'``, ``vim '+!cmd'``: a shell command; an editor's other ``+`` commands are
    ex code the floor cannot read (``+N``, ``+/pattern`` and a bare ``+`` move the cursor)."""
    for word in words[1:]:
        text = text_of(word)
        if text.startswith("!") and len(text) > 1:  # a file that no one names so: read as the command it spells
            yield text[1:]
        if not text.startswith("+") or text.startswith("++"):
            continue
        body = text[1:]
        if not body or body.isdigit() or (body.startswith(("/", "?")) and "!" not in body and "|" not in body):
            continue
        if "!" in body:
            yield body.split("!", 1)[1]
        elif not editor and "|" in body:
            yield body.split("|", 1)[1][1:]  # less: |m command (a mark, then the command)
        elif editor or not re.fullmatch(r"[A-Za-z]|G|F|g", body):
            yield None


# ---------------------------------------------------------------------------- sed


def _sed_commands(words: Sequence[Word]) -> Iterator[str | None]:
    scripts: list[str] = []
    from_file = False
    operands: list[Word] = []
    i = 1
    while i < len(words):
        word = words[i]
        text = text_of(word) if word.literal or (word.value or "").startswith("-") else ""
        following = text_of(words[i + 1]) if i + 1 < len(words) else None
        if text == "--sandbox":
            return  # GNU sed then refuses e, r and w
        if text.startswith("--expression"):
            value = text.partition("=")[2] if "=" in text else following
            scripts.append(value or "")
            i += 1 if "=" in text else 2
            continue
        if text.startswith("--file") or text.startswith("--line-length"):
            from_file = from_file or text.startswith("--file")
            i += 1 if "=" in text else 2
            continue
        if text.startswith("-") and not text.startswith("--") and len(text) > 1:
            step = 1
            for k, ch in enumerate(text[1:], start=2):
                if ch == "i":
                    break  # the rest is the in-place suffix
                if ch in "efl":
                    value = text[k:] or following
                    if not text[k:]:
                        step = 2
                    if ch == "e":
                        scripts.append(value or "")
                    from_file = from_file or ch == "f"
                    break
            i += step
            continue
        if not text.startswith("--"):
            operands.append(word)
        i += 1
    if not scripts and not from_file and operands:
        scripts.append(text_of(operands[0]))
    for script in scripts:
        runs = sed_runs(script)
        if runs is None:
            yield None
        else:
            yield from runs


_SIMPLE = frozenset("=dDgGhHnNpPxzF")


def sed_runs(script: str) -> list[str | None] | None:
    """The commands a sed script runs: an ``e command``'s text, None for a bare ``e`` or the ``e``
    flag of ``s`` (they run the text being edited); None for the whole when it cannot be read."""
    runs: list[str | None] = []
    n = len(script)
    i = 0
    while i < n:
        ch = script[i]
        if ch in " \t\n;{}":
            i += 1
            continue
        if ch == "#":
            i = _line_end(script, i)
            continue
        i = _address(script, i)
        if i < 0:
            return None
        i = _spaces(script, i)
        if i < n and script[i] == ",":
            i = _address(script, _spaces(script, i + 1))
            if i < 0:
                return None
            i = _spaces(script, i)
        while i < n and script[i] in "! \t":
            i += 1
        if i >= n:
            return None
        cmd = script[i]
        i += 1
        if cmd == "{" or cmd in _SIMPLE:
            continue
        if cmd in "aic":  # text up to the end of the line, and on while a line ends in a backslash
            while True:
                end = _line_end(script, i)
                if end < n and end > 0 and script[end - 1] == "\\":
                    i = end + 1
                    continue
                if i < n and script[i:end].strip() == "\\":
                    i = end + 1
                    continue
                i = end
                break
        elif cmd in "bTt":
            while i < n and script[i] not in ";\n}":
                i += 1
        elif cmd in "rRwW":  # the file it reads or writes, as the shell would name it
            end = _line_end(script, i)
            runs.append(_file_use(cmd, script[i:end].strip()))
            i = end
        elif cmd in "v:":
            i = _line_end(script, i)
        elif cmd in "qQlL":
            i = _spaces(script, i)
            while i < n and script[i].isdigit():
                i += 1
        elif cmd == "e":
            end = _line_end(script, i)
            runs.append(script[i:end].strip() or None)
            i = end
        elif cmd in "sy":
            i, flags = _substitution(script, i, cmd)
            if i < 0:
                return None
            flags, _, written = flags.partition("w")
            if "e" in flags:
                runs.append(None)
            if written:
                runs.append(_file_use("w", written))
        else:
            return None
    return runs


def _file_use(cmd: str, path: str) -> str:
    """sed's `w FILE` truncates and writes FILE, `r FILE` reads it: the same as a command
    that does so, for the floor to read (`w /etc/passwd` is `> /etc/passwd`)."""
    quoted = "'" + path.replace("'", "'\\''") + "'"
    return f"cat {quoted}" if cmd in "rR" else f": > {quoted}"


def _line_end(script: str, i: int) -> int:
    end = script.find("\n", i)
    return len(script) if end < 0 else end


def _spaces(script: str, i: int) -> int:
    while i < len(script) and script[i] in " \t":
        i += 1
    return i


def _address(script: str, i: int) -> int:
    """Past one address (``12``, ``$``, ``/re/I``, ``\\%re%``, ``1~2``, ``+3``, ``~4``), -1 when broken."""
    n = len(script)
    if i < n and script[i] in "+~":
        i += 1
    if i < n and script[i] == "$":
        return i + 1
    if i < n and script[i].isdigit():
        while i < n and (script[i].isdigit() or script[i] == "~"):
            i += 1
        return i
    if i < n and script[i] in "/\\":
        delimiter = script[i]
        if delimiter == "\\":
            i += 1
            if i >= n:
                return -1
            delimiter = script[i]
        i = _delimited(script, i + 1, delimiter)
        while 0 <= i < n and script[i] in "IM":
            i += 1
        return i
    return i


def _delimited(script: str, i: int, delimiter: str) -> int:
    """Past the part ending at an unescaped `delimiter` (a newline cannot be in it), -1 when open."""
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == "\\":
            i += 2
            continue
        if ch == delimiter:
            return i + 1
        if ch == "\n" and delimiter != "\n":
            return -1
        i += 1
    return -1


def _substitution(script: str, i: int, cmd: str) -> tuple[int, str]:
    """Past ``s/re/text/flags`` or ``y/abc/xyz/`` (started after the letter), and its flags."""
    if i >= len(script) or script[i] in "\\\n":
        return -1, ""
    delimiter = script[i]
    i = _delimited(script, i + 1, delimiter)
    if i < 0:
        return -1, ""
    i = _delimited_text(script, i, delimiter)
    if i < 0 or cmd == "y":
        return i, ""
    start = i
    while i < len(script) and (script[i] in "gpiImMe" or script[i].isdigit()):
        i += 1
    flags = script[start:i]
    if i < len(script) and script[i] in "wW":  # w FILE: to the end of the line
        end = _line_end(script, i)
        return end, flags + "w" + script[i + 1:end].strip()
    return i, flags


def _delimited_text(script: str, i: int, delimiter: str) -> int:
    """Past a replacement: like `_delimited`, but an escaped newline may be in it."""
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == "\\":
            i += 2
            continue
        if ch == delimiter:
            return i + 1
        if ch == "\n":
            return -1
        i += 1
    return -1
