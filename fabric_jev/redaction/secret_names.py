"""Names that say "secret": of a key, of an option, of a name/value pair (contract §8). Pure code.

A value is a secret when its name says so, whatever shape carries the name:
a dictionary key (`{"DB_PASSWORD": …}`), or the name half of a name/value
pair — Kubernetes and ECS env entries `{name, value}`, header lists
`{key, value}`, SSM parameters `{Name, Value}`, CloudFormation
`{ParameterKey, ParameterValue}`, or a two-item list `["DB_PASSWORD", …]`.
"""

from __future__ import annotations

import re
from typing import Any

from .lookalikes import fold

__all__ = ["is_secret_key", "pair_secret"]

#: Keys whose whole normalised name ends with one of these name a secret.
_SECRET_KEY_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "authorization",
                        "cookie", "apikey", "privatekey", "clientsecret", "accesskey", "secretkey",
                        "accountkey", "authkey", "sessionid", "credential", "credentials",
                        "privatekeyid", "otpseed", "otpkey", "mfaseed", "mfakey")
#: ...or whose last word is one of these (DB_PASS, MYSQL_PWD, user_ssn; not "bypass").
_SECRET_LAST_WORDS = frozenset({"pass", "pwd", "pw", "auth", "ssn"})
#: How a secret's encoding is named after it (secret_hex, tokenB64, password_hash, secret_hex_key,
#: secretHexValue): dropped before the checks above, however many such words follow.
_ENCODING_TAIL = re.compile(r"(?:hex|b64|base64|bytes|str|string|value|data|raw|enc|encoded|hash|key|text)$")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")
_SEPARATORS = re.compile(r"[_\-\s]")
_NAME = re.compile(r"[^\s]{1,128}")

#: The field that names a pair, and the one that holds its value (compared lower-cased,
#: without `_`/`-`): env entries, header lists, SSM, CloudFormation, form fields, settings.
NAME_FIELDS = frozenset({"name", "key", "parameterkey", "parametername", "optionname", "variable",
                         "header", "headername", "field", "fieldname", "id", "label", "setting", "property"})
VALUE_FIELDS = frozenset({"value", "val", "values", "parametervalue", "optionvalue", "secretvalue",
                          "headervalue", "fieldvalue", "data", "default", "defaultvalue"})


def is_secret_key(key: str) -> bool:
    """password, db_password, X-Api-Key, client_secret, accessToken, DB_PASS, secret_hex, ...

    Look-alike spellings (fullwidth, Cyrillic letters, a soft hyphen inside) count as the word.
    """
    key = fold(key)
    norm = _NOT_ALNUM.sub("", key.lower())
    # The name with its tail words dropped one by one: `apikeyhex` is `apikey` (not `api`).
    for _ in range(4):
        if norm.endswith(_SECRET_KEY_SUFFIXES):
            return True
        tail = _ENCODING_TAIL.search(norm)
        if tail is None or tail.start() == 0:
            break
        norm = norm[:tail.start()]
    words = [w.lower() for w in _WORDS.findall(key)]
    while len(words) > 1 and _ENCODING_TAIL.fullmatch(words[-1]):
        words.pop()
    return bool(words) and words[-1] in _SECRET_LAST_WORDS


def _field(key: Any) -> str:
    return _SEPARATORS.sub("", str(key)).lower()


def _holds_something(value: Any) -> bool:
    return value not in (None, "", [], {})


def pair_secret(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> tuple[str, list[Any]] | None:
    """(the secret's name, the keys or indexes of its values) when `value` is a name/value pair
    whose name says secret and whose value holds something; else None.

    `{"name": "DB_PASSWORD", "value": "x"}` gives ("DB_PASSWORD", ["value"]); `["DB_PASS", 7]`
    gives ("DB_PASS", [1]).
    """
    if isinstance(value, dict):
        names = [k for k in value if _field(k) in NAME_FIELDS and isinstance(value[k], str)]
        values = [k for k in value if _field(k) in VALUE_FIELDS and _holds_something(value[k])]
        for name_key in names:
            if values and is_secret_key(value[name_key]):
                return value[name_key], values
        return None
    # A list's first item names the second only when it reads as a name (`DB_PASSWORD`,
    # `X-Api-Key`, `/prod/db/password`): no spaces, not a sentence or a command line.
    if len(value) == 2 and isinstance(value[0], str) and _holds_something(value[1]) \
            and _NAME.fullmatch(value[0]) is not None and is_secret_key(value[0]):
        return value[0], [1]
    return None
