"""browser.cdp clicks only after approval: the browser-click example under an `auto` policy.

Real Chromium; the program's choice and the classifier both run on the
example's fixture evaluator, which picks the Accept button, lets observation
calls, the mouse move and the release through and hands the mouse press (the
event that commits the click) to the approver.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fabric_jev_browser import BrowserConnector

from fabric_jev import CapabilityCall, FixtureEvaluator, HostConfig, JevHost
from fabric_jev.cli.prompt import NO_TERMINAL
from tests.browser_support import Launched, Pages
from tests.pty_support import Terminal

pytestmark = [pytest.mark.anyio, pytest.mark.browser]
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "browser-click"


def load(name: str) -> Any:
    return json.loads((EXAMPLE / name).read_text())


async def run_example(chromium: Launched, url: str, approver: Any) -> Any:
    config = load("config.json")
    # The example launches its own browser (launch: true); these runs use the session's.
    settings = {**config["connectors"]["browser"], "wsUrl": chromium.ws_url}
    del settings["launch"]
    evaluator = FixtureEvaluator.from_file(EXAMPLE / "fixture.json")
    async with JevHost(HostConfig(approvals=config["approvals"]), evaluator=evaluator,
                       approver=approver) as host:
        host.add_connector(BrowserConnector(settings))
        return await host.run(load("program.json"), {**load("input.json"), "url": url},
                              intent="Accept the terms of service on the page")


def cdp_decisions(env: Any) -> list[tuple[str, str, bool]]:
    return [(a["ref"], a["decidedBy"], a["allowed"]) for a in env.to_json().get("approvals", [])]


async def test_the_click_happens_only_after_the_approver_allows_it(chromium: Launched, pages: Pages) -> None:
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    asked: list[CapabilityCall] = []

    async def approver(request: CapabilityCall) -> str:
        asked.append(request)
        return "allow"

    env = await run_example(chromium, url, approver)
    assert env.result == {"clicked": "Accept", "before": "Pending", "after": "Accepted", "verified": True,
                          "confidence": 0.92, "reason": None}
    # The press went to the approver, and nothing else did.
    assert [(r.arguments["method"], r.arguments["params"]["type"]) for r in asked] == [
        ("Input.dispatchMouseEvent", "mousePressed")]
    assert all(r.ref == "browser.cdp" and r.risk == "execute" and r.policy == "auto" for r in asked)
    assert all(r.classifier is not None and r.classifier.decision == "ask" for r in asked)
    assert asked[0].asked_because is not None and asked[0].asked_because.startswith("the classifier: safe 0.20 < 0.50")
    decisions = cdp_decisions(env)
    assert decisions.count(("browser.cdp", "approver", True)) == 1
    # The reading calls, the move and the release were allowed by the browser's default rules:
    # only the press reached the classifier.
    assert ("browser.cdp", "rule", True) in decisions and ("browser.cdp", "classifier", True) not in decisions
    assert [a["probability"] for a in env.to_json().get("approvals", []) if "probability" in a] == [0.2]
    # The program asked Jev once (a read, allowed by policy) before it acted.
    assert env.evaluations == 1 and ("jev.evaluate", "policy", True) in decisions


async def test_one_click_asks_once_when_the_classifier_allows_nothing(chromium: Launched, pages: Pages,
                                                                     tmp_path: Path) -> None:
    """The classifier is unsure of every call (as the offline evaluator is of every execute call):
    the browser's default rules still let the reading calls through (connect, an about:blank tab,
    attach, the run's own page, read-only Runtime.evaluate, the move and the release), so one
    click is one question. Each decision names the default rule that made it."""
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    fixture = load("fixture.json")
    fixture["answers"]["safe"] = {"noul": 0.2}
    fixture["rules"] = []
    (tmp_path / "unsure.json").write_text(json.dumps(fixture))
    config = load("config.json")
    settings = {**config["connectors"]["browser"], "wsUrl": chromium.ws_url}
    del settings["launch"]  # the session's browser, not one launched for the host
    asked: list[CapabilityCall] = []

    async def approver(request: CapabilityCall) -> str:
        asked.append(request)
        return "allow"

    async with JevHost(HostConfig(approvals=config["approvals"]),
                       evaluator=FixtureEvaluator.from_file(tmp_path / "unsure.json"), approver=approver) as host:
        host.add_connector(BrowserConnector(settings))
        env = await host.run(load("program.json"), {**load("input.json"), "url": url},
                             intent="Accept the terms of service on the page")
    assert env.result["clicked"] == "Accept" and env.result["verified"] is True
    assert [(r.arguments["method"], r.arguments["params"]["type"]) for r in asked] == [
        ("Input.dispatchMouseEvent", "mousePressed")]
    rules = {a["rule"] for a in env.to_json().get("approvals", []) if a["decidedBy"] == "rule"}
    assert rules == {
        "allow browser.connect",
        'allow browser.cdp(method: "Target.createTarget", params.url: "about:blank")',
        'allow browser.cdp(method: "Target.attachToTarget")',
        'allow browser.cdp(method: "Page.navigate", params.url: same-origin)',
        'allow browser.cdp(method: "Runtime.evaluate", params.expression: read-only-script)',
        'allow browser.cdp(method: "Input.dispatchMouseEvent", params.type: "mouseMoved")',
        'allow browser.cdp(method: "Input.dispatchMouseEvent", params.type: "mouseReleased")',
        'allow browser.cdp(method: "Target.closeTarget")'}
    assert all(a["ruleSource"] == "default rules" for a in env.to_json().get("approvals", []) if a["decidedBy"] == "rule")
    # Without the default rules, every CDP call is a question (six kinds of them here).
    asked.clear()
    async with JevHost(HostConfig(approvals=config["approvals"], default_rules=False),
                       evaluator=FixtureEvaluator.from_file(tmp_path / "unsure.json"), approver=approver) as host:
        host.add_connector(BrowserConnector(settings))
        await host.run(load("program.json"), {**load("input.json"), "url": url},
                       intent="Accept the terms of service on the page")
    assert len(asked) > 6


async def test_a_denied_click_is_not_sent_and_shows_in_the_envelope(chromium: Launched, pages: Pages) -> None:
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())

    async def approver(request: CapabilityCall) -> str:
        return "deny"

    env = await run_example(chromium, url, approver)
    assert env.result == {"clicked": None, "before": "Pending", "after": "Pending", "verified": False,
                          "confidence": 0.92, "reason": "click not approved"}
    denied = [a for a in env.to_json().get("approvals", []) if not a["allowed"]]
    assert [(a["ref"], a["risk"], a["policy"], a["decidedBy"], a["reason"]) for a in denied] == [
        ("browser.cdp", "execute", "auto", "approver", "the approver denied it")]
    assert env.approval_counts.denied == 1


def cli_files(chromium: Launched, url: str, tmp_path: Path) -> list[str]:
    config = load("config.json")
    config["connectors"]["browser"]["wsUrl"] = chromium.ws_url  # the session's browser, not a launched one
    del config["connectors"]["browser"]["launch"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "input.json").write_text(json.dumps({**load("input.json"), "url": url}))
    return [sys.executable, "-m", "fabric_jev.cli", "run", str(EXAMPLE / "program.json"),
            "--input", str(tmp_path / "input.json"), "--config", str(tmp_path / "config.json"),
            "--evaluator", f"fixture:{EXAMPLE / 'fixture.json'}",
            "--intent", "Accept the terms of service on the page"]


def cli_env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "FABRIC_JEV_HOME": str(tmp_path / "home"),
            "PYTHONPATH": f"{ROOT}:{ROOT / 'connectors' / 'browser'}"}


def test_from_the_terminal_one_answer_approves_the_click(
        chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    with Terminal(cli_files(chromium, url, tmp_path), env=cli_env(tmp_path)) as term:
        shown = term.expect("[y/a/n/N] ")
        term.type("y\n")
        code, env, screen = term.finish()
    assert code == 0, screen
    assert env["result"] == {"clicked": "Accept", "before": "Pending", "after": "Accepted", "verified": True,
                             "confidence": 0.92, "reason": None}
    assert re.search(r"program +browser-click", shown)
    assert re.search(r"capability +browser\.cdp \(risk execute, policy auto\)", shown)
    assert '"type":"mousePressed"' in shown and re.search(r"classifier +ask:", shown)
    assert re.search(r"asked because +the classifier: safe 0\.20 < 0\.50", shown)
    assert screen.count("[y/a/n/N] ") == 1
    [asked] = [a for a in env["approvals"] if a["decidedBy"] == "approver"]
    assert (asked["ref"], asked["allowed"], asked["approver"]) == ("browser.cdp", True, "terminal")


def test_from_the_command_line_without_a_terminal_the_click_is_denied(
        chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    done = subprocess.run(cli_files(chromium, url, tmp_path), capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=cli_env(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr + done.stdout
    env = json.loads(done.stdout)
    assert env["result"]["clicked"] is None and env["result"]["after"] == "Pending"
    [denied] = [a for a in env["approvals"] if not a["allowed"]]
    assert denied["ref"] == "browser.cdp" and denied["reason"] == (
        f"execute requires approval and {NO_TERMINAL} (the classifier could not allow it)")


def test_always_offers_a_pattern_the_person_confirms_and_saves(
        chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    """`a` shows the pattern it stands for; `p` saves it in the project's settings (the working
    directory's .fabric-jev/settings.json), and the rule shows in the audit trail's later calls."""
    url = pages.add("/terms.html", (EXAMPLE / "terms.html").read_text())
    project = tmp_path / "project"
    project.mkdir()
    with Terminal(cli_files(chromium, url, tmp_path), env=cli_env(tmp_path), cwd=project) as term:
        shown = term.expect("[y/a/n/N] ")
        assert 'a = always for browser.cdp(method: "Input.dispatchMouseEvent") in this run' in " ".join(
            shown.split())
        term.type("a\n")
        confirm = term.expect("[r/p/u] ")
        assert 'always allow browser.cdp(method: "Input.dispatchMouseEvent")?' in confirm
        term.type("p\n")
        code, env, screen = term.finish()
    assert code == 0, screen
    assert env["result"]["clicked"] == "Accept" and screen.count("[y/a/n/N] ") == 1
    saved = json.loads((project / ".fabric-jev" / "settings.json").read_text())
    assert saved["rules"] == [{"allow": 'browser.cdp(method: "Input.dispatchMouseEvent")'}]
    [asked] = [a for a in env["approvals"] if a["decidedBy"] == "approver"]
    assert asked["reason"] == "the approver allowed it, and this ref for the rest of the run"
