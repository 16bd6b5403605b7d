"""The eval report: every number in it recomputed from results.jsonl alone, by a second implementation.

The page marks each number with the JSON pointer of summary.json it shows;
this test computes each of them again from the results lines (its own
comparison, Wilson interval, confusion counts, calibration, percentiles and
McNemar test, written here from their definitions) and holds both the page
and summary.json to them. tests/test_eval_browser.py opens the same report
in Chromium.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.eval_support import Evaluated, evaluate_example, numbers_in, resolve, shown_matches

Z = 1.959963984540054


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    return evaluate_example(tmp_path_factory.mktemp("eval-report"))


def _matches(expected: Any, actual: Any, tolerance: float) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float):
        return isinstance(actual, int | float) and abs(actual - expected) <= tolerance + 1e-9
    return type(expected) is type(actual) and expected == actual


def _wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    a, b, c = 1 + Z * Z / n, -(2 * p + Z * Z / n), p * p
    root = math.sqrt(b * b - 4 * a * c)
    low, high = (-b - root) / (2 * a), (-b + root) / (2 * a)
    return (0.0 if k == 0 else low), (1.0 if k == n else high)


def _mcnemar_p(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    if n < 25:
        return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n)
    x = (abs(b - c) - 1) ** 2 / n
    return math.erfc(math.sqrt(x / 2))


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for start, length in sorted(intervals):
        # A line after the covered stretch adds its own length: start + length - start would
        # round at the epoch's precision (about 2e-7 s), enough to miss 1e-6 over many lines.
        total += length if start >= end else max(0.0, start + length - end)
        end = max(end, start + length)
    return total


def _pick(answer: dict[str, Any]) -> tuple[Any, float, list[Any], list[float]]:
    """(picked class, its probability, the classes, their probabilities) of an answer."""
    if answer["type"] == "noul":
        p = answer["noul"]
        return p >= 0.5, max(p, 1 - p), [False, True], [1 - p, p]
    classes = list(answer["probabilities"])
    probs = [answer["probabilities"][k] for k in classes]
    if answer["type"] == "choice":
        return answer["choice"], answer["probabilities"][answer["choice"]], classes, probs
    level = min(len(classes) - 1, max(0, round(answer["score"])))
    return str(level), answer["probabilities"][str(level)], classes, probs


def _label(answer: dict[str, Any], value: Any) -> Any:
    if answer["type"] == "noul":
        return value if isinstance(value, bool) else None
    if answer["type"] == "choice":
        return value if isinstance(value, str) and value in answer["probabilities"] else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != round(value):
        return None
    return str(round(value)) if str(round(value)) in answer["probabilities"] else None


def _calibration(values: dict[str, Any], at: str, outcomes: list[tuple[float, bool, float]]) -> None:
    """ECE over 10 equal bins, Brier, reliability: outcomes are (confidence, right, brier)."""
    n = len(outcomes)
    bins: list[list[tuple[float, bool, float]]] = [[] for _ in range(10)]
    for o in outcomes:
        bins[min(int(o[0] * 10), 9)].append(o)
    values[f"{at}/ece"] = sum(len(b) / n * abs(sum(o[1] for o in b) / len(b) - sum(o[0] for o in b) / len(b))
                              for b in bins if b) if n else None
    for index, b in enumerate(bins):
        values[f"{at}/reliability/{index}/accuracy"] = sum(o[1] for o in b) / len(b) if b else 0.0


def recompute(results: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Every number the report shows, by pointer, from the results lines (and the summary's names)."""
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    bad = sorted((x for x in lines if "bad" in x), key=lambda x: x["line"])
    runs = [x for x in lines if "bad" not in x]
    tolerance = summary["settings"]["tolerance"]
    values: dict[str, Any] = {f"/settings/tolerance/{k}": v for k, v in tolerance.items()}
    cells = list(dict.fromkeys((r["evaluator"], r["variant"]) for r in runs))
    assert cells == [(c["evaluator"], c["variant"]) for c in summary["cells"]]
    ids = {r["id"] for r in runs}
    values.update({"/dataset/bad": len(bad), "/dataset/cases": len(ids), "/dataset/lines": len(ids) + len(bad)})
    values.update({f"/dataset/badLines/{k}/line": b["line"] for k, b in enumerate(bad)})
    verdicts: list[dict[Any, bool]] = []
    for i, cell in enumerate(cells):
        at = f"/cells/{i}"
        records = [r for r in runs if (r["evaluator"], r["variant"]) == cell]
        named = summary["cells"][i]
        passes: dict[Any, bool] = {}
        fields: dict[str, list[tuple[Any, Any, bool]]] = defaultdict(list)  # (expected, actual or KeyError, ok)
        for r in records:
            done = r["state"] == "completed"
            ok_all = done
            for field, want in r["expected"].items():
                present = done and field in r["result"]
                ok = present and _matches(want, r["result"][field], tolerance.get(field, tolerance.get("*", 0)))
                fields[field].append((want, r["result"][field] if present else KeyError, ok))
                ok_all = ok_all and ok
            passes[r["id"]] = ok_all
            assert r["passed"] == ok_all, r["line"]  # the stored verdict is the recomputed one
        verdicts.append(passes)
        passed, n = sum(passes.values()), len(records)
        low, high = _wilson(passed, n)
        values.update({f"{at}/lines": n, f"{at}/passed": passed, f"{at}/passRate": passed / n,
                       f"{at}/passRateInterval/low": low, f"{at}/passRateInterval/high": high,
                       f"{at}/notCompleted": sum(r["state"] != "completed" for r in records)})
        for field, seen in fields.items():
            fat = f"{at}/fields/{field}"
            right = sum(ok for _, _, ok in seen)
            values.update({f"{fat}/lines": len(seen), f"{fat}/correct": right, f"{fat}/accuracy": right / len(seen)})
            numbers = [abs(a - e) for e, a, _ in seen if isinstance(a, int | float) and not isinstance(a, bool)
                       and a is not KeyError]
            values[f"{fat}/mae"] = sum(numbers) / len(numbers) if named["fields"][field]["kind"] == "number" else None
            confusion = named["fields"][field]["confusion"]
            if confusion is not None:
                text = lambda v: v if isinstance(v, str) else json.dumps(v)  # noqa: E731
                counted = Counter((text(e), "(none)" if a is KeyError else text(a)) for e, a, _ in seen)
                for r_i, row in enumerate(confusion["labels"]):
                    for c_i, col in enumerate(confusion["labels"]):
                        values[f"{fat}/confusion/counts/{r_i}/{c_i}"] = counted[(row, col)]
        pooled: list[tuple[float, bool, float]] = []
        for qid, question in named["questions"].items():
            qat = f"{at}/questions/{qid}"
            answered = [(r, a) for r in records for j in r["judgments"] for q, a in j["answers"].items() if q == qid]
            values[f"{qat}/answers"] = len(answered)
            values[f"{qat}/meanConfidence"] = sum(_pick(a)[1] for _, a in answered) / len(answered)
            outcomes = []
            for r, a in answered:
                field = question["field"]
                if field is None or field not in r["expected"]:
                    continue
                label = _label(a, r["expected"][field])
                if label is None:
                    continue
                picked, confidence, classes, probs = _pick(a)
                brier = ((a["noul"] - float(label)) ** 2 if a["type"] == "noul"
                         else sum((p - (1.0 if k == label else 0.0)) ** 2 for k, p in zip(classes, probs, strict=True)))
                outcomes.append((confidence, picked == label, brier))
            values[f"{qat}/labeled"] = len(outcomes)
            values[f"{qat}/agreement"] = sum(o[1] for o in outcomes) / len(outcomes) if outcomes else None
            values[f"{qat}/brier"] = sum(o[2] for o in outcomes) / len(outcomes) if outcomes else None
            _calibration(values, qat, outcomes)
            pooled += outcomes
        _calibration(values, at, pooled)
        seconds = [r["seconds"] for r in records]
        cost = f"{at}/cost"
        values.update({
            f"{cost}/evaluations": sum(r["evaluations"] for r in records),
            f"{cost}/toolCalls": sum(r["toolCalls"] for r in records),
            f"{cost}/inputTokens": sum(r["usage"]["input_tokens"] for r in records),
            f"{cost}/outputTokens": sum(r["usage"]["output_tokens"] for r in records),
            f"{cost}/wallSeconds": _union([(r["started"], r["seconds"]) for r in records]),
            f"{cost}/lineSecondsP50": float(np.percentile(seconds, 50)),
            f"{cost}/lineSecondsP95": float(np.percentile(seconds, 95)),
            f"{cost}/lineSecondsMean": sum(seconds) / len(seconds), f"{cost}/lineSecondsMax": max(seconds)})
    pair = 0
    for i in range(len(cells)):
        for j in range(i + 1, len(cells)):
            shared = [(verdicts[i][k], verdicts[j][k]) for k in verdicts[j] if k in verdicts[i]]
            first_only = sum(a and not b for a, b in shared)
            second_only = sum(b and not a for a, b in shared)
            both = sum(a and b for a, b in shared)
            at = f"/pairs/{pair}"
            values.update({f"{at}/lines": len(shared), f"{at}/bothPassed": both, f"{at}/firstOnly": first_only,
                           f"{at}/secondOnly": second_only,
                           f"{at}/bothFailed": len(shared) - both - first_only - second_only,
                           f"{at}/difference": (second_only - first_only) / len(shared),
                           f"{at}/pValue": _mcnemar_p(first_only, second_only)})
            pair += 1
    return values


