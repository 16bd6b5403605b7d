"""A one-call synchronous helper for scripts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from .contract import Envelope, HostConfig, Program
    from .contract.values import JsonInput
    from .evaluators import Evaluator


def run_program(
    program: Program | dict[str, Any],
    input: JsonInput = None,
    *,
    config: HostConfig | None = None,
    evaluator: Evaluator | str | None = None,
) -> Envelope:
    """Start a host, run one program in the foreground, close the host, return the envelope.

    `evaluator` is an Evaluator or a spec string as for `--evaluator`
    (``"local"``, ``"fixture:answers.json"``, ``"typesafe"``, ...); by default
    the config's, else the local one. Launch problems raise `LaunchRejected`
    subclasses, exactly as `JevHost.run` does.
    """
    from .host import JevHost

    async def main() -> Envelope:
        async with JevHost(config, evaluator=evaluator) as host:
            return await host.run(program, input)

    return anyio.run(main)
