"""What a command runs besides itself: the command behind a wrapper, and the scripts in its strings.

``sudo rm x`` runs ``rm x``; ``bash -c "rm x"``, ``su -c``, ``watch 'rm x'``,
``trap 'rm x' EXIT`` and ``env -S 'rm x'`` run a script held in a string;
``find . -exec rm {} ;`` runs ``rm`` on what it finds; ``xargs rm`` and
``parallel rm`` run ``rm`` on operands read at run time; ``busybox rm`` and
``toybox rm`` are multi-call binaries running their applet. `effective`
yields each of these commands, so deny rules and the floor read every one
(``/bin/rm`` is ``rm`` to them). Assignments whose value is a command that
another program runs (``GIT_SSH_COMMAND='…' git fetch``) are read as scripts
too. Runners behind a subcommand (``uv run``, ``pnpm exec``: `shell_runners`) and
commands carried in an option (``tar --to-command=…``, ``ssh -o ProxyCommand=…``:
`shell_carriers`) are read the same way. After an option a wrapper's table does not
know, every later word is read as a possible start of the command. Pure code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace

from .git_settings import runs_command
from .shell_carriers import carried
from .shell_runners import MAX_STARTS, RUNNERS, runner_commands
from .shell_words import Known, Script, Simple, Word, basename

#: How deep `bash -c "…"` / `eval` strings are parsed inside one another; deeper is opaque.
MAX_NESTING = 4

#: Shells whose `-c STRING` is a script of its own.
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "hush", "fish", "yash", "posh", "tcsh",
                    "csh", "rbash", "lksh", "oksh", "loksh", "nu", "xonsh", "elvish"})
#: Wrappers that run the command after their options: name → options that take a value.
WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
                       "--chdir", "--close-from", "--host", "--prompt", "--role", "--type", "--other-user",
                       "--command-timeout"}),
    "doas": frozenset({"-u", "-C"}),
    "run0": frozenset({"-u", "--user", "-g", "--group", "-D", "--chdir", "--setenv", "--unit", "--property"}),
    "pkexec": frozenset({"--user"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string", "-a", "--argv0"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "nohup": frozenset(),
    "setsid": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "ionice": frozenset({"-c", "-n", "-p", "--class", "--classdata"}),
    "chrt": frozenset(),
    "taskset": frozenset({"-c", "--cpu-list"}),
    "numactl": frozenset({"-C", "-N", "-m", "-p", "-i", "--physcpubind", "--cpunodebind", "--membind",
                          "--preferred", "--interleave"}),
    "unshare": frozenset({"-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd"}),
    "nsenter": frozenset({"-t", "--target", "-S", "--setuid", "-G", "--setgid", "-r", "-w"}),
    "systemd-run": frozenset({"-u", "--unit", "-p", "--property", "-E", "--setenv", "-M", "--machine",
                              "--uid", "--gid", "--slice", "--working-directory", "--description", "-H", "--host"}),
    "cgexec": frozenset({"-g"}),
    "prlimit": frozenset({"-p", "--pid"}),
    "fakeroot": frozenset({"-l", "--lib", "--faked", "-s", "-i"}),
    "faketime": frozenset({"-f"}),
    "catchsegv": frozenset(),
    "valgrind": frozenset(),
    "ltrace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u", "-P", "-E", "-b", "-I", "-S", "-X", "-O", "-a"}),
    "dbus-run-session": frozenset({"--config-file", "--dbus-daemon"}),
    "xvfb-run": frozenset({"-n", "--server-num", "-s", "--server-args", "-e", "--error-file", "-f", "--auth-file",
                           "-p", "--xauth-protocol", "-w", "--wait"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-l", "-s", "-a", "-E", "-e",
                        "--max-args", "--max-procs", "--delimiter", "--arg-file", "--replace", "--max-lines",
                        "--max-chars", "--eof", "--process-slot-var"}),
    "parallel": frozenset({"-j", "--jobs", "-S", "--sshlogin", "--joblog", "--results", "--delay", "--timeout",
                           "-I", "--colsep", "-d", "--delimiter", "-a", "--arg-file", "--tmpdir", "-n", "--max-args"}),
    "chroot": frozenset({"--userspec", "--groups"}),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
    "unbuffer": frozenset(),
    "watch": frozenset({"-n", "--interval", "-d", "--differences", "-q", "--equexit"}),
    "caffeinate": frozenset({"-t", "-w"}),
    "torsocks": frozenset({"-u", "-p", "-a", "-P"}),
    "proxychains": frozenset({"-f"}),
    "proxychains4": frozenset({"-f"}),
    "firejail": frozenset(),
    "runuser": frozenset({"-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w",
                          "--whitelist-environment"}),
    "su": frozenset({"-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment"}),
    "script": frozenset({"-E", "--echo", "-I", "--log-in", "-O", "--log-out", "-B", "--log-io", "-T",
                         "--log-timing", "-m", "--logging-format", "-o", "--output-limit"}),
    "busybox": frozenset(),
    "toybox": frozenset(),
    "npx": frozenset({"-p", "--package", "-c", "--call"}),
    "pnpx": frozenset({"-p", "--package"}),
    "bunx": frozenset({"-p", "--package"}),
    "uvx": frozenset({"--from", "--with", "--python", "-p"}),
}
#: Wrappers whose first operand is not the command (timeout DURATION cmd, chroot DIR cmd, flock FILE cmd).
_LEADING_OPERAND = frozenset({"timeout", "chroot", "flock", "chrt", "faketime"})
#: Multi-call binaries: the first operand is the applet they run.
MULTI_CALL = frozenset({"busybox", "toybox"})
#: Wrappers that hand the command operands read at run time.
_FEEDERS = frozenset({"xargs", "parallel"})
#: Options whose value is a script the program runs: program → options.
SCRIPT_OPTIONS: dict[str, frozenset[str]] = {
    "su": frozenset({"-c", "--command", "--session-command"}),
    "runuser": frozenset({"-c", "--command", "--session-command"}),
    "script": frozenset({"-c", "--command"}),
    "flock": frozenset({"-c", "--command"}),
    "env": frozenset({"-S", "--split-string"}),
}
#: Variables whose value is a command some program runs (read as a script of its own).
COMMAND_VARIABLES = frozenset({"GIT_SSH_COMMAND", "GIT_SSH", "GIT_EDITOR", "GIT_PAGER", "GIT_EXTERNAL_DIFF",
                               "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "PAGER", "MANPAGER", "EDITOR",
                               "VISUAL", "PROMPT_COMMAND", "LESSOPEN", "LESSCLOSE", "BROWSER"})

#: Remote shells: name → options that take a value; the words after the host are a command.
REMOTE_SHELLS: dict[str, frozenset[str]] = {
    "ssh": frozenset({"-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p",
                      "-P", "-Q", "-R", "-S", "-W", "-w", "-B"}),
    "rsh": frozenset({"-l"}),
}

#: Parses a nested script: (text, depth, the command it runs in) → its Script.
Nested = Callable[[str, int, Simple], Script]


def effective(simple: Simple, known: Known, depth: int, nested: Nested, opaque: list[str]) -> Iterator[Simple]:
    """The command itself, the command behind each wrapper, and the commands of its scripts.

    `nested` parses a script held in a string; what cannot be read (nesting too deep) is
    added to `opaque`."""
    yield simple
    current = simple
    for _ in range(8):  # wrappers inside wrappers (sudo env X=1 nice rm …), bounded
        words = list(current.words)
        for assignment in current.assignments:
            variable, _, value = assignment.partition("=")
            if variable in COMMAND_VARIABLES and value:
                yield from _script(_unquote(value), depth, current, nested, opaque)
            elif variable == "GIT_CONFIG_PARAMETERS" or variable.startswith("GIT_CONFIG_VALUE_"):
                opaque.append("git settings given in the environment")  # core.sshCommand among them
        if not words or not words[0].literal:
            return
        name = basename(words[0].text) or ""
        for held in carried(name, words):  # tar --to-command='…', ssh -o ProxyCommand=…, sed 'e …'
            if held is None:
                opaque.append(f"a command {name} runs from its options or script, not readable here")
            else:
                yield from _script(held, depth, current, nested, opaque)
        if name == "git":
            yield from _git_config_commands(words, depth, current, nested, opaque)
            return
        if name in REMOTE_SHELLS:
            host, remote = _remote(words, REMOTE_SHELLS[name])
            if remote:  # what it runs over there is read as if it ran here
                yield from _script(" ".join(_script_text(w) for w in remote), depth, current, nested, opaque)
            elif host and name == "ssh":  # no command: the remote shell runs what ssh reads from its input
                yield replace(current, words=(Word("sh"),), assignments=(), via=name)
            return
        if name in SHELLS or name == "eval":
            yield from _shell_string(name, words, depth, current, nested, opaque)
            return
        if name == "find":
            start = _find_start(words)
            if start > 1:  # find -L ~ -delete: read as find ~ -delete
                words = [words[0], *words[start:]]
                yield replace(current, words=tuple(words))
            yield from _find_actions(words, depth, current, nested, opaque)
            return
        if name == "trap":
            operands = [w for w in words[1:] if not (w.literal and w.text.startswith("-"))]
            if operands and operands[0].value not in ("", "-") and not (operands[0].value or "").isdigit():
                yield from _script(_script_text(operands[0]), depth, current, nested, opaque)
            return
        if name == "watch" and not {"-x", "--exec"} & {w.text for w in words[1:]}:
            rest = _after_options(words, WRAPPERS["watch"])
            if rest:  # watch joins its operands and hands them to sh -c
                yield from _script(" ".join(_script_text(w) for w in rest), depth, current, nested, opaque)
            return
        if name == "coreutils":  # coreutils --coreutils-prog=rm -rf /
            found = next((i for i, w in enumerate(words) if w.text.startswith("--coreutils-prog=")), None)
            if found is None:
                return
            applet = Word(words[found].text.split("=", 1)[1])
            current = replace(current, words=(applet, *words[found + 1:]), assignments=(), via=name)
            yield current
            continue
        if name in RUNNERS:
            ran = _runner(name, words, current, known, depth, nested, opaque)
            if isinstance(ran, Simple):
                current = ran
                yield current
                continue
            yield from ran
            return
        takes_value = WRAPPERS.get(name)
        if takes_value is None:
            return
        script = _script_option(name, words)
        if script is not None:
            at, held = script
            if held is None:
                opaque.append(f"the script {name} runs is only known at run time")
            else:
                tail = " ".join(_script_text(x) for x in words[at:]) if name == "env" else ""
                yield from _script(f"{held} {tail}".strip(), depth, current, nested, opaque)
            return
        if name == "su" or (name == "runuser" and not any(
                w.text in ("-u", "--user") or w.text.startswith("--user=") for w in words)):
            # su [-] [user]: a shell that reads its commands from its input
            yield replace(current, words=(Word("sh"),), assignments=(), via=name)
            return
        i, assignments, dirs = _options(name, words, takes_value, current.dirs)
        if name in _LEADING_OPERAND or (name == "taskset" and not any(  # taskset MASK cmd; -c LIST cmd
                w.literal and (w.text.startswith("--cpu-list") or (w.text[:1] == "-" != w.text[1:2] and "c" in w.text))
                for w in words[1:i])):
            i += 1
        rest_words = words[i:]
        if name == "parallel":
            cut = next((k for k, w in enumerate(rest_words) if w.text in (":::", "::::", ":::+", "::::+")),
                       len(rest_words))
            rest_words = rest_words[:cut]
        if not rest_words:
            if name == "sudo" and {"-s", "-i", "--shell", "--login"} & {w.text for w in words[1:]}:
                # sudo -s / -i without a command: a shell that reads its commands from its input
                yield replace(current, words=(Word("sh"),), assignments=(), dirs=dirs, via=name)
            return
        fed = name if name in _FEEDERS else current.fed
        current = replace(current, words=tuple(rest_words), assignments=tuple(assignments), dirs=dirs, fed=fed,
                          via=name)
        if _unsure(words[:i], takes_value):
            # `systemd-run --on-calendar daily rm -rf ~`: an option the table does not know may have
            # taken the next word; each later word may start the command too.
            yield from _runner_reads(name, words, [], None, [
                replace(current, words=tuple(rest_words[k:])) for k in range(1, len(rest_words))
                if not (rest_words[k].literal and rest_words[k].text.startswith("-"))][:MAX_STARTS],
                current, known, depth, nested, opaque)
        yield current


def _runner(name: str, words: list[Word], current: Simple, known: Known, depth: int, nested: Nested,
            opaque: list[str]) -> Simple | Iterator[Simple]:
    """The command a runner runs (`shell_runners`): one Simple when its start is known, else
    every possible command (and its scripts), each read by `effective` again."""
    unwrapped = runner_commands(name, words)
    if unwrapped is None:
        return iter(())
    dirs = current.dirs
    for folder in unwrapped.folders:
        dirs = None if dirs is None or folder is None else (*dirs, folder)
    candidates = [replace(current, words=tuple(words[k:]), assignments=(), dirs=dirs, via=name)
                  for k in unwrapped.starts]
    if unwrapped.exact and len(candidates) == 1 and not unwrapped.scripts and unwrapped.joined_from is None:
        return candidates[0]
    return _runner_reads(name, words, unwrapped.scripts, unwrapped.joined_from, candidates,
                         replace(current, dirs=dirs), known, depth, nested, opaque)


def _runner_reads(name: str, words: list[Word], scripts: list[str | None], joined_from: int | None,
                  candidates: list[Simple], current: Simple, known: Known, depth: int, nested: Nested,
                  opaque: list[str]) -> Iterator[Simple]:
    for held in scripts:
        if held is None:
            opaque.append(f"the script {name} runs is only known at run time")
        else:
            yield from _script(held, depth, current, nested, opaque)
    if joined_from is not None:
        yield from _script(" ".join(_script_text(w) for w in words[joined_from:]), depth, current, nested, opaque)
    if candidates and depth >= MAX_NESTING:
        opaque.append(f"runners nested deeper than {MAX_NESTING}")
        return
    for candidate in candidates:
        yield from effective(candidate, known, depth + 1, nested, opaque)


#: Wrappers' options that change the folder the command runs in.
_CHDIR = {"env": ("-C", "--chdir"), "sudo": ("-D", "--chdir"), "run0": ("-D", "--chdir"),
          "systemd-run": ("--working-directory",), "unshare": ("-w", "--wd"), "nsenter": ("-w", "--wd")}


def _options(name: str, words: list[Word], takes_value: frozenset[str],
             dirs: tuple[str, ...] | None) -> tuple[int, list[str], tuple[str, ...] | None]:
    """Where a wrapper's command starts, the assignments env gives it, and the folders it may run in."""
    i = 1
    assignments: list[str] = []
    chdir = _CHDIR.get(name, ())
    while i < len(words):
        w = words[i].value or ""
        if w == "--":
            return i + 1, assignments, dirs
        if name == "env" and w == "-":  # env - is env -i
            i += 1
            continue
        if name == "env" and "=" in w and not w.startswith("-"):
            assignments.append(w)
            i += 1
            continue
        if not (w.startswith("-") and len(w) > 1) or name in MULTI_CALL:
            break
        option, eq, value = w.partition("=")
        given: str | None = value
        if option.startswith("--"):
            if not eq and option in takes_value:
                given = words[i + 1].value if i + 1 < len(words) else None
                i += 1
            elif not eq:
                option = ""
        elif w in takes_value:
            option, given = w, (words[i + 1].value if i + 1 < len(words) else None)
            i += 1
        elif w[:2] in takes_value and len(w) > 2:  # -uroot, -C/dir
            option, given = w[:2], w[2:]
        elif "-" + w[-1] in takes_value:  # -iu root
            option, given = "-" + w[-1], (words[i + 1].value if i + 1 < len(words) else None)
            i += 1
        else:
            option = ""
        if option in chdir:
            dirs = None if dirs is None or given is None else (*dirs, given)
        i += 1
    return i, assignments, dirs


