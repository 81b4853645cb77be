"""The hooks of the multi-worker stop scenarios, shared by the worker script (bridged, under
MultiWorkerMirroredStrategy) and the test's native TF1 oracle (a MonitoredSession), so both
run the very same hook code.

Each scenario names the hooks of the worker that asks (or fails) and the step it does so at;
the other worker runs no stopping hook. The global step a run ends on is the stale step fetched
in the run plus one, natively and under HookCallback alike.
"""

from __future__ import annotations

import tensorflow as tf

v1 = tf.compat.v1

#: Steps per epoch and epochs of every scenario's fit (so a stop happens before the end).
STEPS_PER_EPOCH, EPOCHS = 4, 3
#: The step whose loss is NaN in the ``nan_chief`` scenario.
NAN_STEP = 3


class _StepHook(v1.train.SessionRunHook):
    """Fetches the global step in each run; ``on_step(ctx, step)`` gets the step the run ends on."""

    def __init__(self, at: int) -> None:
        self.at = at
        self._step = None

    def begin(self):
        self._step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        self.on_step(run_context, int(run_values.results) + 1)

    def on_step(self, run_context, step: int) -> None:
        raise NotImplementedError


class AskStopAt(_StepHook):
    """``run_context.request_stop()`` in the run that ends on step ``at``."""

    def on_step(self, run_context, step):
        if step >= self.at:
            run_context.request_stop()


class CoordStopAt(_StepHook):
    """``coord.request_stop()`` (the coordinator given to ``after_create_session``) at ``at``."""

    def after_create_session(self, session, coord):
        self.coord = coord

    def on_step(self, run_context, step):
        if step >= self.at:
            self.coord.request_stop()


class RaiseAfterRunAt(_StepHook):
    """Raises from ``after_run`` of the run that ends on step ``at``."""

    def on_step(self, run_context, step):
        if step >= self.at:
            raise RuntimeError(f"RaiseAfterRunAt: failed at step {step}")


class RaiseBeforeRunAt(v1.train.SessionRunHook):
    """Raises from ``before_run`` of the ``at``-th run (natively that run's train op never runs)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0

    def before_run(self, run_context):
        self.calls += 1
        if self.calls >= self.at:
            raise RuntimeError(f"RaiseBeforeRunAt: failed before run {self.calls}")


class RaiseInBegin(v1.train.SessionRunHook):
    """Raises from ``begin()``: the session is never created."""

    def begin(self):
        raise RuntimeError("RaiseInBegin: failed in begin")


def stop_at_batch(model, batch: int):
    """A Keras callback setting ``model.stop_training`` at the end of batch ``batch`` (0-based)."""
    return tf.keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: setattr(model, "stop_training", b >= batch)
    )


def nan_hook() -> v1.train.NanTensorHook:
    """A ``NanTensorHook`` on the loss, built in the hooks' graph (``fail_on_nan_loss=True``)."""
    return v1.train.NanTensorHook(v1.get_default_graph().get_tensor_by_name("loss:0"))


def alike_hooks(last_step: int):
    """docs/distributed.md's hooks: StopAtStepHook and NanTensorHook on loss:0 (which decide
    alike on every worker running them), the file writers' stand-ins chief-only."""

    def make():
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        return [
            v1.train.StopAtStepHook(last_step=last_step),
            v1.train.NanTensorHook(loss),
        ]

    def chief():
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        return [
            v1.train.StepCounterHook(every_n_steps=2),
            v1.train.LoggingTensorHook({"loss": loss}, every_n_iter=2),
        ]

    return make, chief


#: scenario -> (the worker whose hooks ask or fail, hooks factory, passed as chief_only_hooks?)
SCENARIOS = {
    "stop_at_step": (0, lambda: [v1.train.StopAtStepHook(last_step=5)], True),
    "request_stop": (1, lambda: [AskStopAt(3)], False),
    "nan_loss": (0, lambda: [nan_hook()], True),
    "coordinator_stop": (1, lambda: [CoordStopAt(2)], False),
    "raise_after_run": (1, lambda: [RaiseAfterRunAt(4)], False),
    "raise_before_run": (1, lambda: [RaiseBeforeRunAt(2)], False),
    "raise_in_begin": (1, lambda: [RaiseInBegin()], False),
}
