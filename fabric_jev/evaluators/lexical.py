"""Word features for profiles: what a state's own words say, beside its MiniLM vector.

A sentence embedding places texts by topic; a user's labels often turn on a
few words instead ("staging" vs "production", "GDPR", "--force"). So a
profile also compares states by their words: each state's first
``MAX_WORDS`` words (casefolded ``\\w+`` runs) and adjacent word pairs are
hashed to 32-bit ids (CRC-32: stable across runs and machines, and the
profile stores no words in clear); states are compared by the cosine of their
TF-IDF vectors over the labeled states' ids (binary term frequency, smoothed
IDF ``ln((1 + N) / (1 + df)) + 1``). A new state's words that no labeled
state has match nothing but still count toward its length, with the IDF of
an id seen nowhere (``ln(1 + N) + 1``), as a labeled state's own rare words
count toward its length: a state that shares few words with the labels is
not scored as if those few were all it said. (Hashing keeps words out of
plain sight in the file, it does not hide them: a word list reverses CRC-32
at once.)

numpy is imported by the functions that need it.
"""

from __future__ import annotations

import re
import zlib
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ids = npt.NDArray[np.uint32]
    Floats = npt.NDArray[np.float64]

MAX_WORDS = 512
MAX_TERMS = 2 * MAX_WORDS - 1  # the unigrams and bigrams of MAX_WORDS words, at most
MAX_PROFILE_IDS = 2_000_000  # word-feature ids in a whole profile: ~12 bytes each once loaded
_WORD = re.compile(r"\w+")


def _hash(term: str) -> int:
    return zlib.crc32(term.encode("utf-8", "surrogatepass"))


def term_ids(text: str) -> Ids:
    """Sorted, distinct ids of the first MAX_WORDS words of `text` and of their adjacent pairs."""
    import numpy as np

    words = []
    for match in _WORD.finditer(text):
        words.append(match.group().casefold())
        if len(words) >= MAX_WORDS:
            break
    terms = {_hash(w) for w in words} | {_hash(f"{a} {b}") for a, b in pairwise(words)}
    return np.asarray(sorted(terms), dtype=np.uint32)


class LexicalIndex:
    """TF-IDF over the term ids of n labeled states: their Gram matrix, and a new state's similarities."""

    def __init__(self, docs: list[Ids]) -> None:
        import numpy as np

        self.docs = docs
        counts = np.asarray([len(d) for d in docs], dtype=np.int64)
        flat = np.concatenate(docs) if docs else np.zeros(0, dtype=np.uint32)
        doc_of = np.repeat(np.arange(len(docs), dtype=np.int32), counts)
        vocab, column, df = np.unique(flat, return_inverse=True, return_counts=True)
        del flat
        idf = np.log((1.0 + len(docs)) / (1.0 + df)) + 1.0
        self.unseen_idf = float(np.log(1.0 + len(docs)) + 1.0)
        weight = idf[column]
        norms = np.sqrt(np.bincount(doc_of, weights=weight**2, minlength=len(docs)))
        weight /= np.where(norms > 0, norms, 1.0)[doc_of]
        self.vocab, self.idf = vocab, idf
        # Postings grouped by vocabulary column: the document and the weight of each (int32
        # and float32 keep a large profile's index near 8 bytes per stored id).
        order = np.argsort(column, kind="stable")
        self._doc, self._weight = doc_of[order], weight[order].astype(np.float32)
        self._starts = np.searchsorted(column[order], np.arange(len(vocab) + 1))

    @property
    def size(self) -> int:
        return len(self.docs)

    @property
    def ids(self) -> int:
        return len(self._doc)

    def similarities(self, ids: Ids) -> Floats:
        """Cosine of a state's TF-IDF vector with each labeled state's (ids: the state's term ids)."""
        import numpy as np

        n = self.size
        ids = np.unique(ids)
        pos = np.searchsorted(self.vocab, ids)
        inside = pos < len(self.vocab)
        pos = pos[inside]
        known = pos[self.vocab[pos] == ids[inside]]
        if not len(known):
            return np.zeros(n)
        q = self.idf[known]
        unseen = len(ids) - len(known)
        q = q / np.sqrt(float(q @ q) + unseen * self.unseen_idf**2)
        starts, ends = self._starts[known], self._starts[known + 1]
        lengths = ends - starts
        take = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        out = np.bincount(self._doc[take], weights=self._weight[take] * np.repeat(q, lengths), minlength=n)
        return out.astype(np.float64)

    def gram(self) -> Floats:
        """The n×n matrix of cosines between the labeled states: each state's similarities, a row each.

        Row by row through the postings, since the vectors are sparse: a dense product over the
        vocabulary would cost n²·V, this costs n times the postings of one state's words.
        """
        import numpy as np

        return np.stack([self.similarities(doc) for doc in self.docs]) if self.docs else np.zeros((0, 0))


def encode_docs(docs: list[Ids]) -> tuple[str, list[int]]:
    """(base64 of every id as little-endian uint32, the count of ids of each state)."""
    import base64

    import numpy as np

    flat = np.concatenate(docs).astype("<u4") if docs else np.zeros(0, dtype="<u4")
    return base64.b64encode(flat.tobytes()).decode("ascii"), [len(d) for d in docs]


def b64decode(text: str, what: str) -> bytes:
    """Strict base64, or a ValueError that names the field."""
    import base64
    import binascii

    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValueError(f"{what} is not valid base64") from None


def decode_docs(text: object, counts: object, n: int, max_ids: int = MAX_PROFILE_IDS) -> list[Ids]:
    """The inverse of encode_docs, checked: n states, each a sorted run of distinct ids."""
    import numpy as np

    if not isinstance(text, str):
        raise ValueError("terms must be a base64 string")
    if (not isinstance(counts, list) or len(counts) != n
            or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= MAX_TERMS for c in counts)):
        raise ValueError(f"termCounts must be a list of {n} counts of 0-{MAX_TERMS}")
    if sum(counts) > max_ids:
        raise ValueError(f"more word ids than a profile may hold ({MAX_PROFILE_IDS} in all)")
    raw = b64decode(text, "terms")
    if len(raw) != 4 * sum(counts):
        raise ValueError(f"terms hold {len(raw) // 4} ids, termCounts add up to {sum(counts)}")
    flat = np.frombuffer(raw, dtype="<u4").astype(np.uint32)
    docs = np.split(flat, np.cumsum(counts)[:-1]) if counts else []
    if any(len(d) > 1 and not bool(np.all(d[1:] > d[:-1])) for d in docs):
        raise ValueError("each state's term ids must be sorted and distinct")
    return list(docs)
