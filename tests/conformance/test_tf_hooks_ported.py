"""TensorFlow's own hook tests that have a ``fit`` counterpart, replayed through HookCallback.

Each test names the TF test it ports (``tensorflow/python/training/basic_session_run_hooks_test.py``
or ``monitored_session_test.py``), keeps its hook arguments and step counts, and runs the same
scenario natively beside the bridged one. TF's tests drive a train op that adds 1 to the global
step; the bridged runs train a small Keras model with SGD, whose step does the same to
``optimizer.iterations``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
from conftest import KERAS3, make_data, make_model, step_reads

import hookbridge
from hookbridge import _tfcompat

train = tf.compat.v1.train
keras = tf.keras


def fit(
    hook_callback, steps, model=None, extra=(), x=None, y=None, loop=False, after=(), per_call=1
):
    """``model.fit`` over ``steps`` batches of 16 with the callbacks ``extra``, ``hook_callback``,
    ``after``; ``loop=True``: the same training as a custom loop (:func:`loop_fit`, ``per_call``
    steps per call: the model's ``steps_per_execution``). Returns the model."""
    if x is None:
        x, y = make_data(n=16 * steps)
    model = model or make_model(reuse=True)
    callbacks = [*extra, hook_callback, *after]
    if loop:
        return loop_fit(model, x, y, callbacks, per_call)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False, callbacks=callbacks)
    return model


def loop_fit(model, x, y, callbacks, per_call=1):
    """``fit``'s training in a custom loop (``hookbridge.CallbackLoop``, docs/custom-loops.md):
    the same batches of 16, a ``GradientTape`` step on the compiled loss (mse), the compiled
    ``mae`` as a metric the step updates; ``HookCallback``'s global step is
    ``model.optimizer.iterations`` there too. ``per_call`` > 1: that many steps per call of the
    step, as ``steps_per_execution`` (the call reports its last step's loss)."""
    loss_fn, mae = keras.losses.MeanSquaredError(), keras.metrics.MeanAbsoluteError(name="mae")

    def step(features, targets):
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = loss_fn(targets, predictions)
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        mae.update_state(targets, predictions)
        return {"loss": loss}

    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    loop = hookbridge.CallbackLoop(
        model, callbacks, data=data, metrics=[mae], steps_per_execution=per_call
    )
    with loop:
        for _ in loop.epochs():
            for batches in loop.steps():
                logs = [step(*batch) for batch in (batches if per_call > 1 else [batches])]
                loop.step_end(logs[-1])
    return model


#: the bridged side of a test: the hooks under HookCallback in fit, and in a custom loop
WORLDS = pytest.mark.parametrize("loop", [False, True], ids=["fit", "loop"])
#: the same, the custom loop in deep only: for a scenario whose hook CI runs in a custom loop
#: elsewhere (CheckpointSaverHook: test_save_steps_saves_periodically here,
#: test_tf_basic_hooks_ported's test_save_secs_calls_listeners_periodically and
#: test_multi_step_save_steps_saves_periodically; StopAtStepHook: test_tf_basic_hooks_ported's
#: test_stop_based_on_num_step, both variants)
FIT_WORLD = pytest.mark.parametrize(
    "loop", [False, pytest.param(True, marks=pytest.mark.deep)], ids=["fit", "loop"]
)


def iterations(model):
    return int(np.asarray(model.optimizer.iterations))


def saved_step(model_dir):
    """``checkpoint_utils.load_variable(model_dir, global_step.name)`` of TF's tests."""
    return int(tf.train.load_checkpoint(model_dir).get_tensor("global_step"))


class MockCheckpointSaverListener(train.CheckpointSaverListener):
    """TF's ``MockCheckpointSaverListener``."""

    def __init__(self):
        self.counts = {"begin": 0, "before_save": 0, "after_save": 0, "end": 0}

    def begin(self):
        self.counts["begin"] += 1

    def before_save(self, session, global_step):
        self.counts["before_save"] += 1

    def after_save(self, session, global_step):
        self.counts["after_save"] += 1

    def end(self, session, global_step):
        self.counts["end"] += 1


