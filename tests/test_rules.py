"""Permission rules, the floor and their precedence (docs/approvals.md).

Rules match parsed shell words and normalised paths, never raw strings; the
floor is data (floor.json) with examples each entry must hit or pass; through
a real JevHost, a deny beats an allow, the floor beats a broad allow and the
classifier, and a rule beats the classifier.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fabric_jev import CapabilityCall, CapabilityRegistry, FixtureEvaluator, HostConfig, JevHost
from fabric_jev.approval.floor import floor_entries
from fabric_jev.approval.rules import CallView, RuleContext, RuleError, RuleSet, parse_rule, parse_rules
from fabric_jev.approval.screen import default_rules, screen, screen_defaults
from fabric_jev.errors import ConfigError
from tests.conftest import program

CWD, HOME = "/work/project", "/home/user"


def _nothing_there(path: str) -> int | None:
    return None


def view(arguments: Any, ref: str = "shell.exec", risk: str = "execute", *, resolve: Any = None,
         origins: frozenset[str] = frozenset()) -> CallView:
    """The call as floor.json's examples read it: /tmp is the temporary root, where nothing exists yet."""
    return CallView(ref, risk, arguments, RuleContext(CWD, HOME, origins, resolve, ("/tmp",), _nothing_there, 1000))


def allows(rule: str, arguments: Any, **kw: Any) -> bool:
    return parse_rule(rule).matches(view(arguments, **kw))


# ---------------------------------------------------------------- commands: parsed words


@pytest.mark.parametrize(("cmd", "allowed"), [
    ("pytest", True), ("pytest -q tests/", True), ("'pytest' \"-q\"", True), ("pyt''est -q", True),
    ("pytest -q && rm -rf build", False),      # a compound command: only a rule for the whole shape
    ("pytest; curl x | sh", False), ("pytest | tee log", False), ("pytest $(rm -rf ~)", False),
    ("pytest `id`", False), ("pytest $EXTRA", False),  # an expansion never matches a wildcard
    ("sudo pytest", False), ("env X=1 pytest", False), ("X=1 pytest", False),
    ("bash -c \"pytest\"", False), ("./pytest", False), ("/tmp/evil/pytest", False),
    ("pytest > /etc/passwd", False), ("pytest 2>/dev/null", True), ("pytest 2>&1", True),
    ("(pytest)", False), ("pytest\nrm -rf /", False),
])
def test_an_allow_rule_matches_the_command_it_was_written_for_and_no_other_spelling(cmd: str, allowed: bool) -> None:
    assert allows('allow shell.exec(cmd: "pytest *")', {"cmd": cmd}) is allowed


def test_a_rule_for_the_whole_shape_matches_a_compound_command() -> None:
    rule = 'allow shell.exec(cmd: "cd * && pytest *")'
    assert allows(rule, {"cmd": "cd src && pytest -q"})
    assert not allows(rule, {"cmd": "cd src; pytest -q"})  # another operator is another shape
    assert not allows(rule, {"cmd": "cd src && pytest -q && rm -rf /"})
    assert allows('allow shell.exec(cmd: "npm run test:*")', {"cmd": "npm run test --watch"})  # Claude's :*
    assert allows('allow shell.exec(cmd: "git log *")', {"command": ["git", "log", "--oneline"]})  # an argv


@pytest.mark.parametrize("cmd", [
    "rm -rf x", "sudo rm -rf x", "env X=1 rm x", "bash -c \"rm -rf x\"", "sh -lc 'echo; rm x'",
    "echo $(rm x)", "echo `rm x`", "/bin/rm x", "timeout 5 rm x", "nice -n 5 rm x", "ls && rm x",
    "true | xargs rm", "eval 'rm x'", "(cd /; rm x)", "for f in *; do rm $f; done",
])
def test_a_deny_rule_sees_through_wrappers_and_nesting(cmd: str) -> None:
    rules = RuleSet(parse_rules([{"deny": 'shell.exec(cmd: "rm *")'}], source="config"))
    found = screen(view({"cmd": cmd}), rules)
    assert found is not None and found.decision == "deny", cmd


@pytest.mark.parametrize(("path", "denied"), [
    (".env", True), ("./.env", True), ("src/../.env", True), (f"{CWD}/.env", True), ("~/../../work/project/.env", True),
    ("$HOME/../../work/project/.env", True), ("src/.env", False), (".env.example", False), ("../project/.env", True),
])
def test_path_patterns_match_normalised_paths(path: str, denied: bool) -> None:
    rule = parse_rule('deny fs.write(path: "./.env")')
    assert rule.matches(view({"path": path}, "fs.write", "write")) is denied, path


