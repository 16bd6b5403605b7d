"""The cassette format: recorded Jev answers, one JSON line per request.

One format for the pytest plugin, `--evaluator cassette:FILE` / `record:FILE`
and `calibrate`/`learn --from-cassette` (docs/testing.md, "Cassette files")::

    {"format":"fabric-jev-cassette","version":2}
    {"digest":"<sha256>","evaluation":{"answers":{...},"model":"...","usage":{...}},"request":{...}}

`request` is the wire request (state, questions, model) redacted by the rules of
redaction/redactor.py, and `digest` is the SHA-256 of that redacted request as
canonical JSON (sorted keys, no whitespace, UTF-8). Digesting what is shown,
not what was asked, does two things: a digest gives away nothing the line does
not show (an unsalted digest of the real request let a redacted password be
recovered by guessing), and every line can be checked: a line whose request
does not hash to its digest was edited, and is refused, so an edited request
can never replay an answer given to another question. A digest appears once.

Read as well, never written: version 1 (the plugin's lines before, whose
digest covered the unredacted request) and the CLI's older JSON document
`{"version": 1, "entries": {digest: {request, evaluation}}}`. Their lines are
taken over when the digest checks against the request they show; a version-1
line whose request was redacted cannot be checked, is never replayed, and a
miss near it says to record it again.

Pure code except `Cassette`'s own file: one bounded reader, one writer.
"""

from __future__ import annotations

import difflib
import hashlib
import heapq
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict

from .._files import atomic_write, open_regular
from ..contract.wire_model import WireModel
from ..errors import ConfigError
from ..terminal import terminal_safe

if TYPE_CHECKING:
    from ..contract.evaluation import EvaluationRequest

FORMAT = "fabric-jev-cassette"
VERSION = 2
HEADER = {"format": FORMAT, "version": VERSION}
#: The largest cassette read or written (the same cap for every reader of the format).
MAX_CASSETTE_BYTES = 64 << 20
#: Lines of the nearest-request diff shown in a miss, and the characters shown of each.
DIFF_LINES = 40
DIFF_LINE_CHARS = 240
#: How much work finding the nearest request may do, whatever the cassette holds: every
#: recording is ranked by a linear measure (shared lines), and only the best few are
#: compared line by line, on at most this many lines where they differ (difflib's
#: matching is quadratic in the lines it compares: 12,000 short lines took 18 s).
NEAREST_CANDIDATES = 3
DIFF_WINDOW = 300
_DIGEST = re.compile(r"[0-9a-f]{64}")


def canonical(value: object) -> str:
    """The canonical JSON text of a value: sorted keys, no whitespace, UTF-8 characters as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest_of(shown: object) -> str:
    """The digest of a request as a cassette shows it (already redacted)."""
    return hashlib.sha256(canonical(shown).encode("utf-8")).hexdigest()


def redacted(value: object) -> Any:
    """A JSON value with what looks like a credential redacted (redaction/redactor.py)."""
    from ..redaction.redactor import redact

    return redact(value)[0]


def shown_request(request: EvaluationRequest, model: str) -> dict[str, object]:
    """The wire request (state, questions, model) with what looks like a credential redacted."""
    shown: dict[str, Any] = redacted(request.to_wire(request.model or model))
    return shown


def request_digest(request: EvaluationRequest, model: str) -> str:
    """A request's key in a cassette: the digest of its redacted wire request."""
    return digest_of(shown_request(request, model))


