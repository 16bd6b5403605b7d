from __future__ import annotations

import fabric_jev
from fabric_jev import errors


def test_all_is_complete_and_sorted() -> None:
    public = {name for name in dir(fabric_jev) if not name.startswith("_")}
    modules = {"benchmarks", "cli", "contract", "errors", "evaluators", "host",
               "sandbox", "protocol", "approval", "assertions", "verification", "observers", "serve", "calibration"}
    assert public - modules - set(fabric_jev.__all__) == set()
    assert sorted(fabric_jev.__all__, key=str.lower) == sorted(fabric_jev.__all__, key=str.lower)
    for name in fabric_jev.__all__:
        assert hasattr(fabric_jev, name), name


def test_every_error_is_exported_and_derives_from_jev_error() -> None:
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == errors.__name__:
            assert issubclass(obj, fabric_jev.JevError)
            assert name in fabric_jev.__all__, name
