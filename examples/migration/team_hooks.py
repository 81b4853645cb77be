"""The team's own hook, and the Keras callback that replaces it in stage 3.

``LossHistoryHook`` appends ``step,loss`` to a CSV every ``every_n`` steps (the batch loss TF1
fetched). ``LossHistory`` is its Keras replacement: the same file from ``on_train_batch_end``.
One difference is inherent and shows in the file: Keras logs carry the running mean of the
epoch's batch losses, not the batch loss (see docs/migration.md, stage 3).

The ``make_*`` factories are what ``hookbridge check`` runs (``--steps``/``--steps-per-epoch``):
``hookbridge check team_hooks:make_history_hook`` and
``hookbridge check --callback team_hooks:make_history_callback``.
"""

from __future__ import annotations

import csv
import os

import tensorflow as tf

v1 = tf.compat.v1


def _append(path: str | None, rows: list[tuple[int, float]], step: int, loss: float) -> None:
    rows.append((step, round(float(loss), 6)))
    if path is None:
        return
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(["step", "loss"])
        writer.writerow(rows[-1])


class LossHistoryHook(v1.train.SessionRunHook):
    """TF1: the loss every ``every_n`` global steps, by the tensor's name."""

    def __init__(self, path: str | None = None, every_n: int = 5, loss: str = "batch_loss:0"):
        self.path, self.every_n, self.loss = path, every_n, loss
        self.rows: list[tuple[int, float]] = []

    def begin(self) -> None:
        self._step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({"step": self._step, "loss": self.loss})

    def after_run(self, run_context, run_values):
        step = int(run_values.results["step"]) + 1  # the step this run completes
        if step % self.every_n == 0:
            _append(self.path, self.rows, step, run_values.results["loss"])


class LossHistory(tf.keras.callbacks.Callback):
    """Keras: the same rows, from the logs (the epoch's running mean loss) and the iterations."""

    def __init__(self, path: str | None = None, every_n: int = 5):
        super().__init__()
        self.path, self.every_n = path, every_n
        self.rows: list[tuple[int, float]] = []

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.model.optimizer.iterations.numpy())
        if step % self.every_n == 0:
            _append(self.path, self.rows, step, logs["loss"])


def make_history_hook():
    """For ``hookbridge check``: the hook reading the bridge's batch loss, named ``loss``."""
    return LossHistoryHook(every_n=2, loss="loss:0")


def make_history_callback():
    return LossHistory(every_n=2)


def make_terminate_on_nan():
    return tf.keras.callbacks.TerminateOnNaN()


def make_history_hook_csv():
    """For ``hookbridge check --replaced-by``: the hook writing ``loss_history.csv`` (relative:
    check runs each side in its own empty folder and compares the files)."""
    return LossHistoryHook("loss_history.csv", every_n=2, loss="loss:0")


def make_history_callback_csv():
    return LossHistory("loss_history.csv", every_n=2)
