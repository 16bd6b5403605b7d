"""Adaptation profiles for the local evaluator: what a user's labeled examples teach it.

A profile holds, per question *signature* (type + instructions + criteria,
never the question id), the labeled states as MiniLM vectors, one weight
row per labeled state, and a few fitted numbers. For a question with a known
signature the local evaluator scores each class by its labeled neighbours,
each weighted by its similarity to the new state and its fitted weight (a
kernel ridge read-out: ``r = Σᵢ k(xᵢ, x)·wᵢ``, with ``k`` the cosine
similarity, or ``exp((cos − 1)/τ)`` to favour the nearest), and blends that
with the heuristic's own answer in log space. The similarity mixes the
MiniLM cosine with the cosine of the states' word features (lexical.py),
``(1 − λ)·cos_minilm + λ·cos_words``, λ fitted like the rest::

    p ∝ exp(a·r) · prior^b,   then   p ← (1 − ε)·p + ε/classes

``λ``, ``τ``, the ridge penalty, ``a``, ``b`` and ``ε`` are fitted on the training
examples by exact leave-one-out log loss, so ``a`` acts as a temperature
(Platt-style scaling): confidence is fitted to match accuracy. Questions
without a matching signature get the plain heuristic answer.

The file is plain JSON (never pickle), versioned, bounded in size, and names
the embedding model by the SHA-256 of its weights: a profile built with other
weights is refused, since its vectors would mean nothing. Vectors are stored
as base64 float16 (768 bytes each), weights as base64 float32, word features
as base64 uint32 ids. Version 1 profiles (no word features) are still read.

This module stays light: numpy is imported by the functions that need it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, PlainSerializer

from .._files import atomic_write
from .._json import JSONInputError, read_json_file
from ..contract.evaluation import Question, validate_request
from ..contract.json_basics import JsonNumber
from ..contract.values import is_finite_number
from ..contract.wire_model import WireModel, omit_none
from ..errors import EvaluationError, ProfileInvalid
from ..questions import kind_of
from .lexical import MAX_PROFILE_IDS, LexicalIndex, b64decode, decode_docs, encode_docs

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

FORMAT: Literal["fabric-jev-local-profile"] = "fabric-jev-local-profile"
VERSION: Literal[2] = 2
READABLE_VERSIONS = (1, 2)  # 1: before word features (read as λ = 0)
EMBEDDING_MODEL = "all-MiniLM-L6-v2"
DIM = 384
MAX_PROFILE_BYTES = 48 << 20
MAX_SIGNATURES = 256
MAX_EXAMPLES_PER_SIGNATURE = 5_000
MAX_EXAMPLES = 20_000
PRIOR_FLOOR = 1e-4
_NAME = re.compile(r"[^A-Za-z0-9._-]+")
#: A profile's name becomes part of every adapted answer's model id: the model-id name rule.
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PROFILE_NAME_RULE = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, no '..'"


def check_profile_name(name: object, where: str = "profile") -> str:
    """The name, if it may stand in a model id (``...+profile:NAME``); else ProfileInvalid."""
    if not isinstance(name, str) or _PROFILE_NAME.fullmatch(name) is None or ".." in name:
        raise ProfileInvalid(f"{where}: name must be {PROFILE_NAME_RULE}")
    return name


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass")


def question_body(question: Question) -> dict[str, Any]:
    return {"type": question.type, "instructions": question.instructions, "criteria": question.criteria}


def signature_of(question: Question) -> str:
    """What makes two questions "the same question": type, instructions and criteria (not the id)."""
    return hashlib.sha256(_canonical(question_body(question))).hexdigest()[:16]


def example_key(state: Any, question: Question) -> str:
    """A short digest of (state, question): how a profile remembers what it was trained on."""
    return hashlib.sha256(_canonical({"state": state, "question": question_body(question)})).hexdigest()[:16]


def class_count(question: Question) -> int:
    return len(kind_of(question.type).classes(question))


def answer_distribution(question: Question, answer: dict[str, Any]) -> list[float]:
    """An answer's probabilities over the question's classes (no/yes, options, levels) in order."""
    return kind_of(question.type).distribution(question, answer)


@cache
def _file_sha256(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def embedding_fingerprint() -> str:
    """SHA-256 of the MiniLM weights the local evaluator uses (hashed once per process and file)."""
    from .local_model import model_dir

    path = model_dir() / "model.safetensors"
    stat = path.stat()
    return _file_sha256(path, stat.st_size, stat.st_mtime_ns)


def encode_floats(values: Matrix, dtype: str) -> str:
    import numpy as np

    return base64.b64encode(np.asarray(values, dtype=dtype).tobytes()).decode("ascii")


def decode_floats(text: str, shape: tuple[int, int], dtype: str, what: str = "data") -> Matrix:
    import numpy as np

    raw = b64decode(text, what)
    width = np.dtype(dtype).itemsize
    if len(raw) != shape[0] * shape[1] * width:
        raise ValueError(f"{what} hold {len(raw)} bytes, expected {shape[0] * shape[1] * width} for {shape}")
    out = np.frombuffer(raw, dtype=dtype).reshape(shape).astype(np.float32)
    if not np.isfinite(out).all():
        raise ValueError(f"{what} hold numbers that are not finite")
    return out


def kernel(sims: Any, temperature: float) -> Any:
    """Similarity → kernel value (+1: the read-out's intercept). τ = 0 is the plain cosine."""
    import numpy as np

    return (np.exp((sims - 1.0) / temperature) if temperature else sims) + 1.0


@dataclass(frozen=True)
class SignatureModel:
    """What one question signature learned: labeled vectors, their weights and the fitted blend."""

    question: Question  # id "q"
    vectors: Matrix  # (n, 384) unit vectors of the labeled states
    weights: Matrix  # (n, classes) read-out weight of each labeled state
    labels: tuple[int, ...]  # class index of each vector (kept for the record and for counts)
    kernel_temperature: float  # τ; 0 = cosine
    ridge: float  # the penalty the weights were fitted with (for the record)
    readout_weight: float  # a
    prior_weight: float  # b
    floor: float  # ε
    lexical_weight: float = 0.0  # λ: the word features' share of the similarity
    lexical: LexicalIndex | None = None  # the labeled states' word features (None: version 1)
    support: float = 0.0  # σ: a state whose nearest labeled state is less similar is trusted less (0: off)

    @property
    def signature(self) -> str:
        return signature_of(self.question)

    @property
    def classes(self) -> int:
        return class_count(self.question)

    def similarities(self, vector: Matrix, terms: Any = None) -> Any:
        """The mixed similarity of a state (its vector and word ids) to each labeled state."""
        import numpy as np

        sims = (self.vectors @ np.asarray(vector, dtype=np.float32)).astype(np.float64)
        if self.lexical is None or not self.lexical_weight:
            return sims
        if terms is None:
            raise ValueError("this signature compares word features too; pass the state's term ids")
        return (1.0 - self.lexical_weight) * sims + self.lexical_weight * self.lexical.similarities(terms)

    def trust(self, sims: Any) -> float:
        """How far the read-out counts: 1 when the nearest labeled state is at least σ similar, less below."""
        if not self.support or not len(sims):
            return 1.0
        return min(1.0, max(0.0, float(sims.max()) / self.support))

    def adapt(self, prior: list[float], vector: Matrix, terms: Any = None) -> list[float]:
        import numpy as np

        log_prior = np.log(np.clip(np.asarray(prior, dtype=np.float64), PRIOR_FLOOR, 1.0))
        sims = self.similarities(vector, terms)
        readout = kernel(sims, self.kernel_temperature) @ self.weights
        z = self.trust(sims) * self.readout_weight * readout.astype(np.float64) + self.prior_weight * log_prior
        z -= z.max()
        p = np.exp(z)
        p = (1.0 - self.floor) * p / p.sum() + self.floor / self.classes
        return [float(x) for x in p]


class _File(WireModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Embedding(_File):
    """The embedding model a profile's vectors were made with, named by its weights' SHA-256."""

    model: str = EMBEDDING_MODEL
    sha256: str


class SignatureEntry(_File):
    """One question signature as the profile file holds it: the question, the fitted numbers, the
    labeled states' vectors (base64 float16), weights (base64 float32) and word features."""

    signature: str
    type: str
    instructions: str | None
    criteria: Any
    # Numbers as read (a profile read and saved again keeps 0 as 0, not 0.0).
    kernel_temperature: JsonNumber
    ridge: JsonNumber
    readout_weight: JsonNumber
    prior_weight: JsonNumber
    floor: JsonNumber
    labels: list[int]
    vectors: str
    weights: str
    support: JsonNumber
    #: 0 when the states have no word features (then neither terms nor termCounts is written).
    lexical_weight: JsonNumber
    terms: str | None = Field(default=None, exclude_if=omit_none)
    term_counts: list[int] | None = Field(default=None, exclude_if=omit_none)

    @classmethod
    def of(cls, model: SignatureModel) -> SignatureEntry:
        terms, counts = encode_docs(model.lexical.docs) if model.lexical is not None else (None, None)
        return cls(signature=model.signature, **question_body(model.question),
                   kernel_temperature=model.kernel_temperature, ridge=model.ridge,
                   readout_weight=model.readout_weight, prior_weight=model.prior_weight, floor=model.floor,
                   labels=list(model.labels), vectors=encode_floats(model.vectors, "<f2"),
                   weights=encode_floats(model.weights, "<f4"), support=model.support,
                   lexical_weight=model.lexical_weight if model.lexical is not None or not model.lexical_weight
                   else 0.0,
                   terms=terms, term_counts=counts)


if TYPE_CHECKING:
    Models = dict[str, SignatureModel]
else:  # numpy inside: kept as given, written through SignatureEntry
    Models = dict


class Profile(WireModel):
    """A local evaluator's profile; its JSON is the file (format, version, name, embedding,
    signatures, training, report)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["fabric-jev-local-profile"] = FORMAT
    version: Literal[2] = VERSION
    name: str
    embedding_sha256: Annotated[str, PlainSerializer(lambda sha: Embedding(sha256=sha))] = \
        Field(serialization_alias="embedding")
    #: By signature.
    models: Annotated[Models, PlainSerializer(lambda models: [SignatureEntry.of(m) for m in models.values()])] = \
        Field(serialization_alias="signatures")
    #: Example keys the profile was fitted on.
    training: Annotated[frozenset[str], PlainSerializer(sorted)]
    #: Held-out before/after, as learn printed it.
    report: dict[str, Any] = Field(default_factory=dict)

    def model_for(self, question: Question) -> SignatureModel | None:
        return self.models.get(signature_of(question))

    @property
    def examples(self) -> int:
        return sum(len(m.labels) for m in self.models.values())

    def save(self, path: str | Path) -> int:
        """Write atomically; returns the size in bytes."""
        text = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))
        if len(text.encode("utf-8")) > MAX_PROFILE_BYTES:
            raise ProfileInvalid(f"profile would exceed {MAX_PROFILE_BYTES >> 20} MiB; use fewer examples")
        path = Path(path)
        atomic_write(path, text)
        return len(text.encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path, *, embedding_sha256: str | None = None) -> Profile:
        """Read and check a profile; refuse it unless it was built with these embedding weights."""
        try:
            data = read_json_file(path, what="profile", max_bytes=MAX_PROFILE_BYTES)
        except JSONInputError as exc:
            raise ProfileInvalid(str(exc)) from None
        expected = embedding_fingerprint() if embedding_sha256 is None else embedding_sha256
        return cls.from_json(data, source=str(path), embedding_sha256=expected)

    @classmethod
    def from_json(cls, data: Any, *, source: str, embedding_sha256: str) -> Profile:
        where = f"profile {source}"
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ProfileInvalid(f"{where} is not a fabric-jev local-evaluator profile")
        version = data.get("version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise ProfileInvalid(f"{where} has version {version!r}; this fabric-jev reads versions "
                                 f"{' and '.join(map(str, READABLE_VERSIONS))} (rebuild it with fabric-jev learn)")
        embedding = data.get("embedding")
        sha = embedding.get("sha256") if isinstance(embedding, dict) else None
        if not isinstance(sha, str) or sha != embedding_sha256:
            raise ProfileInvalid(
                f"{where} was built with other embedding weights (sha256 {str(sha)[:12]}…); the local "
                f"evaluator uses {embedding_sha256[:12]}… — rebuild it with fabric-jev learn")
        name = check_profile_name(data.get("name"), where)
        raw_models = data.get("signatures")
        if not isinstance(raw_models, list) or len(raw_models) > MAX_SIGNATURES:
            raise ProfileInvalid(f"{where}: signatures must be a list of at most {MAX_SIGNATURES}")
        models: dict[str, SignatureModel] = {}
        total = ids = 0
        for i, raw in enumerate(raw_models):
            try:
                model = _signature_model(raw, version, MAX_PROFILE_IDS - ids)
            except KeyError as exc:
                raise ProfileInvalid(f"{where}: signature {i + 1}: {exc.args[0]} is missing") from None
            except (ValueError, TypeError, EvaluationError) as exc:
                raise ProfileInvalid(f"{where}: signature {i + 1}: {exc}") from None
            ids += model.lexical.ids if model.lexical is not None else 0
            if model.signature in models:
                raise ProfileInvalid(f"{where}: signature {i + 1} repeats an earlier question")
            total += len(model.labels)
            if total > MAX_EXAMPLES:
                raise ProfileInvalid(f"{where} holds more than {MAX_EXAMPLES} examples")
            models[model.signature] = model
        training = data.get("training", [])
        if (not isinstance(training, list) or len(training) > MAX_EXAMPLES * 2
                or not all(isinstance(t, str) and len(t) == 16 for t in training)):
            raise ProfileInvalid(f"{where}: training must be a list of example digests")
        report = data.get("report", {})
        if not isinstance(report, dict):
            raise ProfileInvalid(f"{where}: report must be an object")
        return cls(name=name, embedding_sha256=sha, models=models, training=frozenset(training),
                   report=report)


def _number(raw: dict[str, Any], key: str, low: float, high: float) -> JsonNumber:
    v = raw[key]
    if not is_finite_number(v) or not low <= v <= high:
        raise ValueError(f"{key} must be a number in [{low:g}, {high:g}]")
    return v


def _signature_model(raw: Any, version: int = VERSION, max_ids: int = MAX_PROFILE_IDS) -> SignatureModel:
    if not isinstance(raw, dict):
        raise ValueError("not an object")
    body = {k: raw[k] for k in ("type", "instructions", "criteria") if raw.get(k) is not None}
    question = validate_request({"state": "", "questions": {"q": body}}).questions[0]
    if raw.get("signature") != signature_of(question):
        raise ValueError("its signature does not match its question")
    labels = raw["labels"]
    classes = class_count(question)
    if not isinstance(labels, list) or not 1 <= len(labels) <= MAX_EXAMPLES_PER_SIGNATURE:
        raise ValueError(f"labels must be a list of 1-{MAX_EXAMPLES_PER_SIGNATURE} class indexes")
    if not all(isinstance(y, int) and not isinstance(y, bool) and 0 <= y < classes for y in labels):
        raise ValueError(f"labels must be class indexes from 0 to {classes - 1}")
    vectors, weights = raw["vectors"], raw["weights"]
    if not isinstance(vectors, str) or not isinstance(weights, str):
        raise ValueError("vectors and weights must be base64 strings")
    temperature = _number(raw, "kernelTemperature", 0.0, 10.0)
    if 0 < temperature < 1e-3:
        raise ValueError("kernelTemperature must be 0 or at least 0.001")
    n = len(labels)
    lexical_weight, lexical, support = 0.0, None, 0.0
    if version >= 2:
        lexical_weight = _number(raw, "lexicalWeight", 0.0, 1.0)
        support = _number(raw, "support", 0.0, 1.0) if "support" in raw else 0.0
        if "terms" in raw or lexical_weight:
            lexical = LexicalIndex(decode_docs(raw.get("terms"), raw.get("termCounts"), n, max_ids))
    return SignatureModel(
        question=question, labels=tuple(labels),
        vectors=_checked(decode_floats(vectors, (n, DIM), "<f2", "vectors"), "vectors"),
        weights=_checked(decode_floats(weights, (n, classes), "<f4", "weights"), "weights"),
        kernel_temperature=temperature, ridge=_number(raw, "ridge", 0.0, 1e6),
        readout_weight=_number(raw, "readoutWeight", 0.0, 1000.0),
        prior_weight=_number(raw, "priorWeight", 0.0, 100.0),
        floor=_number(raw, "floor", 0.0, 1.0), lexical_weight=lexical_weight, lexical=lexical,
        support=support)


def _checked(values: Matrix, what: str) -> Matrix:
    """Decoded arrays must not blow up a dot product: bounded like unit vectors and fitted weights."""
    import numpy as np

    if float(np.abs(values).max(initial=0.0)) > 1e4:
        raise ValueError(f"{what} hold numbers over 1e4")
    return values


def profile_name(path: str | Path) -> str:
    """A short, model-id-safe name for a profile, from its file name."""
    name = re.sub(r"\.{2,}", ".", _NAME.sub("-", Path(path).stem)).strip("-._")[:40].rstrip("-._")
    return name or "profile"
