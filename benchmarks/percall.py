#!/usr/bin/env python
"""What one batch callback costs per call inside a real ``fit``: the per-call table of
docs/performance.md ("This round's change, measured per call inside fit").

A Keras callback first in the list and one last in it take the time around the callbacks between
them, at ``on_train_batch_begin`` and at ``on_train_batch_end``, on every step of a real ``fit``
of the benchmark's MLP. The figures include what the end-to-end benchmark cannot resolve (a few
µs on a 1 ms step) and exclude what it includes (TF's step, Keras's loop). Right after TF's step
the CPU caches are cold, so these run 3-10x a warm loop of the same calls (``isolated.py``).

Reported per case: the 20th percentile and the median of the per-call times, after the first
``--skip`` steps, for each of ``--fits`` fits (the spread between fits is the machine's; compare
two versions of the code in alternated processes, e.g. with ``PYTHONPATH`` pointing at a copy).

    TF_CPP_MIN_LOG_LEVEL=3 python benchmarks/percall.py [--cases nan,keras_nan] [--fits 3]

``--cases floor_nan,keras_nan`` adds the floor of the ``nan`` case: the TF1 protocol alone
(context, ``before_run``, ``after_run`` with a ``SessionRunValues``), without the bridge.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras
import numpy as np
import tensorflow as tf
from hookbench.workloads import HIDDEN, IdleHook, NoopCallback, dataset, keras_mlp

import hookbridge

CASES = {
    "keras_noop": lambda: [NoopCallback()],
    "idle_1": lambda: [hookbridge.HookCallback([IdleHook()])],
    "keras_nan": lambda: [keras.callbacks.TerminateOnNaN()],
    "nan": lambda: [hookbridge.HookCallback([tf.compat.v1.train.NanTensorHook("loss:0")])],
}


class FloorNan(keras.callbacks.Callback):
    """The least any bridge must do to run a ``NanTensorHook`` per Keras step: a new
    ``SessionRunContext``, the hook's ``before_run``, its ``after_run`` given Keras's loss as
    ``np.float32`` in a ``SessionRunValues``. No global step, batch value, lock or stop check:
    a floor for the ``nan`` case, not a bridge (``--cases floor_nan,keras_nan``)."""

    def __init__(self) -> None:
        super().__init__()
        self.hook = tf.compat.v1.train.NanTensorHook("loss:0")
        self.context = None

    def on_train_batch_begin(self, batch, logs=None):
        train = tf.compat.v1.train
        self.context = train.SessionRunContext(train.SessionRunArgs(None), None)
        self.hook.before_run(self.context)

    def on_train_batch_end(self, batch, logs=None):
        values = tf.compat.v1.train.SessionRunValues(np.float32(logs["loss"]), None, None)
        self.hook.after_run(self.context, values)


#: Cases run only when named in ``--cases`` (not by default).
EXTRA_CASES = {"floor_nan": lambda: [FloorNan()]}


class _Clock:
    """The two callbacks around the measured ones, and the per-call times they record (ns)."""

    def __init__(self) -> None:
        self.begin: list[int] = []
        self.end: list[int] = []
        clock, now = self, time.perf_counter_ns

        class First(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                clock._t = now()

            def on_train_batch_end(self, batch, logs=None):
                clock._t = now()

        class Last(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                clock.begin.append(now() - clock._t)

            def on_train_batch_end(self, batch, logs=None):
                clock.end.append(now() - clock._t)

        self._t = 0
        self.first, self.last = First(), Last()


def measure(case: str, model, ds, steps: int, epochs: int, skip: int) -> tuple[float, ...]:
    """(begin p20, begin median, end p20, end median) in µs for one fit of ``case``."""
    clock = _Clock()
    callbacks = [clock.first, *{**CASES, **EXTRA_CASES}[case](), clock.last]
    model.fit(ds, steps_per_epoch=steps, epochs=epochs, verbose=0, callbacks=callbacks)
    if len(clock.end) <= skip:
        raise SystemExit(f"percall: {case} ran {len(clock.end)} steps; --skip {skip} leaves none")
    begin, end = (np.asarray(t[skip:]) / 1000 for t in (clock.begin, clock.end))
    return tuple(
        float(f(v)) for v in (begin, end) for f in (lambda a: np.percentile(a, 20), np.median)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help="comma-separated: " + ", ".join([*CASES, *EXTRA_CASES]),
    )
    parser.add_argument("--fits", type=int, default=3, help="fits per case (interleaved)")
    parser.add_argument("--steps", type=int, default=500, help="steps per epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--skip", type=int, default=500, help="first steps of each fit left out")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES and c not in EXTRA_CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {', '.join([*CASES, *EXTRA_CASES])}")
    model, ds = keras_mlp(HIDDEN), dataset()
    model.fit(ds, steps_per_epoch=20, epochs=1, verbose=0)  # traced once, outside the figures
    results: dict[str, list[tuple[float, ...]]] = {c: [] for c in cases}
    for _ in range(args.fits):
        for case in cases:
            results[case].append(measure(case, model, ds, args.steps, args.epochs, args.skip))
    print(
        f"per call inside fit, µs: {args.fits} fits x {args.epochs} x {args.steps} steps, "
        f"first {args.skip} left out; p20 / median per fit"
    )
    print("| case | on_train_batch_begin | on_train_batch_end |")
    print("|---|---|---|")
    for case, fits in results.items():
        begin = ", ".join(f"{r[0]:.1f} / {r[1]:.1f}" for r in fits)
        end = ", ".join(f"{r[2]:.1f} / {r[3]:.1f}" for r in fits)
        print(f"| {case} | {begin} | {end} |")
    totals = {c: float(np.median([r[1] + r[3] for r in fits])) for c, fits in results.items()}
    verdicts = [("nan", "keras_nan", 2.0)]  # issue 24: NanTensorHook <= 2.0x TerminateOnNaN
    if "floor_nan" in totals and "keras_nan" in totals:
        floor = totals["floor_nan"] / totals["keras_nan"]
        print(
            f"floor_nan: begin + end median {totals['floor_nan']:.1f} µs = {floor:.2f}x keras_nan"
        )
    for case, reference, limit in verdicts:
        if case in totals and reference in totals:
            ratio = totals[case] / totals[reference]
            print(
                f"{case}: begin + end median {totals[case]:.1f} µs = {ratio:.2f}x {reference} "
                f"({totals[reference]:.1f} µs); target <= {limit:.1f}x: "
                + ("PASS" if ratio <= limit else "MISS")
            )


if __name__ == "__main__":
    main()