def test_every_number_of_the_report_is_recomputed_from_the_results_file(evaluated: Evaluated) -> None:
    summary = evaluated.summary
    values = recompute(evaluated.out / "results.jsonl", summary)
    shown = numbers_in(evaluated.page.read_text())
    assert len(shown) > 150  # the matrix, both cells' fields, confusions, questions, bins, cost, pairs, bad lines
    for number in shown:
        pointer, kind = number["pointer"], number["kind"]
        assert pointer in values, f"the report shows {pointer}, which this test does not recompute"
        want = values[pointer]
        got = resolve(summary, pointer)
        assert (got is None) == (want is None) and (want is None or math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)), \
            (pointer, got, want)
        if kind == "bar":  # a reliability bar: its height is the bin's accuracy at the diagram's scale
            assert math.isclose(float(number["attrs"]["height"]), want * float(number["attrs"]["data-scale"]),
                                abs_tol=0.006), pointer
        else:
            assert shown_matches(number["text"], kind, want), (pointer, number["text"], want)
    # And the other way round: every cell's pass rate, fields, questions and cost are on the page.
    on_page = {n["pointer"] for n in shown}
    for pointer, value in values.items():
        if "/reliability/" not in pointer and value is not None:  # an empty bin draws no bar; no MAE of a label
            assert pointer in on_page, f"{pointer} is not in the report"


