"""Keras 3 + MirroredStrategy over 2 logical CPU devices, with and without HookCallback.

Run as a script (the logical devices must be configured before TensorFlow starts, so this runs in a
process of its own): ``python mirrored_fit.py OUT_DIR [--loop]``. Prints one JSON object with what
the hooks saw, what Keras reported natively, and what the checkpoint holds; with ``--loop``, under
"loop", what ``mirrored_loop.py`` prints (its scenario, run after this one in the same process).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import mirrored_loop  # sets the same 2 logical CPUs (before TensorFlow starts): its scenario

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
STEPS_PER_EPOCH, EPOCHS, GLOBAL_BATCH = 4, 2, 16


class Recorder(v1.train.SessionRunHook):
    """Records, per step, the stale global step and loss fetched in the run, and the fresh
    global step read through the session in after_run."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.begins = 0

    def begin(self):
        self.begins += 1
        graph = v1.get_default_graph()
        self.global_step = v1.train.get_global_step()
        self.loss = graph.get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({"step": self.global_step, "loss": self.loss})

    def after_run(self, run_context, run_values):
        fresh = run_context.session.run(self.global_step)
        self.steps.append(
            {
                "stale_step": int(run_values.results["step"]),
                "loss": float(run_values.results["loss"]),
                "fresh_step": int(fresh),
            }
        )


class KerasLogs(keras.callbacks.Callback):
    """What Keras reports natively: the logs of every batch and optimizer.iterations."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[dict] = []

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(
            {
                "loss": float(logs["loss"]),
                "iterations": int(self.model.optimizer.iterations.numpy()),
            }
        )


def make_model(strategy=None):
    keras.utils.set_random_seed(0)
    scope = strategy.scope() if strategy is not None else tf.init_scope()
    with scope:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS_PER_EPOCH * GLOBAL_BATCH, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1))).astype("float32")
    return x, y


def fit(strategy, callbacks):
    model = make_model(strategy)
    x, y = data()
    model.fit(
        x, y, batch_size=GLOBAL_BATCH, epochs=EPOCHS, shuffle=False, verbose=0, callbacks=callbacks
    )
    return model


def main(out_dir: str, loop: bool = False) -> None:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    native_logs = KerasLogs()
    native = fit(strategy, [native_logs])

    recorder, bridged_logs = Recorder(), KerasLogs()
    ckpt_dir = os.path.join(out_dir, "ckpt")
    bridge = hookbridge.HookCallback(
        lambda: [recorder, v1.train.CheckpointSaverHook(ckpt_dir, save_steps=STEPS_PER_EPOCH)]
    )
    bridged = fit(strategy, [bridge, bridged_logs])

    reader = tf.train.load_checkpoint(ckpt_dir)
    names = sorted(name for name, _ in tf.train.list_variables(ckpt_dir))
    plain = make_model()
    plain_step = hookbridge.restore_checkpoint(plain, ckpt_dir)
    mirrored = make_model(strategy)
    mirrored_step = hookbridge.restore_checkpoint(mirrored, ckpt_dir)
    weights = [w.tolist() for w in bridged.get_weights()]
    print(
        json.dumps(
            {
                "replicas": strategy.num_replicas_in_sync,
                "hook_begins": recorder.begins,
                "hook_steps": recorder.steps,
                "native_batches": native_logs.batches,
                "bridged_batches": bridged_logs.batches,
                "native_weights": [w.tolist() for w in native.get_weights()],
                "bridged_weights": weights,
                "iterations": int(bridged.optimizer.iterations.numpy()),
                "checkpoint_names": names,
                "checkpoint_step": int(reader.get_tensor("global_step")),
                "restored_plain": [plain_step, [w.tolist() for w in plain.get_weights()]],
                "restored_mirrored": [mirrored_step, [w.tolist() for w in mirrored.get_weights()]],
                **({"loop": mirrored_loop.results(strategy)} if loop else {}),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], loop="--loop" in sys.argv[2:])
