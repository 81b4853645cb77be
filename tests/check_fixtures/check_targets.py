"""Hooks and callbacks a team might own: the targets of tests/test_check.py."""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1


class LossEveryN(v1.train.SessionRunHook):
    """Conforms: fetches the loss and the global step every ``n`` steps, by name."""

    def __init__(self, n: int = 2) -> None:
        self.n = n
        self.seen: list = []

    def begin(self) -> None:
        self.step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs({"loss": "loss:0", "step": self.step})

    def after_run(self, run_context, run_values):
        if run_values.results["step"] % self.n == 0:
            self.seen.append(run_values.results["loss"])


def make_loss_every_2():
    return LossEveryN(2)


class DenseWatcher(v1.train.SessionRunHook):
    """Does not conform: watches the ``dense`` scope's variables, which only the TF1 graph has."""

    def begin(self) -> None:
        self.variables = v1.trainable_variables("dense")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.variables)

    def after_run(self, run_context, run_values):
        pass


def make_early_stopping():
    return tf.keras.callbacks.EarlyStopping(monitor="loss", patience=1)


def make_two():
    return [LossEveryN(1), v1.train.StopAtStepHook(last_step=4)]


def broken_factory():
    raise RuntimeError("the factory itself is broken")


A_HOOK_INSTANCE = LossEveryN(3)
NOT_CALLABLE = 42


_CALLS = []


def callback_failing_the_second_time():
    """Builds natively, raises when the bridged world asks for its own instance."""
    _CALLS.append(1)
    if len(_CALLS) % 2 == 0:
        raise RuntimeError("second call")
    return tf.keras.callbacks.History()
