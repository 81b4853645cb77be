"""One worker of a 2-worker MultiWorkerMirroredStrategy on loopback, running several ``fit``s.

``python multiworker_fit.py OUT_DIR [SCENARIO ...]`` with ``TF_CONFIG`` set by the caller. Runs
each stop scenario of ``multiworker_hooks.SCENARIOS`` (default: all, in that order) as one fit of
a fresh model, then ``keras_stop`` (a Keras callback stops worker 1), ``unagreed``
(``agree_stops=False``, the same StopAtStepHook on both), ``alike`` / ``alike_nan`` /
``unlike`` (hooks deciding alike on every worker: no round per step), then ``basic`` (hooks on
every worker, chief-only hooks on the chief, then an evaluate), which also shows that both
workers still train together after every stop and failure before it. Then, when every scenario
ran (no SCENARIO given), ``multiworker_chief_hooks.run`` (docs/distributed.md's chief-only file
writers, writing under OUT_DIR): one TensorFlow start-up and one cluster for both. Prints one
JSON line: ``{"ok": true, "is_chief": ..., "scenarios": {name: {...}}, "chief_hooks": {...}}``, or
``{"ok": false, "error": "<type>: <message>"}`` when the stack cannot fit under the strategy
(Keras 3 fails upstream: keras-team/keras#20585).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import multiworker_chief_hooks
import numpy as np
import tensorflow as tf
from multiworker_hooks import (
    EPOCHS,
    NAN_STEP,
    SCENARIOS,
    STEPS_PER_EPOCH,
    alike_hooks,
    stop_at_batch,
)

import hookbridge
from hookbridge._hook_callback.agreement import StopAgreement

keras = tf.keras

#: The agreement's collective rounds in the current scenario (the start round included).
ROUNDS = [0]
_exchange = StopAgreement._exchange


def _counted_exchange(self, values):
    ROUNDS[0] += 1
    return _exchange(self, values)


StopAgreement._exchange = _counted_exchange


class CountingHook(tf.compat.v1.train.SessionRunHook):
    """Counts the steps the hooks ran on this worker."""

    def __init__(self) -> None:
        self.steps = 0

    def after_run(self, run_context, run_values):
        self.steps += 1


def build_model(strategy, nan_step: int | None = None):
    """A small linear model under ``strategy``; with ``nan_step``, its loss is NaN on that step
    (on every replica of every worker, whatever data each sees)."""
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(0.05)
        loss = "mse"
        if nan_step is not None:
            iterations = optimizer.iterations

            def loss(y, p):
                bad = tf.equal(iterations, tf.cast(nan_step - 1, iterations.dtype))
                return tf.reduce_mean(tf.square(y - p), axis=-1) + tf.where(bad, np.nan, 0.0)

        model.compile(optimizer=optimizer, loss=loss)
    return model


def dataset():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1))).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)


def fit(model, callbacks, epochs: int, steps: int, validate: bool = False) -> dict:
    """Fits, and reports how it ended (error, warnings of HookCallback, time, iterations)."""
    start = time.monotonic()
    error = None
    validation = {"validation_data": dataset(), "validation_steps": 2} if validate else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(
                dataset(),
                steps_per_epoch=steps,
                epochs=epochs,
                verbose=0,
                callbacks=callbacks if isinstance(callbacks, list) else [callbacks],
                **validation,
            )
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            error = f"{type(e).__name__}: {str(e)[:300]}"
    return {
        "iterations": int(model.optimizer.iterations.numpy()),
        "error": error,
        "warnings": [str(w.message) for w in caught if "HookCallback" in str(w.message)],
        "seconds": round(time.monotonic() - start, 2),
    }


def stop_scenario(strategy, index: int, name: str) -> dict:
    asking, make_hooks, chief_only = SCENARIOS[name]
    if chief_only:  # the asking worker is the chief
        bridge = hookbridge.HookCallback([], chief_only_hooks=make_hooks)
    else:
        bridge = hookbridge.HookCallback(make_hooks if index == asking else [])
    model = build_model(strategy, NAN_STEP if name == "nan_loss" else None)
    # With validation: Keras's evaluation after the stop runs on every worker (collectives), and
    # the failing worker's error still reaches fit's caller.
    return fit(model, bridge, EPOCHS, STEPS_PER_EPOCH, validate=name == "raise_after_run")


def keras_stop_scenario(strategy, index: int) -> dict:
    """Worker 1 only: a Keras callback listed before the HookCallback stops it after its third
    step; the HookCallbacks' agreement stops both."""
    model = build_model(strategy)
    callbacks = [stop_at_batch(model, 2)] if index == 1 else []
    return fit(model, [*callbacks, hookbridge.HookCallback([])], EPOCHS, STEPS_PER_EPOCH)


