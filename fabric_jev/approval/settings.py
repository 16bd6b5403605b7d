"""Approval settings (model key, threshold), persisted in the host's settings file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from .._files import atomic_write, config_dir
from .._json import JSONInputError, read_json_file
from ..contract.config import HostConfig
from ..contract.json_basics import JsonNumber
from ..contract.values import is_finite_number
from ..errors import ConfigError
from .model_keys import DEFAULT_KEY, model_key


def settings_path() -> Path:
    return config_dir() / "settings.json"



def check_threshold(value: object) -> JsonNumber:
    """The threshold as given: settings.json read and saved again keeps 1 as 1."""
    if not is_finite_number(value) or not 0 <= value <= 1:
        raise ValueError("the approval threshold must be a finite number in [0, 1]")
    return value

class ApprovalSettings(NamedTuple):
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
        key = model_key(model)  # legacy jev/<model> is normalised here
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


PROJECT_SETTINGS = Path(".fabric-jev") / "settings.json"


def project_settings_path(cwd: Path | None = None) -> Path:
    """The project's settings: the nearest .fabric-jev/settings.json from the working directory up,
    else the one the working directory would hold."""
    start = (cwd or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        candidate = folder / PROJECT_SETTINGS
        if candidate.is_file():
            return candidate
    return start / PROJECT_SETTINGS


def settings_rules(cwd: Path | None = None, user: Path | None = None) -> list[dict[str, object]]:
    """The project's rules, then the user's, each marked with where it is kept ("from")."""
    out: list[dict[str, Any]] = []
    for label, path in (("project settings", project_settings_path(cwd)), ("user settings", user or settings_path())):
        rules = _read(path).get("rules", [])
        if not isinstance(rules, list):
            raise ConfigError(f"the rules in {path} must be a list")
        for rule in rules:
            if isinstance(rule, str):  # "allow shell.exec(...)"
                decision, _, pattern = rule.strip().partition(" ")
                item: dict[str, Any] = {decision: pattern} if decision in ("allow", "ask", "deny") else {"rule": rule}
            elif isinstance(rule, dict):
                item = dict(rule)
            else:
                raise ConfigError(f"a rule in {path} must be an object or a string")
            item["from"] = f"{label} ({path})"
            out.append(item)
    return out


def default_rules_setting(cwd: Path | None = None, user: Path | None = None) -> bool | None:
    """`defaultRules` from the project's settings, else the user's; None when neither says."""
    for path in (project_settings_path(cwd), user or settings_path()):
        value = _read(path).get("defaultRules")
        if value is not None:
            if not isinstance(value, bool):
                raise ConfigError(f"defaultRules in {path} must be true or false")
            return value
    return None


def with_user_settings(config: HostConfig, path: Path | None = None, cwd: Path | None = None) -> HostConfig:
    """The config as the command line uses it: the user's threshold, the project's and the
    user's rules after the config's own, and their defaultRules unless the config sets it."""
    config = with_user_threshold(config, path)
    rules = settings_rules(cwd, path)
    update: dict[str, Any] = {}
    if rules:
        update["rules"] = [*config.rules, *rules]
    if "default_rules" not in config.model_fields_set:
        setting = default_rules_setting(cwd, path)
        if setting is not None:
            update["default_rules"] = setting
    return config.model_copy(update=update) if update else config


def save_rule(text: str, scope: str, *, cwd: Path | None = None, user: Path | None = None,
              decision: str = "allow") -> Path:
    """Add a rule to the project's or the user's settings (checked first, written atomically)."""
    from .rules import parse_rule

    rule = parse_rule(text if text.split(" ", 1)[0] in ("allow", "ask", "deny") else f"{decision} {text}",
                      source=scope)
    path = project_settings_path(cwd) if scope == "project" else (user or settings_path())
    data = _read(path)
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(f"the rules in {path} must be a list")
    entry = {rule.decision: rule.pattern}
    if entry not in rules:
        rules.append(entry)
    data["rules"] = rules
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=2))
    return path


def remove_rule(text: str, scope: str, *, cwd: Path | None = None, user: Path | None = None) -> bool:
    """Remove a rule (as written, decision first) from the project's or the user's settings."""
    from .rules import parse_rule

    wanted = parse_rule(text, source=scope)
    path = project_settings_path(cwd) if scope == "project" else (user or settings_path())
    data = _read(path)
    rules = data.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(f"the rules in {path} must be a list")
    kept = [r for r in rules if r != {wanted.decision: wanted.pattern} and r != wanted.text]
    if len(kept) == len(rules):
        return False
    data["rules"] = kept
    atomic_write(path, json.dumps(data, indent=2))
    return True


def set_default_rules(on: bool, scope: str, *, cwd: Path | None = None, user: Path | None = None) -> Path:
    path = project_settings_path(cwd) if scope == "project" else (user or settings_path())
    data = _read(path)
    data["defaultRules"] = on
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
