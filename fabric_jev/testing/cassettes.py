"""Recorded Jev answers for tests, vcrpy style: one cassette per test, four record modes.

The format and the evaluator live in fabric_jev.evaluators (cassette.py,
recording.py): the pytest plugin, `--evaluator cassette:FILE` / `record:FILE`
and `calibrate --from-cassette` read and write one format. This module keeps
the names tests import (docs/testing.md).
"""

from __future__ import annotations

from ..errors import CassetteMiss
from ..evaluators.cassette import DIFF_LINES, HEADER, MAX_CASSETTE_BYTES, Cassette, Recording
from ..evaluators.recording import RecordingEvaluator, RecordMode

__all__ = ["DIFF_LINES", "HEADER", "MAX_CASSETTE_BYTES", "Cassette", "CassetteMiss", "RecordMode", "Recording",
           "RecordingEvaluator"]
