"""Credential redaction applied before session text leaves the host (contract §8).

Defense in depth, not a guarantee: keys that name secrets have their values
replaced, and text that looks like a credential is replaced by a marker that
names its kind (`[redacted: bearer token]`), so a classifier can still see
that a credential was there without ever receiving it.
"""

from __future__ import annotations

import re
from typing import Any

_SECRET_KEY_WORDS = ("password", "passwd", "secret", "token", "authorization", "cookie", "apikey",
                     "privatekey", "clientsecret", "accesskey", "sessionid", "credential")


def is_secret_key(key: str) -> bool:
    """password, db_password, X-Api-Key, client_secret, accessToken, ... (suffixes included)."""
    norm = re.sub(r"[^a-z0-9]", "", key.lower())
    return any(norm == w or norm.endswith(w) for w in _SECRET_KEY_WORDS)


def marker(kind: str) -> str:
    return f"[redacted: {kind}]"


# Order matters: header lines and URLs before the bare token shapes they contain.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("authorization header", re.compile(
        r"(?im)^(\s*(?:proxy-)?authorization\s*:\s*)(.+)$")),
    ("cookie header", re.compile(r"(?im)^(\s*(?:set-)?cookie\s*:\s*)(.+)$")),
    ("bearer token", re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]{8,}=*)")),
    ("basic credentials", re.compile(r"(?i)\b(basic\s+)([A-Za-z0-9+/]{8,}={0,2})")),
    # Scheme length is bounded for the same reason (schemes are short anyway).
    ("url credentials", re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://)([^\s/:@]{1,256}:[^\s/@]{1,256})@")),
    ("github token", re.compile(
        r"()\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("slack token", re.compile(r"()\b(xox[abposr]-[A-Za-z0-9-]{10,})")),
    ("api key", re.compile(
        r"()\b((?:sk|pk|rk)-[A-Za-z0-9_\-]{16,}|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,})")),
    ("secret assignment", re.compile(
        # The key prefix is bounded: an unbounded [\w.-]* backtracks quadratically on long words.
        r"""(?i)(["']?(?<![\w.-])[\w.-]{0,40}?(?:password|passwd|secret|token|apikey|api_key|api-key|private_key|"""
        r"""privatekey|client_secret|clientsecret|access_key|cookie)["']?\s*[:=]\s*["']?)([^\s"',;}{]{3,})""")),
    ("base64 data", re.compile(r"()((?:[A-Za-z0-9+/]{4}){40,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)")),
)
_BASE64_MARKER = "[omitted base64]"


def redact_text(text: str) -> tuple[str, list[str]]:
    """Return the text with credentials replaced, and the kinds that were found."""
    kinds: list[str] = []
    for kind, pattern in _PATTERNS:
        def replace(m: re.Match[str], kind: str = kind) -> str:
            secret = m.group(2)
            if secret.startswith("[redacted") or secret == _BASE64_MARKER:
                return m.group(0)
            kinds.append(kind)
            replacement = _BASE64_MARKER if kind == "base64 data" else marker(kind)
            suffix = "@" if kind == "url credentials" else ""
            return m.group(1) + replacement + suffix

        text = pattern.sub(replace, text)
    return text, kinds


def redact(value: Any) -> tuple[Any, list[str]]:
    """Redact a JSON value: secret-named keys lose their values; strings are scanned."""
    kinds: list[str] = []

    def walk(v: Any, key: str | None) -> Any:
        if key is not None and is_secret_key(key) and v not in (None, "", [], {}):
            kinds.append(f"{key} value")
            return marker(f"{key} value")
        if isinstance(v, str):
            out, found = redact_text(v)
            kinds.extend(found)
            return out
        if isinstance(v, list):
            return [walk(x, None) for x in v]
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        return v

    return walk(value, None), kinds
