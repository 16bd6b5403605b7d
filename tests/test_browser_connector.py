"""browser.connect / browser.cdp for programs, with the rules of contract §10."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fabric_jev_browser import BrowserConfig, BrowserConnector

from fabric_jev import ConfigError, HostConfig, JevHost, RunState
from fabric_jev.testing import open_connections
from tests.browser_support import Launched, Pages
from tests.conftest import program

pytestmark = [pytest.mark.anyio, pytest.mark.browser]
ROOT = Path(__file__).resolve().parent.parent
ALLOWED = ["Target.createTarget", "Target.attachToTarget", "Target.closeTarget", "Runtime.evaluate",
           "Browser.getVersion"]
CONNECT_AND_PAGE = """
await tools.call({ref: 'browser.connect'});
const cdp = (method, params, sessionId) => tools.call({ref: 'browser.cdp', args: {method, params, sessionId}});
const {targetId} = await cdp('Target.createTarget', {url: 'about:blank'});
const {sessionId} = await cdp('Target.attachToTarget', {targetId, flatten: true});
"""


async def run_program(chromium: Launched, code: str, **config: Any) -> Any:
    connector = BrowserConnector({"wsUrl": chromium.ws_url, "allowedMethods": ALLOWED, **config})
    async with JevHost(HostConfig(approvals={"execute": "allow"})) as host:
        host.add_connector(connector)
        env = await host.run(program(code, requires=["browser.connect", "browser.cdp"]), None)
        assert open_connections(connector) == {}, "the run's connection outlived the run"
    return env


async def test_allowed_methods_pass(chromium: Launched) -> None:
    env = await run_program(chromium, CONNECT_AND_PAGE + """
      const r = await cdp('Runtime.evaluate', {expression: '6 * 7', returnByValue: true}, sessionId);
      await cdp('Target.closeTarget', {targetId});
      return r.result.value;""")
    assert env.state is RunState.COMPLETED, env.error
    assert env.result == 42


async def test_forbidden_method_is_refused(chromium: Launched) -> None:
    env = await run_program(chromium, CONNECT_AND_PAGE + """
      try { await cdp('Page.navigate', {url: 'http://127.0.0.1:1'}, sessionId); }
      catch (e) { await cdp('Target.closeTarget', {targetId}); return e.message; }""")
    assert env.result == "CDP method not allowed: Page.navigate (line 3, column 50)"


async def test_page_scoped_calls_need_an_explicit_session(chromium: Launched) -> None:
    env = await run_program(chromium, CONNECT_AND_PAGE + """
      try { await cdp('Runtime.evaluate', {expression: '1'}); }
      catch (e) { await cdp('Target.closeTarget', {targetId}); return e.message; }""")
    assert env.result == "Page-scoped CDP calls require an explicit sessionId (line 3, column 50)"


async def test_browser_scoped_calls_need_no_session(chromium: Launched) -> None:
    env = await run_program(chromium, """
      await tools.call({ref: 'browser.connect'});
      const v = await tools.call({ref: 'browser.cdp', args: {method: 'Browser.getVersion'}});
      return v.product.length > 0;""")
    assert env.result is True


async def test_cdp_before_connect_is_refused(chromium: Launched) -> None:
    env = await run_program(chromium, """
      try { await tools.call({ref: 'browser.cdp', args: {method: 'Browser.getVersion'}}); }
      catch (e) { return e.message; }""")
    assert env.result == "Call browser.connect before browser.cdp (line 2, column 25)"


async def test_connect_is_idempotent_and_per_run(chromium: Launched) -> None:
    env = await run_program(chromium, """
      const a = await tools.call({ref: 'browser.connect'});
      const b = await tools.call({ref: 'browser.connect'});
      return [a.reused, b.reused];""")
    assert env.result == [False, True]


async def test_cdp_errors_reach_the_guest_as_messages(chromium: Launched) -> None:
    env = await run_program(chromium, CONNECT_AND_PAGE + """
      try { await cdp('Target.closeTarget', {targetId: 'no-such-target'}); }
      catch (e) { await cdp('Target.closeTarget', {targetId}); return e.message; }""")
    assert env.result.startswith("CDP Target.closeTarget failed:")


async def test_stopping_a_run_closes_its_connection(chromium: Launched) -> None:
    connector = BrowserConnector({"wsUrl": chromium.ws_url, "allowedMethods": ALLOWED})
    async with JevHost(HostConfig(approvals={"execute": "allow"})) as host:
        host.add_connector(connector)
        env = await host.spawn(program(
            "await tools.call({ref: 'browser.connect'}); await program.emit('up');"
            " for (;;) await program.sleep(50);", requires=["browser.connect", "browser.cdp"]), None)
        with anyio.fail_after(10):
            await host.progress(env.id)  # 'up': the run holds its connection
        conn = open_connections(connector)[env.id]
        stopped = await host.stop(env.id)
        assert stopped.state is RunState.CANCELLED
        assert conn.closed and env.id not in open_connections(connector)


@pytest.mark.parametrize(("raw", "needle"), [
    ({}, "wsUrl is required"),
    ({"allowedMethods": ["Browser.getVersion"]}, "or launch: true to start a headless Chromium"),
    ({"launch": True, "wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": ["Browser.getVersion"]},
     "give wsUrl .* or launch: true .*, not both"),
    ({"launch": "yes", "allowedMethods": ["Browser.getVersion"]}, "launch must be true or false"),
    ({"launch": True, "allowedMethods": []}, "1-128 exact method names"),
    ({"wsUrl": "http://127.0.0.1:9222", "allowedMethods": ["Browser.getVersion"]}, "ws: or wss:"),
    ({"wsUrl": "ws://u:p@127.0.0.1:9222/x", "allowedMethods": ["Browser.getVersion"]}, "credentials"),
    ({"wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": []}, "1-128 exact method names"),
    ({"wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": ["Runtime.*"]}, "exact method names"),
    ({"wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": ["A.b"] * 129}, "1-128"),
    ({"wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": ["Browser.getVersion"], "autoAllow": True},
     "always false"),
])
def test_config_rules(raw: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        BrowserConfig.parse(raw)


def test_call_timeout_is_clamped() -> None:
    base = {"wsUrl": "ws://127.0.0.1:9222/x", "allowedMethods": ["Browser.getVersion"]}
    assert BrowserConfig.parse(base).call_timeout_ms == 10_000
    assert BrowserConfig.parse({**base, "callTimeoutMs": 5}).call_timeout_ms == 100
    assert BrowserConfig.parse({**base, "callTimeoutMs": 10**9}).call_timeout_ms == 60_000


def test_browser_click_example_end_to_end(chromium: Launched, pages: Pages, tmp_path: Path) -> None:
    example = ROOT / "examples" / "browser-click"
    url = pages.add("/terms.html", (example / "terms.html").read_text())
    config = json.loads((example / "config.json").read_text())
    config["connectors"]["browser"]["wsUrl"] = chromium.ws_url  # the session's browser, not a launched one
    del config["connectors"]["browser"]["launch"]
    config["approvals"] = {"execute": "allow"}  # the approval flow: tests/test_browser_approval.py
    (tmp_path / "config.json").write_text(json.dumps(config))

    def run(goal: str, fixture: dict[str, Any] | None = None) -> dict[str, Any]:
        (tmp_path / "input.json").write_text(json.dumps({"url": url, "goal": goal, "expect": "Accepted"}))
        answers = json.loads((example / "fixture.json").read_text())
        if fixture is not None:
            answers["answers"]["control"] = fixture
        (tmp_path / "fixture.json").write_text(json.dumps(answers))
        done = subprocess.run([sys.executable, "-m", "fabric_jev.cli", "run", str(example / "program.json"),
                               "--input", str(tmp_path / "input.json"), "--config", str(tmp_path / "config.json"),
                               "--evaluator", f"fixture:{tmp_path / 'fixture.json'}"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr + done.stdout
        envelope: dict[str, Any] = json.loads(done.stdout)
        return envelope

    env = run("Accept the terms of service")
    assert env["result"] == {"clicked": "Accept", "before": "Pending", "after": "Accepted",
                             "verified": True, "confidence": 0.92, "reason": None}
    assert env["events"][0]["value"]["observed"] == ["Accept", "Decline", "Maybe later"]
    assert env["events"][1]["value"] == {"choice": "control_0", "confidence": 0.92}
    assert env["evaluations"] == 1
    # Jev was asked about the enabled buttons only (the disabled one is no candidate), with a
    # no-match path; nothing is clicked when it picks none or is unsure.
    none = {"choice": "none", "probabilities": {"none": 0.9, "control_0": 0.05, "control_1": 0.05},
            "confidence": 0.9}
    assert run("Maybe later", none)["result"]["reason"] == "no control achieves the goal"
    unsure = {"choice": "control_1", "probabilities": {"none": 0.3, "control_0": 0.3, "control_1": 0.4},
              "confidence": 0.4}
    result = run("Decline", unsure)["result"]
    assert result["reason"] == "unsure which control (review)" and result["after"] == "Pending"
