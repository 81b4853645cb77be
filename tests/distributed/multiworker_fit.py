"""One worker of a 2-worker MultiWorkerMirroredStrategy ``fit`` on loopback.

``python multiworker_fit.py OUT_DIR`` with ``TF_CONFIG`` set by the caller. Trains a small Keras
model for a few steps under the strategy and prints one JSON line: ``{"ok": true, ...}``, or
``{"ok": false, "error": "<type>: <message>"}`` when the stack cannot run it (Keras 3 fails
upstream: keras-team/keras#20585).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras


class CountingHook(tf.compat.v1.train.SessionRunHook):
    """Counts the steps the hooks ran on this worker."""

    def __init__(self) -> None:
        self.steps = 0

    def after_run(self, run_context, run_values):
        self.steps += 1


def main(out_dir: str) -> None:
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 4)).astype("float32")
        y = (x @ rng.normal(size=(4, 1))).astype("float32")
        ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
        hook, chief_hook = CountingHook(), CountingHook()
        bridge = hookbridge.HookCallback([hook], chief_only_hooks=[chief_hook])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(ds, steps_per_epoch=4, epochs=1, verbose=0, callbacks=[bridge])
        result = {
            "ok": True,
            "iterations": int(model.optimizer.iterations.numpy()),
            "hook_steps": hook.steps,
            "chief_hook_steps": chief_hook.steps,
            "is_chief": bool(strategy.extended.should_checkpoint),
            "warned_multi_worker": any("multi-worker" in str(w.message) for w in caught),
        }
    except Exception as e:  # noqa: BLE001 - reported to the test, which decides
        result = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:500]}"}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
