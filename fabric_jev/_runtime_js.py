"""Locate what ships with the package in runtime_js/: the guest's prelude, the page scripts, and
the guest API's declarations. (Not a layer: the sandbox reads the prelude, the type check the
declarations, connectors the page scripts through `fabric_jev.protocol.runtime_js`.)"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def runtime_js_dir() -> Path:
    # A wheel carries the folder inside the package; a source checkout (or an
    # editable install) keeps it at the repository root, beside the package.
    for candidate in (_PACKAGE / "runtime_js", _PACKAGE.parent / "runtime_js"):
        if (candidate / "prelude.js").is_file():
            return candidate
    raise FileNotFoundError("runtime_js/ is missing from this fabric-jev installation")


def runtime_js_path(name: str) -> Path:
    return runtime_js_dir() / name