class Recording(WireModel):
    """One recorded answer: its digest, the (redacted) request it answered, the evaluation; its JSON
    is a line of the file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    digest: str
    request: dict[str, Any]
    evaluation: dict[str, Any]


def _noted(path: Path, note: str, _said: set[str] = set()) -> None:  # noqa: B006 (once per process)
    key = str(path.resolve())
    if key not in _said:
        _said.add(key)
        sys.stderr.write(note + "\n")


class Cassette:
    """The recordings of one cassette file, read once and written whole (atomically).

    `recordings` maps a digest to its `Recording`, in the order first recorded;
    `unverified` holds version-1 lines that cannot be checked (never replayed,
    dropped when the file is written again); `where` names each recording's
    line (or the old document's entry) in the file as read.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.recordings: dict[str, Recording] = {}
        self.unverified: list[Recording] = []
        self.where: dict[str, str] = {}
        #: what the reader has to say about the file (the older JSON format), else None
        self.note: str | None = None
        #: how many times this cassette wrote its file
        self.writes = 0
        self._text: str | None = None
        self._lines: dict[str, str] = {}
        self._bytes = len(canonical(HEADER)) + 1
        self._shown: dict[str, list[str]] = {}
        if self.path.exists():
            self._text = self._read()
            self._parse(self._text)
            if self.note is not None:
                _noted(self.path, self.note)

    @property
    def existed(self) -> bool:
        """Whether the file was there when the cassette was opened."""
        return self._text is not None

    # ------------------------------------------------------------ reading

    def _read(self) -> str:
        too_large = f"cassette {self.path} is over {MAX_CASSETTE_BYTES >> 20} MiB"
        # Only a regular file is read, and the open never waits (a FIFO named as a cassette would
        # hang it); refused by its size before it is read: a file named as a cassette may be anything.
        with open_regular(self.path, label=f"cassette {self.path}", error=ConfigError) as f:
            if os.fstat(f.fileno()).st_size > MAX_CASSETTE_BYTES:
                raise ConfigError(too_large)
            try:
                raw = f.read(MAX_CASSETTE_BYTES + 1)
            except OSError as exc:
                raise ConfigError(f"cannot read cassette {self.path}: {exc.strerror}") from None
        if len(raw) > MAX_CASSETTE_BYTES:
            raise ConfigError(too_large)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"cassette {self.path} is not UTF-8 text") from None
        if not text.strip():
            raise ConfigError(f"cassette {self.path} is empty (delete it, or record it again)")
        return text

    def _parse(self, text: str) -> None:
        from .._json import JSONInputError, loads_bounded

        first = text.split("\n", 1)[0]
        try:
            head = loads_bounded(first, what=f"cassette {self.path} line 1", max_bytes=MAX_CASSETTE_BYTES)
        except JSONInputError:
            head = None
        if isinstance(head, dict) and head.get("format") == FORMAT:
            self._parse_lines(text, self._version(head))
            return
        try:
            document = loads_bounded(text, what=f"cassette {self.path}", max_bytes=MAX_CASSETTE_BYTES)
        except JSONInputError as exc:
            if head is None:  # neither a line nor a document: say where the JSON breaks
                raise ConfigError(str(exc)) from None
            document = None
        if isinstance(document, dict) and "entries" in document:
            self._parse_document(text, document)
            return
        raise ConfigError(f"cassette {self.path} line 1 is not a fabric-jev cassette header "
                          f"({canonical(HEADER)})")

    def _version(self, head: dict[str, Any]) -> int:
        version = head.get("version")
        if set(head) != {"format", "version"} or type(version) is not int:
            raise ConfigError(f"cassette {self.path} line 1 is not a fabric-jev cassette header "
                              f"({canonical(HEADER)})")
        if version > VERSION:
            raise ConfigError(f"cassette {self.path} is format version {version}, written by a newer "
                              f"fabric-jev; this one reads versions 1 to {VERSION}")
        if version < 1:
            raise ConfigError(f"cassette {self.path} has an unknown format version {version}")
        return version

    def _parse_lines(self, text: str, version: int) -> None:
        from .._json import JSONInputError, loads_bounded

        seen: dict[str, int] = {}
        # Lines end at "\n" only: str.splitlines() would also break at U+2028, U+2029 and NEL,
        # which JSON text written with ensure_ascii=False carries unescaped inside strings.
        for n, line in enumerate(text.split("\n"), 1):
            if n == 1 or not line.strip():
                continue
            where = f"cassette {self.path} line {n}"
            try:
                item = loads_bounded(line, what=where, max_bytes=MAX_CASSETTE_BYTES)
            except JSONInputError as exc:
                raise ConfigError(str(exc)) from None
            if not isinstance(item, dict) or set(item) != {"digest", "request", "evaluation"} \
                    or not isinstance(item["digest"], str) or not isinstance(item["request"], dict) \
                    or not isinstance(item["evaluation"], dict):
                raise ConfigError(f"{where}: a recording is {{digest, request, evaluation}}")
            digest = item["digest"]
            if not _DIGEST.fullmatch(digest):
                raise ConfigError(f"{where}: the digest is not a SHA-256 (64 lowercase hex digits)")
            if digest in seen:
                raise ConfigError(f"{where}: digest {digest[:12]}… is already recorded on line {seen[digest]} "
                                  "(a request is recorded once; delete one of the lines)")
            seen[digest] = n
            recording = Recording(digest=digest, request=item["request"], evaluation=item["evaluation"])
            checks = digest_of(recording.request) == digest
            if version == VERSION:
                if not checks:
                    raise ConfigError(f"{where}: the digest is not its request's (the line was edited); "
                                      "delete the line and record it again")
                self._take(recording, f"line {n}")
            elif checks:  # version 1 without a redaction: the request shown is the one asked
                self._take_over(recording, f"line {n}", where)
            else:  # version 1 digested a request it redacted: nothing can check it
                self.unverified.append(recording)
                self.where[digest] = f"line {n}"

    def _parse_document(self, text: str, document: dict[str, Any]) -> None:
        def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [k for k, _ in pairs]
            if len(set(keys)) != len(keys):
                twice = next(k for k in keys if keys.count(k) > 1)
                raise ConfigError(f"cassette {self.path} holds the key {twice[:16]!r} twice "
                                  "(a request is recorded once; delete one of the entries)")
            return dict(pairs)

        if document.get("version") != 1 or not isinstance(document.get("entries"), dict):
            raise ConfigError(f"cassette {self.path} is neither JSON Lines nor a version-1 JSON cassette")
        json.loads(text, object_pairs_hook=unique)  # bounded already: only duplicate keys are looked for
        for position, (digest, entry) in enumerate(document["entries"].items(), 1):
            where = f"cassette {self.path} entry {position}"
            if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict) \
                    or not isinstance(entry.get("evaluation"), dict):
                raise ConfigError(f"{where}: an entry is {{request, evaluation}}")
            if digest_of(entry["request"]) != digest:
                raise ConfigError(f"{where}: its key is not its request's digest (the entry was edited); "
                                  "delete it and record it again")
            self._take_over(Recording(digest=digest, request=entry["request"], evaluation=entry["evaluation"]),
                            f"entry {position}", where)
        self.note = (f"fabric-jev: note: cassette {self.path} is in the older JSON format; it is read, "
                     "and written as JSON Lines when something is recorded into it")

    def _take_over(self, old: Recording, origin: str, where: str) -> None:
        """An older line whose digest checked: keyed (and shown) as this version keys it."""
        try:
            shown = redacted(old.request)
        except ValueError as exc:
            raise ConfigError(f"{where}: the request cannot be redacted: {exc}") from None
        recording = Recording(digest=digest_of(shown), request=shown, evaluation=old.evaluation)
        if recording.digest in self.recordings:  # told apart only by what redaction removes
            self.unverified.append(old)
            self.where[old.digest] = origin
            return
        self._take(recording, origin)

    def _take(self, recording: Recording, origin: str) -> None:
        self.add(recording)
        self.where[recording.digest] = origin

    # ------------------------------------------------------------ recordings

    def get(self, digest: str) -> Recording | None:
        return self.recordings.get(digest)

    def add(self, recording: Recording) -> None:
        """Keep a recording (replacing one of the same digest). ConfigError if the file would
        grow past the cap, which no reader would then open."""
        line = canonical(recording.to_json()) + "\n"
        size = len(line.encode("utf-8"))
        old = self._lines.get(recording.digest)
        grown = self._bytes + size - (len(old.encode("utf-8")) if old is not None else 0)
        if grown > MAX_CASSETTE_BYTES:
            raise ConfigError(f"cassette {self.path} would grow past {MAX_CASSETTE_BYTES >> 20} MiB; "
                              "record into another cassette")
        self.recordings[recording.digest] = recording
        self._lines[recording.digest] = line
        self._bytes = grown

    def clear(self) -> None:
        self.recordings.clear()
        self.unverified.clear()
        self._lines.clear()
        self._bytes = len(canonical(HEADER)) + 1

    def render(self) -> str:
        return canonical(HEADER) + "\n" + "".join(self._lines[d] for d in self.recordings)

    def save(self) -> bool:
        """Write the file if its text changed (and it holds something); True if written."""
        if not self.recordings:
            return False  # a test that asked nothing keeps its cassette as it was, or gets none
        text = self.render()
        if text == self._text:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # A file to check in, as an editor would write it (the temporary file's own mode is 0600);
        # a cassette that is there keeps its mode.
        try:
            mode = self.path.stat().st_mode & 0o777
        except OSError:
            mode = 0o644
        atomic_write(self.path, text, mode=mode)
        self._text = text
        self.writes += 1
        return True

    # ------------------------------------------------------------ the nearest request

    def _shown_lines(self, recording: Recording) -> list[str]:
        found = self._shown.get(recording.digest)
        if found is None:
            found = self._shown[recording.digest] = _lines(recording.request)
        return found

    def nearest(self, request: dict[str, Any]) -> tuple[Recording, list[str]] | None:
        """The recorded request most like `request` (as shown: redacted), and a diff from it to
        `request`, without the file names; None for an empty cassette. Bounded work (above)."""
        candidates = [*self.recordings.values(), *self.unverified]
        if not candidates:
            return None
        asked = _lines(request)
        ranking = difflib.SequenceMatcher(None, autojunk=False)
        ranking.set_seq2(asked)
        scored = []
        for i, rec in enumerate(candidates):
            ranking.set_seq1(self._shown_lines(rec))
            scored.append((ranking.quick_ratio(), -i))
        best = max(heapq.nlargest(NEAREST_CANDIDATES, scored),
                   key=lambda s: (_similarity(self._shown_lines(candidates[-s[1]]), asked), s[1]))
        chosen = candidates[-best[1]]
        return chosen, _diff(self._shown_lines(chosen), asked)


