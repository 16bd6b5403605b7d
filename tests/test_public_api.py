from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

import fabric_jev
from fabric_jev import errors

ROOT = Path(__file__).resolve().parent.parent


def test_all_is_complete_sorted_and_unique() -> None:
    exported = fabric_jev.__all__
    assert exported == sorted(exported), "keep __all__ in sorted order"
    assert len(set(exported)) == len(exported), "a name is listed twice"
    for name in exported:  # load every lazy export first: loading one may load a submodule
        getattr(fabric_jev, name)
    names = dir(fabric_jev)
    submodules = {name for name in names if isinstance(getattr(fabric_jev, name), types.ModuleType)}
    public = {name for name in names if not name.startswith("_")}
    assert public - submodules - set(exported) == set(), "public names missing from __all__"
    for name in exported:
        assert hasattr(fabric_jev, name), name


def _error_classes() -> dict[str, type[BaseException]]:
    return {name: obj for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, BaseException)
            and obj.__module__ == errors.__name__}


def test_every_error_is_exported_and_derives_from_jev_error() -> None:
    classes = _error_classes()
    assert "QuerySyntaxError" in classes and "ReaderFailed" in classes
    for name, cls in classes.items():
        assert issubclass(cls, fabric_jev.JevError), name
        assert getattr(fabric_jev, name) is cls, name


def test_the_exception_tree_is_documented_where_it_is_defined_and_in_the_docs() -> None:
    doc = errors.__doc__ or ""
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name in _error_classes():
        for text, where in ((doc, "errors.py"), (architecture, "docs/architecture.md")):
            assert re.search(rf"(── |\n    |\n){name}\b", text), f"{name} missing from the tree in {where}"


#: Modules that run as programs, not imported: the worker's entry point and `python -m` shims.
NOT_IMPORTED = {"fabric_jev.sandbox._worker_main", "fabric_jev.__main__", "fabric_jev.cli.__main__"}


def _exported_exceptions() -> dict[str, tuple[str, type[BaseException]]]:
    """Every exception class any public module of the package exports (`__all__`): name → (module,
    class). A private module's (`_json.JSONInputError`) is always wrapped by its callers."""
    import importlib
    import pkgutil

    found: dict[str, tuple[str, type[BaseException]]] = {}
    for info in pkgutil.walk_packages(fabric_jev.__path__, "fabric_jev."):
        if info.name in NOT_IMPORTED or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                found.setdefault(name, (info.name, value))
    return found


def test_every_exception_any_module_exports_is_in_the_tree() -> None:
    exported = _exported_exceptions()
    # The rooms' own, besides errors.py's: the type check's, the sandbox's, a value's, serve's.
    assert {"CheckerUnavailable", "CompilerStopped", "WorkerGone", "ValueRejected", "ListenError",
            "AssertionFailed", "VerificationFailed"} <= set(exported)
    doc = errors.__doc__ or ""
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name, (module, cls) in exported.items():
        assert issubclass(cls, fabric_jev.JevError), f"{module}.{name} is not a JevError"
        for text, where in ((doc, "errors.py"), (architecture, "docs/architecture.md")):
            assert re.search(rf"(── |\n    |\n){name}\b", text), f"{name} ({module}) missing from the tree in {where}"


def test_both_assertion_failures_share_one_base() -> None:
    from fabric_jev.assertions import AssertionFailed
    from fabric_jev.verification import VerificationFailed

    for cls in (AssertionFailed, VerificationFailed):
        assert issubclass(cls, errors.CheckFailed) and issubclass(cls, AssertionError)


#: Recursive JSON aliases name themselves in strings, which typing resolves only where the
#: alias's own name is in scope (docs/architecture.md says so).
RECURSIVE_ALIASES = {"JsonInput", "JsonObject", "JsonValue"}


def test_every_public_type_alias_resolves_at_run_time_in_a_fresh_interpreter() -> None:
    # An alias written with a forward reference to a lazily loaded class (Approver once named
    # "CapabilityCall" before that module was loaded) broke typing.get_type_hints and pydantic
    # fields in user code that annotated with it.
    import subprocess
    import sys

    # As a user writes it: `from fabric_jev import NAME`, then an annotation with NAME alone.
    script = (
        "import typing, fabric_jev\n"
        f"RECURSIVE = {sorted(RECURSIVE_ALIASES)!r}\n"
        "for name in fabric_jev.__all__:\n"
        "    value = getattr(fabric_jev, name)\n"
        "    if isinstance(value, type) or not hasattr(value, '__origin__') or name in RECURSIVE:\n"
        "        continue\n"
        "    user_module = {name: value}\n"
        "    exec(f'def f(x: {name}) -> None: ...', user_module)\n"
        "    typing.get_type_hints(user_module['f'])\n"
        "    print(name)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "Approver" in done.stdout.split()
    assert set(fabric_jev.__all__) >= RECURSIVE_ALIASES


def test_a_rule_that_cannot_be_read_is_a_jev_error_and_still_a_value_error() -> None:
    from fabric_jev.approval.rules import RuleError, parse_rule

    with pytest.raises(RuleError) as caught:
        parse_rule("nonsense")
    assert isinstance(caught.value, fabric_jev.JevError) and isinstance(caught.value, ValueError)
    doc = errors.__doc__ or ""
    assert re.search(r"── RuleError\b", doc), "RuleError missing from the tree in errors.py"
