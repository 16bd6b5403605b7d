"""The floor's check for a sync that deletes: rsync's source removal and destination deletes. Pure code.

``rsync --remove-source-files SRC DEST`` empties its sources, ``rsync --delete SRC DEST`` deletes
at the destination what the source lacks (``--delete empty/ ~/`` empties the home folder). The
check asks when a source removed lies outside the tree and the user's temporary folders, or a
destination deleted in does, or is on another host (``host:/``, ``rsync://``), where the floor
cannot see what would go. Long options may be shortened, as rsync's parser accepts. The entry's
`options` are the source removers, its `long` the destination deletes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import shell as _shell
from .floor_reading import FloorParams, commands, named, operands
from .places import outside

if TYPE_CHECKING:
    from .call_view import CallView


def _names(command: _shell.Simple, wanted: Sequence[str]) -> bool:
    """Whether a word is one of the long options `wanted`, or a prefix of one (four characters up)."""
    for word in command.words[1:]:
        name = (word.value or "").split("=", 1)[0]
        if name.startswith("--") and len(name) >= 4 and any(option.startswith(name) for option in wanted):
            return True
    return False


def _remote(value: str | None) -> bool:
    if value is None:
        return True
    head = value.split("/", 1)[0]
    return value.startswith("rsync://") or (":" in head and not head.startswith("."))


def sync_deletes(view: CallView, params: FloorParams) -> bool:
    for command in commands(view):
        if not named(command, params["programs"]):
            continue
        places = operands(command)
        if len(places) < 2:
            continue
        *sources, destination = places
        if _names(command, params["options"]) and any(
                _remote(w.value) or outside(view, command, w.value) for w in sources):
            return True
        if _names(command, params["long"]) and (_remote(destination.value)
                                                     or outside(view, command, destination.value)):
            return True
    return False
