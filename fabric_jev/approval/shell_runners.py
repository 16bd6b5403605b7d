"""Runners: programs that run the command written after them, often behind a subcommand.

``uv run rm -rf /`` runs ``rm -rf /``, and so do ``poetry run``, ``pipenv run``,
``pnpm exec``, ``yarn exec``, ``npm exec --``, ``pdm run``, ``hatch run``,
``conda run -n x``, ``mise exec --``, ``direnv exec DIR``, ``nix shell PKG -c``,
``chronic``, ``sshpass -p PW``, ``gosu USER``, … `runner_commands` reads where
the command starts (after the subcommand, the options and their values, and
the operands that come first, as ``direnv exec DIR``), and
`shell_wrappers.effective` reads that command again by the same rules.

Where the start cannot be known — an option the table does not know may take a
value (``uv run --with requests rm -rf /``), or a runner takes any number of
operands before the command unless ``--`` ends them (``mise exec node@20 …``)
— every later word is read as a possible start, so the command is read
whatever the option meant. A runner's option that holds a script
(``nix-shell --run '…'``, ``npm exec -c '…'``) is read as a script; the
operands of ``hyperfine`` and ``pee`` are scripts each. Pure code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .shell_words import Word

#: Possible starts read at most when the start cannot be known.
MAX_STARTS = 8


@dataclass(frozen=True, slots=True)
class Runner:
    """How one runner's command line reads (module doc)."""

    #: The subcommands that run a command (empty: the command follows the runner's options).
    subcommands: frozenset[str] = frozenset()
    #: Options that take a value (before or after the subcommand).
    takes_value: frozenset[str] = frozenset()
    #: Options known to take none (any other option may take one: the start is then unknown).
    flags: frozenset[str] = frozenset()
    #: Operands before the command (``direnv exec DIR``, ``gosu USER``).
    leading: int = 0
    #: Options, or the leading operand ("<operand>"), that name the folder the command runs in.
    chdir: frozenset[str] = frozenset()
    #: Options after which the remaining words are the command (``nix shell PKG -c CMD …``).
    rest: frozenset[str] = frozenset()
    #: Options whose value is a script (``nix-shell --run '…'``).
    scripts: frozenset[str] = frozenset()
    #: Any number of operands may come before the command unless ``--`` ends them (mise, aws-vault).
    until_dashdash: bool = False
    #: Every operand is a script of its own (``hyperfine 'a' 'b'``, ``pee 'a' 'b'``).
    each_a_script: bool = False
    #: The operands joined are one script (``tmux new-session 'rm x'``).
    joined: bool = False


def _r(sub: str = "", values: str = "", flags: str = "", **more: object) -> Runner:
    extra = {k: frozenset(str(v).split()) if k in ("chdir", "rest", "scripts") else v for k, v in more.items()}
    return Runner(frozenset(sub.split()), frozenset(values.split()), frozenset(flags.split()),
                  **extra)  # type: ignore[arg-type]


_PY = "--python -p --with --with-editable --with-requirements --extra --group --only-group --package --env-file " \
      "--index --default-index --find-links -f --index-url --extra-index-url --python-preference --color " \
      "--config-file --cache-dir --project --directory --script -w"
_NODE = "--package -p -C --dir --filter -F --workspace -w --prefix --cwd --registry --userconfig"

