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
import warnings

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


# -- issue 31 item 12: a custom train_step applying gradients on every second batch ----------
class EverySecondBatch(keras.Model):
    """Manual accumulation's step counting: a custom ``train_step`` that applies the gradients
    on every second batch only (``tf.cond`` inside the compiled step), so ``iterations`` goes
    0, 1, 1, 2, ... as batches go 1, 2, 3, 4."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.batches = tf.Variable(0, dtype=tf.int64, trainable=False)

    def call(self, x):
        return self.dense(x)

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(x, training=True) - y))
        grads = tape.gradient(loss, self.trainable_variables)
        self.batches.assign_add(1)

        def apply():
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return tf.constant(0)

        tf.cond(self.batches % 2 == 0, apply, lambda: tf.constant(0))
        return {"loss": loss}


def _every_second_batch_model():
    keras.utils.set_random_seed(0)
    model = EverySecondBatch()
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    model(np.zeros((1, 4), np.float32))
    model.optimizer.build(model.trainable_variables)  # no variable made inside the tf.cond
    return model


def _iterations_per_batch(model, sink):
    return keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: sink.append(int(model.optimizer.iterations.numpy()))
    )


def test_custom_train_step_applying_every_second_batch_global_step_is_iterations(tmp_path):
    """Hooks read 0, 1, 2, 3 (the bridge counted one per batch) where iterations was 0, 1, 1, 2;
    StopAtStepHook(last_step=3) stopped after 4 batches instead of 6, checkpoints were named by
    batches. Now the steps, the stop and the checkpoints are the native run's, whose train op
    advances the global step on every second run."""
    native_hooks = _hooks(tmp_path / "native")
    native_runs = _native(native_hooks, 2, 20)
    x, y = make_data(n=16 * 20)
    model = _every_second_batch_model()
    hooks = _hooks(tmp_path / "bridged")
    iterations: list[int] = []
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False,
              callbacks=[hookbridge.HookCallback(hooks), _iterations_per_batch(model, iterations)])
    assert native_runs == len(iterations) == 6
    assert iterations == [0, 1, 1, 2, 2, 3]
    assert hooks[0].seen == native_hooks[0].seen == [(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 3)]
    assert _checkpoint_steps(tmp_path / "bridged") == _checkpoint_steps(tmp_path / "native")
    reader = tf.train.load_checkpoint(str(tmp_path / "bridged"))
    assert int(reader.get_tensor("global_step")) == 3 == int(model.optimizer.iterations.numpy())


def test_a_custom_loop_applying_every_second_batch_global_step_is_iterations(tmp_path):
    """The same accumulation in a ``CallbackLoop`` on a plain ``Sequential`` (Keras's own
    ``train_step``, which the loop never runs): the step is the user's function, so the bridge
    reads iterations after every step there too."""
    native_hooks = _hooks(tmp_path / "native")
    native_runs = _native(native_hooks, 2, 20)
    x, y = make_data(n=16 * 20)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01))
    model.optimizer.build(model.trainable_variables)
    step = tf.function(EverySecondBatch.train_step.__get__(model))
    model.batches = tf.Variable(0, dtype=tf.int64, trainable=False)
    hooks = _hooks(tmp_path / "bridged")
    iterations: list[int] = []
    loop = hookbridge.CallbackLoop(
        model, [hookbridge.HookCallback(hooks), _iterations_per_batch(model, iterations)], epochs=1
    )
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    with loop:
        for _ in loop.epochs():
            for xb, yb in loop.steps(batches):
                loop.step_end(step((xb, yb)))
    assert native_runs == len(iterations) == 6
    assert hooks[0].seen == native_hooks[0].seen
    assert _checkpoint_steps(tmp_path / "bridged") == _checkpoint_steps(tmp_path / "native")


@pytest.mark.parametrize("write", ["unseen", "watched", "none"])
def test_a_step_count_the_bridge_mispredicted_is_found_at_the_next_epoch_and_read_after(write):
    """Keras's own step and optimizer, so the bridge counts one per step; a callback after it
    adds 1 to iterations after the first batch. Unseen (a raw op on the variable's handle, as a
    checkpoint restore or a step the bridge took for Keras's own): the next epoch's read finds
    4 where the bridge counted 3, warns, and reads after every step from then on, so epoch 1's
    hooks read iterations exactly. Watched (``iterations.assign_add``): read at the next hook
    read, no warning. No write: no warning."""
    x, y = make_data(n=6 * 16)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    pairs = StepPairs()
    iterations = model.optimizer.iterations

    def bump(batch, logs):
        if len(pairs.seen) == 1:  # after the first batch
            if write == "unseen":
                tf.raw_ops.AssignAddVariableOp(
                    resource=iterations.handle, value=tf.constant(1, iterations.dtype)
                )
            elif write == "watched":
                iterations.assign_add(1)

    real: list[int] = []
    callbacks = [
        hookbridge.HookCallback([pairs]),
        _iterations_per_batch(model, real),
        keras.callbacks.LambdaCallback(on_train_batch_end=bump),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=16, epochs=2, steps_per_epoch=3, verbose=0, callbacks=callbacks)
    told = [str(w.message) for w in caught if "where the bridge counted" in str(w.message)]
    shifted = write != "none"
    assert real == ([1, 3, 4, 5, 6, 7] if shifted else [1, 2, 3, 4, 5, 6])
    exact = [(r - 1, r) for r in real]  # as natively: the step's fetch, then the read after it
    if write == "unseen":
        assert len(told) == 1, told
        assert "optimizer.iterations is 4 where the bridge counted 3" in told[0]
        assert pairs.seen[:3] == [(0, 1), (1, 2), (2, 3)]  # counted: docs/limits.md
        assert pairs.seen[3:] == exact[3:]
    else:
        assert told == []
        assert pairs.seen == exact


class EndSeesStep(StepPairs):
    """StepPairs, plus the global step read through the session in ``end()``."""

    def end(self, session):
        self.at_end = int(session.run(self.gs))


OPTIMIZERS = {"keras": lambda: keras.optimizers.Adagrad(0.1)}
if not KERAS3:
    OPTIMIZERS["legacy"] = lambda: keras.optimizers.legacy.Adagrad(0.1)


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_an_input_of_unknown_length_global_step_is_iterations_without_a_warning(optimizer):
    """A filtered dataset (unknown length): each ``fit``'s first epoch ends with a call that
    finds the end of the data (``on_train_batch_begin`` without its ``_end``). Keras 2.11+'s and
    Keras 3's own optimizers count that call in ``iterations`` (their increment waits for
    nothing: the hooks' steps skip one there, as ``iterations`` does); the legacy optimizer does
    not. Either way the hooks read ``iterations`` exactly after each step, with no warning: it is
    Keras's own count, not a misprediction (the bridge warned "where the bridge counted" at
    every such epoch and read after every step from then on). In ``end()`` they see the step
    after the last step taken, as natively (``conformance/test_semantics.py``), whatever
    Keras's optimizer counted after it."""
    x, y = make_data(n=47)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=OPTIMIZERS[optimizer](), loss="mse")
    real: list[int] = []
    ends: list[tuple[int, int]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8).filter(lambda a, b: True)
            pairs = EndSeesStep()
            callbacks = [hookbridge.HookCallback([pairs]), _iterations_per_batch(model, real)]
            model.fit(data, epochs=2, verbose=0, callbacks=callbacks)
            ends.append((pairs.at_end, real[-1]))
            assert [fresh for _, fresh in pairs.seen] == real[-len(pairs.seen) :]
    told = [str(w.message) for w in caught if "where the bridge counted" in str(w.message)]
    assert told == []
    assert len(real) == 2 * 2 * 6  # 6 batches an epoch, the last of 7 rows
    assert all(at_end == last for at_end, last in ends), ends
    counted_the_end = real[-1] > len(real)
    assert counted_the_end == (optimizer == "keras"), real  # what Keras's optimizer does


def test_a_model_keras_builds_on_its_first_batch():
    """No input shape: Keras 3 builds the model before the callbacks' start and the hooks run;
    Keras 2 builds it in the first step, after ``on_train_begin``, where the hooks' graph needs
    its weights: a clear error naming the model and the fix, not Keras's own."""
    x, y = make_data(n=32)
    model = keras.Sequential([keras.layers.Dense(1)], name="built_late")
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    pairs = StepPairs()
    run = lambda: model.fit(  # noqa: E731
        x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([pairs])]
    )
    if KERAS3:
        run()
        assert pairs.seen == [(0, 1), (1, 2), (2, 3), (3, 4)]
    else:
        with pytest.raises(ValueError, match="'built_late' has no weights yet") as raised:
            run()
        assert "model.build(input_shape)" in str(raised.value)


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
