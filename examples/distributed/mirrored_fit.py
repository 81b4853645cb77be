"""TF1 hooks in Keras ``fit`` under ``tf.distribute.MirroredStrategy``, on one machine.

The CPU is split into 2 logical devices, so ``MirroredStrategy`` trains 2 replicas in sync, as
it would on 2 GPUs. ``HookCallback`` runs the hooks once per global step (not once per replica):

* ``StopAtStepHook(last_step=10)`` stops ``fit`` mid-epoch, after global step 10;
* ``LoggingTensorHook`` logs the global step (fetched in the step's run: the value before the
  step, as in TF1) and the batch loss (reduced across replicas) every 3 steps, through TF's
  logger (INFO, to stderr);
* ``CheckpointSaverHook`` writes the mirrored weights, once, every 4 steps and at the end. It is
  a chief-only hook, as ``MonitoredTrainingSession`` runs it: here the one process is the chief.

The checkpoint is then read back with ``hookbridge.restore_checkpoint`` into a fresh model
built without any strategy.

Run: python examples/distributed/mirrored_fit.py [CHECKPOINT_DIR]
(without CHECKPOINT_DIR: a temporary folder, removed when the script ends)
"""

import json
import logging
import sys
import tempfile

import numpy as np
import tensorflow as tf

# Logical devices must be configured before TensorFlow touches the CPU.
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import hookbridge

v1 = tf.compat.v1
keras = tf.keras


def build_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


class HookLines(logging.Filter):
    """Keeps, of TF's INFO lines, the hooks' own: the loss lines and the checkpoints saved."""

    def filter(self, record):
        return record.getMessage().startswith(("hook:", "Saving checkpoints"))


def main(checkpoint_dir):
    v1.logging.set_verbosity(v1.logging.INFO)  # LoggingTensorHook and CheckpointSaverHook log
    tf.get_logger().addFilter(HookLines())
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    print(f"replicas in sync: {strategy.num_replicas_in_sync}")
    with strategy.scope():
        model = build_model()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32")).astype("float32")

    def hooks():  # called while the bridge's graph is the default graph
        return [
            v1.train.StopAtStepHook(last_step=10),
            v1.train.LoggingTensorHook(
                {"step": v1.train.get_global_step(), "loss": "loss:0"},
                every_n_iter=3,
                formatter=lambda v: f"hook: global step {v['step']}, batch loss {v['loss']:.4f}",
            ),
        ]

    saver = v1.train.CheckpointSaverHook(checkpoint_dir, save_steps=4)
    bridge = hookbridge.HookCallback(hooks, chief_only_hooks=[saver])
    history = model.fit(x, y, batch_size=16, epochs=5, verbose=0, callbacks=[bridge])
    step = int(model.optimizer.iterations.numpy())
    print(f"fit stopped at global step {step} (epochs begun: {len(history.history['loss'])})")
    print(f"latest checkpoint: {tf.train.latest_checkpoint(checkpoint_dir)}")

    fresh = build_model()  # no strategy: the checkpoint holds one copy of each weight
    restored = hookbridge.restore_checkpoint(fresh, checkpoint_dir)
    same = all(np.allclose(a, b) for a, b in zip(fresh.get_weights(), model.get_weights()))
    print(f"restored global step {restored} into a fresh model; same weights: {same}")
    print("kernel " + json.dumps(model.get_weights()[0].ravel().tolist()))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(f"writing to {sys.argv[1]}")
        main(sys.argv[1])
    else:  # a temporary folder, removed when the script ends
        with tempfile.TemporaryDirectory(prefix="mirrored_fit_") as folder:
            print(f"writing to {folder} (temporary, removed at exit; pass a folder to keep it)")
            main(folder)
