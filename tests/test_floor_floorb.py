"""The floor's remaining bypass families (issue 39, part 3; docs/approvals.md, "The floor").

A reviewer found four families still allowed under `--policy allow`, and one false positive:
the folder given beside the command, runners that run another command, commands carried in an
option, and, the other way, a delete in a temporary folder the command proves is the user's.
Each family has named cases (the reviewer's) and variants drawn at random: paths, quoting,
option spellings, whitespace.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev.approval.floor import floor_hits
from fabric_jev.approval.rules import CallView, RuleContext
from tests.test_floor import _REFS, CWD, HOME

UNREADABLE = "unreadable-command"


def _context(tmpdir: str | None = None) -> RuleContext:
    """No symlinks to resolve, /tmp and /tmp/u1000 as temporary roots, nothing there yet."""
    return RuleContext(CWD, HOME, frozenset(), None, ("/tmp", "/var/tmp", "/tmp/u1000"), lambda path: None, 1000,
                       tmpdir)


def _hits(arguments: dict[str, Any], ref: str = "shell.exec", *, tmpdir: str | None = "",
          risk: str = "execute") -> list[str]:
    return [e.id for e in floor_hits(CallView(ref, risk, arguments, _context(tmpdir)))]


#: Destructive commands whose target is relative, and spellings of places outside the tree.
_RELATIVE = ["rm -rf *", "rm -rf .", "rm -r --force ./*", "chmod -R 777 .", "find . -delete", "rm -rf etc",
             "rm -fr ./.config"]
_OUTSIDE = ["/", "/etc", "//etc", "/usr/../etc", "~", "/home/user/..", "/var/lib", "~/.ssh/..", "/work"]
_FOLDER_KEYS = ["cwd", "workdir", "dir", "directory", "Cwd", "working-directory", "workingDirectory", "CWD"]
_SPACES = [" ", "  ", "\t", " \t "]


def _spaced(draw: Any, command: str) -> str:
    return draw(st.sampled_from(_SPACES)).join(command.split(" "))


# ---------------------------------------------------------------- 1. the folder beside the command


@pytest.mark.parametrize("arguments", [
    {"cmd": "rm -rf *", "cwd": "/"},
    {"command": "rm -rf etc", "workdir": "/"},
    {"cmd": ["rm", "-rf", "."], "dir": "/etc"},
    {"cmd": "rm -rf ./*", "options": {"cwd": "/home/user"}},
    {"program": "rm", "args": ["-rf", "lib"], "directory": "/usr"},
    {"commands": ["cd /", "rm -rf *"]},
    {"cmd": "rm -rf *", "root": "/"},
    {"cmd": "rm -rf ./*", "workspace": "~"},
])
def test_a_commands_relative_paths_point_into_the_folder_beside_it(arguments: dict[str, Any]) -> None:
    assert "recursive-delete-outside-tree" in _hits(arguments)


@pytest.mark.parametrize("arguments", [{"cmd": "tar -xf a.tar", "cwd": "/etc"}, {"cmd": "tar xzf a.tgz", "dir": "/usr"},
                                       {"cmd": "unzip a.zip", "workdir": "/usr/lib"}, {"cmd": "7z x a.7z", "cwd": "/opt"},
                                       {"cmd": "cd /etc && tar -xf /tmp/a.tar"}])
def test_an_archive_extracted_where_it_runs_writes_that_folder(arguments: dict[str, Any]) -> None:
    assert "system-files" in _hits(arguments)
    inside = {k: "." if k in ("cwd", "dir", "workdir") else v.replace("cd /etc", "cd build") for k, v in
              arguments.items()}
    assert _hits(inside) == [], inside
    assert _hits({"cmd": "unzip -l a.zip", "cwd": "/usr"}) == []
    assert _hits({"cmd": "tar -tf a.tar", "cwd": "/etc"}) == []


@pytest.mark.parametrize("cmd", ["cd - && rm -rf *", "cd /tmp; cd -; rm -rf ./*", "popd && rm -rf *",
                                 "pushd && rm -rf *", "pushd +1; rm -rf ./*"])
def test_a_folder_change_back_to_an_unknown_folder_makes_paths_unknown(cmd: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": cmd})


def test_cd_alone_goes_home_and_without_a_home_is_unknown() -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": "cd && rm -rf ./*"})
    context = RuleContext(CWD, "", frozenset(), None, ("/tmp",), lambda path: None, 1000, "")
    assert floor_hits(CallView("shell.exec", "execute", {"cmd": "cd; rm -rf build"}, context))


@pytest.mark.parametrize("folder", ["$DEPLOY_ROOT", "${ROOT}/x", "$(pwd)/..", 3, ["a", "b"], {"path": "/"}])
def test_a_folder_that_cannot_be_known_makes_relative_paths_unknown(folder: Any) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": "rm -rf build", "cwd": folder})


def test_the_tree_stays_the_hosts_working_directory() -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": "rm -rf build", "cwd": "/"})
    assert _hits({"cmd": "rm -rf build", "cwd": "/work/project/web"}) == []
    assert _hits({"cmd": "rm -rf build", "cwd": "web/../api"}) == []
    assert _hits({"commands": ["cd build", "rm -rf out"]}) == []
    assert _hits({"cmd": "rm -rf build", "root": "./web"}) == []
    assert _hits({"cmd": "ls -la", "cwd": "/etc"}) == []  # the folder alone is not a write


def test_paths_given_to_an_execute_capability_get_the_system_path_check() -> None:
    assert "system-files" in _hits({"program": "truncate", "args": ["-s", "0"], "file": "/etc/passwd"},
                                   "process.spawn")
    assert "system-files" in _hits({"cmd": "shred -u", "target": "/usr/bin/sudo"}, "process.spawn")
    assert _hits({"program": "truncate", "args": ["-s", "0"], "file": "out/log.txt"}, "process.spawn") == []
    assert _hits({"program": "cp", "src": "/etc/hosts", "dest": "./hosts"}, "process.spawn") == []  # a read


@st.composite
def folder_calls(draw: Any) -> dict[str, Any]:
    command = draw(st.sampled_from(_RELATIVE))
    folder = draw(st.sampled_from(_OUTSIDE)) + draw(st.sampled_from(["", "/"]))
    key = draw(st.sampled_from(_FOLDER_KEYS))
    style = draw(st.sampled_from(["string", "argv", "program", "nested"]))
    if style == "argv":
        return {"cmd": command.split(" "), key: folder}
    if style == "program":
        program, *args = command.split(" ")
        return {"program": program, "args": args, key: folder}
    if style == "nested":
        return {"options": {"cmd": _spaced(draw, command), key: folder}}
    return {"cmd": _spaced(draw, command), key: folder}


@given(folder_calls(), st.sampled_from(_REFS))
def test_variants_of_a_folder_outside_the_tree_are_stopped(arguments: dict[str, Any], ref: str) -> None:
    assert _hits(arguments, ref), arguments


@given(st.sampled_from(["rm -rf build", "rm -rf ./dist/*", "find . -name '*.o' -delete", "chmod -R u+w out"]),
       st.sampled_from(_FOLDER_KEYS), st.sampled_from([".", "./web", "/work/project/web", "web/../api", "web/"]))
def test_variants_of_a_folder_inside_the_tree_are_not_stopped(command: str, key: str, folder: str) -> None:
    assert _hits({"cmd": command, key: folder}) == []


# ---------------------------------------------------------------- 2. runners that run another command

_RUNNERS = ["uv run", "poetry run", "pipenv run", "npx", "pnpm exec", "yarn exec", "bunx", "pdm run", "hatch run",
            "conda run -n x", "mise exec --", "direnv exec .", "nix shell nixpkgs#hello -c", "flock /tmp/l",
            "chronic", "unbuffer", "caffeinate", "systemd-run", "npm exec --", "pnpm dlx", "rye run",
            "pixi run", "bundle exec", "mamba run -n base", "micromamba run -p /opt/env", "mise x node@20 --",
            "doppler run --", "aws-vault exec prod --", "dotenvx run --", "op run --", "sshpass -p pw",
            "gosu root", "tini --", "dumb-init", "nice -n 5 uv run", "sudo poetry run", "uvx", "pnpx", "coproc",
            "eatmydata", "pipx run --spec x", "setarch x86_64", "cpulimit -l 50 --", "systemd-inhibit",
            "rlwrap", "sem -j 2", "nocache", "linux32", "fakechroot", "bun run", "bun x"]


@pytest.mark.parametrize("runner", _RUNNERS)
def test_a_runner_runs_the_command_after_it(runner: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": f"{runner} rm -rf /"}), runner


@pytest.mark.parametrize("cmd", ["nix-shell -p hello --run 'rm -rf /'", "npm exec -c 'rm -rf /'",
                                 "mise exec node@20 -c 'rm -rf ~'", "tmux new-session -d 'rm -rf /'",
                                 "hyperfine 'rm -rf ~'", "pee cat 'rm -rf /'", "doppler run --command 'rm -rf /'"])
def test_a_script_a_runner_holds_is_read(cmd: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": cmd})


@pytest.mark.parametrize("cmd", ["uv --directory / run rm -rf ./*", "uv run --directory=/ rm -rf *",
                                 "poetry -C / run rm -rf etc", "conda run -n x --cwd / rm -rf ./*",
                                 "direnv exec / rm -rf ./*"])
def test_a_runners_folder_option_is_where_the_command_runs(cmd: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": cmd})


#: Runners after which an option of theirs may come before the command.
_TAKE_OPTIONS = frozenset({"uv run", "poetry run", "pipenv run", "npx", "pnpm exec", "yarn exec", "bunx", "pdm run",
                           "hatch run", "conda run -n x", "rye run", "pixi run", "bundle exec", "mamba run -n base",
                           "pnpm dlx", "uvx", "pnpx", "systemd-run", "chronic", "dumb-init"})
_UNKNOWN_OPTIONS = ["", "--with requests ", "--frobnicate x ", "--env-file .env ", "-q ", "--python 3.12 "]
_DESTRUCTIVE = ["rm -rf {t}", "chmod -R 777 {t}", "rm -r --force {t}", "find {t} -delete"]
_TARGETS = ["/", "/etc", "~", "$HOME", "/usr/../etc", "/var/lib", "~/.config"]


@given(st.sampled_from(_RUNNERS), st.sampled_from(_UNKNOWN_OPTIONS), st.sampled_from(_DESTRUCTIVE),
       st.sampled_from(_TARGETS), st.data())
def test_variants_of_a_runner_are_stopped(runner: str, option: str, core: str, target: str, data: Any) -> None:
    if runner.endswith("--"):
        runner = runner[:-2] + option + "--"
    elif runner in _TAKE_OPTIONS:
        runner = runner + " " + option.strip()
    command = f"{runner} {core.format(t=target)}"
    assert _hits({"cmd": _spaced(data.draw, command)}), command


@given(st.sampled_from(_RUNNERS), st.sampled_from(["pytest -q tests/", "make test", "node -v", "python -m app",
                                                    "eslint --fix src", "cargo build --release"]))
def test_a_routine_command_behind_a_runner_is_not_stopped(runner: str, command: str) -> None:
    assert _hits({"cmd": f"{runner} {command}"}) == [], runner


# ---------------------------------------------------------------- 3. a command carried in an option


@pytest.mark.parametrize("cmd", [
    "tar --to-command='rm -rf /' -xf a.tar",
    "tar -xf a.tar --to-command 'rm -rf /'",
    "tar --checkpoint=1 --checkpoint-action=exec='rm -rf /' -cf a.tar src",
    "tar -I 'rm -rf /' -xf a.tar",
    "ssh -o ProxyCommand='rm -rf /' host",
    "scp -S 'rm -rf ~' a host:b",
    "rsync -e 'rm -rf /' a host:b",
    "rsync --rsh='rm -rf /' a host:b",
    "sed '1e rm -rf /' notes.txt",
    "sed -n -e p -e '$e rm -rf ~' notes.txt",
    "git -c core.sshCommand='rm -rf /' fetch",
    "git -c alias.x='!rm -rf /' x",
    "GIT_SSH_COMMAND='rm -rf /' git fetch",
    "git clone --upload-pack='rm -rf /' host:repo",
    "git rebase -x 'rm -rf ~' main",
    "git submodule foreach 'rm -rf /'",
    "find . -exec rm -rf / \\;",
    "find . -execdir rm -rf / \\;",
    "find . -ok rm -rf / \\;",
    "less '+!rm -rf /' log.txt",
    "vim '+!rm -rf /' notes.txt",
    "zip -T -TT 'rm -rf /' a.zip src",
    "zip a.zip src -T --unzip-command='rm -rf /'",
    "socat - EXEC:'rm -rf /'",
    "ncat -l 8080 -c 'rm -rf /'",
    "man -P 'rm -rf /' ls",
    "rsync -avze 'rm -rf /' a host:b",
    "git config alias.x '!rm -rf /' && git x",
    "git config --global core.sshCommand 'rm -rf /'",
    "git filter-branch --tree-filter 'rm -rf ~' HEAD",
    "fd -e py -x rm -rf /",
    "rg --pre 'rm -rf /' foo",
    "ex -c '!rm -rf /' notes.txt",
    "tmux send-keys 'rm -rf /' Enter",
])
def test_a_command_carried_in_an_option_is_read_as_a_command(cmd: str) -> None:
    assert "recursive-delete-outside-tree" in _hits({"cmd": cmd}), cmd


@pytest.mark.parametrize("cmd", ["sed 's/x/y/e' notes.txt", "sed -e 'p;s/a/b/ge' notes.txt", "sed e notes.txt",
                                 "sed -n '/x/{e\n}' notes.txt", "sed 's/x/y' notes.txt", "sed 'k' notes.txt",
                                 "sed \"$SCRIPT\" notes.txt", "vim -c 'call system(\"x\")' notes.txt",
                                 "vim '+call system(\"x\")' notes.txt", "git -c core.hooksPath=hooks commit -m x",
                                 "GIT_CONFIG_PARAMETERS=\"'core.sshCommand=x'\" git fetch",
                                 "git --config-env=core.sshCommand=CMD fetch", "view -c 'call system(1)' f"])
def test_a_carried_command_the_floor_cannot_read_fails_closed(cmd: str) -> None:
    assert UNREADABLE in _hits({"cmd": cmd}) or "inline-code" in _hits({"cmd": cmd}), cmd


def test_seds_w_and_r_are_the_write_and_the_read_they_are() -> None:
    assert "system-files" in _hits({"cmd": "sed -n 'w /etc/passwd' notes.txt"})
    assert "system-files" in _hits({"cmd": "sed 's/a/b/w /etc/hosts' notes.txt"})
    assert "credential-files" in _hits({"cmd": "sed 'r ~/.ssh/id_rsa' notes.txt"})
    assert _hits({"cmd": "sed -n '/x/w out.txt' notes.txt"}) == []


def test_awk_and_vim_carriers_stay_inline_code() -> None:
    assert "inline-code" in _hits({"cmd": "awk 'BEGIN{system(\"rm -rf /\")}'"})
    assert "inline-code" in _hits({"cmd": "vim -c '!rm -rf /' notes.txt"})


#: (program before, option spellings taking the script as {s}, program after).
_CARRIERS = [
    ("tar", ["--to-command={s}", "--to-command {s}", "--to-comm={s}", "--use-compress-program={s}", "-I {s}",
             "--checkpoint-action=exec={s}", "--rsh-command {s}", "--info-script={s}"], "-xf a.tar"),
    ("ssh", ["-o ProxyCommand={s}", "-oProxyCommand={s}", "-o proxycommand={s}", "-o LocalCommand={s}",
             "-o KnownHostsCommand={s}"], "host"),
    ("rsync", ["-e {s}", "--rsh={s}", "--rsh {s}", "--rsync-path={s}"], "a host:b"),
    ("zip", ["-T -TT {s}", "-T --unzip-command={s}", "-T --unzip-command {s}"], "a.zip src"),
    ("git", ["-c core.sshCommand={s} fetch", "-c core.pager={s} log", "clone -u {s} host:r",
             "fetch --upload-pack={s}", "push --receive-pack {s} origin", "rebase --exec {s} main",
             "submodule foreach {s}"], ""),
    ("scp", ["-S {s}"], "a host:b"),
]
_SCRIPTS = ["rm -rf /", "rm -rf ~", "chmod -R 777 /etc", "dd if=/dev/zero of=/dev/sda", "rm -rf \"$HOME\"",
            "sh -c 'rm -rf /'", "crontab -r", "python3 -c 'import os'"]


@given(st.sampled_from(_CARRIERS), st.sampled_from(_SCRIPTS), st.data())
def test_variants_of_a_carried_command_are_stopped(carrier: tuple[str, list[str], str], script: str,
                                                   data: Any) -> None:
    program, spellings, after = carrier
    spelling = data.draw(st.sampled_from(spellings))
    quoted = data.draw(st.sampled_from([shlex.quote(script), '"' + script.replace('"', '\\"') + '"']))
    if spelling.endswith("={s}") and data.draw(st.booleans()):  # the quote opened at the option
        spelling = spelling.replace("={s}", "{s}")
        option = spelling.split(" ")[-1].format(s="")
        quoted = shlex.quote(option + "=" + script)
        spelling = " ".join([*spelling.split(" ")[:-1], "{s}"])
    wrapper = data.draw(st.sampled_from(["", "sudo ", "env X=1 ", "nice -n 5 "]))
    command = f"{wrapper}{program} {spelling.format(s=quoted)} {after}".strip()
    assert _hits({"cmd": command}, data.draw(st.sampled_from(_REFS))), command


@given(st.sampled_from(["/", "|", "#", ",", "@"]), st.sampled_from(["g", "p", "2", "gI", "", "2g", "w out.txt"]),
       st.sampled_from(["", "1", "$", "/^#/", "1,5", "/a/,/b/", "0,/x/", "$!", "1~2"]),
       st.sampled_from(["", "-n ", "-E ", "-i ", "-i.bak ", "--posix "]))
def test_routine_sed_scripts_are_not_stopped(delimiter: str, flags: str, address: str, options: str) -> None:
    script = f"{address}s{delimiter}foo{delimiter}bar{delimiter}{flags}"
    assert _hits({"cmd": f"sed {options}{shlex.quote(script)} notes.txt"}) == [], script
    assert _hits({"cmd": f"sed {options}-e {shlex.quote(script)} -e '/^$/d' notes.txt"}) == [], script


@given(st.sampled_from(["s/x/y/e", "s|x|y|ge", "e", "1e", "$e", "/x/e", "s/x/y/2e"]),
       st.sampled_from(["", "-n ", "-E "]), st.booleans())
def test_variants_of_sed_running_its_text_fail_closed(script: str, options: str, expression: bool) -> None:
    where = f"-e {shlex.quote(script)}" if expression else shlex.quote(script)
    assert UNREADABLE in _hits({"cmd": f"sed {options}{where} notes.txt"}), script


@pytest.mark.parametrize("cmd", ["tar -xzf a.tgz -C build", "tar -I zstd -cf a.tar.zst src",
                                 "ssh -o StrictHostKeyChecking=no host uptime", "ssh -o ProxyCommand=none host",
                                 "ssh -o 'ProxyCommand ssh -W %h:%p bastion' host",
                                 "rsync -av -e 'ssh -p 2222' src host:dst", "zip -r out.zip src", "zip -T a.zip",
                                 "git rebase -x 'make test' main", "git push -u origin feature",
                                 "git submodule foreach git pull", "less +G log.txt", "less +/ERROR log.txt",
                                 "vim +10 notes.txt", "man -P cat ls", "sed -f script.sed notes.txt",
                                 "sed --sandbox 's/x/y/e' notes.txt", "socat TCP-LISTEN:8080 TCP:localhost:80",
                                 "git config user.name me", "git config --global alias.st status",
                                 "fd -e py -x wc -l", "rsync -avz src host:dst", "sed -i '/^$/d' notes.txt",
                                 "sed -i -e 's/a/b/' -e '/^#/d' notes.txt", "rg --pre-glob '*.gz' foo"])
def test_routine_commands_with_such_options_are_not_stopped(cmd: str) -> None:
    assert _hits({"cmd": cmd}) == [], cmd


# ---------------------------------------------------------------- 4. a temporary folder the user owns


@pytest.mark.parametrize("cmd", ['rm -rf "$TMPDIR/build-cache"', "rm -rf $TMPDIR/build-cache",
                                 'rm -rf "${TMPDIR}/x"', "rm -rf ${TMPDIR:-/tmp}/x", 'rm -rf "$(mktemp -d)"',
                                 'd=$(mktemp -d) && rm -rf "$d"', "rm -rf /tmp/x-cache"])
def test_a_delete_in_a_temporary_folder_the_user_owns_is_not_stopped(cmd: str) -> None:
    assert _hits({"cmd": cmd}, tmpdir="/tmp/u1000") == [], cmd


def test_tmpdir_is_known_only_as_the_host_has_it() -> None:
    assert _hits({"cmd": "rm -rf ${TMPDIR:-/tmp}/x"}, tmpdir="") == []  # not set: the default
    assert _hits({"cmd": "rm -rf ${TMPDIR-/tmp}/x"}, tmpdir="") == []
    assert _hits({"cmd": 'rm -rf "$TMPDIR/x"'}, tmpdir="")  # not set: "/x"
    assert _hits({"cmd": "rm -rf ${TMPDIR:-/tmp}/x"}, tmpdir=None)  # unknown
    assert _hits({"cmd": 'rm -rf "$TMPDIR/x"'}, tmpdir="/home/user")  # not a temporary root


@pytest.mark.parametrize("cmd", ['export TMPDIR=/; rm -rf "$TMPDIR/etc"', 'rm -rf "${TMPDIR:=/}/etc"',
                                 'TMPDIR=/ sh -c \'rm -rf "$TMPDIR/etc"\'', 'read TMPDIR; rm -rf "$TMPDIR/x"',
                                 'rm -rf "$(mktemp -d)/.."', 'rm -rf "$(mktemp -d)"/../*',
                                 'rm -rf "$(mktemp -d; echo /etc)"', 'rm -rf "$(mktemp -u)"',
                                 'mktemp() { echo /etc; }; rm -rf "$(mktemp -d)"',
                                 'alias mktemp="echo /"; rm -rf "$(mktemp -d)"',
                                 'd=$(mktemp -d); d=/etc; rm -rf "$d"', 'd=$(mktemp -d) && rm -rf "${d%/*}"',
                                 'true || d=$(mktemp -d); rm -rf "$d"', 'a && d=$(mktemp -d); rm -rf "$d"',
                                 'rm -rf "$d"; d=$(mktemp -d)', 'd=$(mktemp -d) && read d && rm -rf "$d"',
                                 'for d in /etc; do :; done; d=$(mktemp -d); rm -rf "$d"',
                                 'd=$(mktemp -d tmp.XXXX); cd /; rm -rf "$d"',
                                 'd=$(mktemp -d) && rm -rf "$d/.."'])
def test_a_temporary_path_that_is_not_provably_the_users_is_stopped(cmd: str) -> None:
    assert _hits({"cmd": cmd}, tmpdir="/tmp/u1000"), cmd


@pytest.mark.parametrize("cmd", ['tmp=$(mktemp -d -t ci-XXXX); trap \'rm -rf "$tmp"\' EXIT; make',
                                 'd=$(mktemp -d) && bash -c "rm -rf $d"', 'd=$(mktemp -d); eval \'rm -rf "$d"\''])
def test_a_script_run_later_in_the_same_shell_sees_the_fresh_variable(cmd: str) -> None:
    assert _hits({"cmd": cmd}, tmpdir="/tmp/u1000") == [], cmd


@pytest.mark.parametrize("cmd", ['trap \'rm -rf "$tmp"\' EXIT; tmp=$(mktemp -d)',
                                 'd=$(mktemp -d); trap \'d=/etc; rm -rf "$d"\' EXIT',
                                 'd=$(mktemp -d); trap \'rm -rf "${d%/*}"\' EXIT',
                                 'd=$(mktemp -d); sh -c \'rm -rf "$d"\'', 'd=$(mktemp -d); ssh host "rm -rf $d"',
                                 'true || d=$(mktemp -d); trap \'rm -rf "$d"\' EXIT'])
def test_a_nested_script_that_cannot_see_the_fresh_variable_is_stopped(cmd: str) -> None:
    assert _hits({"cmd": cmd}, tmpdir="/tmp/u1000"), cmd


def test_a_call_whose_other_command_sets_tmpdir_proves_nothing() -> None:
    assert _hits({"commands": ["export TMPDIR=/", 'rm -rf "$TMPDIR/etc"']}, tmpdir="/tmp/u1000")
    assert _hits({"commands": ["mktemp() { echo /; }", 'rm -rf "$(mktemp -d)"']}, tmpdir="/tmp/u1000")


def test_unquoted_mktemp_counts_only_when_tmpdir_is_one_word() -> None:
    assert _hits({"cmd": "rm -rf $(mktemp -d)"}, tmpdir="/tmp/u1000") == []
    assert _hits({"cmd": "rm -rf $(mktemp -d)"}, tmpdir="/tmp/a b")
    assert _hits({"cmd": 'rm -rf "$(mktemp -d)"'}, tmpdir="/tmp/a b") == []


_NAMES = ["d", "tmp", "WORK_DIR", "out"]
_MKTEMPS = ["mktemp -d", "mktemp -d -t build.XXXXXX", "mktemp -dt x.XXXX", "mktemp -d -p /tmp",
            "mktemp --directory", "mktemp -d /tmp/ci.XXXXXXXX", "mktemp -q -d", "mktemp"]
_MIDDLES = ["", 'cd "{v}"', "make", 'cp -r dist "{v}/"', 'ls "{v}"', 'tar -xzf a.tgz -C "{v}"']


@st.composite
def fresh_scripts(draw: Any) -> str:
    name = draw(st.sampled_from(_NAMES))
    made = draw(st.sampled_from(_MKTEMPS))
    value = draw(st.sampled_from([f"$({made})", f'"$({made})"']))
    declared = draw(st.sampled_from(["", "local ", "declare "]))
    use = draw(st.sampled_from([f'"${name}"', f'"${{{name}}}"', f"${name}"]))
    join = draw(st.sampled_from([" && ", "; ", "\n"]))
    middle = draw(st.sampled_from(_MIDDLES)).format(v="$" + name)
    parts = [f"{declared}{name}={value}", *([middle] if middle else []), f"rm -rf {use}"]
    return join.join(parts)


@given(fresh_scripts(), st.sampled_from(["", "/tmp/u1000"]))
def test_variants_of_a_delete_of_what_mktemp_made_are_not_stopped(script: str, tmpdir: str) -> None:
    assert _hits({"cmd": script}, tmpdir=tmpdir) == [], script


@given(fresh_scripts(), st.sampled_from(['{v}="/etc"', "read {v}", "unset {v}", "for {v} in /etc; do :; done",
                                         "{v}=$(mktemp -d)"]), st.booleans())
def test_variants_that_change_the_variable_are_stopped(script: str, change: str, before_delete: bool) -> None:
    name = script.split("=", 1)[0].split(" ")[-1]
    head, _, tail = script.rpartition("rm -rf ")
    changed = change.format(v=name)
    script = f"{head}{changed}; rm -rf {tail}" if before_delete else f"{changed}; {script}"
    if not before_delete and changed.startswith(name + "=$("):
        changed = f'{name}="/etc"'
        script = f"rm -rf {tail}; {head}{changed}"  # used before it is assigned
    assert _hits({"cmd": script}, tmpdir="/tmp/u1000"), script
