"""Approval commands: approve, settings approvals."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import JevError
from ..terminal import one_line
from .common import BadInput, add_command, config_from, load_json, print_json


async def _cmd_approve(args: argparse.Namespace) -> int:
    import os

    from ..approval import ApprovalRequest, ProposedAction, classify
    from ..approval.rules import CallView, RuleContext
    from ..approval.screen import screen, screen_defaults
    from ..host.gate import host_rules

    try:
        raw = load_json(args.action, "action")
        if not isinstance(raw, dict) or not isinstance(raw.get("ref"), str) \
                or set(raw) - {"ref", "risk", "description", "arguments"}:
            raise BadInput("the action must be an object {ref, risk?, description?, arguments?}")
        action = ProposedAction(ref=raw["ref"], risk=str(raw.get("risk", "execute")),
                                description=str(raw.get("description", "")),
                                arguments=raw.get("arguments"))
        session: Any = load_json(args.session, "session") if args.session else {}
        if not isinstance(session, dict):
            raise BadInput("the session must be an object {conversation?, actions?}")
        request = ApprovalRequest(user_text=args.user_text, action=action,
                                  conversation=list(session.get("conversation", [])),
                                  session_actions=list(session.get("actions", [])))
        # The config with the settings: one threshold (the config's, else settings.json's), and
        # the rules of the config, the project and the user.
        config = config_from(args)
        rules = host_rules(config)
        spec, because = _approval_evaluator(args, config)
    except (BadInput, JevError) as exc:
        sys.stderr.write(f"fabric-jev: {one_line(str(exc))}\n")
        return 2
    extra: dict[str, Any] = {"evaluator": {"spec": spec, "because": because}}
    view = CallView(action.ref, action.risk, action.arguments, RuleContext.here(os.getcwd(), os.path.expanduser("~")))
    found = screen(view, rules["rules"]) if args.policy != "deny" else None
    if found is None and args.policy == "auto" and rules["defaults"] is not None:
        found = screen_defaults(view, rules["defaults"])
    if found is not None:
        verdict = found.decision
        reason = found.reason
        if verdict == "ask" and args.headless:
            verdict, reason = "deny", reason + "; headless caller, so denied"
        out: dict[str, Any] = {"decision": verdict, "reason": reason, "probabilities": None,
                               "decidedBy": "floor" if found.floor is not None else "rule"}
        if found.rule is not None:
            out.update(rule=found.rule.text, ruleSource=found.rule.source)
        if found.floor is not None:
            out["floor"] = found.floor.id
        print_json({**out, **extra})
        return 0 if verdict == "allow" else 1
    evaluator: Any = None
    if args.policy == "auto":
        from ..evaluators.select import build_evaluator

        try:
            evaluator = build_evaluator(spec, config) if spec != "settings" else _settings_evaluator()
        except JevError as exc:
            sys.stderr.write(f"fabric-jev: {one_line(str(exc))}\n")
            return 2
    try:
        decision = await classify(request, evaluator=evaluator, threshold=config.auto_approval_threshold,
                                  policy=args.policy, headless=args.headless,
                                  timeout=config.request_timeout_ms / 1000,
                                  max_request_bytes=config.max_request_bytes)
    finally:
        if evaluator is not None:
            await evaluator.aclose()
    print_json({**decision.to_json(), "decidedBy": "classifier" if args.policy == "auto" else "policy", **extra})
    return 0 if decision.decision == "allow" else 1


def _approval_evaluator(args: argparse.Namespace, config: Any) -> tuple[str, str]:
    """(the evaluator spec, why) as every command resolves it: --evaluator, the config, the
    settings' approval model when the user set one, then the offline local evaluator."""
    from ..approval.settings import _read, settings_path
    from ..evaluators.select import select

    if args.evaluator:
        return args.evaluator, f"--evaluator {args.evaluator}"
    chosen = select(None, config)
    if chosen.spec != "local":
        return chosen.spec, chosen.rule
    model = _read(settings_path()).get("approvals", {}).get("model")
    if model:
        return "settings", f"the settings' approval model {model} (fabric-jev settings approvals)"
    return "local", ("no evaluator is configured: the offline local evaluator (it asks a person on "
                     "execute, write and network actions unless a learned profile can tell them apart)")


def _settings_evaluator() -> Any:
    from ..approval import ApprovalSettings, parse_model_key
    from ..evaluators.http import HttpEvaluator

    model = parse_model_key(ApprovalSettings.load().model)
    return HttpEvaluator(model.route, model=model.model)


async def _cmd_settings_approvals(args: argparse.Namespace) -> int:
    from ..approval import ApprovalSettings

    try:
        current = ApprovalSettings.load()
        updated = ApprovalSettings.make(args.model or current.model,
                                        current.threshold if args.threshold is None else args.threshold)
    except JevError as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    if args.model is not None or args.threshold is not None:
        updated.save()
    print_json({"approvals": {"model": updated.model, "threshold": updated.threshold}})
    return 0


