"""The pattern a person is offered with `a` ("always for this pattern"). Pure code.

A person confirms the pattern before it counts, so it is narrow and readable:
one command's program and subcommand (``pytest *``, ``git log *``), a compound
command exactly as it was, a browser method, a folder of files, else the ref.
"""

from __future__ import annotations

import json
import posixpath

from .call_view import COMMAND_KEYS, PATH_KEYS, CallView
from .shell import Script

MAX_PATTERN_CHARS = 300


def suggest_pattern(ref: str, view: CallView) -> str | None:
    """A rule pattern (without its decision) for calls like this one; None when none is narrow enough."""
    scripts = view.scripts()
    if scripts:
        if len(scripts) != 1:
            return None
        command = _command_pattern(scripts[0])
        return None if command is None else f"{ref}(cmd: {json.dumps(command)})"
    found, method = view.get("method")
    if found and isinstance(method, str) and len(method) <= 100:
        return f"{ref}(method: {json.dumps(method)})"
    paths = [p for p in view.paths()]
    if paths and view.values(PATH_KEYS):
        if any(p is None for p in paths):
            return None
        folders = {posixpath.dirname(p[0]) for p in paths if p is not None}
        if len(folders) == 1:
            folder = folders.pop()
            if folder == view.context.cwd:
                return f"{ref}(path: \"./*\")"
            if folder.startswith(view.context.cwd + "/"):
                return f"{ref}(path: {json.dumps('./' + folder[len(view.context.cwd) + 1:] + '/**')})"
            return f"{ref}(path: {json.dumps(folder + '/**')})"
        return None
    if view.values(COMMAND_KEYS):
        return None
    return ref


def _command_pattern(script: Script) -> str | None:
    if not script.plain or not script.segments:
        return None
    if script.compound:
        text = " ".join(script.shown_segments())
        return text if len(text) <= MAX_PATTERN_CHARS and "*" not in text else None
    words = script.segments[0].words
    if not words or not all(w.literal for w in words[:2]) or script.segments[0].redirects:
        return None
    head = [words[0].text]
    if len(words) > 1 and not words[1].text.startswith("-") and "/" not in words[1].text \
            and "." not in words[1].text and len(words[1].text) <= 40:
        head.append(words[1].text)
    if any("*" in w or " " in w for w in head):
        return None
    return " ".join(head) + " *"  # a trailing * stands for any further words, none included
