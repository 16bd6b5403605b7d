"""The canonical SHA-256 digest of a dictionary (contract §11).

Canonical form: the dictionary with every default filled in (so omitting a
default and writing it out give the same digest), serialised as JSON with
keys sorted, no whitespace, UTF-8 text (`ensure_ascii=False`). It covers ids,
descriptions, versions, targets, options, expected values, observation paths,
predicates and observation versions — everything but reader code, which is
why a reader's semantics change must bump its observation version. The digest
is not a signature.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .dictionary import Dictionary


def canonical(dictionary: Dictionary) -> str:
    data: dict[str, Any] = dictionary.model_dump(mode="json")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def dictionary_digest(dictionary: Dictionary) -> str:
    return "sha256:" + hashlib.sha256(canonical(dictionary).encode("utf-8")).hexdigest()
