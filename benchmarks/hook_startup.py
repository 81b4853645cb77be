#!/usr/bin/env python
"""What a HookCallback costs at start-up: one short ``fit`` with hooks against the same ``fit``
without them and against a native ``MonitoredSession`` running the same hooks.

The suite runs about a thousand HookCallback fits per stack, most of a few steps: there the
bridge's fixed cost (side graph, hooks' ``begin``, Scaffold, session, ``after_create_session``,
``end``) is what a test pays. Each repeat runs, in this order and in one process:

* ``plain``: ``model.fit`` of a traced model, 2 steps, no callback;
* ``hooks``: the same ``fit`` with ``HookCallback([CheckpointSaverHook, StepCounterHook])``;
* ``native``: a TF1 graph of the same MLP, ``MonitoredSession`` with the same two hooks
  (a new graph each time, as each fit gets a new side graph), 2 ``run(train_op)`` calls;
* ``hooks_light`` / ``native_light``: the same with ``NanTensorHook("loss:0")`` and
  ``StepCounterHook`` (no hook reads the weights).

Reported: median process CPU ms per call and the ratios ``hooks - plain`` (the bridge's start-up
plus its per-step work) against ``native`` (what the hooks themselves cost natively, graph and
session included). ``--profile`` adds a cProfile of the ``hooks`` fits (cumulative, top entries).

    TF_CPP_MIN_LOG_LEVEL=3 python benchmarks/hook_startup.py [--repeats 15] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
STEPS, BATCH, IN, HIDDEN = 2, 8, 8, 16


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS * BATCH, IN)).astype(np.float32)
    return x, x[:, :1] * 0.5


def _hooks(out: str, light: bool = False) -> list:
    """The checkpointing set (reads the weights: the bridge copies them into its graph), or the
    light one (reads the loss and the global step only: nothing to copy)."""
    if light:
        return [
            v1.train.NanTensorHook("loss:0"),
            v1.train.StepCounterHook(every_n_steps=1000, output_dir=out),
        ]
    return [
        v1.train.CheckpointSaverHook(out, save_steps=1000),
        v1.train.StepCounterHook(every_n_steps=1000, output_dir=out),
    ]


def _model() -> object:
    model = keras.Sequential(
        [keras.Input((IN,)), keras.layers.Dense(HIDDEN, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def plain(model: object, x: np.ndarray, y: np.ndarray, out: str) -> None:
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)


def hooks(model: object, x: np.ndarray, y: np.ndarray, out: str, light: bool = False) -> None:
    callback = hookbridge.HookCallback(_hooks(out, light))
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False, callbacks=[callback])


def native(model: object, x: np.ndarray, y: np.ndarray, out: str, light: bool = False) -> None:
    with tf.Graph().as_default():
        step = v1.train.get_or_create_global_step()
        xs, ys = v1.placeholder(tf.float32, (None, IN)), v1.placeholder(tf.float32, (None, 1))
        w1 = v1.get_variable("w1", (IN, HIDDEN), initializer=v1.glorot_uniform_initializer())
        w2 = v1.get_variable("w2", (HIDDEN, 1), initializer=v1.glorot_uniform_initializer())
        b1 = v1.get_variable("b1", (HIDDEN,), initializer=v1.zeros_initializer())
        b2 = v1.get_variable("b2", (1,), initializer=v1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(xs, w1) + b1)
        loss = tf.identity(
            v1.losses.mean_squared_error(ys, tf.matmul(hidden, w2) + b2), name="loss"
        )
        train = v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
        with v1.train.MonitoredSession(hooks=_hooks(out, light)) as sess:
            for i in range(STEPS):
                sess.run(train, {xs: x[i * BATCH : (i + 1) * BATCH], ys: y[i * BATCH :][:BATCH]})


CASES = {
    "plain": plain,
    "hooks": hooks,
    "native": native,
    "hooks_light": functools.partial(hooks, light=True),
    "native_light": functools.partial(native, light=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    x, y = _data()
    model = _model()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    with tempfile.TemporaryDirectory() as root:
        for name, case in CASES.items():  # warm-up: traces, imports, first sessions
            case(model, x, y, os.path.join(root, f"warm_{name}"))
        for r in range(args.repeats):
            for name, case in CASES.items():
                out = os.path.join(root, f"{name}_{r}")
                start = time.process_time()
                case(model, x, y, out)
                times[name].append(time.process_time() - start)
        med = {name: 1000 * statistics.median(t) for name, t in times.items()}
        print(
            f"{tf.__version__=} keras={keras.__version__ if hasattr(keras, '__version__') else '?'}"
        )
        print(f"median process CPU ms per call, {args.repeats} repeats, {STEPS} steps each")
        for name, ms in med.items():
            print(f"  {name:7s} {ms:8.1f}")
        for suffix in ("", "_light"):
            bridge = med["hooks" + suffix] - med["plain"]
            print(
                f"  hooks{suffix} - plain {bridge:8.1f} ms"
                f"  = {bridge / med['native' + suffix]:.2f}x native{suffix}"
            )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for r in range(5):
                hooks(model, x, y, os.path.join(root, f"prof_{r}"))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(60)


if __name__ == "__main__":
    main()
