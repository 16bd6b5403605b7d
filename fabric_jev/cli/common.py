"""Helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..contract.config import HostConfig

EXIT_OK = 0
EXIT_NOT_COMPLETED = 1
EXIT_REJECTED = 2
EXIT_INTERRUPTED = 130
EVALUATOR_HELP = ("local | fixture:FILE | cassette:FILE | record:FILE | typesafe | openrouter | "
                  "vercel (default: the config's, else local)")
PROFILE_HELP = "a profile for the local evaluator (from fabric-jev learn)"


class BadInput(Exception):
    """A file the user pointed at is missing or not the JSON it should be."""


def load_json(path: str, what: str) -> Any:
    """Read a JSON file (or standard input for "-")."""
    try:
        if path == "-":
            return json.loads(sys.stdin.read())
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{what} {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None


def config_from(args: argparse.Namespace) -> HostConfig:
    config = HostConfig.load(args.config) if getattr(args, "config", None) else HostConfig()
    if getattr(args, "profile", None):  # --profile is the config's evaluator.profile, given on the line
        config = config.model_copy(update={"evaluator": {**config.evaluator, "profile": args.profile}})
    return config


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()

