"""Score an evaluator on a labeled question set (used by the benchmark and the tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..contract.evaluation import validate_request
from ..questions import kind_of, listed

if TYPE_CHECKING:
    from ..contract.evaluation import Evaluation, EvaluationRequest


def load_labeled_set(path: str | Path) -> list[dict[str, Any]]:
    from .._json import read_json_file

    items: list[dict[str, Any]] = read_json_file(path, what="labeled set", max_bytes=64 << 20)["items"]
    return items


def is_correct(answer: dict[str, object], label: object) -> bool:
    return kind_of(str(answer["type"])).is_correct(answer, label)


def accuracy(answer_fn: Callable[[EvaluationRequest], Evaluation],
             items: list[dict[str, Any]]) -> dict[str, object]:
    """`answer_fn(request) -> Evaluation`; returns right/total per question type."""
    out: dict[str, list[int]] = {name: [0, 0] for name in listed()}
    for item in items:
        request = validate_request({"state": item["state"], "questions": {"q": item["question"]}})
        answer = answer_fn(request).answers["q"]
        tally = out[answer["type"]]
        tally[0] += is_correct(answer, item["label"])
        tally[1] += 1
    right = sum(v[0] for v in out.values())
    total = sum(v[1] for v in out.values())
    return {"right": right, "total": total, **{k: f"{v[0]}/{v[1]}" for k, v in out.items()}}


def first_option_baseline(items: list[dict[str, Any]]) -> int:
    """How many a trivial answerer gets: noul always yes, choice the first option, score level 0
    (each kind's `trivially_right`)."""
    right = 0
    for item in items:
        q, label = item["question"], item["label"]
        right += kind_of(q["type"]).trivially_right(q.get("criteria"), label)
    return right