def test_a_symlink_does_not_escape_a_path_rule(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    (tree / "innocent.txt").symlink_to(tmp_path / "secret.txt")
    context = RuleContext(str(tree), HOME, frozenset(), os.path.realpath)
    inside = parse_rule('allow fs.read(path: "./**")')
    assert not inside.matches(CallView("fs.read", "read", {"path": "innocent.txt"}, context))
    deny = parse_rule(f'deny fs.read(path: "{tmp_path}/secret.txt")')
    assert deny.matches(CallView("fs.read", "read", {"path": "innocent.txt"}, context))


def test_tilde_and_home_expansion_reach_credential_rules() -> None:
    rule = parse_rule('deny *(path: "~/.ssh")')
    for path in ("~/.ssh/id_rsa", "$HOME/.ssh/id_rsa", "${HOME}/.ssh/config", f"{HOME}/x/../.ssh/id_ed25519"):
        assert rule.matches(view({"path": path}, "fs.read", "read")), path
    cmd = parse_rule('deny shell.exec(cmd: "cat ~/.ssh/*")')
    assert cmd.matches(view({"cmd": 'cat "$HOME"/.ssh/id_rsa'}))


def test_keywords_and_plain_values() -> None:
    assert allows('allow browser.cdp(method: "Page.navigate", params.url: same-origin)',
                  {"method": "Page.navigate", "params": {"url": "http://127.0.0.1:8000/a"}},
                  ref="browser.cdp", origins=frozenset({"http://127.0.0.1:8000"}))
    assert not allows('allow browser.cdp(method: "Page.navigate", params.url: same-origin)',
                      {"method": "Page.navigate", "params": {"url": "http://127.0.0.1:9000/a"}},
                      ref="browser.cdp", origins=frozenset({"http://127.0.0.1:8000"}))
    script = 'allow browser.cdp(method: "Runtime.evaluate", params.expression: read-only-script)'
    assert allows(script, {"method": "Runtime.evaluate", "params": {"expression": "document.title"}}, ref="browser.cdp")
    for expression in ("document.cookie", "fetch('/x')", "document.querySelector('b').click()",
                       "location.href = 'http://x'", "localStorage.getItem('t')", "eval('1')"):
        assert not allows(script, {"method": "Runtime.evaluate", "params": {"expression": expression}},
                          ref="browser.cdp"), expression
    assert allows('allow browser.cdp(method: "Target.attachToTarget", params.flatten: true)',
                  {"method": "Target.attachToTarget", "params": {"flatten": True}}, ref="browser.cdp")


@pytest.mark.parametrize("text", [
    "shell.exec(cmd: \"x\")", "permit shell.exec", "allow shell.exec(cmd \"x\")", "allow shell.exec(cmd: x y)",
    "allow shell.exec(cmd: \"ls\", cmd: \"pwd\")", "allow nodot", "allow shell.exec(cmd: \"(ls)\")",
    "allow shell.exec(cmd: [1])", "allow shell.exec(cmd: \"x\"",
])
def test_a_rule_that_cannot_be_read_says_why(text: str) -> None:
    with pytest.raises(RuleError):
        parse_rule(text)


def test_a_bad_rule_in_the_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="config rule 1"):
        JevHost(HostConfig(rules=[{"allow": "shell.exec(cmd \"x\")"}]))


# ---------------------------------------------------------------- the floor: one test per entry


def _action(example: Any) -> tuple[str, str, Any]:
    if isinstance(example, str):
        return "shell.exec", "execute", {"cmd": example}
    return example["ref"], example["risk"], example["arguments"]


@pytest.mark.parametrize("entry", floor_entries(), ids=lambda e: e.id)
def test_floor_entry(entry: Any) -> None:
    assert entry.examples["asks"] and entry.examples["passes"]
    for example in entry.examples["asks"]:
        ref, risk, arguments = _action(example)
        assert entry.hits(view(arguments, ref, risk)), f"{entry.id} should hit {example!r}"
    for example in entry.examples["passes"]:
        ref, risk, arguments = _action(example)
        assert not entry.hits(view(arguments, ref, risk)), f"{entry.id} should pass {example!r}"


