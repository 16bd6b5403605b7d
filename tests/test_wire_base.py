"""Every shape with a wire form has one root and one serializer (docs/architecture.md, "Wire
shapes: one root, one serializer, two ways to make one")."""

from __future__ import annotations

import importlib
import pkgutil

import fabric_jev
from fabric_jev import Evaluation
from fabric_jev.contract.provenance import Provenance
from fabric_jev.contract.wire_model import WIRE_CONFIG, WireData, WireModel, WireShape

#: Modules that run as programs, not imported (as tests/test_public_api.py lists them).
NOT_IMPORTED = {"fabric_jev.sandbox._worker_main", "fabric_jev.__main__", "fabric_jev.cli.__main__"}


def _every_shape() -> set[type[WireShape]]:
    for info in pkgutil.walk_packages(fabric_jev.__path__, "fabric_jev."):
        if info.name not in NOT_IMPORTED:
            importlib.import_module(info.name)
    found: set[type[WireShape]] = set()
    todo: list[type[WireShape]] = [WireShape]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_wire_shape_is_one_of_the_two_bases_and_writes_by_the_one_serializer() -> None:
    shapes = _every_shape()
    assert {WireModel, WireData} <= shapes and len(shapes) > 30
    assert WireModel.model_config == WIRE_CONFIG
    assert WireData.__pydantic_config__ is WIRE_CONFIG
    for shape in shapes:
        assert issubclass(shape, WireModel | WireData), shape
        # Evaluation's own only passes `exclude` to the same serializer (its evaluator-less form).
        # (Compared by name: walking the package may import a module a second time.)
        if (shape.__module__, shape.__qualname__) != (Evaluation.__module__, "Evaluation"):
            assert shape.to_json is WireShape.to_json, f"{shape.__qualname__} writes its JSON its own way"


def test_an_evaluation_without_its_evaluator_is_the_same_json_less_that_key() -> None:
    provenance = Provenance(route="fixture", model="m", readout="fixture")
    evaluation = Evaluation({"q": {"noul": 0.5}}, model="m", provenance=provenance)
    whole = evaluation.to_json()
    assert whole["evaluator"] == provenance.to_json()
    assert evaluation.to_json(evaluator=False) == {key: value for key, value in whole.items() if key != "evaluator"}
