"""Host configuration: defaults, ceilings and clamping (contract §7)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from .._json import JSONInputError, read_json_file
from ..errors import ConfigError
from .json_basics import unknown_keys
from .languages import CheckMode, Language
from .model_id import MODEL_ID_RULE, is_model_id
from .policy import Policy, Risk, parse_approvals, parse_overrides
from .program import ProgramLimits, validate_as
from .values import is_finite_number
from .wire_model import WireModel

MIB = 1024 * 1024
#: A config file larger than this is refused before it is read (as `--config` does).
MAX_CONFIG_BYTES = MIB

# JSON key: (field, default, ceiling, lowest, highest)
_LIMIT_RANGES: dict[str, tuple[str, int, int, int, int]] = {
    "timeoutMs": ("timeout_ms", 60_000, 900_000, 100, 86_400_000),
    "maxEvaluations": ("max_evaluations", 100, 1_000, 1, 100_000),
    "maxToolCalls": ("max_tool_calls", 1_000, 10_000, 1, 1_000_000),
    "maxTokens": ("max_tokens", 100_000, 1_000_000, 1, 100_000_000),
}
# field: (lowest, highest); errors name the field by its JSON key.
_SCALAR_RANGES: dict[str, tuple[int, int]] = {
    "max_concurrent_runs": (1, 16),
    # Launches beyond max_concurrent_runs wait in a FIFO queue this long; 0 refuses them at once.
    "max_queued_runs": (0, 100_000),
    "max_retained_runs": (1, 256),
    "request_timeout_ms": (100, 120_000),
    "max_request_bytes": (1_024, 1_048_576),
    "memory_limit_bytes": (1 * MIB, 64 * MIB),
    "warm_workers": (0, 16),
    # How long an approver may take to decide one capability call.
    "approver_timeout_ms": (100, 3_600_000),
}


def clamp_number(value: object, lo: int, hi: int, key: str) -> int:
    """Floor a finite number and clamp it into [lo, hi]."""
    if not is_finite_number(value):
        raise ValueError(f"{key} must be a finite number")
    return min(max(math.floor(value), lo), hi)


# HostConfig.typecheck's caps, field: (default, lowest, highest)
_TYPECHECK_RANGES: dict[str, tuple[int, int, int]] = {
    "timeout_ms": (10_000, 500, 120_000),
    "memory_limit_bytes": (512 * MIB, 64 * MIB, 4096 * MIB),
}


class TypecheckConfig(WireModel):
    """`HostConfig.typecheck`: a mode per language, the compiler's caps and its verdict cache.

    `require_checker` (``requireChecker`` in JSON) refuses what a mode would check when no
    compiler is installed (by default such programs run unchecked, and their envelope says so).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    typescript: CheckMode = CheckMode.ERROR
    javascript: CheckMode = CheckMode.WARN
    #: Wall-clock cap of one compiler run; past it the compiler is killed.
    timeout_ms: int = _TYPECHECK_RANGES["timeout_ms"][0]
    #: Heap cap of one compiler run (the kernel's data limit; the Go runtime is told to stay under it).
    memory_limit_bytes: int = _TYPECHECK_RANGES["memory_limit_bytes"][0]
    require_checker: bool = False
    #: Keep verdicts on disk too (in `cache_dir`, else the user cache folder), so a new process reuses them.
    disk_cache: bool = True
    cache_dir: str | None = None

    @field_validator(*_TYPECHECK_RANGES, mode="before")
    @classmethod
    def _clamp(cls, v: Any, info: Any) -> int:
        _, lo, hi = _TYPECHECK_RANGES[info.field_name]
        return clamp_number(v, lo, hi, to_camel(info.field_name))

    def mode(self, language: Language) -> CheckMode:
        return self.typescript if language is Language.TYPESCRIPT else self.javascript

    @property
    def enabled(self) -> bool:
        return self.typescript is not CheckMode.OFF or self.javascript is not CheckMode.OFF