def _unsure(words: list[Word], takes_value: frozenset[str]) -> bool:
    """Whether a long option the table does not know, written without `=`, is among `words`."""
    return any(w.literal and w.text.startswith("--") and len(w.text) > 2 and "=" not in w.text
               and w.text not in takes_value for w in words[1:])


def _script_option(name: str, words: list[Word]) -> tuple[int, str | None] | None:
    """(where the words after it start, the script) of `su -c '…'`, `env -S '…'`, `flock F -c '…'`."""
    options = SCRIPT_OPTIONS.get(name)
    if not options:
        return None
    for i, word in enumerate(words[1:], start=1):
        w = word.text if word.literal else ""
        option, eq, value = w.partition("=")
        if eq and option in options:
            return i + 1, value if word.literal else None
        if w in options or (not w.startswith("--") and w.startswith("-") and len(w) > 2 and "-" + w[-1] in options):
            script = words[i + 1] if i + 1 < len(words) else None
            return i + 2, None if script is None else _script_text(script)
        at = next((k for k in range(1, len(w)) if "-" + w[k] in options), 0) if w[:1] == "-" != w[1:2] else 0
        if at:  # the script attached to its flag: env -S'rm -rf /', su -lc'…'
            return i + 1, w[at + 1:]
        if w == "--" and name != "flock":
            return None
    return None


