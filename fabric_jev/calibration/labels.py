"""The labels format: what a question's right answer was, one example a line.

JSONL, one object a line (blank lines are skipped)::

    {"id": "t-17",                                   # optional, unique
     "state": "I was charged twice ...",             # string, array or object
     "question": {"type": "choice", "instructions": "...", "criteria": {...}},
     "label": "Billing"}                             # true|false, an option, a 0-based level

or an approval label, which teaches the auto-approval classifier's questions::

    {"action": {"ref": "shell.exec", "risk": "execute", "arguments": {"cmd": "pytest -q"}},
     "userText": "run the tests", "label": "allow"}  # or "ask"; "secrets"/"destructive": bool

A cassette of recorded answers (the one cassette format, read by
evaluators/cassette.py) is a label source too: each recorded answer becomes
an example labeled with what the evaluator answered (the choice,
``noul >= 0.5``, the rounded score).

Every problem is reported as one line naming the file and line number.
Pure code: no I/O beyond reading the file it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._json import JSONInputError, loads_bounded
from ..contract.evaluation import (
    EvaluationRequest,
    Question,
    validate_answers,
    validate_request,
)
from ..contract.values import key_names
from ..errors import EvaluationError, LabelsInvalid
from ..evaluators.profile import example_key, signature_of
from ..questions import Label as Label  # calibration's name for it, kept
from ..questions import kind_of

MAX_FILE_BYTES = 64 << 20
MAX_LINE_BYTES = 256 << 10
MAX_EXAMPLES = 100_000
_KEYS = {"id", "state", "question", "label"}


def classes_of(question: Question) -> list[Label]:
    """The answers a question can have, in a fixed order."""
    return kind_of(question.type).label_classes(question)


@dataclass(frozen=True, slots=True)
class LabeledExample:
    id: str
    state: Any
    question: Question  # its id is always "q"
    label: Label
    line: int  # 1-based line of the labels file, or the cassette entry's position

    @property
    def key(self) -> str:
        return example_key(self.state, self.question)

    @property
    def signature(self) -> str:
        return signature_of(self.question)

    @property
    def class_index(self) -> int:
        return classes_of(self.question).index(self.label)

    def request(self) -> EvaluationRequest:
        return EvaluationRequest(state=self.state, questions=(self.question,))


def check_label(question: Question, label: object) -> Label:
    """The label if it fits the question, else LabelsInvalid (without a place: callers add it)."""
    return kind_of(question.type).check_label(question, label)


def label_from_answer(question: Question, answer: dict[str, Any]) -> Label:
    """What a recorded answer says the label is."""
    return kind_of(question.type).picked(question, answer)


def parse_example(raw: object, line: int) -> LabeledExample:
    if not isinstance(raw, dict):
        raise LabelsInvalid("an example must be an object {state, question, label, id?}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise LabelsInvalid(f"unknown keys: {key_names(unknown)}")
    for key in ("state", "question", "label"):
        if key not in raw:
            raise LabelsInvalid(f"missing {key!r}")
    example_id = raw.get("id", f"line-{line}")
    if not isinstance(example_id, str) or not 1 <= len(example_id) <= 128:
        raise LabelsInvalid("'id' must be a string of 1-128 characters")
    try:
        request = validate_request({"state": raw["state"], "questions": {"q": raw["question"]}})
    except EvaluationError as exc:
        raise LabelsInvalid(str(exc).replace("question 'q'", "the question")) from None
    question = request.questions[0]
    return LabeledExample(id=example_id, state=raw["state"], question=question,
                          label=check_label(question, raw["label"]), line=line)


_APPROVAL_KEYS = {"id", "action", "userText", "label", "secrets", "destructive"}


def parse_approval_label(raw: dict[str, Any], line: int) -> list[LabeledExample]:
    """An approval label — ``{"action": {ref, risk, description?, arguments?}, "userText": "...",
    "label": "allow" | "ask", "secrets"?: bool, "destructive"?: bool}`` — as examples of the
    auto-approval classifier's own questions (docs/approvals.md, "The classifier"): ``safe`` is
    the label, ``secrets`` and ``destructive`` when given. The state is the classifier's evidence."""
    from ..approval.classifier import QUESTIONS
    from ..approval.evidence import ApprovalRequest, ProposedAction, build_evidence

    unknown = set(raw) - _APPROVAL_KEYS
    if unknown:
        raise LabelsInvalid(f"unknown keys: {key_names(unknown)}")
    action, label = raw.get("action"), raw.get("label")
    if not isinstance(action, dict) or not isinstance(action.get("ref"), str) \
            or set(action) - {"ref", "risk", "description", "arguments"}:
        raise LabelsInvalid("'action' must be an object {ref, risk?, description?, arguments?}")
    if label not in ("allow", "ask"):
        raise LabelsInvalid("an approval label must be \"allow\" or \"ask\"")
    user_text = raw.get("userText")
    if not isinstance(user_text, str) or not user_text.strip():
        raise LabelsInvalid("an approval label needs 'userText', what the user asked for")
    example_id = raw.get("id", f"line-{line}")
    if not isinstance(example_id, str) or not 1 <= len(example_id) <= 120:
        raise LabelsInvalid("'id' must be a string of 1-120 characters")
    try:
        state, _ = build_evidence(ApprovalRequest(user_text, ProposedAction(
            action["ref"], str(action.get("risk", "execute")), str(action.get("description", "")),
            action.get("arguments"))))
    except (ValueError, TypeError, RecursionError) as exc:
        raise LabelsInvalid(f"the action cannot be read: {exc}") from None
    labels: dict[str, bool] = {"safe": label == "allow"}
    for qid in ("secrets", "destructive"):
        if qid in raw:
            if not isinstance(raw[qid], bool):
                raise LabelsInvalid(f"'{qid}' must be true or false")
            labels[qid] = raw[qid]
    out = []
    for qid, value in labels.items():
        request = validate_request({"state": state, "questions": {"q": QUESTIONS[qid]}}, max_bytes=1 << 20)
        out.append(LabeledExample(id=f"{example_id}:{qid}", state=state, question=request.questions[0],
                                  label=value, line=line))
    return out