def native_graph():
    """TF's setUp: a global step and ``_increment_global_step(1)`` as the train op."""
    gs = train.get_or_create_global_step()
    with tf.control_dependencies(step_reads(gs)):  # TF's read, and the variable's own
        return gs, tf.compat.v1.assign_add(gs, 1)


# -- CheckpointSaverHookTest --------------------------------------------------------------------
@FIT_WORLD
def test_listener_with_monitored_session(tmp_path, loop):
    """CheckpointSaverHookTest.test_listener_with_monitored_session: a Scaffold shared by the
    session and ``CheckpointSaverHook(save_steps=1, scaffold=scaffold)``; two steps."""
    scaffold = train.Scaffold()
    listener = MockCheckpointSaverListener()
    hook = train.CheckpointSaverHook(
        str(tmp_path / "b"), save_steps=1, scaffold=scaffold, listeners=[listener]
    )
    model = fit(hookbridge.HookCallback([hook], scaffold=scaffold), steps=2, loop=loop)
    bridged = (iterations(model), listener.counts, saved_step(str(tmp_path / "b")))

    with tf.Graph().as_default():
        scaffold = train.Scaffold()
        global_step, train_op = native_graph()
        listener = MockCheckpointSaverListener()
        hook = train.CheckpointSaverHook(
            str(tmp_path / "n"), save_steps=1, scaffold=scaffold, listeners=[listener]
        )
        with train.SingularMonitoredSession(
            hooks=[hook], scaffold=scaffold, checkpoint_dir=str(tmp_path / "n")
        ) as sess:
            sess.run(train_op)
            sess.run(train_op)
            global_step_val = sess.raw_session().run(global_step)
    native = (global_step_val, listener.counts, saved_step(str(tmp_path / "n")))
    assert bridged == native == (2, {"begin": 1, "before_save": 3, "after_save": 3, "end": 1}, 2)


class SavedSteps(keras.callbacks.Callback):
    """The checkpointed global step after every Keras step (TF's test loads it after each run)."""

    def __init__(self, model_dir):
        super().__init__()
        self.model_dir, self.steps = model_dir, []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append(saved_step(self.model_dir))


@WORLDS
def test_save_steps_saves_periodically(tmp_path, loop):
    """CheckpointSaverHookTest.test_save_steps_saves_periodically: ``save_steps=2`` with a
    scaffold. TF's test drives a bare ``_HookedSession`` that never calls after_create_session
    (checkpointed steps 1, 1, 3, 3, 5); a MonitoredSession calls it, which saves step 0 and
    shifts the schedule: 0, 2, 2, 4, 4, natively and bridged."""
    scaffold = train.Scaffold()
    hook = train.CheckpointSaverHook(str(tmp_path / "b"), save_steps=2, scaffold=scaffold)
    saved = SavedSteps(str(tmp_path / "b"))
    fit(hookbridge.HookCallback([hook], scaffold=scaffold), steps=5, after=[saved], loop=loop)

    native = []
    with tf.Graph().as_default():
        scaffold = train.Scaffold()
        _, train_op = native_graph()
        hook = train.CheckpointSaverHook(str(tmp_path / "n"), save_steps=2, scaffold=scaffold)
        with train.MonitoredSession(
            session_creator=train.ChiefSessionCreator(scaffold=scaffold), hooks=[hook]
        ) as sess:
            for _ in range(5):
                sess.run(train_op)
                native.append(saved_step(str(tmp_path / "n")))
    assert saved.steps == native == [0, 2, 2, 4, 4]


