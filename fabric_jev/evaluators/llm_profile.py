"""An LLM route's profile: the temperatures that calibrate one model, per question type.

Format (JSON, docs/evaluators.md "Calibrating a model")::

    {"format": "fabric-jev-llm-profile", "version": 1,
     "name": "qwen3-support",                      # 1-64 letters, digits, . _ - (starts with one of the first two)
     "route": "ollama", "model": "qwen3:8b",       # the evaluator it was fitted for (gguf: the file's name)
     "readout": "logprobs",                        # optional: logprobs | samples (what it was fitted on)
     "temperatures": {"noul": 1.6, "choice": 1.2, "score": 1.0},   # each optional, 0.05-20; absent = 1
     "report": {...}}                              # optional: how it was fitted (shown, never used)

The route applies the temperature of a question's type to the label
log-probabilities before renormalising (`readout.temper`). A profile fitted
on one readout is applied only to answers read the same way: an answer that
had to be sampled from a profile fitted on logprobs is left as it was read,
and its provenance names no profile.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from ..contract.json_basics import JsonNumber
from ..contract.wire_model import WireModel, omit_none
from ..errors import ProfileInvalid
from ..questions import KINDS, listed
from .llm_routes import LLM_MODEL_RULE, LLM_ROUTES, is_llm_model
from .readout import MAX_TEMPERATURE, MIN_TEMPERATURE

FORMAT: Literal["fabric-jev-llm-profile"] = "fabric-jev-llm-profile"
VERSION: Literal[1] = 1
MAX_PROFILE_BYTES = 1 << 20
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: The routes a profile may be fitted for: the model routes, and gguf (a GGUF file served here).
PROFILE_ROUTES = (*LLM_ROUTES, "gguf")
_KEYS = {"format", "version", "name", "route", "model", "readout", "temperatures", "report"}


class LlmProfile(WireModel):
    """Per-question-type temperatures for one route and model; its JSON is the file (the module doc)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["fabric-jev-llm-profile"] = FORMAT
    version: Literal[1] = VERSION
    name: str
    route: str
    model: str
    readout: Literal["logprobs", "samples"] | None = Field(default=None, exclude_if=omit_none)
    temperatures: dict[str, JsonNumber]
    report: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda report: not report)
    #: The file it was read from, when it was.
    path: Path | None = Field(default=None, exclude=True)

    def temperature(self, qtype: str) -> float:
        return self.temperatures.get(qtype, 1.0)

    def applies_to(self, readout: str) -> bool:
        return self.readout is None or self.readout == readout

    def save(self, path: str | Path) -> Path:
        """Write the profile atomically (a reader never sees half of it)."""
        from .._files import atomic_write

        check(self.to_json(), str(path))  # what is written can be read back
        target = Path(path)
        atomic_write(target, json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")
        return target

    @classmethod
    def load(cls, path: str | Path) -> LlmProfile:
        from .._json import JSONInputError, read_json_file

        try:
            data = read_json_file(path, what="profile", max_bytes=MAX_PROFILE_BYTES)
        except JSONInputError as exc:
            raise ProfileInvalid(str(exc)) from None
        profile = check(data, str(path))
        return profile.model_copy(update={"path": Path(path)})


def check(data: object, where: str) -> LlmProfile:
    """A profile from its JSON, or ProfileInvalid in one line naming the field."""
    def bad(message: str) -> ProfileInvalid:
        return ProfileInvalid(f"profile {where}: {message}")

    if not isinstance(data, dict):
        raise bad("is not a JSON object")
    if data.get("format") != FORMAT:
        raise bad(f"format must be {FORMAT!r} (an LLM route's profile; the local evaluator's profiles "
                  "are fabric-jev-local-profile)")
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise bad(f"version must be {VERSION}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise bad(f"unknown field {unknown[0]!r}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise bad("name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    route = data.get("route")
    if route not in PROFILE_ROUTES:
        raise bad(f"route must be one of {', '.join(PROFILE_ROUTES)}")
    model = data.get("model")
    if not is_llm_model(model):
        raise bad(f"model must be {LLM_MODEL_RULE}")
    readout = data.get("readout")
    if readout is not None and readout not in ("logprobs", "samples"):
        raise bad("readout must be logprobs or samples")
    temperatures = data.get("temperatures")
    types = listed()  # a temperature per question kind in the table
    if not isinstance(temperatures, dict):
        raise bad(f"temperatures must be an object {{{', '.join(t + '?' for t in types)}}}")
    for key, value in temperatures.items():
        if key not in KINDS:
            raise bad(f"temperatures.{key[:40]} is not a question type ({', '.join(types)})")
        if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
                or not MIN_TEMPERATURE <= value <= MAX_TEMPERATURE):
            raise bad(f"temperatures.{key} must be a number from {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}")
    report = data.get("report", {})
    if not isinstance(report, dict):
        raise bad("report must be an object")
    return LlmProfile(name=name, route=str(route), model=str(model),
                      temperatures=dict(temperatures),  # as written: 2 stays 2 when it is saved again
                      readout=readout, report=report)


__all__ = ["FORMAT", "VERSION", "LlmProfile", "check"]
