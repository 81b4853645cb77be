"""The bridge's own work per step, without the training step: HookCallback's batch methods
called directly in a loop (after a real on_train_begin on a real model), and CallbackHook's
before_run/after_run called directly (after a real begin and session), so the figures are free
of the training step's noise. Prints µs per step for each direction's cases.

These are warm-cache figures: inside a real fit the same code runs right after TF's step has
evicted the CPU caches and costs two to four times as much (bench.py --profile measures that).

    TF_CPP_MIN_LOG_LEVEL=3 python benchmarks/isolated.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras


class Idle(tf.compat.v1.train.SessionRunHook):
    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass


def per_step(model, make_hooks, steps: int) -> float:
    cb = hookbridge.HookCallback(make_hooks)
    cb.set_model(model)
    cb.set_params({"steps": 10**9, "epochs": 1, "verbose": 0})
    cb.on_train_begin()
    cb.on_epoch_begin(0)
    logs = {"loss": 1.0}
    start = time.perf_counter()
    for i in range(steps):
        cb.on_train_batch_begin(i)
        cb.on_train_batch_end(i, logs)
    elapsed = time.perf_counter() - start
    cb.on_train_end()
    return elapsed / steps * 1e6


def callback_hook_per_step(make_callbacks, steps: int) -> float:
    """CallbackHook's before_run + after_run, in µs per step (epochs of 100 steps)."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf.identity(tf.constant(1.0), name="loss")
        v1.train.get_or_create_global_step()
        hook = hookbridge.CallbackHook(
            make_callbacks(), logs={"loss": "loss"}, steps_per_epoch=100, batch_size=1, verbose=0
        )
        hook.begin()
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            hook.after_create_session(session, None)
            context = v1.train.SessionRunContext(v1.train.SessionRunArgs(None), session)
            args = hook.before_run(context)
            # what the run returns for the hook's fetch: the loss, or None for its graph op
            fetched = session.run(args.fetches) if args is not None else None
            values = v1.train.SessionRunValues(fetched, None, None)
            start = time.perf_counter()
            for _ in range(steps):
                hook.before_run(context)
                hook.after_run(context, values)
            elapsed = time.perf_counter() - start
            hook.end(session)
    return elapsed / steps * 1e6


def _standard() -> list:
    """bench.py's standard hook set, writing into a fresh temporary directory."""
    from hookbench.workloads import standard_hooks

    return standard_hooks(tempfile.mkdtemp(prefix="hookbridge-isolated-"), 10**9)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(np.zeros((8, 4)), np.zeros((8, 1)), verbose=0)
    cases = {
        "no hooks": list,
        "1 idle hook": lambda: [Idle()],
        "NanTensorHook": lambda: [tf.compat.v1.train.NanTensorHook("loss:0")],
        "100 idle hooks": lambda: [Idle() for _ in range(100)],
        "standard set (bench.py; saves every 500 steps, summaries every 100)": _standard,
    }
    print("| HookCallback case | µs per step (bridge work only) |\n|---|---|")
    for name, make in cases.items():
        best = min(per_step(model, make, args.steps) for _ in range(3))
        print(f"| {name} | {best:.1f} |")
    cb = keras.callbacks
    def epoch_level():
        return [
            cb.History(),
            cb.EarlyStopping(monitor="loss", patience=10**9),
            cb.CSVLogger(os.path.join(tempfile.mkdtemp(), "log.csv")),
        ]
    callback_cases = {
        "History, EarlyStopping, CSVLogger (sums in the graph)": epoch_level,
        "+ TerminateOnNaN (the loss fetched every step)": lambda: [
            *epoch_level(),
            cb.TerminateOnNaN(),
        ],
    }
    print("\n| CallbackHook case | µs per step (hook work only) |\n|---|---|")
    for name, make in callback_cases.items():
        best = min(callback_hook_per_step(make, args.steps) for _ in range(3))
        print(f"| {name} | {best:.1f} |")


if __name__ == "__main__":
    main()
