"""Calibration and learning commands: calibrate, learn."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    CONFIG_HELP,
    EXIT_NOT_COMPLETED,
    EXIT_OK,
    add_command,
    add_evaluator_options,
    config_from,
    positive_int,
    print_json,
)

if TYPE_CHECKING:
    from ..calibration.labels import LabeledExample
    from ..calibration.metrics import AnswerOutcome
    from ..evaluators.base import EvaluatorStatus


def _examples(args: argparse.Namespace) -> list[LabeledExample]:
    from ..calibration.labels import labels_from_cassette, read_labels
    from ..errors import LabelsInvalid

    if not args.labels and not args.from_cassette:
        raise LabelsInvalid("give a labels file, --from-cassette FILE, or both")
    examples = read_labels(args.labels) if args.labels else []
    if args.from_cassette:
        examples += labels_from_cassette(args.from_cassette)
    return examples


class _Bar:
    """A transient rich bar on a terminal (as `batch` draws); nothing when stderr is a pipe or a file."""

    def __init__(self, total: int, what: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = Console(stderr=True)
        self._progress = Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                  console=console, transient=True, disable=not console.is_terminal)
        self._task = self._progress.add_task(what, total=total)
        self._progress.start()

    def update(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def close(self) -> None:
        self._progress.stop()


def _progress(total: int, what: str) -> _Bar:
    return _Bar(total, what)


def _file_digest(path: str) -> str:
    """What a cached answer depends on besides the example: the fixture, cassette or profile file."""
    from .._files import read_regular

    if not path:
        return ""
    try:  # bounded like the largest of them (a cassette); a device or FIFO is not read at all
        return hashlib.sha256(read_regular(path, label=path, max_bytes=64 << 20, error=ValueError)).hexdigest()
    except ValueError:
        return ""


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


def _threshold_lines(s: dict[str, Any]) -> list[str]:
    target = s["targetPrecision"]
    cuts = s["thresholds"]
    if "allow" in cuts:  # a yes-or-no kind's (noul's) two thresholds, where the summary gives them
        out = []
        for side, verb, sign in (("allow", "auto-allow", "≥"), ("deny", "auto-deny", "≤")):
            cut = cuts[side]
            if cut is None:
                out.append(f"  {verb}: no noul threshold keeps precision ≥ {target:g} on these labels")
            else:
                out.append(f"  {verb} at noul {sign} {cut['threshold']:.2f} keeps precision ≥ {target:g} "
                           f"on these labels ({cut['precision']:.2f}), covering {_pct(cut['coverage'])} "
                           f"(recall {_pct(cut['recall'])})")
        return out
    cut = cuts["accept"]
    if cut is None:
        return [f"  accept without review: no confidence threshold keeps accuracy ≥ {target:g} on these labels"]
    return [f"  accept without review at confidence ≥ {cut['threshold']:.2f} keeps accuracy ≥ {target:g} "
            f"({cut['precision']:.2f}), covering {_pct(cut['coverage'])}"]


def _metrics_line(label: str, s: dict[str, Any]) -> str:
    return (f"{label:<8} {s['examples']:>5} examples  accuracy {_pct(s['accuracy']):>5}  "
            f"Brier {s['brier']:.3f}  ECE {s['ece']:.3f}")


async def _cmd_calibrate(args: argparse.Namespace) -> int:
    from ..calibration.ask import AnswerCache, ask_all
    from ..calibration.metrics import outcome, summary
    from ..errors import ConfigError
    from ..evaluators.local import LocalEvaluator
    from ..evaluators.select import build_evaluator
    from ..questions import listed

    if not 0 < args.target_precision <= 1:
        raise ConfigError("--target-precision must be in (0, 1]")
    config = config_from(args)
    examples = _examples(args)
    evaluator = build_evaluator(args.evaluator, config)
    try:
        status = evaluator.status()
        skipped = 0
        profile_digest = ""
        if isinstance(evaluator, LocalEvaluator) and evaluator.profile is not None:
            # Never test a profile on what it was trained on.
            trained = evaluator.profile.training
            kept = [e for e in examples if e.key not in trained]
            skipped = len(examples) - len(kept)
            examples = kept
            profile_digest = _file_digest(config.evaluator["profile"])
        if not examples:
            raise ConfigError("no examples left to test: the profile was trained on all of them")
        identity = json.dumps([status.route, status.model, config.model, profile_digest,
                               _file_digest((args.evaluator or "").partition(":")[2])])
        cache_path = Path(args.cache) if args.cache else (
            Path(args.report) / "answers.jsonl" if args.report else None)
        cache = AnswerCache(cache_path, identity)
        bar = _progress(len(examples), "asking")
        try:
            asked = await ask_all(evaluator, examples, cache=cache, concurrency=args.concurrency,
                                  timeout=config.request_timeout_ms / 1000,
                                  on_done=lambda _: bar.update(1))
        finally:
            bar.close()
    finally:
        await evaluator.aclose()
    by_type: dict[str, list[AnswerOutcome]] = {}
    failed = [a for a in asked if a.answer is None]
    models: dict[str, int] = {}
    for a in asked:
        if a.answer is None:
            continue
        by_type.setdefault(a.example.question.type, []).append(
            outcome(a.example.question, a.answer, a.example.label))
        models[a.model] = models.get(a.model, 0) + 1
    report: dict[str, Any] = {
        "examples": len(asked), "answered": len(asked) - len(failed), "failed": len(failed),
        "cached": sum(a.cached for a in asked), "skippedAsTrainingData": skipped,
        "evaluator": {"route": status.route, "model": status.model},
        "answeredBy": models,
        "types": {t: summary(by_type[t], args.target_precision) for t in listed() if t in by_type},
        "errors": sorted({a.error for a in failed if a.error})[:5],
    }
    pngs: list[Path] = []
    if args.report:
        from ..calibration.diagrams import write_pngs

        folder = Path(args.report)
        # Titled by what actually answered (the profile, say), not only by the evaluator's name.
        answered_by = max(models, key=lambda m: models[m]) if models else ""
        try:
            pngs = write_pngs(by_type, folder, title=answered_by or status.model or status.route)
        except ConfigError as exc:  # no matplotlib: every other part of the report is still written
            sys.stderr.write(f"calibrate: no reliability.png or coverage.png: {exc}\n")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        (folder / "report.txt").write_text(_calibration_text(report, status), encoding="utf-8")
        report["files"] = [str(p) for p in [*pngs, folder / "report.json", folder / "report.txt"]]
    if args.json:
        print_json(report)
    else:
        sys.stdout.write(_calibration_text(report, status))
    if len(failed) == len(asked):
        return EXIT_NOT_COMPLETED
    return EXIT_OK


def _calibration_text(report: dict[str, Any], status: EvaluatorStatus) -> str:
    lines: list[str] = []
    w = lines.append
    with_profile = f", profile {status.profile.name}" if status.profile is not None else ""
    w(f"calibrate: {report['examples']} examples, evaluator {status.route} "
      f"({status.model}{with_profile})\n")
    if report["skippedAsTrainingData"]:
        w(f"  skipped {report['skippedAsTrainingData']} examples the profile was trained on\n")
    if report["cached"]:
        w(f"  {report['cached']} answers came from the answer cache\n")
    for model, n in sorted(report["answeredBy"].items()):
        w(f"  answered by {model}: {n}\n")
    for kind, s in report["types"].items():
        w(_metrics_line(kind, s) + "\n")
        for line in _threshold_lines(s):
            w(line + "\n")
    if report["failed"]:
        w(f"failed: {report['failed']} examples (first error: {report['errors'][0]})\n")
    for f in report.get("files", []):
        w(f"wrote {f}\n")
    return "".join(lines)


async def _cmd_learn(args: argparse.Namespace) -> int:
    import anyio.to_thread

    from ..calibration.learn import learn
    from ..errors import ConfigError
    from ..evaluators.local import LocalEvaluator
    from ..evaluators.profile import profile_name

    if not 0 <= args.holdout < 1:
        raise ConfigError("--holdout must be in [0, 1)")
    if not 0 <= args.seed <= 1_000_000:
        raise ConfigError("--seed must be from 0 to 1000000")
    if args.folds == 1 or not 0 <= args.folds <= 50:
        raise ConfigError("--folds must be 0 (no cross-validation) or from 2 to 50")
    if args.evaluator not in (None, "local"):
        return await _cmd_learn_temperatures(args)
    examples = _examples(args)
    evaluator = LocalEvaluator()
    bar = _progress(len(examples), "learning")
    try:
        result = await anyio.to_thread.run_sync(lambda: learn(
            evaluator, examples, name=args.name or profile_name(args.out), holdout=args.holdout,
            folds=args.folds, target=args.target_precision, progress=bar.update, seed=args.seed))
    finally:
        bar.close()
    size = result.profile.save(args.out)
    report = {**result.report, "profile": {"path": args.out, "bytes": size,
                                           "signatures": len(result.profile.models),
                                           "examples": result.profile.examples}}
    if args.json:
        print_json(report)
        return EXIT_OK
    _print_learning(report)
    return EXIT_OK


async def _cmd_learn_temperatures(args: argparse.Namespace) -> int:
    """learn --evaluator ROUTE:MODEL: a temperature per question type, saved as the route's profile."""
    from ..calibration.ask import AnswerCache
    from ..calibration.learn_temperatures import learn_temperatures
    from ..errors import ConfigError
    from ..evaluators.llm_profile import LlmProfile
    from ..evaluators.llm_routes import LLM_ROUTES
    from ..evaluators.profile import profile_name
    from ..evaluators.select import build_evaluator

    kind, _, model = args.evaluator.partition(":")
    if (kind not in LLM_ROUTES and kind != "gguf") or not model:
        raise ConfigError(f"learn fits the local evaluator (no --evaluator) or a model route's temperatures "
                          f"({', '.join(r + ':MODEL' for r in LLM_ROUTES)}, gguf:FILE), not {args.evaluator!r}")
    if kind == "gguf":  # the profile names the model as the route's answers do: by the file's name
        from ..evaluators.gguf_file import model_name

        model = model_name(model)
    config = config_from(args)
    # The answers as the model gives them: a profile the config attaches is not what is being fitted.
    config = config.model_copy(update={"evaluator": {k: v for k, v in config.evaluator.items() if k != "profile"}})
    examples = _examples(args)
    evaluator = build_evaluator(args.evaluator, config)
    bar = _progress(len(examples), "asking")
    cache = AnswerCache(Path(args.cache) if args.cache else None,
                        identity=f"{args.evaluator}\n{json.dumps(config.evaluator, sort_keys=True)}")
    try:
        fit = await learn_temperatures(evaluator, examples, holdout=args.holdout, seed=args.seed,
                                       target=args.target_precision, concurrency=args.concurrency,
                                       timeout=config.request_timeout_ms / 1000 * 4,
                                       on_done=lambda _: bar.update(), cache=cache)
    finally:
        bar.close()
        await evaluator.aclose()
    report = fit.report
    if not report["before"]:
        raise ConfigError(f"no example was answered ({report['failed']} failed; first error: "
                          f"{(report['errors'] or ['none'])[0]})")
    # How the answers were read (logprobs, or samples where the server gave none): the profile is
    # applied only to answers read the same way.
    readout = getattr(evaluator, "mode", None)
    profile = LlmProfile(name=args.name or profile_name(args.out), route=kind, model=model,
                         temperatures=fit.temperatures,
                         readout=readout if readout in ("logprobs", "samples") else None,
                         report={"examples": report["examples"], "trained": report["trained"], "seed": report["seed"],
                                 "heldOut": {"examples": report["heldOut"], **{
                                     k: {"before": report["before"][k], "after": report["after"][k]}
                                     for k in ("accuracy", "brier", "ece")}}})
    profile.save(args.out)
    report = {**report, "profile": {"path": args.out, "temperatures": fit.temperatures}}
    if args.json:
        print_json(report)
        return EXIT_OK
    _print_temperatures(report, args.evaluator)
    return EXIT_OK


