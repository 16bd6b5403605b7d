"""Who answered an evaluation: route, model, readout, profile and calibration. Pure, no I/O.

Every evaluator of fabric-jev fills `Evaluation.provenance`; a run's
envelope, a batch line, a `serve` answer and an MCP result carry it under the
wire key ``evaluator``.

Readouts (how the probabilities were obtained):

| readout | answered by |
|---|---|
| ``logprobs`` | an LLM route: the next-token distribution over the labels, renormalised |
| ``samples`` | an LLM route without logprobs: `samples` constrained answers, smoothed frequencies |
| ``heuristic`` | the embedded local evaluator (sentence similarity; with a profile, adapted from labels) |
| ``systemone`` | a System One service (TypeSafe, OpenRouter, Vercel): its own distribution, as sent |
| ``fixture`` | answers written in advance (a fixture file, a scripted test evaluator) |
| ``recorded`` | a cassette entry recorded before answers named their answerer |
| ``unknown`` | an application's own evaluator that did not say (the host names its route) |
| ``mixed`` | a run whose evaluations had several answerers, listed in `answerers` |

A cassette replays the provenance it recorded, with `replayed` set.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import ConfigDict, Field

from .wire_model import ReadAsDict, WireModel, omit_empty, omit_none

Readout = Literal["logprobs", "samples", "heuristic", "systemone", "fixture", "recorded", "unknown", "mixed"]
READOUTS: tuple[Readout, ...] = ("logprobs", "samples", "heuristic", "systemone", "fixture", "recorded",
                                 "unknown", "mixed")
#: none: the answerer's raw output; temperature: per-question-type temperatures from an LLM profile;
#: learned: the local evaluator's profile fitted on labels; upstream: whatever the service does.
Calibration = Literal["none", "temperature", "learned", "upstream"]
#: Why a question of readout "logprobs" was read from samples instead: none of its labels among the
#: next tokens listed (`no_label`), or what the server listed is not a distribution: a log-probability
#: that is NaN or infinite (`not_finite`) or positive (`positive_logprob`), or listed probabilities
#: that add up to more than 1 (`mass_above_one`).
SampledReason = Literal["no_label", "not_finite", "positive_logprob", "mass_above_one"]
SAMPLED_REASONS: tuple[SampledReason, ...] = ("no_label", "not_finite", "positive_logprob", "mass_above_one")
#: The most distinct answerers a run's envelope lists (a run asks at most 100,000 evaluations).
MAX_ANSWERERS = 16
#: The most low-mass question ids a run's envelope keeps.
MAX_LOW_MASS = 64


class Provenance(ReadAsDict, WireModel):
    """Who answered one evaluation, and how (see the module doc for the readouts).

    JSON (``to_json``): ``{"route", "model", "readout", "calibration", "profile"?,
    "temperatures"?, "samples"?, "validMass"?, "lowMass"?, "sampled"?, "sampledReasons"?, "replayed"?,
    "answerers"?}``: a key with nothing to say (None, empty, false) is left out.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    #: The route or kind that answered: local, fixture, cassette, typesafe, openai, ollama, ...
    route: str = Field(min_length=1, max_length=64)
    #: The model as the answerer named it (an LLM server's own id for the model it ran).
    model: str = Field(max_length=128)
    readout: Readout
    calibration: Calibration = "none"
    #: The profile's name (a local learned profile, or an LLM route's temperatures profile).
    profile: str | None = Field(default=None, max_length=128, exclude_if=omit_none)
    #: The temperatures applied, by question type (calibration "temperature" only).
    temperatures: dict[str, float] | None = Field(default=None, exclude_if=omit_none)
    #: How many samples each question took (readout "samples" only).
    samples: int | None = Field(default=None, ge=1, exclude_if=omit_none)
    #: Per question id: the share of the next-token mass (logprobs) or of the samples that named a
    #: valid label, before renormalising.
    valid_mass: dict[str, float] | None = Field(default=None, exclude_if=omit_none)
    #: Question ids whose valid mass was under the low-mass threshold (0.5): read those answers warily.
    low_mass: tuple[str, ...] = Field(default=(), exclude_if=omit_empty)
    #: Readout "logprobs" only: question ids none of whose labels was among the next tokens the server
    #: listed, read instead from constrained samples (the route's `samples` of them; valid mass 0).
    sampled: tuple[str, ...] = Field(default=(), exclude_if=omit_empty)
    #: Readout "logprobs" only: for each question in `sampled`, why its logprobs could not be read.
    sampled_reasons: dict[str, SampledReason] | None = Field(default=None, exclude_if=omit_none)
    #: A cassette gave back an answer recorded earlier; the other fields are the recording's.
    replayed: bool = Field(default=False, exclude_if=omit_empty)
    #: Readout "mixed" only: the run's distinct answerers.
    answerers: tuple[Provenance, ...] = Field(default=(), exclude_if=omit_empty)

    @property
    def key(self) -> str:
        """A text that two provenances share exactly when they name the same answerer the same way."""
        return json.dumps(self.identity.to_json(), sort_keys=True)

    @property
    def identity(self) -> Provenance:
        """The answerer without this evaluation's own details (valid mass, low-mass and sampled ids,
        and why those were sampled)."""
        if self.valid_mass is None and not self.low_mass and not self.sampled and self.sampled_reasons is None:
            return self
        return self.model_copy(update={"valid_mass": None, "low_mass": (), "sampled": (), "sampled_reasons": None})

    def describe(self) -> str:
        """One line naming the answerer, e.g. ``ollama qwen3:8b (logprobs, temperature profile p)``."""
        if self.readout == "mixed":
            return "several evaluators: " + "; ".join(a.describe() for a in self.answerers)
        how: list[str] = [self.readout]
        if self.samples:
            how[0] = f"{self.samples} samples"
        if self.sampled:
            how.append(f"sampled for {len(self.sampled)} question{'s' if len(self.sampled) > 1 else ''}")
        if self.profile:
            how.append(f"profile {self.profile}")
        if self.replayed:
            how.append("replayed from a cassette")
        return f"{self.route} {self.model or '-'} ({', '.join(how)})"


