"""The shape of a jev.evaluate request (contract §5), as one typed model.

`validate_request` (evaluation.py) reads every request through these models,
and the MCP tool `jev_evaluate` advertises their JSON Schema (mcp/tools.py):
what a client is told and what the host accepts are one definition. What no
JSON Schema can say is checked around the model, in evaluation.py: the
request's size in bytes, its depth and node count, finite numbers, text
that is Unicode.

Strict: nothing is converted (a tuple is no array, a number no text).
Built on first use, so a process that never evaluates never pays for it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from typing_extensions import TypedDict

from ..questions.choice import MAX_OPTION_KEY_CHARS, MAX_OPTIONS
from ..questions.score import MAX_LEVELS, MIN_LEVELS
from .model_id import MODEL_ID_MAX_CHARS, MODEL_ID_PATTERN, is_model_id

MAX_QUESTIONS = 128
MAX_QUESTION_ID_CHARS = 128

_STRICT = ConfigDict(strict=True, extra="forbid", defer_build=True)

#: What `state`, `instructions` and each description may be: text, a list or an object.
Text = str | list[Any] | dict[str, Any]
_Instructions = Annotated[Text, Field(description="What to judge, for this question: text, a list or an object.")]


class ChoiceQuestion(BaseModel):
    """A choice among options: the answer is one option's key, with a probability for each."""

    model_config = _STRICT
    type: Literal["choice"]
    instructions: _Instructions
    criteria: Annotated[
        dict[Annotated[str, StringConstraints(min_length=1, max_length=MAX_OPTION_KEY_CHARS)], Text | None],
        Field(min_length=1, max_length=MAX_OPTIONS,
              description=f"The options: each key (1-{MAX_OPTION_KEY_CHARS} characters) with its description, "
                          f"or null; 1-{MAX_OPTIONS} options.")]


class ScoreQuestion(BaseModel):
    """A position on ordered levels: the answer is the probability-weighted level."""

    model_config = _STRICT
    type: Literal["score"]
    instructions: _Instructions
    criteria: Annotated[list[Text], Field(min_length=MIN_LEVELS, max_length=MAX_LEVELS,
                                          description=f"The {MIN_LEVELS}-{MAX_LEVELS} levels, each described, "
                                                      "lowest first.")]


class NoulCriteria(TypedDict, total=False):
    """What yes and no mean, if the instructions leave it open."""

    __pydantic_config__ = ConfigDict(strict=True, extra="forbid")  # type: ignore[misc]
    true: Text | None
    false: Text | None


class NoulQuestion(BaseModel):
    """A yes-or-no question: the answer is the probability of yes."""

    model_config = _STRICT
    type: Literal["noul"]
    instructions: _Instructions
    criteria: NoulCriteria | None = None


class WireNoulQuestion(NoulQuestion):
    """A noul as a Jev-compatible server reads one: it may rely on its criteria alone (spec:
    noul.no-instructions)."""

    instructions: Text | None = None  # type: ignore[assignment]


#: One question, told apart by its `type`.
Question = Annotated[ChoiceQuestion | ScoreQuestion | NoulQuestion, Field(discriminator="type")]
WireQuestion = Annotated[ChoiceQuestion | ScoreQuestion | WireNoulQuestion, Field(discriminator="type")]

_QuestionId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUESTION_ID_CHARS)]


def _model_id(value: str) -> str:
    # The pattern says most of the rule; the rest (no "..") is the rule's own check.
    if not is_model_id(value):
        raise ValueError("not a model id")
    return value


_ModelId = Annotated[str, StringConstraints(max_length=MODEL_ID_MAX_CHARS, pattern=MODEL_ID_PATTERN),
                     AfterValidator(_model_id),
                     # JSON Schema can say "no ..": the advertised schema says it too.
                     Field(json_schema_extra={"not": {"pattern": r"\.\."}})]


class EvaluateRequest(BaseModel):
    """A batch of typed questions about one state (contract §5)."""

    model_config = _STRICT
    state: Annotated[Text, Field(description="What the questions are about.")]
    questions: Annotated[dict[_QuestionId, Question], Field(
        min_length=1, max_length=MAX_QUESTIONS,
        description=f"1-{MAX_QUESTIONS} questions by id (1-{MAX_QUESTION_ID_CHARS} characters).")]
    model: _ModelId | None = Field(default=None, description="The model to ask; the route's own when omitted.")


class WireEvaluateRequest(EvaluateRequest):
    """The same request as a Jev-compatible server reads it: unknown fields are ignored and a noul
    may omit its instructions (the wire spec)."""

    model_config = ConfigDict(strict=True, extra="ignore", defer_build=True)
    questions: Annotated[dict[_QuestionId, WireQuestion], Field(  # type: ignore[assignment]
        min_length=1, max_length=MAX_QUESTIONS)]
