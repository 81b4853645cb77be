#!/usr/bin/env python
"""hookbridge per-step cost benchmark: prints a table of µs/step, ratios, targets, PASS/MISS.

Every target compares two cases of the same run: a bridge case against what a user would run
instead (a Keras callback doing the same job, or the native TF1 hook), measured side by side in one
process, repeats interleaved in a shuffled order. A case's per-step cost is an epoch's seconds over
its steps, for every epoch of a run but the first (see ``hookbench/timing.py``), so fixed costs fall
outside; verdicts compare each case's fastest epoch (interference only slows an epoch down, so the
fastest is the least disturbed, as ``timeit`` reasons), and the median of per-repeat paired ratios
is printed beside it. Time inside the bridge's entry points is printed after the table as a
diagnostic, not a verdict (``hookbench/profile.py`` says why).

Usage::

    python benchmarks/bench.py            # full mode (~20 min on 2 cores): docs/performance.md
    python benchmarks/bench.py --short    # only checks every case runs (CI, no warm-up); no verdicts
    python benchmarks/bench.py --memory   # 50,000-step soak with the standard hook set
    python benchmarks/bench.py --profile  # per case: time inside the bridge, then cProfile
    py-spy record -o out.svg -- python benchmarks/bench.py --run standard --steps 5000

The targets live in ``hookbench/report.py``, never in timed tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def _pin_process(argv: list[str]) -> str:
    """``--cpus N`` pins this process to logical CPU N before TensorFlow starts its thread pools
    (which inherit the affinity); the default, ``all``, leaves the affinity alone."""
    value = "all"
    for i, arg in enumerate(argv):
        if arg == "--cpus" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--cpus="):
            value = arg.split("=", 1)[1]
    if value == "all" or not hasattr(os, "sched_setaffinity"):
        return "all"
    os.sched_setaffinity(0, {int(value)})
    return value


PINNED = _pin_process(sys.argv[1:]) if __name__ == "__main__" else "all"

# Imported after pinning, so TF's thread pools inherit the affinity.
import tensorflow as tf
from hookbench import cases as cases_mod
from hookbench import memory, profile, report, timing
from hookbench.workloads import BATCH, HIDDEN, IN, OUT, WIDE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--short", action="store_true", help="quick run: only checks every case runs")
    mode.add_argument("--memory", action="store_true", help="50,000-step soak, standard set")
    mode.add_argument("--profile", action="store_true", help="cProfile one run per case (--only)")
    mode.add_argument("--run", metavar="CASE", help="run one case once for --steps (for py-spy)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (full: 8)")
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per timed epoch (full: 500; the CNN: 500)"
    )
    parser.add_argument(
        "--epochs", type=int, default=None, help="timed epochs per run, after one untimed (full: 3)"
    )
    parser.add_argument("--only", default=None, help="comma-separated cases (+ their references)")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="wall (default) or process CPU"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="TF intra-/inter-op pools of this size"
    )
    parser.add_argument("--cpus", default="all", help="logical CPU to pin to (default: all)")
    parser.add_argument("--soak-steps", type=int, default=50_000)
    return parser


def _header(args: argparse.Namespace) -> None:
    print(f"machine: {report.machine()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"TF thread pools: {args.threads or 'default (one thread per core)'}")
    print(f"CPU affinity: {'pinned to CPU ' + PINNED if PINNED != 'all' else 'all CPUs'}")


def _benchmark(args: argparse.Namespace, workdir: str) -> int:
    if args.short:
        repeats, steps, epochs = args.repeats or 1, args.steps or 20, args.epochs or 1
    else:
        repeats, steps, epochs = args.repeats or 8, args.steps or 500, args.epochs or 3
    cases = cases_mod.build_cases(workdir)
    if args.only:
        wanted = set(args.only.split(","))
        cases = {k: c for k, c in cases.items() if k in wanted | report.references(wanted)}
    print(
        f"mode: {'short (runs only, no verdicts)' if args.short else 'full'}; clock {args.clock}; "
        f"{repeats} interleaved repeats of 1 + {epochs} epochs x {steps} steps (the first epoch "
        f"untimed; CNN cases: 1 + {cases_mod.CNN_EPOCHS} x {cases_mod.CNN_STEPS} in full mode); "
        f"batch {BATCH}; MLP {IN}->{HIDDEN}->{OUT} (wide: {IN}->{WIDE}->{OUT})",
        flush=True,
    )
    t0 = time.perf_counter()
    timings = timing.measure(
        cases, steps, epochs, repeats, own_sizes=not args.short, warm_up=not args.short
    )
    text, all_pass = report.table(timings, not args.short, report.checks_for(timings.samples))
    print(text)
    print(
        "\nDiagnostic (not a verdict): time inside the bridge's per-step entry points, one more "
        "run per case, perf_counter"
    )
    print(profile.attribute(cases, timings, steps, epochs, own_sizes=not args.short))
    print(
        f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"measured in {time.perf_counter() - t0:.0f} s"
    )
    if args.short:
        print("short mode: every case ran (timings are not meaningful)")
        return 0
    print("all targets met" if all_pass else "some targets MISSED")
    return 0 if all_pass else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    timing.use_clock(args.clock)
    _header(args)
    with tempfile.TemporaryDirectory(prefix="hookbridge-bench-") as workdir:
        if args.memory:
            return 0 if memory.memory_soak(workdir, args.soak_steps, epochs=10) else 1
        if args.profile:
            names = (args.only or "idle_1,nan,standard,ms_callback_hook").split(",")
            profile.profile(cases_mod.build_cases(workdir), names, args.steps or 2000, top=25)
            return 0
        if args.run:
            case = cases_mod.build_cases(workdir)[args.run]
            case.run(50)  # trace / warm up
            steps = args.steps or 3000
            elapsed = sum(case.run(steps))
            print(
                f"{args.run}: {steps} steps in {elapsed:.2f} s ({elapsed / steps * 1e6:.0f} µs/step)"
            )
            return 0
        return _benchmark(args, workdir)


if __name__ == "__main__":
    sys.exit(main())
