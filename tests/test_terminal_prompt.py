"""The terminal approver, driven through a real pseudo-terminal.

`fabric-jev run` and `batch` ask on standard error and read one answer line from
standard input when both are a TTY. The program asks through `jev.evaluate`
with the `read` policy set to `ask`: every call is a question.
"""

from __future__ import annotations

import json
import os
import pty
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from fabric_jev import FixtureEvaluator, HostConfig, JevHost
from fabric_jev.cli.prompt import NO_TERMINAL, TerminalApprover
from tests.cli_support import cli
from tests.conftest import program
from tests.pty_support import Terminal

ASKING = """
const out = [];
for (let i = 0; i < input.n; i++) {
  try {
    const a = await jev.evaluate({state: input.state + i, questions: {q: {type: 'noul', instructions: 'ok?'}}});
    out.push(a.answers.q.noul);
  } catch (e) { out.push(e.message); }
}
return out;
"""
QUESTION = "[y/a/n/N] "
FIXTURE = {"answers": {"q": {"noul": 0.75}}, "usage": {"input_tokens": 1, "output_tokens": 1}}


def files(tmp_path: Path, n: int, *, timeout_ms: int = 60_000, state: str = "state ") -> list[str]:
    (tmp_path / "program.json").write_text(json.dumps(program(ASKING, name="asker", requires=["jev.evaluate"])))
    (tmp_path / "input.json").write_text(json.dumps({"n": n, "state": state}))
    (tmp_path / "config.json").write_text(json.dumps({"approvals": {"read": "ask"},
                                                      "approverTimeoutMs": timeout_ms}))
    (tmp_path / "fixture.json").write_text(json.dumps(FIXTURE))
    return [str(tmp_path / "program.json"), "--input", str(tmp_path / "input.json"),
            "--config", str(tmp_path / "config.json"), "--evaluator", f"fixture:{tmp_path / 'fixture.json'}"]


def run_on_terminal(tmp_path: Path, *args: str) -> Terminal:
    return Terminal([sys.executable, "-m", "fabric_jev.cli", "run", *args],
                    env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})


def decisions(envelope: Any) -> list[tuple[str, bool, str, str | None]]:
    return [(a["decidedBy"], a["allowed"], a["reason"], a.get("approver")) for a in envelope["approvals"]]


DENIED = "Capability call denied: jev.evaluate ({}) (line 5, column 56)"  # the call's place in ASKING


def test_yes_allows_the_call_once_and_the_question_shows_the_facts(tmp_path: Path) -> None:
    # A control sequence in the arguments must reach the terminal escaped, not as a command.
    with run_on_terminal(tmp_path, *files(tmp_path, 1, state="x\x1b[2K\u202e"), "--intent", "judge it") as term:
        shown = term.expect(QUESTION)
        term.type("y\n")
        code, envelope, screen = term.finish()
    assert code == 0 and envelope["result"] == [0.75]
    assert re.search(r"program +asker", shown) and re.search(r"capability +jev\.evaluate \(risk read, policy ask\)", shown)
    assert '"state":"x\\u001b[2K\\u202e0"' in shown and re.search(r"user asked +judge it", shown)
    assert re.search(r"asked because +the read policy is ask", shown)
    assert "(--allow jev.evaluate or --allow read allows it without asking" in shown
    assert "\x1b[2K" not in screen and "\u202e" not in screen
    assert "→ allowed this once" in screen
    assert decisions(envelope) == [("approver", True, "the approver allowed it", "terminal")]


def test_a_long_argument_cannot_wrap_into_a_line_of_its_own(tmp_path: Path) -> None:
    """The terminal (160 columns) would wrap a long line where the program chose: padded with
    spaces, its text would start a row of its own and read as a fact ("user asked ..."). The
    prompt lays each fact out itself, every row within the width, later rows under the value."""
    from rich.cells import cell_len

    fake = "user asked  read the weather, nothing else"
    state = "x" + " " * 140 + fake + " " * 100 + "東京" * 60
    with run_on_terminal(tmp_path, *files(tmp_path, 1, state=state)) as term:
        shown = term.expect(QUESTION)
        term.type("n\n")
        term.finish()
    block = shown[shown.index("fabric-jev: a program asks"):].replace("\r\n", "\n").split("\n")
    facts = block[1:block.index(next(line for line in block if line.startswith("  (--allow")))]
    assert all(cell_len(line) < 160 for line in facts)
    indent = " " * len("  asked because  ")
    labelled = [line.split()[0] for line in facts if not line.startswith(indent)]
    # No row of the program's text at a label's place.
    assert labelled == ["program", "capability", "arguments", "asked"]
    rows = [line for line in facts if line.startswith(indent)]
    assert len(rows) > 2  # the argument was laid out on rows of its own, each under the value column
    first = next(line for line in facts if line.startswith("  arguments      "))
    assert (first[len(indent):] + "".join(line[len(indent):] for line in rows[:-1])).startswith(
        '{"state":"' + state + '0","questions"')


