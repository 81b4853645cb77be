"""The ``hookbridge`` command line: ``hookbridge demo [--out DIR] [--steps N]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookbridge",
        description="Run TF1 SessionRunHooks inside Keras fit(), and Keras callbacks inside "
        "MonitoredSession/Estimator.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="train a small Keras model with built-in TF1 hooks and show what they wrote",
        description="Trains a small Keras regression on mtcars with StopAtStep, NanTensor, "
        "LoggingTensor, CheckpointSaver, SummarySaver and StepCounter hooks under "
        "hookbridge.HookCallback, reads back the checkpoints and events, restores the checkpoint "
        "into a fresh model and saves a loss plot.",
    )
    demo.add_argument(
        "--out",
        default="hookbridge_demo",
        metavar="DIR",
        help="output directory (default: ./hookbridge_demo)",
    )
    demo.add_argument(
        "--steps",
        type=int,
        default=40,
        metavar="N",
        help="training steps; StopAtStepHook stops fit there (default: 40)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hookbridge`` command; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.steps < 1:
            parser.error(f"--steps must be at least 1, received {args.steps}")
        from hookbridge._demo import run_demo

        run_demo(args.out, args.steps)
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
