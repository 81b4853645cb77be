"""An Estimator-era training script moved to Keras ``fit``, keeping its TF1 hooks.

The TF1 original (sketch)::

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(tf.layers.dense(features, 16, tf.nn.relu), 1)
        loss = tf.losses.mean_squared_error(labels, logits)
        train_op = tf.train.AdamOptimizer(0.01).minimize(loss, tf.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    hooks = [tf.train.StopAtStepHook(last_step=40),
             tf.train.CheckpointSaverHook(model_dir, save_steps=10),
             tf.train.LoggingTensorHook({"loss": "loss"}, every_n_iter=10)]
    tf.estimator.Estimator(model_fn, model_dir).train(input_fn, hooks=hooks)

After the move the model is Keras, the hooks are the same objects, and a restarted job resumes
from the hooks' checkpoint with ``hookbridge.restore_checkpoint``.

Run: python examples/estimator_to_fit.py [MODEL_DIR]
(without MODEL_DIR: a temporary folder, removed when the script ends)
"""

import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
BATCH = 16


def make_model():
    keras = tf.keras
    model = keras.Sequential(
        [keras.Input(shape=(3,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    return model


def hooks(model_dir, last_step):
    # Same hooks as the Estimator script; "loss" names the bridge's batch-loss tensor. Called by
    # HookCallback while its graph is the default graph, so get_global_step() finds its step.
    # (Not the name "global_step": in TF2's v1 graphs the global step is a resource variable and
    # "global_step:0" is its handle, natively as under the bridge.)
    return [
        v1.train.StopAtStepHook(last_step=last_step),
        v1.train.CheckpointSaverHook(model_dir, save_steps=10),
        v1.train.LoggingTensorHook(
            {"loss": "loss", "step": v1.train.get_global_step()}, every_n_iter=10
        ),
    ]


def train(model_dir, x, y, last_step):
    """One run of the training job: resumes from model_dir's latest checkpoint if there is one."""
    model = make_model()
    step = 0
    if tf.train.latest_checkpoint(model_dir):
        step = hookbridge.restore_checkpoint(model, model_dir)
        print(
            f"resumed from {os.path.basename(tf.train.latest_checkpoint(model_dir))} "
            f"at global step {step}"
        )
    steps_per_epoch = len(x) // BATCH
    model.fit(
        x,
        y,
        batch_size=BATCH,
        epochs=100,
        initial_epoch=step // steps_per_epoch,
        verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: hooks(model_dir, last_step))],
    )
    step = int(model.optimizer.iterations.numpy())
    print(f"stopped at global step {step}, mse {model.evaluate(x, y, verbose=0):.4f}")
    return model


def main(model_dir):
    tf.keras.utils.set_random_seed(0)  # Python, NumPy, TF and Keras: the same run every time
    v1.logging.set_verbosity(v1.logging.INFO)  # LoggingTensorHook logs through tf.logging
    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], "float32")) + 0.1

    train(model_dir, x, y, last_step=20)  # the job is preempted at step 20 ...
    train(model_dir, x, y, last_step=40)  # ... and restarted: it continues to step 40
    state = tf.train.get_checkpoint_state(model_dir)
    print("checkpoints:", [os.path.basename(p) for p in state.all_model_checkpoint_paths])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(f"writing to {sys.argv[1]}")
        main(sys.argv[1])
    else:  # a temporary folder, removed when the script ends
        with tempfile.TemporaryDirectory(prefix="estimator_to_fit_") as folder:
            print(f"writing to {folder} (temporary, removed at exit; pass a folder to keep it)")
            main(folder)
