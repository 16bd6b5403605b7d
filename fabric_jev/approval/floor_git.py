"""The floor's git checks: force pushes and discarded work, read as git reads options. Pure code.

git accepts any unique prefix of a long option (``git reset --har``, ``git push --mirr``); a
prefix is read here as every option of interest it may stand for, so an ambiguous one (which git
refuses) still asks: the floor fails closed. Short options cluster (``git branch -df``).
Discarding work covers the commands with the effect of ``reset --hard``: a forced branch delete
however spelt, a forced checkout or switch, a checkout of paths from another commit, whole-tree
or folder checkouts and restores, ``update-ref`` (it moves or deletes any ref), ``read-tree -u``
and a forced ``worktree remove``. ``git checkout -- FILE`` (named files from the index) passes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from . import shell as _shell
from .floor_reading import FloorParams, commands, named

if TYPE_CHECKING:
    from .call_view import CallView

_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--exec-path"})
#: Per subcommand, the long options the checks look at (a shortened spelling stands for each it prefixes).
_LONG: dict[str, tuple[str, ...]] = {
    "push": ("--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune"),
    "reset": ("--hard", "--merge", "--keep", "--soft", "--mixed"),
    "clean": ("--force", "--dry-run"),
    "branch": ("--delete", "--force", "--move", "--copy"),
    "checkout": ("--force", "--orphan", "--track", "--detach"),
    "switch": ("--force", "--discard-changes", "--create", "--force-create", "--orphan", "--detach"),
    "restore": ("--worktree", "--staged", "--source"),
    "worktree": ("--force",),
    "read-tree": ("--reset",),
}


class GitCall:
    """One git command read: its subcommand, the long options it names, its short flags, operands."""

    def __init__(self, sub: str, words: Sequence[str]) -> None:
        self.sub = sub
        self.long: set[str] = set()
        self.short: set[str] = set()
        self.operands: list[str] = []
        self.after_dashes: list[str] | None = None
        known = _LONG.get(sub, ())
        for i, word in enumerate(words):
            if word == "--":
                self.after_dashes = list(words[i + 1:])
                break
            if word.startswith("--"):
                name = word.split("=", 1)[0]
                self.long |= {name} if name in known else {o for o in known if o.startswith(name) and len(name) > 2}
            elif word.startswith("-") and len(word) > 1:
                self.short |= set(word[1:])
            else:
                self.operands.append(word)

    def has(self, long: str, short: str = "") -> bool:
        return long in self.long or bool(set(short) & self.short)


def git_calls(view: CallView) -> Iterator[GitCall]:
    for command in commands(view):
        words = _git_words(command)
        if words:
            yield GitCall(words[0], words[1:])


def _git_words(command: _shell.Simple) -> list[str] | None:
    """A git command's words after its global options (git -C DIR push → [push, ...])."""
    if not named(command, ["git"]):
        return None
    words = [w.value or "" for w in command.words[1:]]
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in _GLOBAL_VALUES else 1
    return words[i:]


def force_push(view: CallView, params: FloorParams) -> bool:
    """A force push, a mirror push, or a deleted remote branch (``+ref``, ``:ref``)."""
    for git in git_calls(view):
        if git.sub != params["subcommand"]:
            continue
        if git.long or set(params["short"]) & git.short:
            return True
        if any(w.startswith(tuple(params["refspec_prefixes"])) for w in [*git.operands, *(git.after_dashes or ())]):
            return True
    return False


def discard(view: CallView, params: FloorParams) -> bool:
    """A git command that discards uncommitted work, commits or branches (module doc)."""
    return any(_discards(git) for git in git_calls(view))


def _whole(paths: Sequence[str]) -> bool:
    """Paths that stand for many files: the tree, a folder, a glob, a magic pathspec."""
    return any(p in (".", "*", "/") or p.endswith("/") or p.startswith(":") or any(c in p for c in "*?[")
               for p in paths)


def _discards(git: GitCall) -> bool:
    sub, rest = git.sub, git.operands
    if sub == "reset":
        return git.has("--hard") or git.has("--merge")
    if sub == "clean":
        return git.has("--force", "f")
    if sub == "branch":
        return git.has("--delete", "dD") and git.has("--force", "Df")
    if sub == "checkout":
        if git.has("--force", "f"):
            return True
        if git.after_dashes is not None:
            return bool(rest) or _whole(git.after_dashes)
        values = int(bool(git.short & set("bB"))) + int("--orphan" in git.long)
        return _whole(rest) or len(rest) - values > 1
    if sub == "switch":
        return git.has("--discard-changes") or git.has("--force", "f")
    if sub == "restore":
        return _whole([*rest, *(git.after_dashes or ())]) or "--worktree" in git.long or bool(git.short & set("W"))
    if sub == "stash":
        return rest[:1] in (["clear"], ["drop"])
    if sub == "update-ref":
        return True
    if sub == "read-tree":
        return "u" in git.short
    if sub == "worktree":
        return rest[:1] == ["remove"] and git.has("--force", "f")
    return False