async def _cmd_settings_rules(args: argparse.Namespace) -> int:
    import os

    from ..approval.rules import RuleError, parse_rule
    from ..approval.settings import (
        default_rules_setting,
        project_settings_path,
        remove_rule,
        save_rule,
        set_default_rules,
        settings_path,
        settings_rules,
    )

    scope = "project" if args.project else "user"
    where = project_settings_path() if scope == "project" else settings_path()
    try:
        if args.add is not None:
            rule = parse_rule(args.add, source=f"{scope} settings")
            # The person sees the rule as it will be read, and confirms it.
            shown = one_line(rule.text)
            if not args.yes:
                if not (os.isatty(0) and os.isatty(2)):
                    sys.stderr.write(f"fabric-jev: would add {shown} to {one_line(str(where))}; "
                                     "pass --yes to add it without a terminal\n")
                    return 2
                sys.stderr.write(f"add  {shown}\n  to {one_line(str(where))}? [y/N] ")
                sys.stderr.flush()
                if sys.stdin.readline().strip().lower() not in ("y", "yes"):
                    sys.stderr.write("fabric-jev: not added\n")
                    return 1
            save_rule(rule.text, scope)
        elif args.remove is not None:
            if not remove_rule(args.remove, scope):
                sys.stderr.write(f"fabric-jev: {one_line(args.remove)} is not among the rules in "
                                 f"{one_line(str(where))}\n")
                return 1
        elif args.default_rules is not None:
            set_default_rules(args.default_rules == "on", scope)
        rules = settings_rules()
        out = {"rules": [{"rule": _rule_text(item), "from": item["from"]} for item in rules],
               "defaultRules": default_rules_setting() is not False,
               "files": {"project": str(project_settings_path()), "user": str(settings_path())}}
    except (RuleError, JevError) as exc:
        sys.stderr.write(f"fabric-jev: {one_line(str(exc))}\n")
        return 2
    print_json(out)
    return 0


def _rule_text(item: dict[str, Any]) -> str:
    for decision in ("allow", "ask", "deny"):
        if decision in item:
            return f"{decision} {item[decision]}"
    return str(item.get("rule", ""))


def add_approval_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = add_command(
        sub, "approve", help="classify one proposed action: allow, ask or deny",
        description="Decide whether one proposed agent action may run without asking a person, as a "
                    "host decides a capability call: permission rules (the config's, the project's and "
                    "the user's settings), the conservative floor, the default rules, then the "
                    "classifier's four noul questions, compared with the threshold "
                    "(docs/approvals.md). Prints the decision as JSON, with what decided and which "
                    "evaluator was used.",
        codes=("0 allow", "1 ask or deny", "2 bad action, session, settings or evaluator"))
    ap.add_argument("--action", required=True,
                    help="action JSON file {ref, risk?, description?, arguments?}, or - for standard input")
    ap.add_argument("--session", help="session JSON file {conversation: [{role, text}], actions: [...]}")
    ap.add_argument("--user-text", dest="user_text", default=None, help="the current user turn's text")
    ap.add_argument("--policy", choices=("auto", "ask", "deny", "allow"), default="auto",
                    help="auto asks the model; ask, deny and allow decide without it (default auto)")
    ap.add_argument("--headless", action="store_true", help="no human to ask: ask becomes deny")
    ap.add_argument("--evaluator", help="the evaluator (e.g. fixture:FILE, local, typesafe); without it, the "
                    "config's, else the settings' approval model when set, else the offline local one")
    ap.add_argument("--config", help="host config JSON file (its rules, defaultRules, autoApprovalThreshold, "
                    "requestTimeoutMs and maxRequestBytes apply)")
    ap.add_argument("--no-default-rules", dest="no_default_rules", action="store_true",
                    help="switch off fabric-jev's default rules for known-safe, read-only work")
    ap.set_defaults(handler=_cmd_approve, with_settings=True)

    se = add_command(sub, "settings", help="show or change persisted settings",
                     description="Persisted settings, kept in the fabric-jev config folder.",
                     codes=("0 shown or saved", "2 an invalid value or a missing subcommand"))
    se_sub = se.add_subparsers(dest="settings_command", required=True, metavar="COMMAND")
    sa = add_command(se_sub, "approvals", help="show or set the approval model and threshold",
                     description="Show the approval settings as JSON; with --model or --threshold, "
                                 "change and save them first.",
                     codes=("0 shown or saved", "2 an invalid model or threshold"))
    sa.add_argument("--model", help="pi-fabric/typesafe/jev-latest, …, or legacy jev/<model>")
    sa.add_argument("--threshold", type=float, help="0-1; allow needs safe >= threshold")
    sa.set_defaults(handler=_cmd_settings_approvals)
    sr = add_command(se_sub, "rules", help="show, add or remove permission rules",
                     description="Show the permission rules of the project's and your user settings "
                                 "(docs/approvals.md) as JSON; --add shows the rule as it will be read "
                                 "and asks you to confirm it (--yes without a terminal); --remove takes "
                                 "a rule as written; --default-rules switches fabric-jev's default rules.",
                     codes=("0 shown or changed", "1 not confirmed, or no such rule",
                            "2 a rule that cannot be read, or no terminal to confirm on"))
    change = sr.add_mutually_exclusive_group()
    change.add_argument("--add", metavar="RULE", help='a rule, e.g. \'allow shell.exec(cmd: "pytest *")\'')
    change.add_argument("--remove", metavar="RULE", help="a rule as --add wrote it")
    change.add_argument("--default-rules", dest="default_rules", choices=("on", "off"),
                        help="switch the default rules for known-safe, read-only work")
    place = sr.add_mutually_exclusive_group()
    place.add_argument("--project", action="store_true",
                       help="the project's settings (.fabric-jev/settings.json, the nearest from here up)")
    place.add_argument("--user", action="store_true", help="your user settings (the default)")
    sr.add_argument("--yes", action="store_true", help="add without asking for confirmation")
    sr.set_defaults(handler=_cmd_settings_rules)