def _git_config_commands(words: list[Word], depth: int, outer: Simple, nested: Nested,
                         opaque: list[str]) -> Iterator[Simple]:
    for i, word in enumerate(words[:-1]):
        if word.literal and word.text == "-c":
            setting = words[i + 1]
            if setting.value is None:
                opaque.append("a git setting only known at run time")
                continue
            key, _, value = setting.value.partition("=")
            key = key.lower()
            if key == "core.hookspath":
                opaque.append("git hooks from a folder the floor does not read")
                continue
            if value and runs_command(key, value):
                yield from _script(value.removeprefix("!"), depth, outer, nested, opaque)


def _remote(words: list[Word], takes_value: frozenset[str]) -> tuple[Word | None, list[Word]]:
    """A remote shell's host and the command after it; options may follow the host too
    (``ssh host -n rm -rf /``), and ``--`` ends them."""
    host: Word | None = None
    i = 1
    while i < len(words):
        w = words[i].value or ""
        if w == "--":
            rest = words[i + 1:]
            return (host, rest) if host is not None else (rest[0] if rest else None, rest[1:])
        if w.startswith("-") and len(w) > 1:
            i += 2 if w in takes_value else 1
            continue
        if host is not None:
            return host, words[i:]
        host = words[i]
        i += 1
    return host, []