def unagreed_scenario(strategy) -> dict:
    """``agree_stops=False`` with the same stop condition on every worker: ``StopAtStepHook``
    (``last_step=3``) ends both after step 3, without the per-step collective."""
    bridge = hookbridge.HookCallback(
        lambda: [tf.compat.v1.train.StopAtStepHook(last_step=3)], agree_stops=False
    )
    got = fit(build_model(strategy), bridge, EPOCHS, STEPS_PER_EPOCH)
    return got


def alike_scenario(strategy, index: int, name: str) -> dict:
    """Hooks that decide alike on every worker, so no step needs the agreement's round:
    ``alike`` (StopAtStepHook(last_step=3) and NanTensorHook on both workers, with Keras's
    TerminateOnNaN before the bridge), ``alike_nan`` (the same, the loss NaN at step NAN_STEP
    on every worker: both raise), and ``unlike`` (worker 1's StopAtStepHook stops at 5, worker
    0's at 3: the fingerprints differ, so every step has a round and both stop at 3)."""
    last_step = 5 if name == "unlike" and index == 1 else 3
    if name == "alike_nan":
        last_step = 100
    make, chief = alike_hooks(last_step)
    bridge = hookbridge.HookCallback(make, chief_only_hooks=chief)
    model = build_model(strategy, NAN_STEP if name == "alike_nan" else None)
    callbacks = [keras.callbacks.TerminateOnNaN(), bridge] if name == "alike" else [bridge]
    got = fit(model, callbacks, EPOCHS, STEPS_PER_EPOCH)
    got["stop_rounds"] = bridge._stop_rounds
    return got


def basic_scenario(strategy) -> dict:
    hook, chief_hook = CountingHook(), CountingHook()
    bridge = hookbridge.HookCallback([hook], chief_only_hooks=[chief_hook])
    model = build_model(strategy)
    got = fit(model, bridge, 1, 4)
    got.update(
        hook_steps=hook.steps, chief_hook_steps=chief_hook.steps, stop_rounds=bridge._stop_rounds
    )
    # evaluate: the hooks run on every worker, no agreement (a warning says so).
    evaluated = CountingHook()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.evaluate(
            dataset(), steps=2, verbose=0, callbacks=[hookbridge.HookCallback([evaluated])]
        )
    got.update(
        evaluate_hook_steps=evaluated.steps,
        evaluate_warnings=[str(w.message) for w in caught if "HookCallback" in str(w.message)],
    )
    return got


def main(out_dir: str, names: list[str]) -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    index = int(strategy.cluster_resolver.task_id)
    results: dict = {}
    alike = ["alike", "alike_nan", "unlike"]
    ROUNDS[0] = 0
    for name in names or [*SCENARIOS, "keras_stop", "unagreed", *alike, "basic"]:
        if name in alike:
            got = alike_scenario(strategy, index, name)
        elif name == "unagreed":
            got = unagreed_scenario(strategy)
        elif name == "basic":
            got = basic_scenario(strategy)
        elif name == "keras_stop":
            got = keras_stop_scenario(strategy, index)
        else:
            got = stop_scenario(strategy, index, name)
        got["rounds"] = ROUNDS[0]
        ROUNDS[0] = 0
        results[name] = got
        if got["error"] and "PerReplica" in got["error"]:  # Keras 3: keras-team/keras#20585
            print(json.dumps({"ok": False, "error": got["error"]}), flush=True)
            return
    result = {
        "ok": True,
        "is_chief": bool(strategy.extended.should_checkpoint),
        "scenarios": results,
    }
    if not names:
        result["chief_hooks"] = multiworker_chief_hooks.run(strategy, out_dir)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
