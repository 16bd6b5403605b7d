"""git settings whose value is a command git runs (`git -c pager.status='…' status`). Pure code.

git runs a setting's value as a command for its pagers (`core.pager`, `pager.<cmd>`), editors,
askpass and ssh programs, signing programs (`gpg.program`, `gpg.<format>.program`), external
diffs and text conversions (`diff.external`, `diff.<driver>.textconv`, `diff.<driver>.command`),
merge drivers and tools, filters (`filter.<name>.clean`, `smudge`, `process`), credential
helpers, the fsmonitor hook, `uploadpack.packObjectsHook`, a remote's upload and receive packs,
and an alias starting with `!`. `runs_command` names them all; the floor reads such a value as
a command of its own.
"""

from __future__ import annotations

import re

#: Whole setting names (lower case) whose value is a command.
GIT_COMMAND_SETTINGS = frozenset({
    "core.pager", "core.editor", "core.askpass", "core.sshcommand", "core.fsmonitor", "core.gitproxy",
    "diff.external", "sequence.editor", "credential.helper", "gpg.program", "uploadpack.packobjectshook",
    "merge.tool", "diff.tool", "sendemail.smtpserver", "sendemail.tocmd", "sendemail.cccmd",
    "ssh.program", "web.browser", "imap.tunnel", "core.alternaterefscommand",
})
#: Setting names with a user-chosen middle part (`diff.<driver>.textconv`) whose value is a command.
_PATTERNS = re.compile(
    r"pager\.[^.]+|gpg\.[^.]+\.program|diff\..+\.(?:textconv|command)|merge\..+\.driver"
    r"|filter\..+\.(?:clean|smudge|process)|credential\..+\.helper|(?:merge|diff)tool\..+\.(?:cmd|path)"
    r"|remote\..+\.(?:uploadpack|receivepack)|browser\..+\.(?:cmd|path)|man\..+\.(?:cmd|path)")


def runs_command(key: str, value: str) -> bool:
    """Whether git runs the value of setting `key` (any case) as a command."""
    key = key.lower()
    if key.startswith("alias."):
        return value.startswith("!")
    return key in GIT_COMMAND_SETTINGS or _PATTERNS.fullmatch(key) is not None