def recorded_provenance(recorded: object) -> Provenance:
    """Who answered a recorded evaluation (a cassette's ``evaluation``), marked replayed.

    The recording's ``evaluator`` when it has a valid one. A cassette written
    before answers named their answerer has none: the answer is then said to be
    ``recorded``, by the model it names. A cassette is a test's own file, and
    what it claims is shown, never trusted for more than display.
    """
    raw = recorded.get("evaluator") if isinstance(recorded, dict) else None
    if isinstance(raw, dict):
        try:
            found = Provenance.model_validate(raw, by_alias=True, by_name=False)
        except ValueError:
            found = None
        if found is not None and found.readout != "mixed":
            return found.model_copy(update={"replayed": True})
    model = recorded.get("model") if isinstance(recorded, dict) else None
    return Provenance(route="cassette", model=model[:128] if isinstance(model, str) else "", readout="recorded",
                      replayed=True)


class AnswererLog:
    """The distinct answerers of one run's evaluations, for its envelope's ``evaluator``.

    One answerer: its provenance, with the low-mass question ids of every
    evaluation. Several: readout ``mixed`` with each in `answerers` (at most
    16, in the order they first answered).
    """

    __slots__ = ("_answerers", "_low_mass")

    def __init__(self) -> None:
        self._answerers: dict[str, Provenance] = {}
        self._low_mass: dict[str, None] = {}

    def add(self, provenance: Provenance) -> None:
        key = provenance.key
        if key not in self._answerers and len(self._answerers) < MAX_ANSWERERS:
            self._answerers[key] = provenance.identity
        for qid in provenance.low_mass:
            if len(self._low_mass) >= MAX_LOW_MASS:
                break
            self._low_mass[qid] = None

    def summary(self) -> Provenance | None:
        if not self._answerers:
            return None
        low = tuple(self._low_mass)
        if len(self._answerers) == 1:
            [only] = self._answerers.values()
            return only.model_copy(update={"low_mass": low}) if low else only
        return Provenance(route="mixed", model="", readout="mixed", low_mass=low,
                          answerers=tuple(self._answerers.values()))


__all__ = ["READOUTS", "SAMPLED_REASONS", "AnswererLog", "Calibration", "Provenance", "Readout", "SampledReason",
           "recorded_provenance"]
