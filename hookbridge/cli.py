"""The ``hookbridge`` command line: ``hookbridge demo [--out DIR] [--steps N]``,
``hookbridge scan PATH [--format table|json|markdown]``,
``hookbridge check MODULE:ATTR [--callback] [--steps N] [--steps-per-epoch N] [--format json]``.

Each subcommand imports its implementation only when it runs: ``--help`` and ``scan`` load no
TensorFlow (``demo`` and ``check`` import it when they start).
"""

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
    _add_scan(sub)
    _add_check(sub)
    return parser


def _add_scan(sub: argparse._SubParsersAction) -> None:
    scan = sub.add_parser(
        "scan",
        help="list a TF1 codebase's hooks, entry points and tensors with their bridge status",
        description="Reads Python files by syntax tree (never imports or runs them) and lists "
        "SessionRunHook subclasses, hooks constructed, MonitoredSession/Estimator entry points, "
        "Keras callbacks in TF1 code and tensors named inside hooks, each with its bridge status. "
        "Exit status: 0 everything conforms; 1 custom code to check, tensors to expose or "
        "unverified built-ins; 2 bad input; 3 something unsupported; 4 a file could not be "
        "parsed (the highest that applies).",
    )
    scan.add_argument("path", metavar="PATH", help="a .py file or a folder")
    scan.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        dest="fmt",
        help="report format (default: table)",
    )
    # --exclude (issue 26 item 6; owned by the scan)
    scan.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip folders or files whose relative path or name matches (repeatable), "
        "e.g. --exclude tests --exclude third_party --exclude '*_test.py'",
    )
    scan.set_defaults(handler=_run_scan)


def _run_scan(args: argparse.Namespace) -> int:
    from hookbridge._migrate.scan import scan
    from hookbridge._migrate.scan.findings import EXIT_USAGE
    from hookbridge._migrate.scan.report import render

    try:
        result = scan(args.path, exclude=args.exclude)
    except FileNotFoundError as e:
        print(f"hookbridge scan: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(render(result, args.fmt))
    return result.exit_code()


def _add_check(sub: argparse._SubParsersAction) -> None:
    check = sub.add_parser(
        "check",
        help="run the conformance kit on your hook (or callback) factory: native vs bridged",
        description="Runs MODULE:ATTR (a class or zero-argument function returning a "
        "SessionRunHook, or with --callback a Keras callback) natively and under the bridge, and "
        "prints 'conforms' or both call traces side by side. Exit status: 0 conforms, 1 does "
        "not, 2 bad input. Imports only MODULE.",
    )
    check.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="e.g. my_project.hooks:make_hook, hooks.py:LossHook, or a call: "
        "'my_project.hooks:LossHook(\"loss:0\", threshold=0.5)'",
    )
    check.add_argument("--steps", type=int, default=6, metavar="N", help="steps (default: 6)")
    check.add_argument("--steps-per-epoch", type=int, default=3, metavar="N", help="(default: 3)")
    check.add_argument(
        "--callback",
        action="store_true",
        help="ATTR makes a Keras callback: compare fit with CallbackHook in MonitoredSession",
    )
    check.add_argument("--format", choices=("text", "json"), default="text", dest="fmt")
    check.set_defaults(handler=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    from hookbridge._migrate import check as _check

    request = _check.CheckRequest(
        args.target, args.steps, args.steps_per_epoch, args.callback, args.fmt
    )
    return _check.main(request)


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
    if getattr(args, "handler", None) is not None:
        return int(args.handler(args))
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