def _print_temperatures(report: dict[str, Any], spec: str) -> None:
    w = sys.stdout.write
    w(f"learn: {report['examples']} examples for {spec}; fitted on {report['trained']}, held out "
      f"{report['heldOut']} ({_pct(report['holdout'])}), split per question signature"
      + (f" (seed {report['seed']})" if report["seed"] else "") + "\n")
    if report["failed"]:
        w(f"  {report['failed']} examples failed and were left out (first error: {report['errors'][0]})\n")
    before, after = report["before"], report["after"]
    w("held-out       as answered   with temperatures\n")
    for key, name, fmt in (("accuracy", "accuracy", _pct), ("ece", "ECE", "{:.3f}".format),
                           ("brier", "Brier", "{:.3f}".format)):
        w(f"  {name:<12} {fmt(before[key]):>11}   {fmt(after[key]):>17}\n")
    for qtype, t in report["types"].items():
        if t["temperature"] is None:
            w(f"  [{qtype}] no training example: left at 1\n")
            continue
        line = f"  [{qtype}] temperature {t['temperature']:.2f} (fitted on {t['trained']})"
        if t["before"] and t["after"]:
            line += (f", held out {t['heldOut']}: ECE {t['before']['ece']:.3f} → {t['after']['ece']:.3f}, "
                     f"Brier {t['before']['brier']:.3f} → {t['after']['brier']:.3f}")
        w(line + "\n")
    w(f"wrote {report['profile']['path']}\n")


