from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_jev import ConfigError, CredentialError
from fabric_jev.evaluators import OPENROUTER, TYPESAFE, VERCEL, AuthStore, CredentialResolver
from fabric_jev.evaluators.credentials import run_credential_command
from tests.conftest import wait_gone

pytestmark = pytest.mark.anyio
PY = sys.executable


def script(tmp: Path, body: str) -> list[str]:
    path = tmp / "cmd.py"
    path.write_text(body)
    return [PY, str(path)]


async def test_order_store_then_environment_then_command(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "auth.json")
    cmd = script(tmp_path, "print('from-command')")
    env = {"TYPESAFE_API_KEY": "from-env"}
    resolver = CredentialResolver(TYPESAFE, store=store, command=cmd, environ=env)
    assert resolver.status().source == "environment"
    assert await resolver.key() == "from-env"
    store.set("jev", "from-store")
    assert resolver.status().source == "store" and await resolver.key() == "from-store"
    store.remove("jev")
    bare = CredentialResolver(TYPESAFE, store=store, command=cmd, environ={})
    assert bare.status().source == "command" and await bare.key() == "from-command"
    none = CredentialResolver(TYPESAFE, store=store, environ={})
    assert none.status().to_json() == {"configured": False, "source": "missing", "verified": False}
    with pytest.raises(CredentialError, match="fabric-jev login typesafe"):
        await none.key()


@pytest.mark.parametrize(("route", "names"), [
    (OPENROUTER, ["OPENROUTER_API_KEY", "TYPESAFE_OPENROUTER_API_KEY"]),
    (VERCEL, ["AI_GATEWAY_API_KEY", "JEV_AI_GATEWAY_API_KEY"]),
])
async def test_environment_names_per_route(tmp_path: Path, route: object, names: list[str]) -> None:
    store = AuthStore(tmp_path / "auth.json")
    for name in names:
        resolver = CredentialResolver(route, store=store, environ={name: f"k-{name}"})  # type: ignore[arg-type]
        assert await resolver.key() == f"k-{name}"
        assert resolver.status().source == "environment"
    # Read in the documented order: the first name set wins.
    both = CredentialResolver(route, store=store, environ={n: f"k-{n}" for n in names})  # type: ignore[arg-type]
    assert await both.key() == f"k-{names[0]}"
    # Blank values count as unset, for status as for the key.
    blank = CredentialResolver(route, store=store,  # type: ignore[arg-type]
                               environ={names[0]: "  ", names[-1]: f"k-{names[-1]}"})
    assert await blank.key() == f"k-{names[-1]}"
    nothing = CredentialResolver(route, store=store, environ={n: " " for n in names})  # type: ignore[arg-type]
    assert nothing.status().source == "missing"


async def test_the_verification_seeds_gateway_key_reaches_the_vercel_route(tmp_path: Path) -> None:
    # Seed 000 names the key JEV_AI_GATEWAY_API_KEY; a real server checks the bearer key.
    from fabric_jev.evaluators import HttpEvaluator
    from fabric_jev.verification import compile_verification
    from tests.upstream import Front, front, mock

    def to_mock(body: dict[str, object]) -> dict[str, object]:
        return {**body, "model": "jev-latest"}

    env = {"JEV_AI_GATEWAY_API_KEY": "sk-gateway-seed"}
    with mock(key="sk-gateway-seed") as upstream, front(Front(upstream, rewrite=to_mock)) as relay:
        ev = HttpEvaluator(VERCEL, base_urls={"vercel-ai-gateway": relay.url}, environ=env,
                           credentials=CredentialResolver(VERCEL, store=AuthStore(tmp_path / "a.json"),
                                                          environ=env))
        try:
            assert ev.status().credentials.source == "environment"
            result = await compile_verification("Verify the Save button is visible.", {
                "id": "d", "version": "1", "checks": [{"id": "save", "description": "Save is visible",
                                                       "assertion": {"kind": "see", "target": "Save"}}]}, ev)
        finally:
            await ev.aclose()
    [request] = relay.requests
    assert request.path == "/typesafe/v1/systemone"
    assert request.headers["authorization"] == "Bearer sk-gateway-seed"
    assert result.request_count == 1 and "HTTP" not in (result.reason or "")


async def test_status_never_runs_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    cmd = script(tmp_path, f"open({str(marker)!r}, 'w').write('x'); print('k')")
    resolver = CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"), command=cmd,
                                  environ={})
    assert resolver.status().source == "command"
    assert not marker.exists()


