"""A canned DNNClassifier moved to Keras and back, with the figures (TF 2.15: tensorflow-estimator).

    python canned_dnn.py OUT_DIR

1. The Estimator job trains 40 steps into OUT_DIR/model_dir (and a copy goes on natively, the
   reference for every comparison below).
2. ``hookbridge.keras_twin(est)`` builds its Keras model; ``restore_checkpoint`` loads weights,
   global step and the Adagrad accumulators; Keras ``fit`` continues to step 80 under
   ``estimator_hooks(model_dir, model=twin)``, writing the Estimator's checkpoints.
3. The way back: the Estimator continues from the Keras checkpoint to step 120 while Keras goes on.
4. Rolling back: the Estimator restarts from the checkpoint kept in ``estimator-backup/``.

Each step prints the largest relative difference of the batch losses, step by step.
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
RNG = np.random.default_rng(0)
X = RNG.normal(size=(256, 3)).astype("float32")
FEATURES = {"size": X[:, :1], "age": X[:, 1:2], "rate": X[:, 2:]}  # the Estimator sorts them
LABELS = ((X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3) > 0).astype("int64")
BATCH, STEPS_PER_EPOCH = 32, 8
RUN_CONFIG = {"save_checkpoints_steps": 20, "save_summary_steps": 20, "log_step_count_steps": 20}


class LossRecorder(v1.train.SessionRunHook):
    """Each step's batch loss: the Estimator's (its ``loss`` summary's input) or the bridge's."""

    def __init__(self):
        self.losses = []

    def begin(self):
        graph = v1.get_default_graph()
        summaries = [
            s for s in graph.get_collection(v1.GraphKeys.SUMMARIES) if s.op.name == "loss"
        ]
        self._loss = summaries[0].op.inputs[1] if summaries else graph.get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def estimator(model_dir):
    columns = [tf.feature_column.numeric_column(k) for k in ("size", "age", "rate")]
    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=0, **RUN_CONFIG)
    return tf.estimator.DNNClassifier([16, 8], columns, config=config)


def train(model_dir, max_steps):
    recorder = LossRecorder()
    estimator(model_dir).train(
        lambda: tf.data.Dataset.from_tensor_slices((FEATURES, LABELS)).batch(BATCH).repeat(),
        hooks=[recorder],
        max_steps=max_steps,
    )
    return recorder.losses


def fit(twin, first, last, hooks):
    recorder = LossRecorder()
    twin.fit(
        FEATURES,
        LABELS,
        batch_size=BATCH,
        shuffle=False,
        verbose=0,
        initial_epoch=first // STEPS_PER_EPOCH,
        epochs=last // STEPS_PER_EPOCH,
        callbacks=[hookbridge.HookCallback(lambda: [recorder, *hooks()])],
    )
    return recorder.losses


def differ(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return f"{len(a)} losses, max relative difference {np.max(np.abs(a - b) / np.abs(b)):.1e}"


def main(out):
    model_dir, native = os.path.join(out, "model_dir"), os.path.join(out, "native")
    shutil.rmtree(out, ignore_errors=True)
    train(model_dir, 40)                                    # 1. the Estimator job
    shutil.copytree(model_dir, native)
    native_losses = train(native, 80) + train(native, 120)  # the reference, natively
    twin = hookbridge.keras_twin(estimator(model_dir))      # 2. the switch
    step = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    print(f"restored at step {step}: {len(twin.weights)} weights, optimizer "
          f"{type(twin.optimizer).__name__}(learning_rate="
          f"{float(twin.optimizer.learning_rate.numpy()):g})")
    keras_losses = fit(twin, 40, 80, lambda: hookbridge.estimator_hooks(
        model_dir, model=twin, **RUN_CONFIG))
    print("Keras 40 -> 80 vs the Estimator:", differ(keras_losses, native_losses[:40]))
    ours, theirs = (tf.train.load_checkpoint(os.path.join(d, "model.ckpt-80"))
                    for d in (model_dir, native))
    names = sorted(theirs.get_variable_to_shape_map())
    assert sorted(ours.get_variable_to_shape_map()) == names
    gap = max(float(np.max(np.abs(ours.get_tensor(n) - theirs.get_tensor(n)))) for n in names)
    print(f"Keras's model.ckpt-80 vs the Estimator's: the same {len(names)} variables "
          f"({', '.join(n for n in names if 'Adagrad/dnn/logits' in n)}, ...), "
          f"max absolute difference {gap:.1e}")
    back = os.path.join(out, "back")                        # 3. the way back
    shutil.copytree(model_dir, back)
    back_losses = train(back, 120)
    more = fit(twin, 80, 120, lambda: [])
    print("Estimator 80 -> 120 from Keras's checkpoint vs Keras:", differ(back_losses, more))
    print("  ... vs the Estimator all along:", differ(back_losses, native_losses[40:]))
    rollback = os.path.join(out, "rollback")                # 4. rolling back
    shutil.copytree(os.path.join(model_dir, "estimator-backup"), rollback)
    print("rolled back to", os.path.basename(tf.train.latest_checkpoint(rollback)) + ":",
          differ(train(rollback, 80), native_losses[:40]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/hookbridge-canned")
