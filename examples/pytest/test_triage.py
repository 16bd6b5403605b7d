"""The triage program, tested with recorded Jev answers (cassettes/test_triage/*.jsonl)."""

import json
from pathlib import Path

import pytest

from fabric_jev import run_program

TRIAGE = json.loads((Path(__file__).parent / "triage.json").read_text())


@pytest.mark.anyio
async def test_a_double_charge_goes_to_billing_as_a_refund(jev_host):
    ticket = {"text": "I was charged twice for my subscription this month, please refund the second payment."}
    envelope = await jev_host.run(TRIAGE, ticket)
    assert envelope.state == "completed", envelope.error
    assert envelope.result == {"queue": "billing", "refund": True, "review": False}
    assert envelope.evaluations == 1


@pytest.mark.anyio
async def test_a_crash_goes_to_technical(jev_host):
    envelope = await jev_host.run(TRIAGE, {"text": "The app crashes every time I open the settings page."})
    assert envelope.state == "completed", envelope.error
    assert envelope.result["queue"] == "technical"
    assert envelope.result["refund"] is False


def test_a_plain_function_can_run_the_program_too(jev_evaluator):
    envelope = run_program(TRIAGE, {"text": "Where can I download last month's invoice?"}, evaluator=jev_evaluator)
    assert envelope.state == "completed", envelope.error
    assert envelope.result["queue"] == "billing"