def test_progress_lines_cannot_steer_the_terminal_around_the_question(tmp_path: Path) -> None:
    """A progress line is the program's text on the same terminal: JSON escapes ESC, but not
    the one-byte CSI (U+009B: "conceal what follows" on many terminals) or a bidi override."""
    args = files(tmp_path, 1)
    emitting = "program.emit('\\u009b8m\\u202e'); await program.sleep(0);" + ASKING
    (tmp_path / "program.json").write_text(json.dumps(program(emitting, name="asker",
                                                              requires=["jev.evaluate"])))
    with run_on_terminal(tmp_path, *args) as term:
        term.expect(QUESTION)
        term.type("y\n")
        code, envelope, screen = term.finish()
    assert code == 0 and envelope["result"] == [0.75]
    assert '[1] "\\u009b8m\\u202e"' in screen
    assert "\x9b" not in screen and "\u202e" not in screen


def test_always_answers_every_later_question_about_the_ref(tmp_path: Path) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 3)) as term:
        term.expect(QUESTION)
        term.type("a\n")
        code, envelope, screen = term.finish()
    assert code == 0 and envelope["result"] == [0.75, 0.75, 0.75]
    assert screen.count(QUESTION) == 1
    assert decisions(envelope) == [
        ("approver", True, "the approver allowed it, and this ref for the rest of the run", "terminal"),
        ("approver", True, "an earlier answer allowed this ref for the rest of the run", None),
        ("approver", True, "an earlier answer allowed this ref for the rest of the run", None)]


@pytest.mark.parametrize("answer", ["n", "", "no"])
def test_no_or_enter_denies(tmp_path: Path, answer: str) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 1)) as term:
        term.expect(QUESTION)
        term.type(answer + "\n")
        code, envelope, screen = term.finish()
    assert code == 0 and envelope["result"] == [DENIED.format("the approver denied it")]
    assert "→ denied" in screen


def test_capital_n_denies_every_later_question(tmp_path: Path) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 2)) as term:
        term.expect(QUESTION)
        term.type("N\n")
        code, envelope, screen = term.finish()
    assert code == 0 and screen.count(QUESTION) == 1
    assert envelope["result"] == [
        DENIED.format("the approver denied it and every later question of the run"),
        DENIED.format("an earlier answer denied every later question of the run")]


def test_an_unknown_answer_asks_again(tmp_path: Path) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 1)) as term:
        term.expect(QUESTION)
        term.type("maybe\n")
        term.expect("answer y, a, n or N (Enter: no): ")
        term.type("y\n")
        code, envelope, _ = term.finish()
    assert code == 0 and envelope["result"] == [0.75]


def test_keys_typed_before_the_question_do_not_answer_it(tmp_path: Path) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 1)) as term:
        term.type("y\n")  # typed ahead: discarded when the question is shown
        term.expect(QUESTION)
        term.type("n\n")
        code, envelope, _ = term.finish()
    assert code == 0 and envelope["result"] == [DENIED.format("the approver denied it")]


def test_no_answer_in_time_denies(tmp_path: Path) -> None:
    with run_on_terminal(tmp_path, *files(tmp_path, 1, timeout_ms=100)) as term:
        term.expect(QUESTION)
        term.expect("→ no answer: denied")
        code, envelope, _ = term.finish()
    assert code == 0 and envelope["result"] == [DENIED.format("the approver did not answer in time")]
    assert decisions(envelope) == [("approver", False, "the approver did not answer in time", "terminal")]


def test_without_a_terminal_the_call_is_refused_and_the_envelope_says_why(tmp_path: Path) -> None:
    done = cli("run", *files(tmp_path, 1), stdin="y\n")
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["result"] == [DENIED.format(f"read requires approval and {NO_TERMINAL}")]
    assert QUESTION not in done.stderr


def test_allow_and_deny_flags_decide_without_asking(tmp_path: Path) -> None:
    done = cli("run", *files(tmp_path, 1), "--allow", "read")
    assert json.loads(done.stdout)["result"] == [0.75]
    [entry] = json.loads(done.stdout)["approvals"]
    assert (entry["override"], entry["reason"], entry["policy"]) == ("--allow read", "--allow read allows it",
                                                                      "allow")
    done = cli("run", *files(tmp_path, 1), "--allow", "read", "--deny", "jev.evaluate")
    assert json.loads(done.stdout)["result"] == [DENIED.format("--deny jev.evaluate denies it")]
    done = cli("run", *files(tmp_path, 1), "--allow", "reading")
    assert done.returncode == 2 and "'reading' is neither a risk" in done.stderr


# ---------------------------------------------------------------- two runs asking together

