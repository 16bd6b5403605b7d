"""The pieces every kind's request model is made of: what a text may be, the strict config, the
instructions field. Each kind declares its own model with them (`QuestionKind.request`), and the
contract's request model (contract/evaluation_shape.py) unites the table's models by `type`.

A kind's model has the fields ``type`` (``Literal[name]``), ``instructions`` and ``criteria``:
the contract reads those three from every question and names any other key as unknown.
Strict: nothing is converted (a tuple is no array, a number no text). Deferred: a model's
validator is built with the request's, on first use.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

#: What `state`, `instructions` and each description may be: text, a list or an object.
Text = str | list[Any] | dict[str, Any]
#: A question's instructions, as every kind's request model declares them.
Instructions = Annotated[Text, Field(description="What to judge, for this question: text, a list or an object.")]
#: The config of every request model: strict, no unknown key, built on first use.
STRICT = ConfigDict(strict=True, extra="forbid", defer_build=True)

__all__ = ["STRICT", "Instructions", "Text"]
