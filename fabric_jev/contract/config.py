"""Host configuration: defaults, ceilings and clamping (contract §7)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._json import JSONInputError, read_json_file
from ..errors import ConfigError
from .model_id import MODEL_ID_RULE, is_model_id
from .policy import Policy, Risk, parse_approvals, parse_overrides
from .program import ProgramLimits, validate_as
from .typecheck import CheckMode, Language
from .values import is_finite_number, key_names

MIB = 1024 * 1024
#: A config file larger than this is refused before it is read (as `--config` does).
MAX_CONFIG_BYTES = MIB

# key: (default, ceiling, lowest, highest)
_LIMIT_RANGES: dict[str, tuple[int, int, int, int]] = {
    "timeoutMs": (60_000, 900_000, 100, 86_400_000),
    "maxEvaluations": (100, 1_000, 1, 100_000),
    "maxToolCalls": (1_000, 10_000, 1, 1_000_000),
    "maxTokens": (100_000, 1_000_000, 1, 100_000_000),
}
_SCALAR_RANGES: dict[str, tuple[int, int]] = {
    "maxConcurrentRuns": (1, 16),
    "maxRetainedRuns": (1, 256),
    "requestTimeoutMs": (100, 120_000),
    "maxRequestBytes": (1_024, 1_048_576),
    "memoryLimitBytes": (1 * MIB, 64 * MIB),
    "warmWorkers": (0, 16),
    # How long an approver may take to decide one capability call.
    "approverTimeoutMs": (100, 3_600_000),
}


def clamp_number(value: Any, lo: int, hi: int, key: str) -> int:
    """Floor a finite number and clamp it into [lo, hi]."""
    if not is_finite_number(value):
        raise ValueError(f"{key} must be a finite number")
    return min(max(math.floor(value), lo), hi)


# HostConfig.typecheck's caps, key: (default, lowest, highest)
_TYPECHECK_RANGES: dict[str, tuple[int, int, int]] = {
    "timeoutMs": (10_000, 500, 120_000),
    "memoryLimitBytes": (512 * MIB, 64 * MIB, 4096 * MIB),
}


class TypecheckConfig(BaseModel):
    """`HostConfig.typecheck`: a mode per language, the compiler's caps and its verdict cache.

    `requireChecker` refuses what a mode would check when no compiler is
    installed (by default such programs run unchecked, and their envelope says so).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    typescript: CheckMode = CheckMode.ERROR
    javascript: CheckMode = CheckMode.WARN
    #: Wall-clock cap of one compiler run; past it the compiler is killed.
    timeoutMs: int = _TYPECHECK_RANGES["timeoutMs"][0]
    #: Heap cap of one compiler run (the kernel's data limit; the Go runtime is told to stay under it).
    memoryLimitBytes: int = _TYPECHECK_RANGES["memoryLimitBytes"][0]
    requireChecker: bool = False
    #: Keep verdicts on disk too (in `cacheDir`, else the user cache folder), so a new process reuses them.
    diskCache: bool = True
    cacheDir: str | None = None

    @field_validator(*_TYPECHECK_RANGES, mode="before")
    @classmethod
    def _clamp(cls, v: Any, info: Any) -> int:
        _, lo, hi = _TYPECHECK_RANGES[info.field_name]
        return clamp_number(v, lo, hi, info.field_name)

    def mode(self, language: Language) -> CheckMode:
        return self.typescript if language is Language.TYPESCRIPT else self.javascript

    @property
    def enabled(self) -> bool:
        return self.typescript is not CheckMode.OFF or self.javascript is not CheckMode.OFF


class LimitSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeoutMs: int
    maxEvaluations: int
    maxToolCalls: int
    maxTokens: int


def _limit_set(raw: Any, which: int, label: str) -> LimitSet:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{label} must be an object")
    unknown = set(raw) - set(_LIMIT_RANGES)
    if unknown:
        raise ValueError(f"{label} has unknown keys: {key_names(unknown)}")
    values = {}
    for key, spec in _LIMIT_RANGES.items():
        lo, hi = spec[2], spec[3]
        values[key] = clamp_number(raw.get(key, spec[which]), lo, hi, f"{label}.{key}")
    return LimitSet(**values)


class HostConfig(BaseModel):
    """Everything a host keeps; every number is floored and clamped into range.

    ``ceilings.timeoutMs`` is the contract's ``maxDurationMs``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    defaults: LimitSet = Field(default_factory=lambda: _limit_set({}, 0, "defaults"))
    ceilings: LimitSet = Field(default_factory=lambda: _limit_set({}, 1, "ceilings"))
    maxConcurrentRuns: int = 4
    maxRetainedRuns: int = 64
    requestTimeoutMs: int = 15_000
    maxRequestBytes: int = 131_072
    memoryLimitBytes: int = 64 * MIB
    warmWorkers: int = 2
    model: str = Field(default="jev-latest", min_length=1, max_length=128)
    #: The threshold of `auto` policies and of `fabric-jev approve --config`; see
    #: docs/programs.md for its precedence over settings.json.
    autoApprovalThreshold: float = 0.5
    #: Risk → policy (allow, ask, deny, auto); missing risks keep their defaults.
    approvals: dict[Risk, Policy] = Field(default_factory=lambda: parse_approvals(None))
    approverTimeoutMs: int = 120_000
    #: Risks or refs allowed / denied whatever their policy (`--allow`, `--deny`; a deny wins).
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    evaluator: dict[str, Any] = Field(default_factory=dict)
    #: Connector settings by name, e.g. {"browser": {"wsUrl": ..., "allowedMethods": [...]}}.
    connectors: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Type-checking at launch: error | warn | off per language, caps, verdict cache (docs/programs.md).
    typecheck: TypecheckConfig = Field(default_factory=TypecheckConfig)

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
        return clamp_number(v, lo, hi, info.field_name)

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

    @field_validator("autoApprovalThreshold", mode="before")
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
        req = requested or ProgramLimits()

        def pick(key: str) -> int:
            asked = getattr(req, key)
            value: int = getattr(self.defaults, key) if asked is None else asked
            ceiling: int = getattr(self.ceilings, key)
            return min(value, ceiling)

        return EffectiveLimits(
            timeout_ms=pick("timeoutMs"),
            max_evaluations=pick("maxEvaluations"),
            max_tool_calls=pick("maxToolCalls"),
            max_tokens=pick("maxTokens"),
        )


@dataclass(frozen=True, slots=True)
class EffectiveLimits:
    timeout_ms: int
    max_evaluations: int
    max_tool_calls: int
    max_tokens: int
