"""The shape of a jev.evaluate request (contract §5), as one typed model.

`validate_request` (evaluation.py) reads every request through these models,
and the MCP tool `jev_evaluate` advertises their JSON Schema (mcp/tools.py):
what a client is told and what the host accepts are one definition. What no
JSON Schema can say is checked around the model, in evaluation.py: the
request's size in bytes, its depth and node count, finite numbers, text
that is Unicode.

Each question kind's model is its own module's (questions/: the kind owns
its request shape); the request unites the table's models by `type`, read
from the table when the model is built and built again when a kind is
registered. The product's models keep their names here.

Strict: nothing is converted (a tuple is no array, a number no text).
Built on first use, so a process that never evaluates never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    StringConstraints,
)
from pydantic_core import CoreSchema

from ..questions import KINDS, on_change
from ..questions.choice import choice_question
from ..questions.noul import noul_questions
from ..questions.request import STRICT, Text
from ..questions.score import score_question
from .model_id import MODEL_ID_MAX_CHARS, MODEL_ID_PATTERN, is_model_id

MAX_QUESTIONS = 128
MAX_QUESTION_ID_CHARS = 128

_STRICT = STRICT
# Each kind's request model is its own module's (questions/), made on first use, which this module
# is: here they are united by `type`. The names stay here, where the contract's readers found them.
ChoiceQuestion = choice_question()
ScoreQuestion = score_question()
NoulQuestion, WireNoulQuestion, NoulCriteria = noul_questions()


def question_union(*, wire: bool) -> object:
    """One question, told apart by its `type`: the table's request models, in its order."""
    models = tuple(kind.request_model(wire=wire) for kind in KINDS.values())
    return Annotated[Union[models], Discriminator("type")]  # noqa: UP007 (a union of a tuple of types)


if TYPE_CHECKING:
    class _Question(Protocol):
        """What the contract reads from a question of any kind (questions/request.py)."""

        type: Any  # a kind's name, one of the table's: the union checks it at run time
        instructions: Any
        criteria: Any

    _WireQuestion = _Question
else:
    class _Question:
        """A question of any kind in the table, as the request's model is built (on first use, and
        again when a kind is registered): the table is read then, not when this module is imported."""

        wire: ClassVar[bool] = False

        @classmethod
        def __get_pydantic_core_schema__(cls, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
            return handler.generate_schema(question_union(wire=cls.wire))

    class _WireQuestion(_Question):
        wire: ClassVar[bool] = True


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
    questions: Annotated[dict[_QuestionId, _Question], Field(
        min_length=1, max_length=MAX_QUESTIONS,
        description=f"1-{MAX_QUESTIONS} questions by id (1-{MAX_QUESTION_ID_CHARS} characters).")]
    model: _ModelId | None = Field(default=None, description="The model to ask; the route's own when omitted.")


class WireEvaluateRequest(EvaluateRequest):
    """The same request as a Jev-compatible server reads it: unknown fields are ignored and a noul
    may omit its instructions (the wire spec)."""

    model_config = ConfigDict(strict=True, extra="ignore", defer_build=True)
    questions: Annotated[dict[_QuestionId, _WireQuestion], Field(
        min_length=1, max_length=MAX_QUESTIONS)]


def _rebuild() -> None:
    # A kind registered (or unregistered) after the models were built: build them again from the table.
    for model in (EvaluateRequest, WireEvaluateRequest):
        if model.__pydantic_complete__:
            model.model_rebuild(force=True)


on_change(_rebuild)

__all__ = ["MAX_QUESTIONS", "MAX_QUESTION_ID_CHARS", "ChoiceQuestion", "EvaluateRequest", "NoulCriteria",
           "NoulQuestion", "ScoreQuestion", "Text", "WireEvaluateRequest", "WireNoulQuestion", "question_union"]