def _after_options(words: list[Word], takes_value: frozenset[str]) -> list[Word]:
    i = 1
    while i < len(words):
        w = words[i].value or ""
        if w == "--":
            return words[i + 1:]
        if w.startswith("-") and len(w) > 1:
            i += 2 if w in takes_value else 1
        else:
            break
    return words[i:]


def _shell_string(name: str, words: list[Word], depth: int, outer: Simple, nested: Nested,
                  opaque: list[str]) -> Iterator[Simple]:
    if name == "eval":
        script_words = words[1:]
    else:
        script_words = []
        for i, w in enumerate(words[1:], start=1):
            value = w.value or ""
            if (value.startswith("-") and not value.startswith("--") and "c" in value[1:]) or value in (
                    "--command", "--commands"):
                script_words = _command_string(words, i + 1)
                break
            if value.startswith(("--command=", "--commands=")):  # fish --command='…'
                script_words = [Word(value.split("=", 1)[1])]
                break
    if script_words:
        # A string with an expansion in it is still read: what it would run is what deny rules and
        # the floor must see ($HOME expanded where known, the rest as written).
        yield from _script(" ".join(_script_text(w) for w in script_words), depth, outer, nested, opaque)


def _command_string(words: list[Word], start: int) -> list[Word]:
    """The command string of `sh -c`: the first operand after the options that may follow -c
    (``sh -c -- '…'``, ``bash -c -x '…'``, ``bash -c -o errexit '…'``)."""
    i = start
    while i < len(words):
        w = words[i]
        if not w.literal or not w.text.startswith(("-", "+")) or w.text in ("-", "+"):
            return [w]
        if w.text == "--":
            return words[i + 1:i + 2]
        i += 2 if w.text in ("-o", "+o", "-O", "+O") else 1
    return []


