"""The bridge's own work per Keras step, without the Keras step: HookCallback's batch methods
called directly in a loop (after a real on_train_begin on a real model), so the figure is free
of the training step's noise. Prints µs per step for no hooks, an idle hook, NanTensorHook, and
100 idle hooks.

    TF_CPP_MIN_LOG_LEVEL=3 python benchmarks/isolated.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
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
    }
    print("| case | µs per step (bridge work only) |\n|---|---|")
    for name, make in cases.items():
        best = min(per_step(model, make, args.steps) for _ in range(3))
        print(f"| {name} | {best:.1f} |")


if __name__ == "__main__":
    main()
