"""Verification dictionaries: compile an intent once, replay with zero model calls."""

from .channels import Channels, MemoryChannels, MemoryElement, PollOutcome, ReaderFailed, poll
from .compile import CompileResult, Plan, build_request, compile_verification
from .dictionary import Dictionary, DictionaryCheck, DictionaryInvalid, parse_dictionary
from .digest import canonical, dictionary_digest
from .run import Observation, PlanInvalid, RunResult, VerificationFailed, parse_plan, run_verification

__all__ = [
    "Channels", "CompileResult", "Dictionary", "DictionaryCheck", "DictionaryInvalid", "MemoryChannels",
    "MemoryElement", "Observation", "Plan", "PlanInvalid", "PollOutcome", "ReaderFailed",
    "RunResult", "VerificationFailed", "build_request", "canonical", "compile_verification",
    "dictionary_digest", "parse_dictionary", "parse_plan", "poll", "run_verification",
]