def test_a_broad_allow_never_lifts_the_floor_and_a_rule_naming_the_entry_does() -> None:
    broad = RuleSet(parse_rules([{"allow": 'shell.exec(cmd: "rm -rf *")'}], source="config"))
    found = screen(view({"cmd": "rm -rf /"}), broad)
    assert found is not None and found.decision == "ask" and found.floor is not None
    assert found.floor.id == "recursive-delete-outside-tree"
    lifting = RuleSet(parse_rules([{"allow": 'shell.exec(cmd: "rm -rf /data/scratch/*")',
                                    "lifts": ["recursive-delete-outside-tree", "write-outside-tree"]}],
                                  source="config"))
    lifted = screen(view({"cmd": "rm -rf /data/scratch/build"}), lifting)
    assert lifted is not None and lifted.decision == "allow" and "lifting the floor" in lifted.reason
    still = screen(view({"cmd": "rm -rf /"}), lifting)  # the lifting rule does not match: the floor stands
    assert still is not None and still.decision == "ask"


def test_default_rules_allow_read_only_work_inside_the_tree_only() -> None:
    defaults = default_rules()
    for cmd in ("ls", "ls -la src", "cat README.md", "grep -rn TODO src", "git status", "git log --oneline -5",
                "git diff HEAD~1", "find . -name '*.py'", "wc -l src/app.py", "git branch -a"):
        assert screen_defaults(view({"cmd": cmd}), defaults) is not None, cmd
    for cmd in ("cat ../../etc/passwd", "ls /", "find . -delete", "find . -exec rm {} ;", "git branch new",
                "git diff --output=/tmp/x", "sort -o out.txt in.txt", "cat a > b", "ls && rm x", "grep x ~/notes"):
        assert screen_defaults(view({"cmd": cmd}), defaults) is None, cmd


# ---------------------------------------------------------------- precedence, through a real host


def _host_program(cmd: str) -> dict[str, Any]:
    code = ("try { return await tools.call({ref: 'shell.exec', args: {cmd: input.cmd}}); } "
            "catch (e) { return e.message; }")
    return program(code, name="sh", requires=["shell.exec"], outputSchema={})


async def _decide(cmd: str, *, rules: list[Any] | None = None, policy: str = "auto", safe: float = 0.95,
                  answer: str = "allow", allow: tuple[str, ...] = ()) -> tuple[Any, list[str], list[CapabilityCall]]:
    ran: list[str] = []
    asked: list[CapabilityCall] = []
    registry = CapabilityRegistry()

    async def run_it(args: Any, ctx: Any) -> Any:
        ran.append(args["cmd"])
        return "ran"

    async def approver(call: CapabilityCall) -> str:
        asked.append(call)
        return answer

    registry.register("shell.exec", run_it, "execute")
    fixture = FixtureEvaluator({"answers": {"safe": {"noul": safe}, "secrets": {"noul": 0.01},
                                            "destructive": {"noul": 0.01}, "sessionOwned": {"noul": 0.5}}})
    config = HostConfig(approvals={"execute": policy}, rules=rules or [], allow=allow)
    async with JevHost(config, evaluator=fixture, capabilities=registry, approver=approver) as host:
        envelope = await host.run(_host_program(cmd), {"cmd": cmd}, intent="run the tests")
    return envelope, ran, asked


@pytest.mark.anyio
async def test_deny_beats_allow() -> None:
    env, ran, asked = await _decide("pytest -q", rules=[{"allow": 'shell.exec(cmd: "pytest *")'},
                                                         {"deny": 'shell.exec(cmd: "pytest -q")'}])
    assert ran == [] and asked == []
    [entry] = env.to_json()["approvals"]
    assert (entry["decidedBy"], entry["allowed"], entry["rule"]) == ("rule", False, 'deny shell.exec(cmd: "pytest -q")')


@pytest.mark.anyio
async def test_the_floor_beats_a_broad_allow_rule_an_allow_flag_and_the_classifier() -> None:
    for kw in ({"rules": [{"allow": 'shell.exec(cmd: "rm -rf *")'}]}, {"allow": ("execute",)}, {"safe": 0.99}):
        env, ran, asked = await _decide("rm -rf / --no-preserve-root", answer="deny", **kw)  # type: ignore[arg-type]
        assert ran == [] and len(asked) == 1, kw
        assert asked[0].asked_because is not None and "recursive-delete-outside-tree" in asked[0].asked_because
        assert asked[0].always is None  # a floor question is answered for this call only
        [entry] = env.to_json()["approvals"]
        assert (entry["decidedBy"], entry["allowed"], entry["floor"]) == (
            "approver", False, "recursive-delete-outside-tree")


@pytest.mark.anyio
async def test_a_rule_beats_the_classifier_both_ways() -> None:
    env, ran, asked = await _decide("pytest -q", rules=[{"allow": 'shell.exec(cmd: "pytest *")'}], safe=0.01)
    assert ran == ["pytest -q"] and asked == [] and env.approvals[0].decided_by == "rule"
    env, ran, asked = await _decide("make deploy", rules=[{"ask": 'shell.exec(cmd: "make deploy")'}], safe=0.99,
                                    answer="deny")
    assert ran == [] and len(asked) == 1 and "ask shell.exec" in (asked[0].asked_because or "")
    assert env.approvals[0].rule == 'ask shell.exec(cmd: "make deploy")'


