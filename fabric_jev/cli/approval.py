"""Approval commands: approve, settings approvals."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import JevError
from .common import BadInput, add_command, config_from, load_json, print_json


async def _cmd_approve(args: argparse.Namespace) -> int:
    from ..approval import ApprovalRequest, ApprovalSettings, ProposedAction, classify
    from ..approval.settings import with_user_threshold
    from ..evaluators.http import HttpEvaluator
    from ..evaluators.select import build_evaluator

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
        settings = ApprovalSettings.load()
        # One threshold: the config's autoApprovalThreshold, else settings.json's.
        config = with_user_threshold(config_from(args))
    except (BadInput, JevError) as exc:
        sys.stderr.write(f"fabric-jev: {exc}\n")
        return 2
    evaluator: Any = None
    if args.policy == "auto":
        if args.evaluator:
            evaluator = build_evaluator(args.evaluator, config)
        else:
            from ..approval import parse_model_key

            model = parse_model_key(settings.model)
            evaluator = HttpEvaluator(model.route, model=model.model)
    try:
        decision = await classify(request, evaluator=evaluator, threshold=config.auto_approval_threshold,
                                  policy=args.policy, headless=args.headless,
                                  timeout=config.request_timeout_ms / 1000,
                                  max_request_bytes=config.max_request_bytes)
    finally:
        if evaluator is not None:
            await evaluator.aclose()
    print_json(decision.to_json())
    return 0 if decision.decision == "allow" else 1


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


def add_approval_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = add_command(
        sub, "approve", help="classify one proposed action: allow, ask or deny",
        description="Decide whether one proposed agent action may run without asking a person: four "
                    "noul questions to the approval model, compared with the threshold from "
                    "`fabric-jev settings approvals`. Prints the decision as JSON.",
        codes=("0 allow", "1 ask or deny", "2 bad action, session, settings or evaluator"))
    ap.add_argument("--action", required=True,
                    help="action JSON file {ref, risk?, description?, arguments?}, or - for standard input")
    ap.add_argument("--session", help="session JSON file {conversation: [{role, text}], actions: [...]}")
    ap.add_argument("--user-text", dest="user_text", default=None, help="the current user turn's text")
    ap.add_argument("--policy", choices=("auto", "ask", "deny", "allow"), default="auto",
                    help="auto asks the model; ask, deny and allow decide without it (default auto)")
    ap.add_argument("--headless", action="store_true", help="no human to ask: ask becomes deny")
    ap.add_argument("--evaluator", help="override the settings' model (e.g. fixture:FILE, local, typesafe)")
    ap.add_argument("--config", help="host config JSON file (its autoApprovalThreshold, "
                    "requestTimeoutMs and maxRequestBytes apply)")
    ap.set_defaults(handler=_cmd_approve)

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