def _lines(value: Any) -> list[str]:
    # Indented JSON breaks lines only between values ("\n" inside a string is escaped).
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False).split("\n")


def _window(a: list[str], b: list[str]) -> tuple[int, int, list[str], list[str]]:
    """The lines both share at the start and at the end, and the differing middles cut to
    DIFF_WINDOW lines each."""
    n = min(len(a), len(b))
    start = 0
    while start < n and a[start] == b[start]:
        start += 1
    end = 0
    while end < n - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    return start, end, a[start:len(a) - end][:DIFF_WINDOW], b[start:len(b) - end][:DIFF_WINDOW]


def _similarity(a: list[str], b: list[str]) -> float:
    """difflib's ratio, with lines past the window counted as different."""
    start, end, middle_a, middle_b = _window(a, b)
    blocks = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False).get_matching_blocks()
    return 2 * (start + end + sum(m.size for m in blocks)) / (len(a) + len(b))


_HUNK = re.compile(r"@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _diff(a: list[str], b: list[str]) -> list[str]:
    """A unified diff (one line of context) from `a` to `b`, over the window only."""
    start, end, middle_a, middle_b = _window(a, b)
    lo = max(0, start - 1)
    cut = len(middle_a) < len(a) - start - end or len(middle_b) < len(b) - start - end
    hi_a = start + len(middle_a) + (0 if cut else 1)
    hi_b = start + len(middle_b) + (0 if cut else 1)
    out = []
    for line in list(difflib.unified_diff(a[lo:hi_a], b[lo:hi_b], n=1, lineterm=""))[2:]:
        hunk = _HUNK.fullmatch(line)
        if hunk:  # numbered from the window: renumber from the top of the request
            line = (f"@@ -{int(hunk[1]) + lo}{hunk[2]} +{int(hunk[3]) + lo}{hunk[4]} @@")
        # A request's text may hold what a terminal acts on (U+009B, a bidi override, U+2028: JSON
        # leaves them as they are); the miss lands in pytest's report and on standard error.
        line = terminal_safe(line)
        out.append(line if len(line) <= DIFF_LINE_CHARS else line[:DIFF_LINE_CHARS] + "…")
    if cut:
        out.append(f"… the requests differ over more than {DIFF_WINDOW} lines; the diff stops there")
    return out


__all__ = ["DIFF_LINES", "FORMAT", "HEADER", "MAX_CASSETTE_BYTES", "VERSION", "Cassette", "Recording",
           "canonical", "digest_of", "redacted", "request_digest", "shown_request"]
