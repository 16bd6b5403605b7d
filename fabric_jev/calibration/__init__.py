"""Labeled examples, calibration metrics and reports, and learning a local-evaluator profile.

``labels`` reads the labels format (JSONL, or a cassette of recorded answers),
``metrics`` holds the pure scoring (accuracy, Brier, ECE, thresholds),
``ask`` asks an evaluator every example with a resumable answer cache,
``report`` draws the PNGs (matplotlib, from the ``report`` extra) and
``learn`` fits a profile (see ``fabric_jev.evaluators.profile``).
Nothing here is imported by ``import fabric_jev``.
"""