@FIT_WORLD
def test_save_checkpoint_before_first_train_step(tmp_path, loop):
    """CheckpointSaverHookTest.test_save_checkpoint_before_first_train_step: step 0 is saved by
    after_create_session, none after one step, step 2 after two."""

    class SavedAtStart(train.SessionRunHook):
        def after_create_session(self, session, coord):
            self.at_start = saved_step(str(tmp_path / "b"))

    scaffold = train.Scaffold()
    hook = train.CheckpointSaverHook(str(tmp_path / "b"), save_steps=2, scaffold=scaffold)
    start = SavedAtStart()
    saved = SavedSteps(str(tmp_path / "b"))
    callback = hookbridge.HookCallback([hook, start], scaffold=scaffold)
    fit(callback, steps=2, after=[saved], loop=loop)
    assert [start.at_start, *saved.steps] == [0, 0, 2]


# -- StopAtStepTest -----------------------------------------------------------------------------
class SetIterations(keras.callbacks.Callback):
    """Sets ``iterations`` before some batches, as TF's test assigns the global step."""

    def __init__(self, values):
        super().__init__()
        self.values = values

    def on_train_batch_begin(self, batch, logs=None):
        if batch in self.values:
            self.model.optimizer.iterations.assign(self.values[batch])


@FIT_WORLD
def test_stop_based_on_last_step(loop):
    """StopAtStepTest.test_stop_based_on_last_step: ``StopAtStepHook(last_step=10)`` while the
    global step is assigned from outside (5, then 8). TF's test runs a no-op; here (and in the
    native run beside it) the train op adds 1, as a Keras step does: stop after the step reaching
    10."""
    assigned = {0: 5, 1: 8}
    callback = hookbridge.HookCallback([train.StopAtStepHook(last_step=10)])
    model = fit(callback, steps=10, extra=[SetIterations(assigned)], loop=loop)
    bridged = iterations(model)

    with tf.Graph().as_default():
        gs, train_op = native_graph()
        value = tf.compat.v1.placeholder(tf.int64, [])
        assign = tf.compat.v1.assign(gs, value)
        runs = 0
        with train.SingularMonitoredSession(hooks=[train.StopAtStepHook(last_step=10)]) as sess:
            while not sess.should_stop() and runs < 10:
                if runs in assigned:
                    sess.raw_session().run(assign, {value: assigned[runs]})
                sess.run(train_op)
                runs += 1
            native = sess.raw_session().run(gs)
    assert bridged == native == 10


# -- StepCounterHookTest ------------------------------------------------------------------------
@pytest.mark.skipif(not KERAS3, reason="Keras 3 only: LossScaleOptimizer skipping steps")
@WORLDS
def test_log_warning_if_global_step_not_increased(monkeypatch, loop):
    """StepCounterHookTest.test_log_warning_if_global_step_not_increased: 31 runs of a train op
    that keeps the step (``_increment_global_step(0)``); here a LossScaleOptimizer skipping
    every (non-finite) step. StepCounterHook warns as natively. (TF's test patches the warning;
    here ``log_first_n`` is recorded, as TF counts its calls per process.)"""
    from tensorflow.python.training import basic_session_run_hooks

    messages = []
    monkeypatch.setattr(
        basic_session_run_hooks.logging,
        "log_first_n",
        lambda level, msg, n, *args: messages.append(msg % args),
    )
    x, y = make_data(n=16 * 31)
    x[:] = np.nan
    model = make_model()
    model.compile(
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01)), loss="mse"
    )
    fit(
        hookbridge.HookCallback([train.StepCounterHook(every_n_steps=1, every_n_secs=None)]),
        steps=31,
        model=model,
        x=x,
        y=y,
        loop=loop,
    )
    bridged, messages[:] = list(messages), []
    with tf.Graph().as_default():
        gs = train.get_or_create_global_step()
        train_op = tf.compat.v1.assign_add(gs, 0)  # keep same.
        hook = train.StepCounterHook(every_n_steps=1, every_n_secs=None)
        with train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(31):
                sess.run(train_op)
    assert iterations(model) == 0
    pattern = "global step.*has not been increased"
    warned = [m for m in bridged if re.search(pattern, m)]
    assert len(warned) == 30 and len(warned) == len([m for m in messages if re.search(pattern, m)])


