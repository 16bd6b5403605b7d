"""`fabric-jev learn --evaluator ROUTE:MODEL`: a temperature per question type, from the user's labels.

The examples are split as the local evaluator's `learn` splits them (per
question signature, by content digest, so the split never depends on file
order): the held-out share is never used for fitting. The evaluator answers
every example once, without any profile. Per question type a temperature is
fitted on the training share's answers (temperature.fit_temperature); on the
held-out share the report gives accuracy, Brier and ECE of the answers as
given ("before") and with the temperature applied ("after").

A temperature never changes what an answer picks (the order of the
probabilities is kept), so accuracy is the same before and after; Brier and
ECE move. Applying it to the answers already given is exactly what the route
does at answer time: it tempers the distribution it read and picks its
most probable label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract.evaluation import Question
from ..evaluators.base import Evaluator
from ..evaluators.profile import answer_distribution
from ..evaluators.readout import temper
from ..questions import kind_of, listed
from .ask import AnswerCache, Asked, ask_all
from .labels import LabeledExample, classes_of
from .learn import split
from .metrics import AnswerOutcome, outcome, summary
from .temperature import fit_temperature, nll


@dataclass(frozen=True)
class TemperatureFit:
    #: Per question type seen in the training share; a type absent here is left at 1.
    temperatures: dict[str, float]
    report: dict[str, Any]


def tempered(question: Question, answer: dict[str, object], temperature: float) -> dict[str, object]:
    """`answer` as the route gives it with `temperature` applied: its probabilities scaled, and the
    rest (a choice's pick and confidence, a score's level and confidence) built from them by the
    route's own readout (the kind's `route_reading`), so the report measures exactly what the route
    will answer."""
    probs = temper(answer_distribution(question, answer), temperature)
    return {**answer, **kind_of(question.type).route_reading(question, probs)}


def _label_index(example: LabeledExample) -> int:
    return classes_of(example.question).index(example.label)


async def learn_temperatures(evaluator: Evaluator, examples: Sequence[LabeledExample], *,
                             holdout: float = 0.3, seed: int = 0, target: float = 0.95, concurrency: int = 4,
                             timeout: float = 60.0, identity: str = "",
                             on_done: Callable[[Asked], None] | None = None,
                             cache: AnswerCache | None = None) -> TemperatureFit:
    """Ask `evaluator` every example, fit a temperature per type on the training share, report both shares."""
    train, test = split(examples, holdout, seed)
    asked = await ask_all(evaluator, [*train, *test], cache=cache or AnswerCache(None, identity),
                          concurrency=concurrency, timeout=timeout, on_done=on_done)
    answers = {a.example.id: a.answer for a in asked if a.answer is not None}
    errors = [a.error for a in asked if a.error]
    models: dict[str, int] = {}
    for a in asked:
        if a.answer is not None:
            models[a.model] = models.get(a.model, 0) + 1
    temperatures: dict[str, float] = {}
    types: dict[str, dict[str, Any]] = {}
    for qtype in listed():
        fit_on = [e for e in train if e.question.type == qtype and e.id in answers]
        held = [e for e in test if e.question.type == qtype and e.id in answers]
        if not fit_on and not held:
            continue
        dists = [answer_distribution(e.question, answers[e.id]) for e in fit_on]
        labels = [_label_index(e) for e in fit_on]
        temperature = fit_temperature(dists, labels) if fit_on else 1.0
        if fit_on:
            temperatures[qtype] = temperature
        before = [outcome(e.question, answers[e.id], e.label) for e in held]
        after = [outcome(e.question, tempered(e.question, answers[e.id], temperature), e.label) for e in held]
        types[qtype] = {
            "temperature": temperature if fit_on else None, "trained": len(fit_on), "heldOut": len(held),
            "trainingNll": {"before": nll(dists, labels, 1.0), "after": nll(dists, labels, temperature)}
            if fit_on else None,
            "before": summary(before, target) if held else None,
            "after": summary(after, target) if held else None,
            "_outcomes": (before, after),
        }
    pooled_before: list[AnswerOutcome] = [o for t in types.values() for o in t["_outcomes"][0]]
    pooled_after: list[AnswerOutcome] = [o for t in types.values() for o in t["_outcomes"][1]]
    for t in types.values():
        del t["_outcomes"]
    report: dict[str, Any] = {
        "examples": len(examples), "trained": len(train), "heldOut": len(test), "holdout": holdout, "seed": seed,
        "answeredBy": models, "failed": len(errors), "errors": errors[:3],
        "temperatures": temperatures,
        "before": summary(pooled_before, target) if pooled_before else None,
        "after": summary(pooled_after, target) if pooled_after else None,
        "types": types,
    }
    return TemperatureFit(temperatures, report)