def _print_learning(report: dict[str, Any]) -> None:
    w = sys.stdout.write
    w(f"learn: {report['examples']} examples; trained on {report['trained']}, held out "
      f"{report['heldOut']} ({_pct(report['holdout'])}), split per question signature"
      + (f" (seed {report['seed']})" if report["seed"] else "") + "\n")
    before, after = report["before"], report["after"]
    if before and after:
        w("held-out       heuristic   with profile\n")
        for key, name, fmt in (("accuracy", "accuracy", _pct), ("ece", "ECE", "{:.3f}".format),
                               ("brier", "Brier", "{:.3f}".format)):
            w(f"  {name:<12} {fmt(before[key]):>9}   {fmt(after[key]):>12}\n")
    else:
        w("no held-out examples: nothing measured on a held-out share (use --holdout > 0)\n")
    cv = report.get("crossValidated")
    if cv and cv["before"] and cv["after"]:
        w(f"cross-validated ({cv['folds']} folds, each of the {cv['examples']} examples answered by a "
          f"profile fitted without it): accuracy {_pct(cv['before']['accuracy'])} → "
          f"{_pct(cv['after']['accuracy'])}, ECE {cv['before']['ece']:.3f} → {cv['after']['ece']:.3f}\n")
    for sig in report["signatures"]:
        head = f"  [{sig['type']}] {sig['instructions']}: trained on {sig['trained']}"
        if sig["before"] and sig["after"]:
            head += (f", held out {sig['heldOut']}: accuracy {_pct(sig['before']['accuracy'])} → "
                     f"{_pct(sig['after']['accuracy'])}, ECE {sig['before']['ece']:.3f} → "
                     f"{sig['after']['ece']:.3f}")
        w(head + ("" if sig["fit"] else " (too few examples: answered by the heuristic)") + "\n")
    p = report["profile"]
    w(f"wrote {p['path']} ({p['signatures']} signatures, {p['examples']} examples, "
      f"{p['bytes'] / 1024:.0f} KiB)\n")