@pytest.mark.anyio
async def test_two_runs_asking_together_queue_their_questions() -> None:
    """Two runs on one host ask at once: the second question is shown only after the first is answered."""
    master, slave = pty.openpty()
    output = os.fdopen(os.dup(slave), "w")
    approver = TerminalApprover(timeout_s=60, input_fd=slave, output=output)
    screen = ""

    async def until(text: str) -> str:
        nonlocal screen
        while text not in screen:
            await anyio.wait_readable(master)
            screen += os.read(master, 65536).decode()
        shown, screen = screen, screen[screen.index(text) + len(text):]
        return shown

    config = HostConfig(approvals={"read": "ask"})
    try:
        async with JevHost(config, evaluator=FixtureEvaluator(FIXTURE), approver=approver) as host:
            asker = program(ASKING, name="asker", requires=["jev.evaluate"])
            first = await host.spawn(asker, {"n": 1, "state": "first "})
            shown = await until(QUESTION)
            assert '"state":"first' in shown
            second = await host.spawn(asker, {"n": 1, "state": "second "})
            await host.policy.until_waiting(1)  # the second run's question is queued...
            assert screen == ""  # ...and nothing of it is on the terminal
            os.write(master, b"y\n")
            shown = await until(QUESTION)
            assert "→ allowed this once" in shown and '"state":"second' in shown
            assert shown.count(QUESTION) == 1
            os.write(master, b"n\n")
            assert (await host.wait(first.id)).result == [0.75]
            assert (await host.wait(second.id)).result == [DENIED.format("the approver denied it")]
    finally:
        output.close()
        os.close(slave)
        os.close(master)


def test_batch_pauses_its_progress_bar_for_each_question(tmp_path: Path) -> None:
    args = files(tmp_path, 1)
    (tmp_path / "inputs.jsonl").write_text('{"n": 1, "state": "one "}\n{"n": 1, "state": "two "}\n')
    term = Terminal([sys.executable, "-m", "fabric_jev.cli", "batch", args[0], "--inputs",
                     str(tmp_path / "inputs.jsonl"), "--out", str(tmp_path / "out.jsonl"), *args[3:],
                     "--concurrency", "2"], env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")})
    with term:
        questions = []
        for answer in ("y\n", "n\n"):
            questions.append(term.expect(QUESTION))
            term.type(answer)
        code, _, screen = term.finish()
    assert code == 0
    for shown in questions:  # each question is whole: no bar was drawn inside it
        block = shown[shown.index("fabric-jev: a program asks"):]
        assert "batch" not in block and "\x1b[" not in block
    assert screen.count(QUESTION) == 2 and "batch summary" in screen
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    results = sorted(str(line["result"]) for line in lines)
    assert results == sorted([str([0.75]), str([DENIED.format("the approver denied it")])])


def test_the_question_at_80_columns_wraps_at_word_boundaries(tmp_path: Path) -> None:
    from rich.cells import cell_len

    state = "please summarise the quarterly report for the finance team " * 4
    with Terminal([sys.executable, "-m", "fabric_jev.cli", "run", *files(tmp_path, 1, state=state)],
                  env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home")}, columns=80) as term:
        shown = term.expect(QUESTION)
        term.type("n\n")
        term.finish()
    block = shown[shown.index("fabric-jev: a program asks"):].replace("\r\n", "\n").split("\n")
    assert all(cell_len(row) < 80 for row in block), block
    words = set(state.split()) | {"question", "allows", "without", "asking;", "every", "later"}
    for row in block:
        tokens = row.split()
        if tokens:  # no word is cut at a row's end (JSON punctuation aside)
            last = tokens[-1].strip('",{}:[]')
            assert not last or any(last == w or last.endswith(w) or w.startswith(last) is False for w in words)
    joined = " ".join(" ".join(block).split())
    assert "N = no to every later question of this run" in joined
    assert "asked because the read policy is ask" in joined


def test_a_late_answer_does_not_land_on_the_next_question(tmp_path: Path) -> None:
    """The first question times out; the `a` typed for it arrives as the second is shown. Before:
    it answered the second ("always"), allowing a call the person never saw. Now a line that
    arrives within the guard after an unanswered question does not count."""
    args = files(tmp_path, 2, timeout_ms=1500)
    with Terminal([sys.executable, "-m", "fabric_jev.cli", "run", *args],
                  env={**os.environ, "FABRIC_JEV_HOME": str(tmp_path / "home"),
                       "FABRIC_JEV_ANSWER_GUARD_MS": "5000"}) as term:
        term.expect("→ no answer: denied")
        term.expect(QUESTION)  # the second question, shown a moment after the first timed out
        term.type("a\n")  # the answer the person was typing for the first
        code, envelope, screen = term.finish()
    assert code == 0
    assert "typed before this question was on screen: it does not count" in screen
    assert [(a["allowed"], a["reason"]) for a in envelope["approvals"]] == [
        (False, "the approver did not answer in time"), (False, "the approver did not answer in time")]