# -- GlobalStepWaiterHookTest -------------------------------------------------------------------
@WORLDS
def test_wait_for_step(monkeypatch, loop):
    """GlobalStepWaiterHookTest.test_wait_for_step: ``wait_until_step=1000``; the first sleep
    assigns the global step 500 and the second 1100, through the session, as TF's test does:
    before_run returns after exactly two sleeps, and the Keras model trains on from 1100."""
    from tensorflow.python.training import basic_session_run_hooks

    class Assigner(train.SessionRunHook):
        def begin(self):
            self.value = tf.compat.v1.placeholder(tf.int64, [])
            self.assign = tf.compat.v1.assign(train.get_global_step(), self.value)

        def after_create_session(self, session, coord):
            self.session = session

    assigner = Assigner()
    counter = []

    def mock_sleep(seconds):
        counter.append(seconds)
        if len(counter) == 1:
            assigner.session.run(assigner.assign, {assigner.value: 500})
        elif len(counter) == 2:
            assigner.session.run(assigner.assign, {assigner.value: 1100})
        else:
            raise AssertionError("Expected before_run() to terminate after the second sleep")

    monkeypatch.setattr(basic_session_run_hooks.time, "sleep", mock_sleep)
    hooks = [assigner, train.GlobalStepWaiterHook(wait_until_step=1000)]
    model = fit(hookbridge.HookCallback(hooks), steps=2, loop=loop)
    assert len(counter) == 2
    assert iterations(model) == 1102


# -- MonitoredSessionTest -----------------------------------------------------------------------
class RaiseOnceAtCountN(train.SessionRunHook):
    """TF's ``RaiseOnceAtCountN``: raises ``ex`` once, at the n-th ``before_run``."""

    def __init__(self, n, ex):
        self.n, self.ex, self.raised = n, ex, False

    def before_run(self, run_context):
        self.n -= 1
        if self.n == 0 and not self.raised:
            self.raised = True
            raise self.ex


class Steps(train.SessionRunHook):
    def __init__(self):
        self.seen, self.sessions = [], 0

    def begin(self):
        self.gs = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())

    def after_create_session(self, session, coord):
        self.sessions += 1

    def after_run(self, run_context, run_values):
        self.seen.append(int(run_context.session.run(self.gs)))


@WORLDS
def test_recover_and_retry_on_aborted_error(tmp_path, loop):
    """MonitoredSessionTest.test_recover_and_retry_on_aborted_error: ``RaiseOnceAtCountN(4,
    AbortedError)`` beside ``CheckpointSaverHook(save_steps=1, scaffold=scaffold)``; the session
    is re-created and the run retried, continuing from the checkpointed (here: the Keras) step.
    TF's test makes one extra ``run(gstep)`` first, counted by the hook: here the 4th run is the
    4th Keras step."""
    scaffold = train.Scaffold()
    steps = Steps()
    hooks = [
        RaiseOnceAtCountN(4, tf.errors.AbortedError(None, None, "Abort")),
        train.CheckpointSaverHook(str(tmp_path / "b"), save_steps=1, scaffold=scaffold),
        steps,
    ]
    model = fit(hookbridge.HookCallback(hooks, scaffold=scaffold), steps=5, loop=loop)
    bridged = (steps.seen, steps.sessions, iterations(model))

    with tf.Graph().as_default():
        _, train_op = native_graph()
        scaffold = train.Scaffold()
        steps = Steps()
        hooks = [
            RaiseOnceAtCountN(4, tf.errors.AbortedError(None, None, "Abort")),
            train.CheckpointSaverHook(str(tmp_path / "n"), save_steps=1, scaffold=scaffold),
            steps,
        ]
        creator = train.ChiefSessionCreator(scaffold, checkpoint_dir=str(tmp_path / "n"))
        with train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            for _ in range(5):
                sess.run(train_op)
    native = (steps.seen, steps.sessions, steps.seen[-1])
    assert bridged == native == ([1, 2, 3, 4, 5], 2, 5)