def _add_label_sources(parser: argparse.ArgumentParser) -> None:
    """LABELS and --from-cassette: where calibrate and learn read examples (see _examples)."""
    parser.add_argument("labels", nargs="?", help="labels file (JSONL, one example a line)")
    parser.add_argument("--from-cassette", metavar="FILE", help="also use a cassette's recorded answers as labels")


def add_learning_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cal = add_command(
        sub, "calibrate", help="measure an evaluator on labeled examples (accuracy, Brier, ECE, thresholds)",
        description="Ask an evaluator every labeled example (bounded concurrency, a resumable answer "
                    "cache) and report per question type: accuracy, Brier score, expected calibration "
                    "error and thresholds that keep a target precision; with --report, reliability and "
                    "coverage PNGs. With a local-evaluator profile, the examples it was trained on are "
                    "skipped. See docs/evaluators.md.",
        codes=("0 reported", "1 the evaluator failed on every example",
               "2 bad labels, config, evaluator or profile"))
    _add_label_sources(cal)
    add_evaluator_options(cal, config=False)
    cal.add_argument("--report", metavar="DIR", help="write reliability.png, coverage.png, report.json "
                     "and the answer cache there (PNGs need the report extra)")
    cal.add_argument("--cache", metavar="FILE", help="answer cache (default: DIR/answers.jsonl with --report)")
    cal.add_argument("--concurrency", type=positive_int, default=4,
                     help="questions in flight at once (default 4)")
    cal.add_argument("--target-precision", type=float, default=0.95,
                     help="suggest thresholds that keep this precision (default 0.95)")
    cal.add_argument("--json", action="store_true", help="print the report as JSON")
    cal.add_argument("--config", help=CONFIG_HELP)
    cal.set_defaults(handler=_cmd_calibrate)

    le = add_command(
        sub, "learn", help="fit a profile from labeled examples (the local evaluator, or a model's temperatures)",
        description="Fit a profile that adapts the local evaluator to labeled examples, per question "
                    "signature, on a training share; print the heuristic's and the profile's accuracy, "
                    "Brier and ECE on the held-out share and cross-validated over every example. Use it "
                    "with --evaluator local --profile FILE. With --evaluator ROUTE:MODEL (openai, ollama, "
                    "anthropic) or gguf:FILE, fit that model's temperatures instead, one per question type, and print "
                    "held-out accuracy, Brier and ECE as answered and with them. See docs/evaluators.md.",
        codes=("0 profile written", "2 bad labels or options, the local model is not installed, or no "
               "example could be answered"))
    _add_label_sources(le)
    le.add_argument("--out", required=True, metavar="PROFILE.json", help="where to write the profile")
    le.add_argument("--name", help="the profile's name in answers' model (default: from --out)")
    le.add_argument("--holdout", type=float, default=0.3,
                    help="share of each signature's examples held out to measure it (default 0.3)")
    le.add_argument("--seed", type=int, default=0,
                    help="another seed holds out another share, to see how much the held-out figures "
                         "move (default 0)")
    le.add_argument("--folds", type=int, default=5,
                    help="also cross-validate over all examples with this many folds (0: don't; default 5)")
    le.add_argument("--target-precision", type=float, default=0.95,
                    help="the precision the reported thresholds keep (default 0.95)")
    le.add_argument("--json", action="store_true", help="print the report as JSON")
    le.add_argument("--evaluator", metavar="ROUTE:MODEL",
                    help="fit a model route's temperatures instead (openai:MODEL, ollama:MODEL, "
                         "anthropic:MODEL): one per question type, saved as that route's profile")
    le.add_argument("--config", help=CONFIG_HELP + " (with --evaluator: base URLs, credentials)")
    le.add_argument("--concurrency", type=positive_int, default=4,
                    help="with --evaluator: examples in flight at once (default 4)")
    le.add_argument("--cache", metavar="FILE",
                    help="with --evaluator: answer cache, so an interrupted run resumes (JSONL)")
    le.set_defaults(handler=_cmd_learn)
