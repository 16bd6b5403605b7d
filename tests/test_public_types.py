"""The public API says what it takes and gives: no bare `Any` where a type is known.

The public API is every name in the `__all__` of the packages below and, for
a class, its public methods (and `__init__`). An annotation is *bare Any*
when it is `Any` (or `Any | None`) as a whole: `dict[str, Any]` is a known
shape with open values and passes. JSON crossing the API is `JsonValue`;
untrusted input a function validates is `object`.

Where `Any` is the honest type, the name is on `ALLOWED` below with the
reason. The list is part of the documentation (docs/architecture.md, "Typed
faces"): keep it short, and give every entry its why.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

PACKAGES = ("fabric_jev", "fabric_jev.host", "fabric_jev.evaluators", "fabric_jev.contract",
            "fabric_jev.assertions", "fabric_jev.verification", "fabric_jev.batch", "fabric_jev.approval",
            "fabric_jev.calibration", "fabric_jev.evals", "fabric_jev.protocol", "fabric_jev.testing",
            "fabric_jev.typecheck",
            "fabric_jev_browser")
BARE = {"Any", "Any | None", "None | Any", "Optional[Any]"}

#: "module.qualname (parameter)" → why `Any` is the right type there.
ALLOWED: dict[str, str] = {
    # A provider's reply is indexed inside one try/except (KeyError, IndexError,
    # TypeError) that turns any other shape into a VisionError; a JSON type would
    # only add a narrowing per key.
    "fabric_jev.assertions.vision.AnthropicVision.reply_text (data)": "provider JSON, indexed under try",
    "fabric_jev.assertions.vision.AnthropicVision.reply_text (return)": "the text, checked by the caller",
    "fabric_jev.assertions.vision.GeminiVision.reply_text (data)": "provider JSON, indexed under try",
    "fabric_jev.assertions.vision.GeminiVision.reply_text (return)": "the text, checked by the caller",
    "fabric_jev.assertions.vision.OpenAIVision.reply_text (data)": "provider JSON, indexed under try",
    "fabric_jev.assertions.vision.OpenAIVision.reply_text (return)": "the text, checked by the caller",
    # A verification reader is the author's code: what it reads is the author's own value.
    "fabric_jev.verification.channels.PollOutcome.__init__ (value)": "a reader's own value",
}


def _public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    seen: set[str] = set()
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            members: list[tuple[str, Any]] = []
            if inspect.isclass(obj):
                members = [(f"{obj.__module__}.{obj.__qualname__}.{m}", v) for m, v in vars(obj).items()
                           if not m.startswith("_") or m == "__init__"]
            elif inspect.isfunction(obj):
                members = [(f"{obj.__module__}.{obj.__qualname__}", obj)]
            for qualname, member in members:
                if isinstance(member, staticmethod | classmethod):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member) and qualname not in seen:
                    seen.add(qualname)
                    yield qualname, member


def _bare_any(annotation: Any) -> bool:
    return annotation is Any or (isinstance(annotation, str) and annotation.strip() in BARE)


def _offenders() -> set[str]:
    found = set()
    for qualname, function in _public_callables():
        signature = inspect.signature(function)
        for name, parameter in signature.parameters.items():
            if name not in ("self", "cls") and _bare_any(parameter.annotation):
                found.add(f"{qualname} ({name})")
        if _bare_any(signature.return_annotation):
            found.add(f"{qualname} (return)")
    return found


def test_no_public_function_takes_or_returns_bare_any() -> None:
    unexpected = sorted(_offenders() - set(ALLOWED))
    assert unexpected == [], "bare Any on the public API (type it, or allow it with a reason):\n" + \
        "\n".join(unexpected)


def test_the_allow_list_holds_only_what_is_still_there() -> None:
    assert sorted(set(ALLOWED) - _offenders()) == []


def test_the_scan_sees_the_public_api() -> None:
    names = {qualname for qualname, _ in _public_callables()}
    assert "fabric_jev.host.host.JevHost.run" in names
    assert "fabric_jev.contract.evaluation.validate_request" in names
    assert "fabric_jev_browser.tab.Tab.call" in names and "fabric_jev_browser.page.Page.snapshot_source" in names
    assert _bare_any("Any") and _bare_any(Any) and not _bare_any("dict[str, Any]")
