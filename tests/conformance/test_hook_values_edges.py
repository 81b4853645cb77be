"""Issue 24: every value a hook reads under HookCallback is exact, or refused with a clear message.

Each test runs the scenario natively beside the bridged ``fit``: a native TF1 ``MonitoredSession``
for what a hook sees in TF1 (global steps, checkpoints, NaN checks), or native Keras (its own batch
logs, ``optimizer.iterations``, or the batch's value computed directly from the model's weights
before the step) for what a batch value must be.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

keras = tf.keras
T = tf.compat.v1.train
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")


class StepRecorder(T.SessionRunHook):
    """Records the global step fetched in the step's run (stale) and read in ``after_run``."""

    def begin(self):
        self.step = T.get_global_step()
        self.got = []

    def before_run(self, run_context):
        return T.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
        self.got.append((int(run_values.results), int(run_context.session.run(self.step))))


def _native_steps(increments, checkpoint_dir):
    """TF1: one ``run`` per execution, the train op advancing the global step by the steps that
    execution ran (ordered after the hooks' fetch, as the train op's increment is)."""
    with tf.Graph().as_default():
        gs = T.get_or_create_global_step()
        inc = tf.compat.v1.placeholder(tf.int64, [])
        w = tf.compat.v1.get_variable("w", initializer=np.float32(1.0))
        read = tf.identity(gs)
        with tf.control_dependencies([read]):
            train = gs.assign_add(inc)
        recorder = StepRecorder()
        saver = T.CheckpointSaverHook(checkpoint_dir, save_steps=1000)
        with T.MonitoredSession(hooks=[recorder, saver]) as sess:
            for k in increments:
                sess.run(train, {inc: k})
        del w
    return recorder.got


# -- item 1: steps_per_execution with an epoch that is not a multiple of k ----------------------
@pytest.mark.parametrize("k", [3, 4])
def test_global_step_is_iterations_under_steps_per_execution_ragged_epoch(tmp_path, k):
    """10 steps per epoch, ``steps_per_execution=k``, 2 epochs: the last execution of each epoch
    runs fewer than k steps. The hooks see ``optimizer.iterations`` (read by a Keras callback
    after them) in the stale fetch and in ``after_run``, ``CheckpointSaverHook`` writes the
    final step's checkpoint and ``restore_checkpoint`` returns it, as the native session does."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=k)
    iterations = []

    class Iterations(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            iterations.append(int(self.model.optimizer.iterations.numpy()))

    bridged_dir = str(tmp_path / "bridged")
    bridge = hookbridge.HookCallback(
        lambda: [StepRecorder(), T.CheckpointSaverHook(bridged_dir, save_steps=1000)]
    )
    x = np.zeros((10, 1), "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with bridge:
            model.fit(x, x, batch_size=1, epochs=2, verbose=0, callbacks=[bridge, Iterations()])
    assert iterations[-1] == int(model.optimizer.iterations.numpy()) == 20
    increments = np.diff([0, *iterations]).tolist()
    native = _native_steps(increments, str(tmp_path / "native"))
    bridged = bridge.hooks[0].got
    assert bridged == native
    assert [after for _, after in bridged] == iterations
    native_ckpt = os.path.basename(T.latest_checkpoint(str(tmp_path / "native")))
    assert os.path.basename(T.latest_checkpoint(bridged_dir)) == native_ckpt == "model.ckpt-20"
    fresh = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    fresh.compile(keras.optimizers.SGD(0.01), "mse")
    assert hookbridge.restore_checkpoint(fresh, bridged_dir) == 20