def test_the_example_matrix_shows_a_real_difference_between_the_wordings(evaluated: Evaluated) -> None:
    summary = evaluated.summary
    base, deadline = summary["cells"]
    assert base["passRate"] > deadline["passRate"]
    assert base["fields"]["urgent"]["accuracy"] > deadline["fields"]["urgent"]["accuracy"]
    assert base["fields"]["route"]["accuracy"] == deadline["fields"]["route"]["accuracy"]  # same wording
    (pair,) = summary["pairs"]
    assert pair["pValue"] < 0.05 and pair["firstOnly"] > pair["secondOnly"]
    assert summary["dataset"]["bad"] == 3 and summary["dataset"]["lines"] == 43


def test_the_report_is_one_file_that_needs_nothing_else(evaluated: Evaluated) -> None:
    page = evaluated.page.read_text()
    assert "default-src 'none'" in page  # its policy forbids every fetch
    for outside in ("http://", "https://", "src=", "<link", "@import", "url("):
        assert outside not in page.replace("http://www.w3.org", ""), outside
    assert sorted(p.name for p in (evaluated.report / "png").iterdir()) == [
        "confusion-0.png", "confusion-1.png", "pass-rates.png", "reliability-0.png", "reliability-1.png"]
    for png in (evaluated.report / "png").iterdir():
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_from_the_dataset_cannot_become_markup(tmp_path: Path) -> None:
    from fabric_jev.evals.report import render
    from fabric_jev.evals.summary import EvalSummary

    summary = EvalSummary.from_json(json.loads(json.dumps(_hostile_summary())))
    page = render(summary)
    assert "<script>alert" not in page and "</script><img" not in page
    assert page.count("<script") == 2  # the data and the page's own script, nothing a line brought


def _hostile_summary() -> dict[str, Any]:
    from fabric_jev.benchmarks.evals import synthetic_summary

    summary, _ = synthetic_summary(5)
    data = summary.to_json()
    data["program"] = "<script>alert(1)</script>"
    data["cells"][0]["worst"][0]["input"] = {"text": "</script><img src=x onerror=alert(1)>"}
    data["dataset"]["badLines"] = [{"line": 9, "error": "dataset line 9: <script>alert(2)</script>"}]
    data["dataset"]["bad"] = 1
    return data