async def test_command_output_is_trimmed_and_cached_until_reload(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    cmd = script(tmp_path, f"""
import pathlib
p = pathlib.Path({str(counter)!r})
n = int(p.read_text()) + 1 if p.exists() else 1
p.write_text(str(n))
print('  key-' + str(n) + '  ')
""")
    resolver = CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"), command=cmd,
                                  environ={})
    assert await resolver.key() == "key-1"
    assert await resolver.key() == "key-1"
    resolver.reload()
    assert await resolver.key() == "key-2"


@pytest.mark.parametrize(("body", "needle"), [
    ("print('')", "printed nothing"),
    ("print('a'); print('b')", "more than one line"),
    ("import sys; sys.stdout.write('x' * 20000)", "more than 16384 bytes"),
    ("import sys; print('secret-output'); sys.exit(3)", "failed (exit 3)"),
])
async def test_command_format_rules_never_echo_output(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(CredentialError) as err:
        await run_credential_command(script(tmp_path, body))
    assert needle in str(err.value)
    assert "secret-output" not in str(err.value) and "xxxx" not in str(err.value)


async def test_command_deadline_and_group_kill(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = script(tmp_path, f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pidfile)!r}, "w").write(str(child.pid))
time.sleep(60)
""")
    # The command sleeps a minute, so only the deadline can end it with this message.
    with pytest.raises(CredentialError, match=r"timed out after 0\.5 s"):
        await run_credential_command(cmd, timeout=0.5)
    child = int(pidfile.read_text())
    # The grandchild was in the command's process group, so it was killed too.
    await wait_gone([child])
    assert not _alive(child)


async def test_a_command_that_succeeds_leaves_no_group_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = script(tmp_path, f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         stdout=subprocess.DEVNULL)
open({str(pidfile)!r}, "w").write(str(child.pid))
print("the-key")
""")
    assert await run_credential_command(cmd) == "the-key"
    child = int(pidfile.read_text())
    await wait_gone([child])
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("argv", [[], ["a"] * 17, "echo key", [""], [1]])
def test_command_must_be_an_argv_list(argv: object) -> None:
    with pytest.raises(ConfigError, match="argv list"):
        CredentialResolver(TYPESAFE, command=argv, environ={})  # type: ignore[arg-type]


def test_auth_store_is_private_and_atomic(tmp_path: Path) -> None:
    store = AuthStore(tmp_path / "cfg" / "auth.json")
    store.set("openrouter", "sk-or-1")
    mode = stat.S_IMODE(os.stat(store.path).st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert store.get("openrouter") == "sk-or-1"
    assert [p.name for p in store.path.parent.iterdir()] == ["auth.json"]
    assert store.remove("openrouter") and store.get("openrouter") is None
    with pytest.raises(CredentialError, match="one non-empty line"):
        store.set("jev", "a\nb")


def test_login_and_logout_commands(tmp_path: Path) -> None:
    env = {**os.environ, "FABRIC_JEV_HOME": str(tmp_path)}
    done = subprocess.run([PY, "-m", "fabric_jev.cli", "login", "vercel-ai-gateway"],
                          input="sk-vercel-secret\n", capture_output=True, text=True, env=env,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert "sk-vercel-secret" not in done.stdout + done.stderr
    assert AuthStore(tmp_path / "auth.json").get("vercel-ai-gateway") == "sk-vercel-secret"
    assert stat.S_IMODE(os.stat(tmp_path / "auth.json").st_mode) == 0o600
    done = subprocess.run([PY, "-m", "fabric_jev.cli", "logout", "vercel-ai-gateway"],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0
    assert AuthStore(tmp_path / "auth.json").get("vercel-ai-gateway") is None


async def test_request_timeout_covers_a_slow_credential_command(tmp_path: Path) -> None:
    from fabric_jev import UpstreamError
    from fabric_jev.contract.evaluation import validate_request
    from fabric_jev.evaluators import HttpEvaluator

    slow = script(tmp_path, "import time; time.sleep(30); print('late-key')")
    resolver = CredentialResolver(TYPESAFE, store=AuthStore(tmp_path / "a.json"), command=slow, environ={})
    ev = HttpEvaluator(TYPESAFE, base_urls={"typesafe": "http://127.0.0.1:9"}, environ={}, credentials=resolver)
    request = validate_request({"state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}})
    # Were the command outside the deadline, the call would end 30 s later as "unreachable".
    with pytest.raises(UpstreamError, match=r"timed out after 0\.3 s"):
        await ev.evaluate(request, timeout=0.3)
    await ev.aclose()