def _find_actions(words: list[Word], depth: int, outer: Simple, nested: Nested,
                  opaque: list[str]) -> Iterator[Simple]:
    """The commands of find's -exec, -execdir, -ok and -okdir, `{}` read as a path under each start."""
    starts: list[Word] = []
    for w in words[1:]:
        if w.literal and (w.text.startswith("-") or w.text in ("(", "!", ")")):
            break
        starts.append(w)
    starts = starts or [Word(".")]
    i = 1
    while i < len(words):
        if words[i].literal and words[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(words) and not (words[j].literal and words[j].text in (";", "+")):
                j += 1
            action = words[i + 1:j]
            i = j + 1
            if not action:
                continue
            for start in starts[:8]:
                found = [_found_under(w, start) for w in action]
                yield from effective(replace(outer, words=tuple(found), assignments=(), via="find"), Known(), depth,
                                     nested, opaque)
        else:
            i += 1


def _find_start(words: list[Word]) -> int:
    """Where find's start folders begin, after its leading options (-H, -L, -P, -O3, -D opts)."""
    i = 1
    while i < len(words) and words[i].literal and (words[i].text in ("-H", "-L", "-P", "-D")
                                                   or re.fullmatch(r"-O\d*|-[HLP]+", words[i].text)):
        i += 2 if words[i].text == "-D" else 1
    return i


def _found_under(word: Word, start: Word) -> Word:
    if "{}" not in word.text:
        return word
    base = start.value
    if base is None or not word.literal:
        return Word(word.text, False, None)
    path = base.rstrip("/") + "/{}" if base.rstrip("/") else "/{}"
    return Word(word.text.replace("{}", path))


def _script(text: str, depth: int, outer: Simple, nested: Nested, opaque: list[str]) -> Iterator[Simple]:
    if depth >= MAX_NESTING:
        opaque.append(f"scripts nested deeper than {MAX_NESTING}")
        return
    inner = nested(text, depth + 1, outer)
    opaque.extend(inner.opaque)
    yield from inner.commands


def _script_text(word: Word) -> str:
    if word.value is not None:
        return word.value
    return _unquote(word.text)


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text
