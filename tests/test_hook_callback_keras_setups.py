"""HookCallback with Keras setups beyond a plain ``compile`` (issue 24, items 13 and 15).

* ``keras.optimizers.SGD(gradient_accumulation_steps=2)`` (Keras 3): ``optimizer.iterations``
  counts updates, not batches, and is computed; hooks see it as the global step, as a native
  ``MonitoredSession`` whose train op advances the step on every other run.
* Keras 3 on a backend other than TensorFlow: ``HookCallback(...)`` refuses at construction.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from conftest import KERAS3, make_data, step_reads

import hookbridge
from hookbridge._hook_callback.keras_access import require_tensorflow_backend

train = tf.compat.v1.train
keras = tf.keras


class StepPairs(train.SessionRunHook):
    """Per run: the global step fetched with it (stale) and read after it (fresh)."""

    def begin(self):
        self.gs = train.get_global_step()
        self.seen: list[tuple[int, int]] = []

    def before_run(self, run_context):
        return train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        self.seen.append((int(run_values.results), int(run_context.session.run(self.gs))))


def _hooks(checkpoint_dir):
    return [
        StepPairs(),
        train.StopAtStepHook(last_step=3),
        train.CheckpointSaverHook(str(checkpoint_dir), save_steps=1),
    ]


def _checkpoint_steps(directory):
    state = tf.train.get_checkpoint_state(str(directory))
    return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def _native(hooks, accumulation, runs):
    """A native MonitoredSession whose train op adds 1 to the global step on every
    ``accumulation``-th run (ordered after the step's read), as the optimizer's update."""
    with tf.Graph().as_default():
        gs = train.get_or_create_global_step()
        tf.Variable(np.zeros((4, 1), np.float32), name="kernel")  # something to checkpoint
        inc = tf.compat.v1.placeholder(tf.int64, [])
        with tf.control_dependencies(step_reads(gs)):
            train_op = tf.compat.v1.assign_add(gs, inc)
        made = 0
        with train.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop() and made < runs:
                made += 1
                sess.run(train_op, {inc: 1 if made % accumulation == 0 else 0})
    return made


@pytest.mark.skipif(not KERAS3, reason="gradient_accumulation_steps is a Keras 3 option")
def test_gradient_accumulation_global_step_is_optimizer_iterations(tmp_path):
    """Every HookCallback failed at fit's start with 'Graph is finalized and cannot be
    modified.' (iterations is computed; it was read while the bridge's graph was the default).
    Now: StopAtStepHook stops when iterations reaches 3 (after 6 batches), the checkpoints are
    those of the native run, named by iterations."""
    native_hooks = _hooks(tmp_path / "native")
    native_runs = _native(native_hooks, 2, 20)
    x, y = make_data(n=16 * 20)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01, gradient_accumulation_steps=2), loss="mse")
    hooks = _hooks(tmp_path / "bridged")
    iterations: list[int] = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: iterations.append(
            int(model.optimizer.iterations.numpy())
        )
    )
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False,
              callbacks=[hookbridge.HookCallback(hooks), record])
    assert native_runs == len(iterations) == 6
    assert iterations == [0, 1, 1, 2, 2, 3]
    assert hooks[0].seen == native_hooks[0].seen == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3)]
    assert _checkpoint_steps(tmp_path / "bridged") == _checkpoint_steps(tmp_path / "native")
    assert _checkpoint_steps(tmp_path / "bridged")[-1] == 3 == int(model.optimizer.iterations)
    reader = tf.train.load_checkpoint(str(tmp_path / "bridged"))
    assert int(reader.get_tensor("global_step")) == 3


# -- item 15: a backend other than TensorFlow -------------------------------------------------
def test_a_backend_other_than_tensorflow_is_refused_naming_it():
    require_tensorflow_backend("tensorflow")  # this process's: accepted
    hookbridge.HookCallback([train.StopAtStepHook(last_step=1)])
    for backend in ("jax", "torch", "numpy"):
        with pytest.raises(RuntimeError) as info:
            require_tensorflow_backend(backend)
        message = str(info.value)
        assert f"'{backend}'" in message and "KERAS_BACKEND=tensorflow" in message
        assert "TensorFlow graphs" in message  # why


_CHILD = textwrap.dedent(
    """
    import sys
    try:
        import keras
        keras.backend.backend()
    except Exception as e:  # the backend's own packages are missing
        print("UNAVAILABLE", type(e).__name__, e)
        sys.exit(0)
    import tensorflow as tf
    import hookbridge
    try:
        hookbridge.HookCallback([tf.compat.v1.train.StopAtStepHook(last_step=1)])
    except RuntimeError as e:
        print("REFUSED", e)
    else:
        print("ACCEPTED")
    """
)


@pytest.mark.skipif(not KERAS3, reason="Keras 3 backends")
@pytest.mark.parametrize("backend", ["jax", "numpy", "torch"])
def test_hookcallback_under_keras_backend_env_raises_at_construction(backend):
    """In a fresh process with KERAS_BACKEND set, as a user would: HookCallback(...) raises,
    naming the backend. (Keras 3's numpy backend imports jax and scipy: without them no
    non-TensorFlow backend can start here, and the test says so.)"""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if out.stdout.startswith("UNAVAILABLE"):
        pytest.skip(f"Keras's {backend} backend cannot start here: {out.stdout.strip()}")
    assert out.stdout.startswith("REFUSED"), out.stdout
    assert f"'{backend}'" in out.stdout
