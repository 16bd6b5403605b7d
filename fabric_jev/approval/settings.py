"""Approval settings (model key, threshold), persisted in the host's settings file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._files import atomic_write, config_dir
from .._json import JSONInputError, read_json_file
from ..contract.config import HostConfig
from ..contract.values import is_finite_number
from ..errors import ConfigError
from .model_keys import DEFAULT_KEY, parse_model_key


def settings_path() -> Path:
    return config_dir() / "settings.json"



def check_threshold(value: object) -> float:
    if not is_finite_number(value) or not 0 <= value <= 1:
        raise ValueError("the approval threshold must be a finite number in [0, 1]")
    return float(value)

@dataclass(frozen=True)
class ApprovalSettings:
    model: str = DEFAULT_KEY
    threshold: float = 0.5

    @classmethod
    def load(cls, path: Path | None = None) -> ApprovalSettings:
        data = _read(path or settings_path()).get("approvals", {})
        if not isinstance(data, dict):
            raise ConfigError("settings.approvals must be an object")
        return cls.make(data.get("model", DEFAULT_KEY), data.get("threshold", 0.5))

    @classmethod
    def make(cls, model: object, threshold: object) -> ApprovalSettings:
        key = parse_model_key(model).key  # legacy jev/<model> is normalised here
        try:
            value = check_threshold(threshold)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return cls(key, value)

    def save(self, path: Path | None = None) -> Path:
        path = path or settings_path()
        data = _read(path)
        data["approvals"] = {"model": self.model, "threshold": self.threshold}
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=2))
        return path


def with_user_threshold(config: HostConfig, path: Path | None = None) -> HostConfig:
    """The threshold's precedence: the config's own `autoApprovalThreshold` when it
    sets one, else the user's settings.json (`settings approvals --threshold`), else 0.50."""
    if "auto_approval_threshold" in config.model_fields_set:
        return config
    threshold = ApprovalSettings.load(path).threshold
    return config.model_copy(update={"auto_approval_threshold": threshold})


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = read_json_file(path, what="the settings file", max_bytes=1 << 20)
    except JSONInputError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"the settings file {path} must hold an object")
    return data
