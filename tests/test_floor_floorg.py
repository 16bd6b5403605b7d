"""The floor reads git as git does (issue 39, a red team's round on main).

1. a long option shortened to a unique prefix (``git reset --har``, ``git push --mirr``);
2. git commands with the effect of the ones the floor asks about (``git branch -df``,
   ``git checkout -f``, ``git update-ref -d``, ``git read-tree -u``, ``git worktree remove -f``);
3. git settings whose value is a command (``git -c pager.status='…' status``, textconv, filters);
4. a container's host mount attached to ``-v`` (``-v$HOME:/h``, ``-itv/:/h``), and
   ``docker-compose``/``podman-compose`` as docker;
5. rsync removing its sources or deleting at a destination outside the tree or on another host;
6. a glob that may match a credential path (``cat ~/.ss?/id_rsa``) counts as that path;
7. a write to git's hooks or config (a later routine git command runs them) is a floor entry.

Each has named tests that failed before its fix, variants drawn at random, and the labelled rows
of tests/data/floor_actions.jsonl (families below), run through a real host.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric_jev.approval.floor import floor_hits
from fabric_jev.approval.git_settings import runs_command
from fabric_jev.approval.rules import CallView, RuleContext
from tests.floor_families import run_family_under_allow
from tests.test_floor import CWD, HOME, ROWS

#: This branch's families of the labelled set, and the entry each destructive row must hit
#: (None: any entry).
FAMILIES: dict[str, str | None] = {
    "git-option-prefix": None,
    "git-discard-by-another-command": "git-discard-work",
    "git-setting-runs-command": "recursive-delete-outside-tree",
    "container-mount-spellings": "container-mounts-host",
    "sync-deletes": "sync-deletes",
    "credential-glob": "credential-files",
    "write-git-hooks-or-config": "git-hooks-and-config",
}


def _hits(arguments: Any, ref: str = "shell.exec", risk: str = "execute") -> list[str]:
    if isinstance(arguments, str):
        arguments = {"cmd": arguments}
    return [e.id for e in floor_hits(CallView(ref, risk, arguments, RuleContext.here(CWD, HOME)))]


# ---------------------------------------------------------------- 1. long options by unique prefix


@pytest.mark.parametrize(("cmd", "entry"), [
    ("git reset --har HEAD~3", "git-discard-work"), ("git clean --forc -d", "git-discard-work"),
    ("git push --del origin main", "git-force-push"), ("git push --mirr", "git-force-push"),
    ("git push --forc", "git-force-push"), ("git push --force-with origin main", "git-force-push"),
])
def test_a_shortened_long_option_is_the_option_it_stands_for(cmd: str, entry: str) -> None:
    assert entry in _hits(cmd)


@pytest.mark.parametrize("cmd", ["git push origin main", "git push --follow-tags", "git push --tags",
                                 "git clean -n", "git clean --dry-run", "git reset --soft HEAD~1"])
def test_routine_git_options_pass(cmd: str) -> None:
    assert _hits(cmd) == []


@given(st.sampled_from([("push", "--force"), ("push", "--mirror"), ("push", "--delete"), ("reset", "--hard"),
                        ("clean", "--force"), ("push", "--force-with-lease")]),
       st.data(), st.sampled_from(["", "-C sub ", "-c color.ui=never "]))
def test_variants_every_unique_prefix_of_a_destructive_option_asks(pair: tuple[str, str], data: st.DataObject,
                                                                    globals_: str) -> None:
    sub, option = pair
    cut = data.draw(st.integers(min_value=3, max_value=len(option)))
    assert _hits(f"git {globals_}{sub} {option[:cut]} origin main") != []


# ---------------------------------------------------------------- 2. other commands that discard work


@pytest.mark.parametrize("cmd", [
    "git branch -df x", "git branch --delete -f x", "git branch --del --forc x", "git checkout -f main",
    "git switch --discard-changes main", "git switch -f main", "git checkout HEAD~5 -- src/",
    "git checkout HEAD~5 src/", "git update-ref -d refs/heads/main", "git read-tree -u --reset HEAD",
    "git worktree remove --force ../x", "git worktree remove -f ../x", "git checkout -- src/",
])
def test_a_command_with_the_effect_of_discarding_work_asks(cmd: str) -> None:
    assert "git-discard-work" in _hits(cmd)


@pytest.mark.parametrize("cmd", [
    "git branch -d merged", "git checkout main", "git checkout -- README.md", "git checkout -b new origin/main",
    "git switch -c feature", "git worktree remove ../x", "git read-tree HEAD", "git restore README.md",
])
def test_routine_git_commands_pass(cmd: str) -> None:
    """`git checkout -- FILE` restores named files from the index: routine (docs/approvals.md)."""
    assert _hits(cmd) == []


@given(st.permutations(["-d", "-f", "NAME"]), st.sampled_from(["-d", "--delete", "--del", "--de"]),
       st.sampled_from(["-f", "--force", "--forc", "--fo"]))
def test_variants_a_forced_branch_delete_asks_however_spelt(order: list[str], delete: str, force: str) -> None:
    words = [delete if w == "-d" else force if w == "-f" else "feature" for w in order]
    assert "git-discard-work" in _hits("git branch " + " ".join(words))


# ---------------------------------------------------------------- 3. settings that run a command


_SETTINGS = ["pager.status", "core.askpass", "gpg.program", "gpg.ssh.program", "gpg.x509.program", "core.pager",
             "core.editor", "sequence.editor", "diff.external", "diff.txt.textconv", "diff.pdf.command",
             "filter.lfs.clean", "filter.lfs.smudge", "filter.lfs.process", "core.fsmonitor",
             "uploadpack.packObjectsHook", "merge.ours.driver", "credential.https://x.example.helper"]


@pytest.mark.parametrize("key", _SETTINGS)
def test_a_git_setting_that_runs_a_command_is_read_as_one(key: str) -> None:
    assert "recursive-delete-outside-tree" in _hits(f"git -c {key}='rm -rf ~' status")
    assert "recursive-delete-outside-tree" in _hits(f"git config {key} 'rm -rf ~'")


def test_a_credential_helper_with_a_bang_is_a_command() -> None:
    assert "recursive-delete-outside-tree" in _hits("git -c credential.helper='!rm -rf ~' fetch")


@pytest.mark.parametrize("cmd", ["git -c color.ui=always log", "git -c user.name=ci commit -m x",
                                 "git -c core.pager=less log", "git -c alias.st=status st"])
def test_routine_git_settings_pass(cmd: str) -> None:
    assert _hits(cmd) == []


@given(st.sampled_from(_SETTINGS), st.sampled_from(["rm -rf /", "rm -rf ~", "rm -rf /etc"]),
       st.booleans())
def test_variants_any_case_of_a_command_setting_runs_its_value(key: str, script: str, upper: bool) -> None:
    spelt = key.upper() if upper else key
    assert runs_command(spelt, script)
    assert _hits(f"git -c {spelt}='{script}' log") != []


# ---------------------------------------------------------------- 4. container mounts however attached


@pytest.mark.parametrize("cmd", [
    "docker run -v$HOME:/h alpine rm -rf /h", "docker run -v\"$HOME\":/h alpine ls", "docker run --volume=/:/h alpine ls",
    "docker run --volume=\"$HOME\":/h alpine ls", "docker run --mount type=bind,source=/,target=/h alpine ls",
    "docker run --mount=\"type=bind,source=$HOME,target=/h\" alpine ls", "docker run -itv/:/h alpine sh",
    "docker-compose run -v /:/h app", "podman-compose run -v /:/h app", "podman run -v$HOME:/h alpine",
    "nerdctl run -v /:/h alpine", "docker run -v$DATA:/h alpine",
])
def test_a_host_mount_however_attached_asks(cmd: str) -> None:
    assert "container-mounts-host" in _hits(cmd)


@pytest.mark.parametrize("cmd", ["docker run -v \"$PWD\":/src alpine ls", "docker run -v\"$PWD\":/src alpine ls",
                                 "docker run -itv\"$PWD\"/x:/src alpine ls", "docker-compose run app pytest",
                                 "docker run -e MODE=v alpine env", "docker run -d nginx"])
def test_a_mount_of_the_working_tree_passes(cmd: str) -> None:
    assert _hits(cmd) == []


@given(st.sampled_from(["docker", "podman", "nerdctl", "docker-compose"]), st.sampled_from(["", "it", "d", "ti"]),
       st.sampled_from(["/", "$HOME", "~", "/etc", "\"$HOME\""]), st.booleans())
def test_variants_a_host_folder_attached_to_v_asks(binary: str, switches: str, source: str, spaced: bool) -> None:
    volume = f"-{switches}v {source}:/h" if spaced else f"-{switches}v{source}:/h"
    assert "container-mounts-host" in _hits(f"{binary} run {volume} alpine rm -rf /h")


# ---------------------------------------------------------------- 5. rsync that deletes


@pytest.mark.parametrize("cmd", [
    "rsync -a --remove-source-files ~/ /tmp/x", "rsync -a --delete empty/ host:/", "rsync -a --delete empty/ ~/",
    "rsync -a --remove-s ~/docs/ backup/", "rsync -a --delete-after empty/ /etc/", "rsync -a --del x/ rsync://h/d/",
])
def test_a_sync_that_deletes_outside_the_tree_asks(cmd: str) -> None:
    assert "sync-deletes" in _hits(cmd)


@pytest.mark.parametrize("cmd", ["rsync -a src/ build/", "rsync -a --delete src/ build/", "rsync -a src/ host:/srv/app",
                                 "rsync -a --remove-source-files out/ /tmp/x", "rsync -av --exclude '*.o' --delete src/ b/"])
def test_a_sync_inside_the_tree_passes(cmd: str) -> None:
    assert "sync-deletes" not in _hits(cmd)


@given(st.sampled_from(["--delete", "--delete-before", "--delete-after", "--del", "--delete-excluded"]),
       st.sampled_from(["~/", "/", "/etc/", "host:/", "user@host:~/", "$HOME/"]))
def test_variants_a_delete_into_another_place_asks(option: str, destination: str) -> None:
    assert "sync-deletes" in _hits(f"rsync -a {option} empty/ {destination}")


# ---------------------------------------------------------------- 6. credential paths through a glob


@pytest.mark.parametrize("cmd", ["cat ~/.ss?/id_rsa", "cat ~/.[s]sh/id_rsa", "cat ~/.*/id_rsa", "cat ~/.ss*",
                                 "cat /etc/sha*", "cat ~/.aw?/credentials", "cat ~/.*"])
def test_a_glob_that_may_match_a_credential_path_counts_as_it(cmd: str) -> None:
    assert "credential-files" in _hits(cmd)


@pytest.mark.parametrize("cmd", ["cat ~/.bashrc", "cat src/*.py", "ls *.txt", "grep -n TODO src/*/*.py",
                                 "cat ~/proj/notes/*.md"])
def test_a_glob_elsewhere_passes(cmd: str) -> None:
    assert "credential-files" not in _hits(cmd)


@given(st.sampled_from(["~/.ssh/id_rsa", "~/.aws/credentials", "~/.gnupg/pubring.kbx", "~/.netrc"]), st.data())
def test_variants_any_wildcard_in_a_credential_path_still_asks(path: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(min_value=3, max_value=len(path) - 1))
    if path[at] == "/":
        at -= 1
    wildcard = data.draw(st.sampled_from(["?", "*", f"[{path[at]}]"]))
    assert "credential-files" in _hits(f"cat {path[:at]}{wildcard}{path[at + 1:]}")


# ---------------------------------------------------------------- 7. writing git's hooks or config


@pytest.mark.parametrize(("arguments", "ref", "risk"), [
    ({"path": ".git/hooks/pre-commit", "content": "rm -rf ~"}, "fs.write", "write"),
    ({"path": ".git/config", "content": "[core]"}, "fs.write", "write"),
    ({"path": "./.git/hooks/post-checkout", "content": "x"}, "fs.write", "write"),
    ({"cmd": "printf x > .git/hooks/pre-push"}, "shell.exec", "execute"),
    ({"cmd": "echo x >> .git/config"}, "shell.exec", "execute"),
    ({"cmd": "tee .git/hooks/pre-commit < hook.sh"}, "shell.exec", "execute"),
])
def test_a_write_to_git_hooks_or_config_asks(arguments: Any, ref: str, risk: str) -> None:
    assert "git-hooks-and-config" in _hits(arguments, ref, risk)


@pytest.mark.parametrize(("arguments", "ref", "risk"), [
    ({"path": "src/hooks.py", "content": "x"}, "fs.write", "write"),
    ({"path": "docs/git/config.md", "content": "x"}, "fs.write", "write"),
    ({"cmd": "cat .git/config"}, "shell.exec", "execute"), ({"cmd": "git status"}, "shell.exec", "execute"),
])
def test_other_writes_and_reads_of_git_pass(arguments: Any, ref: str, risk: str) -> None:
    assert "git-hooks-and-config" not in _hits(arguments, ref, risk)


@given(st.sampled_from(["pre-commit", "pre-push", "post-checkout", "post-merge", "commit-msg"]),
       st.sampled_from([">", ">>"]), st.sampled_from(["", "./"]))
def test_variants_any_hook_written_by_a_redirection_asks(hook: str, operator: str, prefix: str) -> None:
    assert "git-hooks-and-config" in _hits(f"echo 'rm -rf ~' {operator} {prefix}.git/hooks/{hook}")


# ---------------------------------------------------------------- the labelled rows through a real host


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
            args = row["action"]["arguments"]
            assert entry in _hits(args, row["action"]["ref"], row["action"]["risk"]), args
