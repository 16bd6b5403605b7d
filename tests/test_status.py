"""`fabric-jev status` and `host.status()`: every route's state, the chosen route and its rule;
never ready without credentials; presence only (no command run, no network, no key printed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import ConfigError, HostConfig, JevHost
from fabric_jev.evaluators import TYPESAFE, AuthStore, CredentialResolver, HttpEvaluator
from fabric_jev.evaluators.select import build_evaluator, select
from fabric_jev.evaluators.status import status_report

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("TYPESAFE_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY",
        "JEV_AI_GATEWAY_API_KEY", "FABRIC_JEV_TYPESAFE_BASE_URL", "FABRIC_JEV_OPENROUTER_BASE_URL",
        "FABRIC_JEV_VERCEL_AI_GATEWAY_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FABRIC_JEV_OPENAI_BASE_URL",
        "FABRIC_JEV_OLLAMA_BASE_URL", "FABRIC_JEV_ANTHROPIC_BASE_URL")


def status(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    return subprocess.run([sys.executable, "-m", "fabric_jev.cli", "status", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env={**clean, "FABRIC_JEV_HOME": str(tmp / "home"), **(env or {})})


def report(tmp: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = status(tmp, *args, "--json", env=env)
    out: dict[str, Any] = json.loads(done.stdout)
    # Exit 1 exactly when the chosen route is not ready, with the reason on standard error too.
    assert done.returncode == (0 if out["ready"] else 1), done.stderr
    assert (done.stderr == "") is out["ready"], done.stderr
    return out


def rows(out: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in out["routes"]}


def test_a_route_without_credentials_is_not_ready(tmp_path: Path) -> None:
    out = report(tmp_path, "--evaluator", "typesafe")
    assert out["ready"] is False and out["route"] == "typesafe" and out["mode"] == "online"
    assert out["credentials"] == {"configured": False, "source": "missing", "verified": False}
    assert out["problem"] == ("no credentials for the typesafe route: run `fabric-jev login typesafe`, "
                              "set TYPESAFE_API_KEY, or configure credentialCommand")
    assert out["selection"] == {"route": "typesafe", "spec": "typesafe", "rule": "--evaluator typesafe"}
    # With a key (presence only), the same route is ready.
    assert report(tmp_path, "--evaluator", "typesafe", env={"TYPESAFE_API_KEY": "sk-x"})["ready"] is True


def test_with_only_the_typesafe_key_every_route_says_where_it_stands(tmp_path: Path) -> None:
    done = status(tmp_path, "--json", env={"TYPESAFE_API_KEY": "sk-status-canary-0123"})
    out = json.loads(done.stdout)
    assert "sk-status-canary-0123" not in done.stdout + done.stderr
    # The default: local, offline, needing no key — not a "missing" one.
    assert out["route"] == "local" and out["selection"]["rule"] == "no route is configured: the offline local evaluator"
    by = rows(out)
    assert list(by) == ["local", "typesafe", "openrouter", "vercel-ai-gateway", "openai", "ollama", "anthropic",
                        "gguf"]
    assert by["local"]["mode"] == "offline" and by["local"]["credentials"]["source"] == "not needed"
    assert by["local"]["selected"] and by["local"]["enabled"]
    ts = by["typesafe"]
    assert (ts["mode"], ts["enabled"], ts["selected"], ts["ready"], ts["problem"]) == (
        "online", True, False, True, None)
    assert ts["credentials"] == {"configured": True, "source": "environment", "from": "TYPESAFE_API_KEY",
                                 "verified": False}
    assert ts["endpoint"] == "https://api.typesafe.ai/v1/systemone" and ts["model"] == "jev-latest"
    for name in ("openrouter", "vercel-ai-gateway"):
        assert by[name]["ready"] is False and by[name]["credentials"]["source"] == "missing"
        assert by[name]["problem"].startswith(f"no credentials for the {name} route")
    assert by["vercel-ai-gateway"]["model"] == "typesafe-ai/jev"


@pytest.mark.parametrize(("config", "args", "route", "rule"), [
    ({}, (), "local", "no route is configured: the offline local evaluator"),
    ({}, ("--evaluator", "openrouter"), "openrouter", "--evaluator openrouter"),
    ({"evaluator": {"kind": "vercel"}}, (), "vercel-ai-gateway", "the config's evaluator.kind is 'vercel'"),
    ({"model": "typesafe/jev-1.13"}, (), "openrouter",
     "the config's model 'typesafe/jev-1.13' is served by the openrouter route"),
    ({"model": "typesafe-ai/jev"}, (), "vercel-ai-gateway",
     "the config's model 'typesafe-ai/jev' is served by the vercel-ai-gateway route"),
    ({"evaluator": {"kind": "typesafe"}}, ("--evaluator", "local"), "local", "--evaluator local"),
])
def test_which_route_the_host_would_pick_and_by_which_rule(tmp_path: Path, config: dict[str, Any],
                                                           args: tuple[str, ...], route: str, rule: str) -> None:
    (tmp_path / "c.json").write_text(json.dumps(config))
    out = report(tmp_path, "--config", str(tmp_path / "c.json"), *args)
    assert out["route"] == route and out["selection"]["rule"] == rule
    assert [r["name"] for r in out["routes"] if r["selected"]] == [route]
    # The host builds what status names.
    parsed = HostConfig.parse(config)
    assert select(args[1] if args else None, parsed).route == route


def test_a_disabled_route_is_reported_and_never_built(tmp_path: Path) -> None:
    config = {"evaluator": {"disabled": ["openrouter", "vercel"]}, "model": "typesafe/jev-1.13"}
    (tmp_path / "c.json").write_text(json.dumps(config))
    out = report(tmp_path, "--config", str(tmp_path / "c.json"), env={"OPENROUTER_API_KEY": "k"})
    by = rows(out)
    assert by["openrouter"]["enabled"] is False and by["openrouter"]["selected"] is True
    assert by["vercel-ai-gateway"]["enabled"] is False and by["local"]["enabled"] is True
    assert out["ready"] is False and out["problem"] == "disabled in the config (evaluator.disabled)"
    with pytest.raises(ConfigError, match="the openrouter route is disabled in the config"):
        build_evaluator(None, HostConfig.parse(config))
    with pytest.raises(ConfigError, match="unknown route 'gpt'"):
        build_evaluator(None, HostConfig.parse({"evaluator": {"disabled": ["gpt"]}}))


def test_text_output_shows_each_route_and_the_choice(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"evaluator": {"disabled": ["vercel"]}}))
    done = status(tmp_path, "--evaluator", "typesafe", "--config", str(tmp_path / "c.json"),
                  env={"TYPESAFE_API_KEY": "sk-text-canary"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ready: typesafe (online), model jev-latest"
    assert lines[1] == "  chosen because --evaluator typesafe"
    table = {line.split()[0] if not line.startswith(" *") else line.split()[1]: line for line in lines
             if line.startswith(("   ", " *")) and not line.startswith("      ")}
    assert table["local"].split()[1:4] == ["offline", "enabled", "ready"]
    assert table["typesafe"].startswith(" *") and "key from environment (TYPESAFE_API_KEY)" in table["typesafe"]
    assert table["vercel-ai-gateway"].split()[1:3] == ["online", "disabled"]
    assert "sk-text-canary" not in done.stdout


def test_status_never_runs_the_credential_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "key.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x'); print('k')")
    (tmp_path / "c.json").write_text(json.dumps({"evaluator": {
        "kind": "typesafe", "credentialCommand": [sys.executable, str(script)]}}))
    out = report(tmp_path, "--config", str(tmp_path / "c.json"))
    assert out["ready"] is True and out["credentials"]["source"] == "command"
    assert rows(out)["typesafe"]["credentials"]["from"] == "credentialCommand (not run by status)"
    assert not marker.exists()


def test_the_seeds_gateway_key_name_is_shown_as_the_source(tmp_path: Path) -> None:
    out = report(tmp_path, "--evaluator", "vercel", env={"JEV_AI_GATEWAY_API_KEY": "sk-gw"})
    assert out["ready"] is True
    assert rows(out)["vercel-ai-gateway"]["credentials"]["from"] == "JEV_AI_GATEWAY_API_KEY"


def test_a_stored_key_is_named_by_its_store_entry(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "home" / "auth.json")
    store.set("openrouter", "sk-stored")
    out = status_report("openrouter", HostConfig(), store=store, environ={})
    assert out["ready"] is True
    assert rows(out)["openrouter"]["credentials"]["from"] == "auth store entry 'openrouter'"


@pytest.mark.anyio
async def test_host_status_is_not_ready_without_credentials(tmp_path: Path) -> None:
    ev = HttpEvaluator(TYPESAFE, environ={}, credentials=CredentialResolver(
        TYPESAFE, store=AuthStore(tmp_path / "a.json"), environ={}))
    async with JevHost(evaluator=ev) as host:
        st = host.status()
    assert st.ready is False and st.mode == "online" and "fabric-jev login typesafe" in (st.problem or "")
    assert st.to_json()["ready"] is False and st.to_json()["problem"] == st.problem
    assert ev.status().ready is False and ev.status().credentials.source == "missing"
    async with JevHost() as local:  # the offline default (its weights are installed by setup)
        st = local.status()
    assert (st.route, st.mode, st.ready, st.problem) == ("local", "offline", True, None)
    assert st.credentials.source == "not needed" and "problem" not in st.to_json()


def test_run_refuses_a_judgment_program_when_the_route_has_no_credentials(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if k not in KEYS}
    done = subprocess.run(
        [sys.executable, "-m", "fabric_jev.cli", "run", str(ROOT / "examples" / "ticket-triage" / "program.json"),
         "--input", str(ROOT / "examples" / "ticket-triage" / "input.json"), "--evaluator", "typesafe"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**clean, "FABRIC_JEV_HOME": str(tmp_path)})
    assert done.returncode != 0 and done.stdout == ""
    assert "no credentials for the typesafe route" in done.stderr


def test_the_documented_text_is_what_status_prints(tmp_path: Path) -> None:
    import re

    doc = (ROOT / "docs" / "evaluators.md").read_text()
    block = re.search(r"```\n(ready: typesafe \(online\).*?)```", doc, re.DOTALL)
    assert block is not None
    (tmp_path / "c.json").write_text(json.dumps({"evaluator": {"disabled": ["vercel"]}}))
    done = status(tmp_path, "--evaluator", "typesafe", "--config", str(tmp_path / "c.json"),
                  env={"TYPESAFE_API_KEY": "sk-doc-canary"})
    assert done.returncode == 0, done.stderr
    # The compiler's version is this machine's.
    checker = re.compile(r"^type checker: .*$", re.MULTILINE)
    assert checker.sub("type checker: …", done.stdout) == checker.sub("type checker: …", block.group(1))


def test_status_opens_no_connection(tmp_path: Path) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        base = f"http://127.0.0.1:{listener.getsockname()[1]}"
        env = {"TYPESAFE_API_KEY": "sk-a", "OPENROUTER_API_KEY": "sk-b", "AI_GATEWAY_API_KEY": "sk-c",
               "OPENAI_API_KEY": "sk-d", "ANTHROPIC_API_KEY": "sk-e",
               "FABRIC_JEV_TYPESAFE_BASE_URL": base, "FABRIC_JEV_OPENROUTER_BASE_URL": base,
               "FABRIC_JEV_VERCEL_AI_GATEWAY_BASE_URL": base, "FABRIC_JEV_OPENAI_BASE_URL": base,
               "FABRIC_JEV_OLLAMA_BASE_URL": base, "FABRIC_JEV_ANTHROPIC_BASE_URL": base}
        for route in ("typesafe", "openrouter", "vercel", "openai:m", "ollama:qwen3:8b", "anthropic:m"):
            out = report(tmp_path, "--evaluator", route, env=env)
            assert out["ready"] is True
            # gguf has no endpoint until its server starts, at the first evaluation
            assert all(r["endpoint"].startswith(base) for r in out["routes"] if r["name"] not in ("local", "gguf"))
        # Every route points at this socket; a connection would wait in its backlog.
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_status_exits_1_when_the_chosen_route_is_not_ready(tmp_path: Path) -> None:
    done = status(tmp_path, "--evaluator", "typesafe")
    assert done.returncode == 1
    assert done.stdout.startswith("NOT READY: typesafe")
    assert done.stderr == ("fabric-jev: status: the chosen route typesafe is not ready: no credentials for the "
                           "typesafe route: run `fabric-jev login typesafe`, set TYPESAFE_API_KEY, or configure "
                           "credentialCommand\n")
    assert status(tmp_path, "--evaluator", "typesafe", env={"TYPESAFE_API_KEY": "sk-x"}).returncode == 0