def parse_labels(text: str, *, source: str = "labels") -> list[LabeledExample]:
    """Every example of a JSONL text; the first bad line raises LabelsInvalid naming it."""
    examples: list[LabeledExample] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            raw = loads_bounded(line, what=where, max_bytes=MAX_LINE_BYTES)
        except JSONInputError as exc:
            raise LabelsInvalid(str(exc)) from None
        try:
            found = (parse_approval_label(raw, number) if isinstance(raw, dict) and "action" in raw
                     else [parse_example(raw, number)])
        except LabelsInvalid as exc:
            raise LabelsInvalid(f"{where}: {exc}") from None
        for example in found:
            if example.id in seen:
                raise LabelsInvalid(f"{where}: id {example.id!r} already used on line {seen[example.id]}")
            seen[example.id] = number
            examples.append(example)
        if len(examples) > MAX_EXAMPLES:
            raise LabelsInvalid(f"{where}: more than {MAX_EXAMPLES} examples")
    if not examples:
        raise LabelsInvalid(f"{source} has no examples")
    return examples


def _read_text(path: str | Path, what: str) -> str:
    from .._files import read_regular

    path = Path(path)
    # Only a regular file, refused at once otherwise (a FIFO would wait, /dev/zero never end).
    data = read_regular(path, label=f"{what} {path}", max_bytes=MAX_FILE_BYTES, error=LabelsInvalid)
    if data.startswith(b"\xef\xbb\xbf"):
        raise LabelsInvalid(f"{what} {path} starts with a byte-order mark; save it as plain UTF-8")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise LabelsInvalid(f"{what} {path} line {line}: not UTF-8") from None


def read_labels(path: str | Path) -> list[LabeledExample]:
    return parse_labels(_read_text(path, "labels file"), source=str(path))


def labels_from_cassette(path: str | Path) -> list[LabeledExample]:
    """One example per recorded answer, labeled with what the recording answered.

    The cassette is read as every reader of the format reads it (evaluators/cassette.py:
    JSON Lines, or the older JSON document); its requests are the redacted ones it shows.
    """
    from ..errors import ConfigError
    from ..evaluators.cassette import Cassette

    try:
        cassette = Cassette(path)
    except ConfigError as exc:
        raise LabelsInvalid(str(exc)) from None
    if not cassette.existed:
        raise LabelsInvalid(f"cannot read cassette {path}: it does not exist")
    examples: list[LabeledExample] = []
    recordings = [*cassette.recordings.values(), *cassette.unverified]
    for position, recording in enumerate(recordings, start=1):
        digest = recording.digest
        where = f"cassette {path} {cassette.where.get(digest, f'entry {position}')} ({digest[:12]})"
        try:
            wire = recording.request
            request = validate_request({k: wire[k] for k in ("state", "questions") if k in wire},
                                       max_bytes=1 << 20, wire=True)
            evaluation = validate_answers(request, recording.evaluation)
        except EvaluationError as exc:
            raise LabelsInvalid(f"{where}: {exc}") from None
        for q in request.questions:
            if q.instructions is None:
                continue  # a criteria-only noul has no signature worth learning
            question = Question(id="q", type=q.type, instructions=q.instructions, criteria=q.criteria)
            examples.append(LabeledExample(
                id=f"{digest[:12]}:{q.id}", state=request.state, question=question,
                label=label_from_answer(q, evaluation.answers[q.id]), line=position))
        if len(examples) > MAX_EXAMPLES:
            raise LabelsInvalid(f"{where}: more than {MAX_EXAMPLES} examples")
    if not examples:
        raise LabelsInvalid(f"cassette {path} has no recorded answers")
    return examples
