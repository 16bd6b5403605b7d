"""Lone UTF-16 surrogates: one check (`fabric_jev._surrogates`), used wherever text holds one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fabric_jev._surrogates import has_lone_surrogate, without_lone_surrogates
from fabric_jev.contract.values import normalize_json
from fabric_jev.redaction import redact_text

PACKAGE = Path(__file__).resolve().parent.parent / "fabric_jev"


def test_a_lone_half_is_found_and_replaced_one_for_one() -> None:
    high, low = json.loads('"a\\ud800b"'), json.loads('"\\udfffz"')
    assert has_lone_surrogate(high) and has_lone_surrogate(low)
    assert without_lone_surrogates(high) == "a\ufffdb" and without_lone_surrogates(low) == "\ufffdz"
    assert len(without_lone_surrogates(high)) == len(high)  # offsets stay where they were


def test_a_pair_read_from_json_is_one_character_not_a_surrogate() -> None:
    face = json.loads('"\\ud83d\\ude00"')
    assert face == "\U0001f600" and not has_lone_surrogate(face)
    assert without_lone_surrogates(face) is face


def test_the_contract_and_redaction_use_it() -> None:
    lone = json.loads('"k\\ud800"')
    assert normalize_json({lone: [lone]}, "output") == {"k\ufffd": ["k\ufffd"]}
    text, _ = redact_text("note " + lone)
    assert text == "note k\ufffd"
    text.encode("utf-8")  # what redaction gives back can be written


SPELLED = re.compile(r"\\ud800-\\udfff|[\ud800-\udfff]", re.IGNORECASE)


def test_the_surrogate_range_is_spelled_in_one_module() -> None:
    # Messages may name the range ("\\uD800-\\uDFFF escape"); a pattern over it lives in _surrogates.
    spelled = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_surrogates.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if SPELLED.search(code) and "uD800-\\\\uDFFF" not in code:
                spelled.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert spelled == []