@pytest.mark.anyio
async def test_the_question_shows_every_segment_of_a_compound_command() -> None:
    padded = "echo " + "word " * 400 + "&& rm -rf ./important"
    _, _, asked = await _decide(padded, safe=0.01, answer="deny")
    [call] = asked
    facts = dict(call.facts())
    assert facts["command 2/2"] == "rm -rf ./important"
    assert call.arguments_text.endswith('rm -rf ./important"}')  # the tail survives the cut


def test_settings_rules_come_after_the_config_and_name_their_file(tmp_path: Path, monkeypatch: Any) -> None:
    from fabric_jev.approval.settings import save_rule, with_user_settings

    monkeypatch.setenv("FABRIC_JEV_HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    path = save_rule('shell.exec(cmd: "pytest *")', "project", cwd=project)
    assert path == project / ".fabric-jev" / "settings.json"
    assert json.loads(path.read_text())["rules"] == [{"allow": 'shell.exec(cmd: "pytest *")'}]
    config = with_user_settings(HostConfig(rules=[{"deny": "shell.exec"}]), cwd=project)
    assert config.rules[0] == {"deny": "shell.exec"}
    assert config.rules[1]["from"] == f"project settings ({path})"


# ---------------------------------------------------------------- the labeled set, with `fabric-jev approve`

LABELED = Path(__file__).parent / "data" / "approval_actions.jsonl"


def _approve(tmp_path: Path, action: Any, *extra: str) -> dict[str, Any]:
    from tests.cli_support import cli

    path = tmp_path / "action.json"
    path.write_text(json.dumps(action))
    done = cli("approve", "--action", str(path), "--user-text", "look around the project and run the tests",
               *extra, env={"FABRIC_JEV_HOME": str(tmp_path / "home")})
    assert done.returncode in (0, 1), done.stderr
    decision: dict[str, Any] = json.loads(done.stdout)
    assert (decision["decision"] == "allow") == (done.returncode == 0)
    return decision


def test_approve_with_its_defaults_meets_the_goals_on_the_labeled_set(tmp_path: Path) -> None:
    """No destructive or exfiltrating action is allowed without a person, and at least 60 % of the
    routine read-only ones are allowed without asking: `fabric-jev approve` with no --evaluator
    (the offline evaluator), the default rules and the floor, run from a project folder."""
    from fabric_jev.approval.rules import RuleContext
    from fabric_jev.approval.screen import screen, screen_defaults

    rows = [json.loads(line) for line in LABELED.read_text().splitlines() if line.strip()]
    assert len(rows) >= 60
    # The command itself, on a sample of each label (a process per action would take minutes).
    for row in (rows[0], rows[30], rows[-1], rows[-10]):
        decision = _approve(tmp_path, row["action"])
        assert decision["evaluator"]["spec"] == "local"
        assert (decision["decision"] == "allow") == (row["label"] == "routine" and row is not rows[30]), row
    # Every action, through the same layers the command uses.
    context = RuleContext(str(tmp_path), HOME, frozenset(), os.path.realpath)
    allowed = {"routine": 0, "dangerous": 0}
    for row in rows:
        action = row["action"]
        call = CallView(action["ref"], action["risk"], action["arguments"], context)
        found = screen(call, RuleSet()) or screen_defaults(call, default_rules())
        if found is not None and found.decision == "allow":
            allowed[row["label"]] += 1
        elif row["label"] == "dangerous":
            # What no rule decided goes to the classifier: offline, it asks on execute/write/network.
            assert found is not None or action["risk"] in ("execute", "write", "network"), action
    routine = sum(1 for r in rows if r["label"] == "routine")
    assert allowed["dangerous"] == 0
    assert allowed["routine"] / routine >= 0.6, allowed


def test_approve_says_which_evaluator_it_resolved(tmp_path: Path) -> None:
    action = {"ref": "kv.read", "risk": "read", "arguments": {"key": "a"}}
    assert _approve(tmp_path, action)["evaluator"]["spec"] == "local"
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"answers": {"safe": {"noul": 0.9}, "secrets": {"noul": 0.1},
                                               "destructive": {"noul": 0.1}, "sessionOwned": {"noul": 0.5}}}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"evaluator": {"kind": f"fixture:{fixture}"}}))
    decided = _approve(tmp_path, action, "--config", str(config))
    assert decided["evaluator"]["because"] == f"the config's evaluator.kind is 'fixture:{fixture}'"
    assert decided["decision"] == "allow" and decided["decidedBy"] == "classifier"
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"approvals": {"model": "pi-fabric/typesafe/jev-latest"}}))
    assert _approve(tmp_path, action)["evaluator"]["spec"] == "settings"
    flagged = _approve(tmp_path, action, "--evaluator", f"fixture:{fixture}")
    assert flagged["evaluator"]["because"] == f"--evaluator fixture:{fixture}"


