"""The ordinary text redaction is measured on: how often it redacts what holds no credential.

Three corpora, none holding a credential:
- `suite`: the suite's own ordinary text (tests/data/ordinary_text.txt: commands, logs, code
  and prose an agent session shows, near misses of every rule), one item per line;
- `eval-set`: the customer messages of the local evaluator's labeled set (tests/data);
- `python-reference`: the paragraphs of Python's language reference as the interpreter ships
  it (`pydoc_data.topics`), text nobody wrote for these rules.
"""

from __future__ import annotations

import json
import pydoc_data.topics
import re
from pathlib import Path

from fabric_jev.redaction.redactor import redact_text

DATA = Path(__file__).resolve().parent / "data"


def ordinary_corpora() -> dict[str, list[str]]:
    suite = [line for line in (DATA / "ordinary_text.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    eval_set = [item["state"] for item in json.loads((DATA / "local_eval_set.json").read_text())["items"]]
    reference = [p for topic in pydoc_data.topics.topics.values()
                 for p in re.split(r"\n\s*\n", topic) if p.strip()]
    return {"suite": suite, "eval-set": eval_set, "python-reference": reference}


def false_positives(texts: list[str]) -> list[tuple[str, str]]:
    """(text, what redaction made of it) for each text that redaction changed."""
    out = []
    for text in texts:
        shown, kinds = redact_text(text)
        if kinds or shown != text:
            out.append((text, shown))
    return out
