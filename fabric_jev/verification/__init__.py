"""Verification dictionaries: compile an intent once, replay with zero model calls.

Channels other than the in-memory ones (the browser connector's) locate a dictionary's
`Target` with `select_targets` over their elements' `TargetFields`, under `SeeOptions`.
"""

from .channels import (
    Channels,
    MemoryChannels,
    MemoryElement,
    PollOutcome,
    ReaderFailed,
    TargetFields,
    poll,
    select_targets,
)
from .compile import CompileResult, Plan, build_request, compile_verification
from .dictionary import (
    Dictionary,
    DictionaryCheck,
    DictionaryInvalid,
    SeeOptions,
    Target,
    TargetSpec,
    parse_dictionary,
)
from .digest import canonical, dictionary_digest
from .files import load_plan
from .replay import Observation, PlanInvalid, RunResult, VerificationFailed, parse_plan, run_verification

__all__ = [
    "Channels", "CompileResult", "Dictionary", "DictionaryCheck", "DictionaryInvalid", "MemoryChannels",
    "MemoryElement", "Observation", "Plan", "PlanInvalid", "PollOutcome", "ReaderFailed",
    "RunResult", "SeeOptions", "Target", "TargetFields", "TargetSpec", "VerificationFailed", "build_request",
    "canonical", "compile_verification", "dictionary_digest", "load_plan", "parse_dictionary", "parse_plan", "poll",
    "run_verification", "select_targets",
]