@pytest.mark.timeout(300)  # learning encodes 72 evidence states and cross-validates: slow on a busy machine
def test_learn_on_approval_labels_lets_the_offline_classifier_judge(tmp_path: Path) -> None:
    """Offline, `auto` asks a person on execute actions it cannot tell apart; `learn` on approval
    labels (held-out accuracy shown) gives a profile with which it judges them."""
    from tests.cli_support import cli

    rows = [json.loads(line) for line in LABELED.read_text().splitlines() if line.strip()]
    labels = tmp_path / "approvals.jsonl"
    with labels.open("w") as out:
        for n, row in enumerate(rows):
            routine = row["label"] == "routine"
            item = {"id": f"a{n}", "action": row["action"], "userText": "look around and run the tests",
                    "label": "allow" if routine else "ask"}
            if routine:
                item.update(secrets=False, destructive=False)
            out.write(json.dumps(item) + "\n")
    home = {"FABRIC_JEV_HOME": str(tmp_path / "home")}
    learned = cli("learn", str(labels), "--out", str(tmp_path / "profile.json"), env=home, timeout=300)
    assert learned.returncode == 0, learned.stderr
    assert "held-out" in learned.stdout + learned.stderr and "accuracy" in learned.stdout + learned.stderr
    action = {"ref": "shell.exec", "risk": "execute", "arguments": {"cmd": "pytest -q tests/"}}
    before = _approve(tmp_path, action)
    assert before["decision"] == "ask" and "cannot tell execute actions apart" in before["reason"]
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"evaluator": {"profile": str(tmp_path / "profile.json")}}))
    after = _approve(tmp_path, action, "--config", str(config))
    assert after["decidedBy"] == "classifier" and after["probabilities"] is not None
    assert after["probabilities"]["safe"] >= 0.5


def test_settings_rules_shows_adds_after_confirmation_and_removes(tmp_path: Path) -> None:
    from tests.cli_support import cli

    home = {"FABRIC_JEV_HOME": str(tmp_path / "home")}
    rule = 'allow shell.exec(cmd: "pytest *")'
    unconfirmed = cli("settings", "rules", "--add", rule, env=home)  # no terminal to confirm on
    assert unconfirmed.returncode == 2 and "pass --yes" in unconfirmed.stderr
    assert not (tmp_path / "home" / "settings.json").exists()
    added = cli("settings", "rules", "--add", rule, "--yes", env=home)
    assert added.returncode == 0, added.stderr
    shown = json.loads(added.stdout)["rules"]
    assert shown == [{"rule": rule, "from": f"user settings ({tmp_path / 'home' / 'settings.json'})"}]
    bad = cli("settings", "rules", "--add", 'allow shell.exec(cmd "x")', "--yes", env=home)
    assert bad.returncode == 2 and "must be followed by ':'" in bad.stderr
    off = cli("settings", "rules", "--default-rules", "off", env=home)
    assert json.loads(off.stdout)["defaultRules"] is False
    removed = cli("settings", "rules", "--remove", rule, env=home)
    assert removed.returncode == 0 and json.loads(removed.stdout)["rules"] == []
    assert cli("settings", "rules", "--remove", rule, env=home).returncode == 1


@pytest.mark.parametrize(("value", "shown"), [
    (0.4999, "safe 0.4999 < 0.5000"), (0.5, "safe 0.50 ≥ 0.50"), (0.67, "safe 0.67 ≥ 0.50"),
    (0.504, "safe 0.504 ≥ 0.500"), (0.4951, "safe 0.495 < 0.500"), (0.38, "safe 0.38 < 0.50"),
])
def test_probabilities_are_shown_with_the_precision_the_comparison_needs(value: float, shown: str) -> None:
    from fabric_jev.approval.classifier import compare, decide

    assert compare("safe", value, 0.5) == shown
    verdict, reason = decide({"safe": 0.4999, "secrets": 0.5, "destructive": 0.49999, "sessionOwned": 0.5}, 0.5)
    assert verdict == "ask" and "0.50 < 0.50" not in reason and "secrets 0.50 ≥ 0.50" in reason
