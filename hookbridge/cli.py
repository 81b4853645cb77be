"""The ``hookbridge`` command line: ``hookbridge demo [--out DIR] [--steps N]``,
``hookbridge scan PATH [--format table|json|markdown]``, ``hookbridge upgrade PATH [--write]``,
``hookbridge check MODULE:ATTR [--callback | --replaced-by MODULE:ATTR] [--model MODULE:ATTR]
[--steps N] [--steps-per-epoch N] [--format json]``, ``hookbridge --version``.

Each subcommand imports its implementation only when it runs: ``--help`` and ``scan`` load no
TensorFlow (``demo`` and ``check`` import it when they start, through :func:`quiet_tensorflow`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Sequence

#: TensorFlow's C++ log level the command sets when the user has not set one: errors only, not
#: the INFO lines (CPU features, oneDNN) TensorFlow prints on import.
LOG_LEVEL = "2"
#: Lines TensorFlow writes to stderr on import before its logging honours the level above (TF
#: 2.21 logs the oneDNN notice before absl's logging is initialized): dropped when the command
#: set the level, kept when the user set ``TF_CPP_MIN_LOG_LEVEL`` themselves.
_IMPORT_NOISE = re.compile(
    rb"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to "
    rb"STDERR|I\d{4} [\d:. ]+\d+ port\.cc:\d+\] oneDNN custom operations are on\. .*)$"
)


def quiet_tensorflow(command: str = "check") -> None:
    """Imports TensorFlow without its start-up INFO lines, unless the user asked for them.

    Sets ``TF_CPP_MIN_LOG_LEVEL`` to :data:`LOG_LEVEL` if the environment does not set it, and
    filters the two lines TensorFlow prints on import regardless of that level. Does not touch
    ``TF_ENABLE_ONEDNN_OPTS``: turning oneDNN off would silence its notice too, but it changes
    the numerics (float round-off) from what the user's own training computes.

    Raises:
        SystemExit: TensorFlow is not installed (how to install it, in one line).
    """
    if importlib.util.find_spec("tensorflow") is None:
        raise SystemExit(
            f"hookbridge {command} needs TensorFlow, which is not installed here: "
            'pip install "tf-hookbridge[tensorflow-cpu]" (or [tensorflow])'
        )
    if "tensorflow" in sys.modules or "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = LOG_LEVEL
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded): import as is
        import tensorflow
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().splitlines(keepends=True)
                    if not _IMPORT_NOISE.match(line.rstrip(b"\r\n"))]
            if kept:
                sys.stderr.flush()
                os.write(2, b"".join(kept))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookbridge",
        description="Run TF1 SessionRunHooks inside Keras fit(), and Keras callbacks inside "
        "MonitoredSession/Estimator.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
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
    from hookbridge._migrate.upgrade.command import add_parser as _add_upgrade

    _add_upgrade(sub)
    return parser


def _version() -> str:
    from hookbridge import __version__

    return __version__


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
    scan.add_argument(
        "--stage0",
        action="store_true",
        help="list only stage 0: every TF1-only name `hookbridge upgrade` would rewrite, with "
        "its replacement (imports TensorFlow for its upgrader's tables); exit 0: stage 0 clean",
    )
    scan.set_defaults(handler=_run_scan)


def _run_scan(args: argparse.Namespace) -> int:
    from hookbridge._migrate.scan import scan
    from hookbridge._migrate.scan.findings import EXIT_USAGE
    from hookbridge._migrate.scan.report import render

    try:
        result = scan(args.path, exclude=args.exclude, stage0=args.stage0)
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
        "prints 'conforms' or both call traces side by side. With --replaced-by CALLBACK, runs "
        "the hook under HookCallback and the callback natively in the same Keras fit and "
        "compares what they do (every line their code logs, warns or prints, TensorFlow's and the "
        "bridge's own lines left out; files written and their contents, summaries by value; the "
        "step fit stops at): 'replaces' or the differences. Exit status: 0 conforms (replaces), "
        "1 does not, 2 bad input, 3 unknown, printed 'cannot tell' (something could not be "
        "compared, or both worlds fail the same way). Imports only the named modules.",
    )
    check.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="e.g. my_project.hooks:make_hook, hooks.py:LossHook, or a call: "
        "'my_project.hooks:LossHook(\"loss:0\", threshold=0.5)'",
    )
    check.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="N",
        help="steps (default: 2 epochs of --steps-per-epoch, or 6)",
    )
    check.add_argument(
        "--steps-per-epoch",
        type=int,
        default=None,
        metavar="N",
        help="(default: 3, or with --steps alone the fewest epochs of at least two that divide "
        "it: --steps 10 runs 2 epochs of 5; a prime --steps runs one epoch)",
    )
    kind = check.add_mutually_exclusive_group()
    kind.add_argument(
        "--callback",
        action="store_true",
        help="ATTR makes a Keras callback: compare fit with CallbackHook in MonitoredSession",
    )
    kind.add_argument(
        "--replaced-by",
        metavar="MODULE:ATTR",
        default=None,
        help="a factory of the Keras callback(s) meant to replace the hook: prove it does the same",
    )
    check.add_argument(
        "--model",
        metavar="MODULE:ATTR",
        default=None,
        help="a zero-argument function returning your compiled Keras model and its data, "
        "(model, x, y), or the model alone: the run is fit on it (see docs/conformance.md)",
    )
    check.add_argument("--format", choices=("text", "json"), default="text", dest="fmt")
    check.set_defaults(handler=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    quiet_tensorflow()
    from hookbridge._migrate import check as _check

    request = _check.CheckRequest(
        args.target,
        args.steps,
        args.steps_per_epoch,
        args.callback,
        args.fmt,
        replaced_by=args.replaced_by,
        model=args.model,
    )
    return _check.main(request)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hookbridge`` command; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.steps < 1:
            parser.error(f"--steps must be at least 1, received {args.steps}")
        quiet_tensorflow("demo")
        from hookbridge._demo import run_demo

        run_demo(args.out, args.steps)
        return 0
    if getattr(args, "handler", None) is not None:
        return int(args.handler(args))
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
