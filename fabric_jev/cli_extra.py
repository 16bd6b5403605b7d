"""Sub-commands beyond `run`, registered on the main parser."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .bench import add_bench_command

    add_bench_command(sub)
