"""A hook and the callbacks meant to replace it: the targets of ``check --replaced-by`` tests.

``LossLogHook`` logs and writes ``loss.csv`` (the batch loss every ``every_n`` global steps) and
stops training at ``last_step``. ``FaithfulLossLog`` does the same from Keras's logs (the batch
loss recovered from the epoch's running mean: exact with batches of one size); ``RunningMeanLog``
writes the running mean itself (the usual first attempt); ``make_noop`` does nothing.
"""

from __future__ import annotations

import csv
import os
from typing import ClassVar

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def _row(step: int, loss: float) -> None:
    v1.logging.info("loss = %s, step = %d", round(float(loss), 6), step)
    new = not os.path.exists("loss.csv")
    with open("loss.csv", "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["step", "loss"])
        writer.writerow([step, round(float(loss), 6)])


class LossLogHook(v1.train.SessionRunHook):
    def __init__(self, every_n: int = 2, last_step: int = 5) -> None:
        self.every_n, self.last_step = every_n, last_step

    def begin(self) -> None:
        self.step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({"loss": "loss:0", "step": self.step})

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"]) + 1  # the step this run completed
        if step % self.every_n == 0:
            _row(step, run_values.results["loss"])
        if step >= self.last_step:
            run_context.request_stop()


class FaithfulLossLog(tf.keras.callbacks.Callback):
    def __init__(self, every_n: int = 2, last_step: int = 5) -> None:
        super().__init__()
        self.every_n, self.last_step = every_n, last_step

    def on_epoch_begin(self, epoch, logs=None):
        self.previous_mean = 0.0

    def on_train_batch_end(self, batch, logs=None):
        mean = float(logs["loss"])
        loss = (batch + 1) * mean - batch * self.previous_mean  # the batch's own loss
        self.previous_mean = mean
        step = int(np.asarray(self.model.optimizer.iterations))
        if step % self.every_n == 0:
            _row(step, loss)
        if step >= self.last_step:
            self.model.stop_training = True


class RunningMeanLog(FaithfulLossLog):
    def on_train_batch_end(self, batch, logs=None):
        step = int(np.asarray(self.model.optimizer.iterations))
        if step % self.every_n == 0:
            _row(step, logs["loss"])
        if step >= self.last_step:
            self.model.stop_training = True


class SilentHook(v1.train.SessionRunHook):
    """Counts steps in memory only: nothing check can observe."""

    def after_run(self, run_context, run_values):
        self.count = getattr(self, "count", 0) + 1


def make_hook():
    return LossLogHook()


def make_faithful():
    return FaithfulLossLog()


def make_running_mean():
    return RunningMeanLog()


def make_noop():
    return tf.keras.callbacks.Callback()


def make_checkpoint_hook():
    return v1.train.CheckpointSaverHook("ckpt", save_steps=3)


def regression():
    """A user's model and data: 12 samples of a linear function, a Dense(1), SGD."""
    import keras

    rng = np.random.default_rng(1)
    x = rng.standard_normal((12, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return model, x, y


class MaeWatcher(v1.train.SessionRunHook):
    """Reads the ``mae`` metric by name: in check's default graph only with ``--model``."""

    def before_run(self, run_context):
        return v1.train.SessionRunArgs("mae:0")

    def after_run(self, run_context, run_values):
        v1.logging.info("mae = %s", round(float(run_values.results), 4))


def regression_model_only():
    """The same model without data: check feeds it standard-normal inputs and its own
    predictions as targets."""
    return regression()[0]


class GraphLister(v1.train.SessionRunHook):
    """Records the tensors and variables of the graph it is given (check's default graphs)."""

    seen: ClassVar[list] = []

    def begin(self) -> None:
        graph = v1.get_default_graph()
        kinds = ("PlaceholderWithDefault", "Placeholder", "VarHandleOp", "VariableV2", "Identity")
        names = {
            op.name
            for op in graph.get_operations()
            if op.type in kinds and not op.name.startswith(("hookbridge/", "global_step/"))
        }
        GraphLister.seen.append(sorted(names))