RUNNERS: dict[str, Runner] = {
    "uv": _r("run", _PY, "--no-project --isolated --frozen --locked --no-sync --active --all-extras --no-dev "
                         "--dev -q --quiet -v --verbose --offline --no-cache -n --exact --module -m --no-config "
                         "--preview --native-tls", chdir="--directory"),
    "poetry": _r("run", "-C --directory -P --project", "-q --quiet -v -vv -vvv --verbose -n --no-interaction "
                 "--no-ansi --ansi --no-plugins --no-cache", chdir="-C --directory"),
    "pipenv": _r("run", "--python --site-packages", "-q --quiet -v --verbose"),
    "pdm": _r("run", "-p --project -L --lockfile -s --site-packages --venv", "-v --verbose -q --quiet "
              "--list --json -g --global"),
    "hatch": _r("run", "-e --env -p --project --data-dir --cache-dir", "-v --verbose -q --quiet"),
    "rye": _r("run", "--pyproject", "-v --verbose -q --quiet -l --list"),
    "pixi": _r("run", "-e --environment --manifest-path --frozen", "-v --verbose -q --quiet --locked"),
    "tox": _r("exec", "-e -c --conf --workdir --root", "-q -v --skip-pkg-install -r --recreate",
              until_dashdash=True),
    "conda": _r("run", "-n --name -p --prefix --cwd", "--live-stream --no-capture-output -v --debug-wrapper-scripts",
                chdir="--cwd"),
    "mamba": _r("run", "-n --name -p --prefix --cwd", "--live-stream --no-capture-output -v", chdir="--cwd"),
    "micromamba": _r("run", "-n --name -p --prefix -r --root-prefix --cwd", "-a --attach --clean-env -v",
                     chdir="--cwd"),
    "npm": _r("exec x", _NODE, "-y --yes --no -ws --workspaces --include-workspace-root", scripts="-c --call",
              chdir="--prefix"),
    "npx": _r("", _NODE, "-y --yes --no -q --quiet", scripts="-c --call"),
    "pnpm": _r("exec dlx", _NODE, "-r --recursive --parallel --shell-mode -c -s --silent", chdir="-C --dir"),
    "pnpx": _r("", _NODE, "-y --yes"),
    "yarn": _r("exec dlx", _NODE, "-q --quiet --silent", chdir="--cwd"),
    "bunx": _r("", _NODE, "--bun -b"),
    "bun": _r("x", _NODE, "--bun -b"),
    "bundle": _r("exec", "--gemfile", "--keep-file-descriptors"),
    "mise": _r("exec x", "-j --jobs -C --cd -E --env", "--raw -y --yes -q --quiet", scripts="-c --command",
               chdir="-C --cd", until_dashdash=True),
    "rtx": _r("exec x", "-j --jobs -C --cd", "--raw", scripts="-c --command", chdir="-C --cd", until_dashdash=True),
    "asdf": _r("exec"),
    "rbenv": _r("exec"),
    "pyenv": _r("exec"),
    "nodenv": _r("exec"),
    "volta": _r("run", "--node --npm --yarn --pnpm", "--bundled-npm --no-yarn -v --verbose --quiet"),
    "fnm": _r("exec", "--using", "--log-level", until_dashdash=True),
    "nvm": _r("exec run", "", "--silent", leading=1),
    "direnv": _r("exec", leading=1, chdir="<operand>"),
    "nix": _r("shell develop", "--expr --file -f --impure -i --keep -k --unset -u --override-input --arg --argstr",
              "--impure --ignore-environment", rest="-c --command"),
    "nix-shell": _r("", "-p --packages -A --attr -I --arg --argstr --keep -E --expr", "--pure -i",
                    scripts="--run --command"),
    "devbox": _r("run", "-c --config -e --env --env-file", "-q --quiet --pure"),
    "stack": _r("exec", "--package --cwd", "", chdir="--cwd", until_dashdash=True),
    "cabal": _r("exec", "", "", until_dashdash=True),
    "opam": _r("exec", "--switch", "", until_dashdash=True),
    "doppler": _r("run", "-p --project -c --config --token --mount --mount-format", "--preserve-env --fallback-only",
                  scripts="--command", until_dashdash=True),
    "op": _r("run", "--env-file --account", "--no-masking", until_dashdash=True),
    "dotenvx": _r("run", "-f --env-file -e --env", "-o --overload --quiet", until_dashdash=True),
    "dotenv": _r("run", "-f --file", "-o --override --no-override"),
    "infisical": _r("run", "--env --path --projectId --token", "--watch", scripts="--command", until_dashdash=True),
    "aws-vault": _r("exec", "-d --duration --region -t --mfa-token", "-n --no-session -j --json -s --server",
                    leading=1, until_dashdash=True),
    "pew": _r("in", leading=1),
    "toolbox": _r("run", "-c --container -r --release -d --distro"),
    "distrobox": _r("enter", "-n --name", "-T --no-tty", until_dashdash=True),
    "flatpak-spawn": _r("", "--directory --env", "--host --clear-env --watch-bus", chdir="--directory"),
    "chronic": _r("", "", "-e -v -ev"),
    "ifne": _r("", "", "-n"),
    "lckdo": _r("", "", "-w -W", leading=1),
    "sshpass": _r("", "-p -f -d -P", "-e -v"),
    "gosu": _r("", leading=1),
    "su-exec": _r("", leading=1),
    "setpriv": _r("", "--reuid --regid --groups --inh-caps --ambient-caps --bounding-set --securebits --selinux-label "
                  "--apparmor-profile --landlock-access --landlock-rule", "--clear-groups --init-groups "
                  "--keep-groups --nnp --no-new-privs --reset-env"),
    "tini": _r("", "-p -e", "-s -v -w -g -l"),
    "dumb-init": _r("", "-r --rewrite", "-c --single-child -v --verbose"),
    "ssh-agent": _r("", "-a -E -P -t", "-c -D -d -k -s"),
    "dbus-launch": _r("", "--config-file", "--sh-syntax --csh-syntax --auto-syntax --exit-with-session"),
    "retry": _r("", "-t --times -d --delay -u --until", "", until_dashdash=True),
    "nq": _r("", "", "-c -q"),
    "tsp": _r("", "-L -D -N -E -O", "-n -g -f"),
    "perf": _r("stat record trace", "-e --event -o --output -p --pid -F -c -r --repeat", "-a -g -q"),
    "heaptrack": _r("", "-o --output", "-d --debug"),
    "bwrap": _r("", "--bind --ro-bind --dev-bind --symlink --chdir --tmpfs --proc --dev --setenv --unsetenv "
                "--uid --gid --hostname --dir --file --remount-ro --bind-try --ro-bind-try --args --cap-add "
                "--cap-drop", "--unshare-all --unshare-net --unshare-user --share-net --die-with-parent "
                "--new-session --clearenv --as-pid-1", chdir="--chdir"),
    "schroot": _r("", "-c --chroot -u --user -d --directory", "-p --preserve-environment -q --quiet",
                  chdir="-d --directory", until_dashdash=True),
    "entr": _r("", "", "-a -c -d -n -p -r -z", scripts="-s"),
    "hyperfine": _r("", "-w --warmup -r --runs -m --min-runs -M --max-runs -p --prepare -c --cleanup -s --setup "
                    "-n --command-name --export-json --export-csv --export-markdown -S --shell -P --parameter-scan "
                    "-L --parameter-list --style -u --time-unit --output --input", "-i --ignore-failure -N",
                    each_a_script=True, scripts="-p --prepare -c --cleanup -s --setup"),
    "pee": _r("", "", "--ignore-sigpipe --ignore-write-errors", each_a_script=True),
    "tmux": _r("new-session new new-window neww split-window splitw respawn-pane respawnp respawn-window respawnw "
               "run-shell run", "-s -n -c -t -x -y -F -e -l -f -A", "-d -P -b -h -v -k -D -E -X", joined=True,
               chdir="-c"),
    "screen": _r("", "-S -c -e -h -p -t -L -Logfile -s -dmS -DmS", "-d -m -D -R -r -x -q -A -a -U -dm"),
    "scl": _r("enable", "", "", leading=1, joined=True),
    "coproc": _r(),
    "pipx": _r("run", "--spec --python --pip-args --index-url",
               "--no-cache --verbose -v --quiet -q --system-site-packages"),
    "corepack": _r(),
    "cpulimit": _r("", "-l --limit -p --pid -e --exe -c --cpu", "-z --lazy -i --include-children -v --verbose -q"),
    "eatmydata": _r(),
    "nocache": _r("", "-n", ""),
    "setarch": _r("", "", "-R -L -B -X -Z -3 -v --verbose --addr-no-randomize", leading=1),
    "linux32": _r("", "", "-R -L -B -X -Z -3 -v"),
    "linux64": _r("", "", "-R -L -B -X -Z -3 -v"),
    "systemd-inhibit": _r("", "--what --who --why --mode", "--list --no-pager --no-legend"),
    "fakechroot": _r("", "-l --lib -d --elfloader -e --environment -c --config-dir", "-s --use-system-libs"),
    "rlwrap": _r("", "-a -b -f -H -l -p -P -q -s -S -t -w -z -e -g -M -o -O -C", "-c -i -m -n -r -R -A -N -v"),
    "sem": _r("", "-j --jobs --id --semaphorename --st --semaphoretimeout", "--fg --bg -u --ungroup"),
    "watchexec": _r("", "-e --exts -w --watch -i --ignore -f --filter -d --debounce -s --signal --shell "
                    "--stop-signal --stop-timeout", "-c --clear -r --restart -p --postpone -n -N --notify -o "
                    "--on-busy-update", joined=True),
    "nodemon": _r("", "-w --watch -e --ext -i --ignore -d --delay --signal", "-q -V --verbose --legacy-watch -L",
                  scripts="-x --exec"),
}
RUNNERS["tmux"] = _r("new-session new new-window neww split-window splitw respawn-pane respawnp respawn-window "
                     "respawnw run-shell run send-keys send", "-s -n -c -t -x -y -F -e -l -f -A -N",
                     "-d -P -b -h -v -k -D -E -X -l -R -M", joined=True, chdir="-c")
