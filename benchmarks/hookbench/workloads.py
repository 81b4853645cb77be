"""What every case trains: data, models, the standard hook set and its Keras equivalents."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

v1 = tf.compat.v1

BATCH = 32
IN, HIDDEN, OUT = 32, 64, 1
WIDE = 10 * HIDDEN
#: The realistic case: a small convolutional network on 32x32x3 images, 10 classes.
IMAGE, CLASSES = (32, 32, 3), 10


# ------------------------------------------------------------------------------------- data
def _arrays(n: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, IN)).astype(np.float32)
    w = rng.standard_normal((IN, OUT)).astype(np.float32)
    y = (np.tanh(x @ w) + 0.1 * rng.standard_normal((n, OUT))).astype(np.float32)
    return x, y


def dataset() -> tf.data.Dataset:
    """The MLP's input: 4,096 regression samples, repeated, in batches of 32."""
    x, y = _arrays()
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .repeat()
        .batch(BATCH, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def image_dataset(n: int = 1024) -> tf.data.Dataset:
    """The CNN's input: ``n`` random 32x32x3 images with integer labels, repeated, batches of 32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, *IMAGE)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(n,)).astype(np.int32)
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .repeat()
        .batch(BATCH, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


# ----------------------------------------------------------------------------------- models
def keras_mlp(hidden: int) -> Any:
    """The Keras MLP every ``fit`` case trains (32 -> hidden -> 1, ReLU, Adam, MSE)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((IN,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(OUT),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


def keras_cnn() -> Any:
    """A small convolutional network on 32x32x3 images: a step is real work on a CPU."""
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input(IMAGE),
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(64, activation="relu"),
            layers.Dense(CLASSES),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def graph_mlp(hidden: int) -> tuple[Any, Any]:
    """A TF1 graph MLP of the same size as the Keras one, with a real Adam train op."""
    x, y = v1.data.make_one_shot_iterator(dataset()).get_next()
    glorot = v1.glorot_uniform_initializer(seed=0)
    w1 = v1.get_variable("w1", [IN, hidden], initializer=glorot)
    b1 = v1.get_variable("b1", [hidden], initializer=v1.zeros_initializer())
    w2 = v1.get_variable("w2", [hidden, OUT], initializer=glorot)
    b2 = v1.get_variable("b2", [OUT], initializer=v1.zeros_initializer())
    pred = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    step = v1.train.get_or_create_global_step()
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
    return train_op, loss


# ----------------------------------------------------------------------------------- hooks
class IdleHook(v1.train.SessionRunHook):
    """A hook that fetches nothing: ``before_run`` returns None, ``after_run`` does nothing."""

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass


def standard_hooks(outdir: str, num_steps: int) -> Callable[[], list]:
    """The standard TF1 hook set, in the hooks-callable form (built on the bridge's graph):
    StopAtStep, NanTensor, LoggingTensor and StepCounter (every 100 steps), SummarySaver (a loss
    scalar every 100 steps), CheckpointSaver (every 500 steps)."""

    def make() -> list:
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        summary_op = v1.summary.scalar("loss", loss)
        return [
            v1.train.StopAtStepHook(num_steps=num_steps),
            v1.train.NanTensorHook("loss:0"),
            v1.train.LoggingTensorHook({"loss": "loss:0"}, every_n_iter=100),
            v1.train.StepCounterHook(every_n_steps=100, output_dir=outdir),
            v1.train.SummarySaverHook(save_steps=100, output_dir=outdir, summary_op=summary_op),
            v1.train.CheckpointSaverHook(outdir, save_steps=500),
        ]

    return make


# --------------------------------------------------------------------- Keras equivalents
class StepsPerSec(keras.callbacks.Callback):
    """Hand-written equivalent of StepCounterHook(100): logs steps/sec every 100 steps."""

    def __init__(self, every: int = 100) -> None:
        super().__init__()
        self.every = every
        self._t = None

    def on_train_batch_end(self, batch, logs=None):
        if batch % self.every == 0:
            now = time.perf_counter()
            if self._t is not None:
                v1.logging.info("global_step/sec: %g", self.every / (now - self._t))
            self._t = now


class NoopCallback(keras.callbacks.Callback):
    """Overrides the batch methods HookCallback overrides, and does nothing: what Keras charges
    any per-batch callback."""

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        pass


def keras_equivalents(outdir: str) -> list:
    """Hand-written Keras callbacks doing what the standard hook set does."""

    def log_loss(batch, logs):
        if batch % 100 == 0:
            v1.logging.info("loss = %s", logs.get("loss"))

    return [
        keras.callbacks.TerminateOnNaN(),
        keras.callbacks.LambdaCallback(on_train_batch_end=log_loss),
        StepsPerSec(100),
        keras.callbacks.TensorBoard(
            os.path.join(outdir, "tb"), update_freq=100, write_graph=False, profile_batch=0
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(outdir, "ckpt.weights.h5"), save_weights_only=True, save_freq=500
        ),
    ]


def hook_classes() -> tuple[type, ...]:
    """The hook classes the cases run: attribution separates their own ``before_run`` /
    ``after_run`` time from the bridge's."""
    t = v1.train
    return (
        IdleHook,
        t.NanTensorHook,
        t.StopAtStepHook,
        t.LoggingTensorHook,
        t.StepCounterHook,
        t.SummarySaverHook,
        t.CheckpointSaverHook,
    )


def callback_classes() -> tuple[type, ...]:
    """The Keras callback classes CallbackHook runs in the ``ms_callback_hook`` cases: attribution
    separates their own methods' time (Keras's work, e.g. EarlyStopping's comparison at each
    epoch end) from the bridge's."""
    c = keras.callbacks
    return (c.History, c.EarlyStopping, c.CSVLogger, c.TerminateOnNaN)



class Tf1Equivalent(v1.train.SessionRunHook):
    """One hand-written TF1 hook doing what ``ms_callback_hook``'s Keras callbacks do (History,
    EarlyStopping, CSVLogger, TerminateOnNaN): the loss fetched every step, checked for NaN,
    averaged per epoch of ``steps_per_epoch`` steps (weighted by the batch size, as Keras), each
    epoch's mean kept, compared with the best (patience never reached) and written as a CSV row.
    What a TF1 user would write instead of bridging the callbacks."""

    def __init__(self, csv_path: str, steps_per_epoch: int = 100) -> None:
        self.csv_path, self.steps_per_epoch = csv_path, steps_per_epoch
        self.history: list[float] = []
        self.best, self.wait, self.patience = float("inf"), 0, 10**9

    def begin(self):
        self.loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        self.total, self.count, self.step, self.epoch = 0.0, 0, 0, 0
        self.file = open(self.csv_path, "w")  # noqa: SIM115 - closed in end()
        self.file.write("epoch,loss\n")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.loss)

    def after_run(self, run_context, run_values):
        loss = float(run_values.results)
        if np.isnan(loss) or np.isinf(loss):
            run_context.request_stop()
        self.total += loss * BATCH
        self.count += BATCH
        self.step += 1
        if self.step % self.steps_per_epoch == 0:
            mean = self.total / self.count
            self.history.append(mean)
            if mean < self.best:
                self.best, self.wait = mean, 0
            else:
                self.wait += 1
                if self.wait >= self.patience:
                    run_context.request_stop()
            self.file.write(f"{self.epoch},{mean}\n")
            self.file.flush()
            self.epoch += 1
            self.total, self.count = 0.0, 0

    def end(self, session):
        self.file.close()