class LimitSet(WireModel):
    """`HostConfig.defaults` and `.ceilings`; JSON: ``timeoutMs``, ``maxEvaluations``, ..."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_ms: int
    max_evaluations: int
    max_tool_calls: int
    max_tokens: int


def _limit_set(raw: Any, which: int, label: str) -> LimitSet:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{label} must be an object")
    unknown = set(raw) - set(_LIMIT_RANGES)
    if unknown:
        raise ValueError(f"{label} has unknown keys: {unknown_keys(unknown, _LIMIT_RANGES)}")
    values: dict[str, Any] = {}
    for key, (field, *spec) in _LIMIT_RANGES.items():
        lo, hi = spec[2], spec[3]
        values[field] = clamp_number(raw.get(key, spec[which]), lo, hi, f"{label}.{key}")
    return LimitSet.model_construct(**values)  # four ints in range: nothing left to validate


class HostConfig(WireModel):
    """Everything a host keeps; every number is floored and clamped into range.

    Attributes are snake_case (`config.max_concurrent_runs`); a config file, and
    `HostConfig.parse`, use the contract's camelCase keys (``maxConcurrentRuns``).
    Python code may construct it by either name. ``defaults`` and ``ceilings``
    given as dicts use the file's keys (``{"timeoutMs": 5000}``).
    ``ceilings.timeout_ms`` is the contract's ``maxDurationMs``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: LimitSet = Field(default_factory=lambda: _limit_set({}, 0, "defaults"))
    ceilings: LimitSet = Field(default_factory=lambda: _limit_set({}, 1, "ceilings"))
    max_concurrent_runs: int = 4
    #: Runs launched while `max_concurrent_runs` are running wait, first in first out, in a queue of
    #: this many; past it a launch raises ConcurrencyLimitReached (docs/programs.md, "Queued runs").
    max_queued_runs: int = 1_000
    max_retained_runs: int = 64
    request_timeout_ms: int = 15_000
    max_request_bytes: int = 131_072
    memory_limit_bytes: int = 64 * MIB
    warm_workers: int = 2
    model: str = Field(default="jev-latest", min_length=1, max_length=128)
    #: The threshold of `auto` policies and of `fabric-jev approve --config`; see
    #: docs/programs.md for its precedence over settings.json.
    auto_approval_threshold: float = 0.5
    #: Risk → policy (allow, ask, deny, auto); missing risks keep their defaults.
    approvals: dict[Risk, Policy] = Field(default_factory=lambda: parse_approvals(None))
    approver_timeout_ms: int = 120_000
    #: Risks or refs allowed / denied whatever their policy (`--allow`, `--deny`; a deny wins).
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    evaluator: dict[str, Any] = Field(default_factory=dict)
    #: Permission rules (docs/approvals.md): [{"allow"|"ask"|"deny": "ref(key: \"pattern\")", ...}];
    #: read by the host (a rule that cannot be read is a ConfigError when the host is made).
    rules: list[Any] = Field(default_factory=list, max_length=1000)
    #: fabric-jev's default rules for known-safe, read-only work (fabric_jev/approval/default_rules.json).
    default_rules: bool = True
    #: Connector settings by name, e.g. {"browser": {"wsUrl": ..., "allowedMethods": [...]}}.
    connectors: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Type-checking at launch: error | warn | off per language, caps, verdict cache (docs/programs.md).
    typecheck: TypecheckConfig = Field(default_factory=TypecheckConfig.model_construct)  # its defaults

    @field_validator("defaults", mode="before")
    @classmethod
    def _defaults(cls, v: Any) -> LimitSet:
        return v if isinstance(v, LimitSet) else _limit_set(v, 0, "defaults")

    @field_validator("ceilings", mode="before")
    @classmethod
    def _ceilings(cls, v: Any) -> LimitSet:
        return v if isinstance(v, LimitSet) else _limit_set(v, 1, "ceilings")

    @field_validator(*_SCALAR_RANGES, mode="before")
    @classmethod
    def _scalar(cls, v: Any, info: Any) -> int:
        lo, hi = _SCALAR_RANGES[info.field_name]
        return clamp_number(v, lo, hi, to_camel(info.field_name))

    @field_validator("approvals", mode="before")
    @classmethod
    def _approvals(cls, v: Any) -> dict[Risk, Policy]:
        return parse_approvals(v)

    @field_validator("allow", "deny", mode="before")
    @classmethod
    def _overrides(cls, v: Any, info: Any) -> tuple[str, ...]:
        return parse_overrides(v, info.field_name)

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: Any) -> str:
        if not is_model_id(v):
            raise ValueError(f"model must be {MODEL_ID_RULE}")
        return str(v)

    @field_validator("auto_approval_threshold", mode="before")
    @classmethod
    def _threshold(cls, v: Any) -> float:
        if not is_finite_number(v):
            raise ValueError("autoApprovalThreshold must be a finite number")
        return min(max(float(v), 0.0), 1.0)

    @classmethod
    def load(cls, path: str | Path) -> HostConfig:
        # The bounded reader: a config file is small, and not every file named one is.
        try:
            data = read_json_file(path, what="config file", max_bytes=MAX_CONFIG_BYTES)
        except JSONInputError as exc:
            raise ConfigError(str(exc)) from None
        return cls.parse(data)

    @classmethod
    def parse(cls, data: object) -> HostConfig:
        return validate_as(cls, data, ConfigError, "Invalid fabric-jev config")

    def effective_limits(self, requested: ProgramLimits | None) -> EffectiveLimits:
        """A program's limits: its own request or the default, min() the ceiling."""

        def pick(key: str) -> int:
            asked = None if requested is None else getattr(requested, key)
            value: int = getattr(self.defaults, key) if asked is None else asked
            ceiling: int = getattr(self.ceilings, key)
            return min(value, ceiling)

        return EffectiveLimits(
            timeout_ms=pick("timeout_ms"),
            max_evaluations=pick("max_evaluations"),
            max_tool_calls=pick("max_tool_calls"),
            max_tokens=pick("max_tokens"),
        )


def default_config() -> HostConfig:
    """`HostConfig()`. Every default is valid as it stands, so it is made without validating them:
    a command given no --config builds no schema for it (docs/performance.md, "Start-up of run";
    tests/test_contract_config.py holds it equal to `HostConfig()`). The values of the fields made by
    a factory are made here and given, as none of them set: left to `model_construct`, each factory's
    signature would be read (`inspect.signature`, ~1 ms apiece here) to learn whether it takes the
    data validated so far, which none does."""
    made = {name: field.default_factory() for name, field in HostConfig.model_fields.items()  # type: ignore[call-arg]
            if field.default_factory is not None}
    return HostConfig.model_construct(set(), **made)


@dataclass(frozen=True, slots=True)
class EffectiveLimits:
    timeout_ms: int
    max_evaluations: int
    max_tool_calls: int
    max_tokens: int