RUNNERS["bun"] = _r("x run", _NODE, "--bun -b --silent --if-present")


@dataclass(slots=True)
class Unwrapped:
    """What a runner's words run: where each possible command starts, the folders it may run
    in (None when one is unknown), the scripts it holds (None: one only known at run time)."""

    starts: list[int] = field(default_factory=list)
    exact: bool = True
    folders: list[str | None] = field(default_factory=list)
    scripts: list[str | None] = field(default_factory=list)
    #: The words from where the joined script starts (tmux, scl), or None.
    joined_from: int | None = None


def _is_option(word: Word) -> bool:
    text = word.value or ""
    return word.literal and text.startswith("-") and len(text) > 1


def _text(word: Word) -> str | None:
    return word.value


def runner_commands(name: str, words: list[Word]) -> Unwrapped | None:
    """How `words` (the runner's first) read, or None when they run no command (``uv sync``)."""
    spec = RUNNERS[name]
    i = 1
    out = Unwrapped()
    if spec.subcommands:  # the runner's own options, then the subcommand
        while i < len(words) and _is_option(words[i]):
            option, eq, value = (words[i].value or "").partition("=")
            if option in spec.chdir:  # uv --directory / run …
                out.folders.append(value if eq else _text(words[i + 1]) if i + 1 < len(words) else None)
            i += 2 if not eq and option in spec.takes_value else 1
        if i >= len(words) or not words[i].literal or words[i].text not in spec.subcommands:
            return None
        i += 1
    leading = spec.leading
    while i < len(words):
        word = words[i]
        text = word.value or ""
        if not _is_option(word):
            if leading:
                leading -= 1
                if "<operand>" in spec.chdir:
                    out.folders.append(word.value)
                i += 1
                continue
            break
        if text == "--":
            out.starts = [i + 1] if i + 1 < len(words) else []
            return _dashdash(out, spec, i + 1)
        option, eq, value = text.partition("=")
        given: str | None = value if eq else None
        if option in spec.rest:
            out.starts = [i + 1] if i + 1 < len(words) else []
            return out
        if option in spec.scripts:
            held = given if eq else (_text(words[i + 1]) if i + 1 < len(words) else None)
            out.scripts.append(held)
            if not spec.each_a_script:
                return out
            i += 1 if eq else 2
            continue
        if option in spec.takes_value or (not option.startswith("--") and option[:2] in spec.takes_value
                                          and len(option) > 2):
            if not eq and option in spec.takes_value:
                given = _text(words[i + 1]) if i + 1 < len(words) else None
                i += 1
            elif not eq:
                given = option[2:]
                option = option[:2]
            if option in spec.chdir:
                out.folders.append(given)
        elif option not in spec.flags:
            out.exact = False  # it may take a value: the command may start at any later word
        i += 1
    if spec.rest:  # nix shell PKG… -c CMD: without -c it starts a shell of its own, read elsewhere
        found = next((k for k in range(i, len(words)) if words[k].literal
                      and words[k].text.partition("=")[0] in spec.rest), None)
        out.starts = [found + 1] if found is not None and found + 1 < len(words) else []
        return out
    if spec.until_dashdash:  # the operands are tools (mise exec node@20 -c '…' / -- …)
        for k in range(i, len(words)):
            if words[k].literal and words[k].text == "--":
                break
            if words[k].literal and words[k].text.partition("=")[0] in spec.scripts:
                attached = "=" in words[k].text
                out.scripts.append(words[k].text.partition("=")[2] if attached
                                   else _text(words[k + 1]) if k + 1 < len(words) else None)
                return out
        dashdash = next((k for k in range(i, len(words)) if words[k].literal and words[k].text == "--"), None)
        if dashdash is not None:
            out.starts = [dashdash + 1] if dashdash + 1 < len(words) else []
            return _dashdash(out, spec, dashdash + 1)
        out.exact = False
    if spec.each_a_script:
        out.scripts.extend(_text(w) for w in words[i:] if not _is_option(w))
        return out
    if spec.joined:
        out.joined_from = i if i < len(words) else None
        return out
    if out.exact:
        out.starts = [i] if i < len(words) else []
    else:
        out.starts = [k for k in range(i, len(words)) if not _is_option(words[k])][:MAX_STARTS]
    return out


def _dashdash(out: Unwrapped, spec: Runner, start: int) -> Unwrapped:
    if spec.joined:
        out.starts, out.joined_from = [], start
    return out
