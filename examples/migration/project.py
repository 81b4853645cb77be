"""The small project the migration walk-through moves, stage by stage (docs/migration.md).

A regression on 3 features with a 3-8-1 network, trained with plain SGD on 64 examples in
batches of 16 (4 steps per pass), and its TF1 pieces as an Estimator job wrote them: ``model_fn``
(variables ``dnn/hiddenlayer_0/*`` and ``dnn/logits/*``, as a canned DNNRegressor names them),
``input_fn`` and the ``RunConfig``. ``team_hooks.py`` holds the team's own hook and its Keras
replacement. The stage scripts import what they need from here.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
BATCH = 16
STEPS_PER_EPOCH = 4
LEARNING_RATE = 0.05
#: The Estimator job's RunConfig (also given to hookbridge.estimator_hooks after the switch).
RUN_CONFIG = {
    "save_checkpoints_steps": 10,
    "save_summary_steps": 5,
    "log_step_count_steps": 10,
    "keep_checkpoint_max": 3,
}


def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * STEPS_PER_EPOCH, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")
    return x, y


# ----------------------------------------------------------------------------- TF1 side
def model_fn(features, labels, mode):
    h = features
    for scope, units, act in (("dnn/hiddenlayer_0", 8, tf.nn.relu), ("dnn/logits", 1, None)):
        with v1.variable_scope(scope):
            kernel = v1.get_variable("kernel", [h.shape[-1], units])
            bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
        h = tf.matmul(h, kernel) + bias
        h = act(h) if act else h
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=h)
    # Named for hooks and CallbackHook logs; not "loss", which Estimator's summary takes.
    loss = tf.identity(v1.losses.mean_squared_error(labels, h), name="batch_loss")
    train_op = v1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
        loss, v1.train.get_global_step()
    )
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x, y = data()
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).repeat()


def estimator(model_dir: str):
    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=0, **RUN_CONFIG)
    return tf.estimator.Estimator(model_fn, config=config)


# --------------------------------------------------------------------------- Keras side
def keras_model():
    keras = tf.keras
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.SGD(LEARNING_RATE), loss="mse")
    return model


# ------------------------------------------------------------------------------ scripts
def out_dir(default: str) -> str:
    """The output directory (first argument, else ``default``), created; says where it writes."""
    path = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default)
    os.makedirs(path, exist_ok=True)
    print(f"writing to {path}")
    return path


def model_dir(out: str) -> str:
    return os.path.join(out, "model_dir")
