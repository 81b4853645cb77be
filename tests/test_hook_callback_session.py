"""HookCallback's session against native MonitoredSession: global step, coordinator, recovery,
scaffold, writes to the weight mirrors, fresh weights (issue 13, items 1-6).

Every test runs the same hooks in a native ``MonitoredSession`` whose train op does what the Keras
step does (advance the global step, change the weights) and compares what the hooks saw.
"""

from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest
import reused_models
import tensorflow as tf
from conftest import KERAS3, make_data, make_model, step_reads
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import hookbridge
from hookbridge import _tfcompat

train = tf.compat.v1.train
keras = tf.keras


# -- helpers ---------------------------------------------------------------------------------
class StepRecorder(train.SessionRunHook):
    """Records, per run, the global step fetched with the run (stale) and read after it."""

    def __init__(self):
        self.stale: list[int] = []
        self.fresh: list[int] = []
        self.events: list[str] = []

    def begin(self):
        self.events.append("begin")
        # The cached read tensor built-in hooks fetch (ordered before the native train op).
        self.gs = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())

    def after_create_session(self, session, coord):
        self.events.append("after_create_session")

    def before_run(self, run_context):
        self.events.append("before_run")
        return train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        self.events.append("after_run")
        self.stale.append(int(run_values.results))
        self.fresh.append(int(run_context.session.run(self.gs)))

    def end(self, session):
        self.events.append("end")


def native_run(make_hooks, increments, *, between=None, scaffold=None, checkpoint_dir=None):
    """A native MonitoredSession whose train op adds ``increments[i]`` to the global step at
    run i (after the step is read, as Estimator orders it). ``between(i)`` may return a value the
    global step is set to before run i. Returns the number of runs made."""
    graph = tf.Graph()
    with graph.as_default():
        gs = train.get_or_create_global_step()
        inc = tf.compat.v1.placeholder(tf.int64, [])
        with tf.control_dependencies(step_reads(gs)):
            train_op = tf.compat.v1.assign_add(gs, inc)
        value = tf.compat.v1.placeholder(tf.int64, [])
        assign = tf.compat.v1.assign(gs, value)
        hooks = make_hooks()
        creator = train.ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=checkpoint_dir)
        runs = 0
        with train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            while not sess.should_stop() and runs < len(increments):
                new_step = between(runs) if between is not None else None
                if new_step is not None:  # as other code would, outside the hooks
                    sess.run_step_fn(_assign_step_fn(assign, {value: new_step}))
                sess.run(train_op, feed_dict={inc: increments[runs]})
                runs += 1
    return runs


def _assign_step_fn(assign, feeds):
    def step_fn(step_context):
        step_context.session.run(assign, feeds)

    return step_fn


def mirror(name):
    """The bridge graph's (or a native graph's) variable called ``name``."""
    return next(v for v in tf.compat.v1.global_variables() if v.op.name == name)


def fit(callbacks, *, steps=5, model=None, x=None, y=None, epochs=1):
    if x is None:
        x, y = make_data(n=16 * steps)
    model = model or make_model(reuse=True)
    model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=False, callbacks=callbacks)
    return model


def iterations(model):
    return int(np.asarray(model.optimizer.iterations))


class FirstNWarnings:
    """Records StepCounterHook's ``log_first_n`` warnings. TF counts those per call site for the
    whole process (5 at most), so the test replaces the function rather than read the log."""

    def __init__(self, monkeypatch):
        from tensorflow.python.training import basic_session_run_hooks

        self.messages: list[str] = []
        monkeypatch.setattr(basic_session_run_hooks.logging, "log_first_n", self.log_first_n)

    def log_first_n(self, level, msg, n, *args):
        self.messages.append(msg % args)

    def take(self):
        taken, self.messages = self.messages, []
        return taken


# -- item 1: the global step is optimizer.iterations -----------------------------------------
@pytest.mark.skipif(not KERAS3, reason="Keras 3 only: LossScaleOptimizer skipping steps")
def test_a_skipped_step_leaves_the_global_step_and_checkpoints_as_natively(tmp_path, monkeypatch):
    """Keras 3's LossScaleOptimizer does not advance ``iterations`` on a non-finite step: hooks
    see the step unchanged (StepCounterHook warns, as TF does), and CheckpointSaverHook saves
    only global steps the model has, as a native train op that skips an increment."""
    x, y = make_data(n=80)
    x[32:48] = np.nan  # batch 2: non-finite gradients, the step is skipped
    model = make_model()  # compiled again below: not a reusable model
    model.compile(
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.01)), loss="mse"
    )
    bridged = StepRecorder()
    ckpt_b = str(tmp_path / "bridged")
    warnings_ = FirstNWarnings(monkeypatch)
    fit(
        [
            hookbridge.HookCallback(
                lambda: [
                    bridged,
                    train.StepCounterHook(every_n_steps=1, output_dir=str(tmp_path / "sc")),
                    train.CheckpointSaverHook(ckpt_b, save_steps=1),
                ]
            )
        ],
        model=model,
        x=x,
        y=y,
    )
    assert iterations(model) == 4
    log_b = warnings_.take()

    native = StepRecorder()
    ckpt_n = str(tmp_path / "native")
    native_run(
        lambda: [
            native,
            train.StepCounterHook(every_n_steps=1, output_dir=str(tmp_path / "scn")),
            train.CheckpointSaverHook(ckpt_n, save_steps=1),
        ],
        [1, 1, 0, 1, 1],
    )
    assert bridged.stale == native.stale == [0, 1, 2, 2, 3]
    assert bridged.fresh == native.fresh == [1, 2, 2, 3, 4]
    log_n = warnings_.take()
    warned = [m for m in log_b if "has not been increased" in m]
    assert len(warned) == 1 and warned == [m for m in log_n if "has not been increased" in m]

    def saved_steps(d):
        state = tf.train.get_checkpoint_state(d)
        return sorted(
            int(tf.train.load_checkpoint(p).get_tensor("global_step"))
            for p in state.all_model_checkpoint_paths
        )

    assert saved_steps(ckpt_b) == saved_steps(ckpt_n) == [0, 1, 2, 3, 4]


class AssignIterations(keras.callbacks.Callback):
    """Another callback changing ``iterations`` before a batch (as user code may)."""

    def __init__(self, at_batch, value):
        super().__init__()
        self.at_batch, self.value = at_batch, value

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.at_batch:
            self.model.optimizer.iterations.assign(self.value)


def test_a_change_of_iterations_made_elsewhere_is_what_the_next_hook_read_sees():
    bridged = StepRecorder()
    model = fit([AssignIterations(2, 100), hookbridge.HookCallback([bridged])])
    assert iterations(model) == 103

    native = StepRecorder()
    native_run(lambda: [native], [1] * 5, between=lambda i: 100 if i == 2 else None)
    assert bridged.stale == native.stale == [0, 1, 100, 101, 102]
    assert bridged.fresh == native.fresh == [1, 2, 101, 102, 103]


class AssignThroughSession(train.SessionRunHook):
    """Assigns the global step through ``run_context.session`` in after_run of run ``at``."""

    def __init__(self, at, value):
        self.at, self.value, self.runs = at, value, 0

    def begin(self):
        self.assign = tf.compat.v1.assign(train.get_global_step(), self.value)

    def after_run(self, run_context, run_values):
        if self.runs == self.at:
            run_context.session.run(self.assign)
        self.runs += 1


def test_a_hook_assigning_the_global_step_through_the_session_changes_iterations():
    bridged = StepRecorder()
    model = fit([hookbridge.HookCallback(lambda: [AssignThroughSession(2, 500), bridged])])
    native = StepRecorder()
    native_run(lambda: [AssignThroughSession(2, 500), native], [1] * 5)
    assert bridged.stale == native.stale == [0, 1, 2, 500, 501]
    assert bridged.fresh == native.fresh == [1, 2, 500, 501, 502]
    assert iterations(model) == 502  # the Keras model trained on from the assigned step


class AddToStepWithTheRun(train.SessionRunHook):
    """Fetches ``assign_add(global_step, 10)`` with run ``at`` (in ``before_run``): natively it
    runs in the same ``Session.run`` as the train op, so the step advances by both."""

    def __init__(self, at):
        self.at, self.runs = at, 0

    def begin(self):
        self.add = tf.compat.v1.assign_add(train.get_global_step(), 10)

    def before_run(self, run_context):
        self.runs += 1
        return train.SessionRunArgs(self.add) if self.runs - 1 == self.at else None


def test_a_hook_writing_the_step_with_the_run_adds_to_the_keras_step():
    bridged = StepRecorder()
    model = fit([hookbridge.HookCallback(lambda: [AddToStepWithTheRun(2), bridged])])
    native = StepRecorder()
    native_run(lambda: [AddToStepWithTheRun(2), native], [1] * 5)
    assert bridged.fresh == native.fresh == [1, 2, 13, 14, 15]
    assert iterations(model) == 15


class SummaryOfTheStepRead(train.SessionRunHook):
    """Fetches a value computed from TF's cached global-step read (a ``cond`` that takes the
    step variable's handle, as ``SummarySaverHook`` does for a summary of it) on every run."""

    def begin(self):
        read = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())
        self.double = tf.cast(read, tf.float32) * 2
        self.values = []

    def before_run(self, run_context):
        return train.SessionRunArgs(self.double)

    def after_run(self, run_context, run_values):
        self.values.append(float(run_values.results))


def test_a_fetch_reading_the_step_through_a_cond_leaves_the_keras_step_alone():
    """It takes the step's handle, so it may write it: the bridge reads back whether it did,
    rather than copying the graph's step (the value before this Keras step) into the model."""
    bridged, native = SummaryOfTheStepRead(), SummaryOfTheStepRead()
    model = fit([hookbridge.HookCallback(lambda: [bridged])])
    native_run(lambda: [native], [1] * 5)
    assert bridged.values == native.values == [0.0, 2.0, 4.0, 6.0, 8.0]
    assert iterations(model) == 5


def test_global_step_waiter_returns_once_the_step_reaches_its_target(monkeypatch):
    """A thread raises ``iterations`` to the target: GlobalStepWaiterHook stops waiting."""
    from tensorflow.python.training import basic_session_run_hooks

    model = make_model(reuse=True)
    fit([], steps=1, model=model)
    sleeps = []

    def fake_sleep(seconds):
        sleeps.append(seconds)
        worker = threading.Thread(target=lambda: model.optimizer.iterations.assign(7))
        worker.start()
        worker.join()

    monkeypatch.setattr(basic_session_run_hooks.time, "sleep", fake_sleep)
    recorder = StepRecorder()
    hooks = [train.GlobalStepWaiterHook(wait_until_step=5), recorder]
    fit([hookbridge.HookCallback(hooks)], steps=3, model=model)
    assert len(sleeps) == 1
    assert recorder.stale == [7, 8, 9] and iterations(model) == 10


# -- item 3: the coordinator ------------------------------------------------------------------
class CoordStop(train.SessionRunHook):
    """Asks the coordinator (from a thread it registered) to stop after run ``at``."""

    def __init__(self, at, exc=None, from_thread=False):
        self.at, self.exc, self.from_thread = at, exc, from_thread
        self.runs = 0
        self.ended = False

    def after_create_session(self, session, coord):
        self.coord = coord

    def after_run(self, run_context, run_values):
        if self.runs == self.at:
            if self.from_thread:
                worker = threading.Thread(target=self._request_stop)
                self.coord.register_thread(worker)
                worker.start()
                worker.join()
            else:
                self._request_stop()
        self.runs += 1

    def _request_stop(self):
        if self.exc is None:
            self.coord.request_stop()
            return
        try:
            raise self.exc
        except type(self.exc) as e:  # as TF code reports errors to the coordinator
            self.coord.request_stop(e)

    def end(self, session):
        self.ended = True


@pytest.mark.parametrize("from_thread", [False, True])
def test_coordinator_stop_ends_fit_at_the_next_step_boundary(from_thread):
    bridged = CoordStop(1, from_thread=from_thread)
    model = fit([hookbridge.HookCallback([bridged])], steps=6)
    native = CoordStop(1, from_thread=from_thread)
    runs = native_run(lambda: [native], [1] * 6)
    assert iterations(model) == runs == bridged.runs == native.runs == 2
    assert bridged.ended and native.ended


def test_coordinator_stop_with_an_exception_raises_it_when_the_run_closes():
    error = ValueError("stop with this")
    bridged = CoordStop(1, exc=error)
    model = make_model(reuse=True)
    with pytest.raises(ValueError, match="stop with this") as got:
        fit([hookbridge.HookCallback([bridged])], steps=6, model=model)
    native = CoordStop(1, exc=ValueError("stop with this"))
    with pytest.raises(ValueError, match="stop with this"):
        native_run(lambda: [native], [1] * 6)
    assert got.value is error
    assert iterations(model) == bridged.runs == native.runs == 2
    # Natively should_stop() turns True, the loop ends, end() runs, and close() re-raises.
    assert bridged.ended and native.ended


# -- item 2: recovery -------------------------------------------------------------------------
class RaiseOnce(train.SessionRunHook):
    """Raises ``error`` once, in ``where`` (before_run / after_run) of run ``at``."""

    def __init__(self, at, error, where="before_run"):
        self.at, self.error, self.where = at, error, where
        self.calls = {"before_run": 0, "after_run": 0}
        self.raised = False

    def _maybe_raise(self, where):
        n = self.calls[where]
        self.calls[where] += 1
        if where == self.where and n == self.at and not self.raised:
            self.raised = True
            raise self.error

    def before_run(self, run_context):
        self._maybe_raise("before_run")

    def after_run(self, run_context, run_values):
        self._maybe_raise("after_run")


#: UnavailableError in deep only: the bridge recovers from both through one tuple (as
#: MonitoredSession's _RecoverableSession does), so AbortedError covers the path in CI.
@pytest.mark.parametrize(
    "error",
    [
        tf.errors.AbortedError(None, None, "Abort"),
        pytest.param(tf.errors.UnavailableError(None, None, "x"), marks=pytest.mark.deep),
    ],
)
def test_preemption_in_before_run_recreates_the_session_and_retries(tmp_path, error):
    """As MonitoredSession: a new session, every after_create_session again (begin not), the
    run retried. The bridge's new session starts from the Keras model, as a native session
    restoring a checkpoint saved at every step."""
    bridged = StepRecorder()
    model = fit(
        [
            hookbridge.HookCallback(
                lambda: [
                    RaiseOnce(2, error),
                    bridged,
                    train.CheckpointSaverHook(str(tmp_path / "b"), save_steps=1),
                ]
            )
        ]
    )
    native = StepRecorder()
    scaffold = train.Scaffold()
    native_run(
        lambda: [
            RaiseOnce(2, error),
            native,
            train.CheckpointSaverHook(str(tmp_path / "n"), save_steps=1, scaffold=scaffold),
        ],
        [1] * 5,
        scaffold=scaffold,
        checkpoint_dir=str(tmp_path / "n"),
    )
    assert bridged.events == native.events
    assert bridged.events.count("after_create_session") == 2 and bridged.events.count("begin") == 1
    assert bridged.stale == native.stale == [0, 1, 2, 3, 4]
    assert iterations(model) == 5


def test_preemption_after_the_keras_step_retries_the_hooks_and_warns_once():
    bridged = StepRecorder()
    raiser = RaiseOnce(2, tf.errors.AbortedError(None, None, "Abort"), where="after_run")
    with pytest.warns(UserWarning, match="Keras step itself was not run again") as got:
        model = fit([hookbridge.HookCallback(lambda: [bridged, raiser])])
    assert len([w for w in got if "AbortedError" in str(w.message)]) == 1
    # Natively the retry runs the train op again (the step advances twice); here the hooks'
    # before_run/after_run are retried on the values of the step that ran.
    native = StepRecorder()
    native_run(
        lambda: [native, RaiseOnce(2, tf.errors.AbortedError(None, None, "Abort"), "after_run")],
        [1] * 5,
    )
    assert native.events == bridged.events
    assert bridged.stale == [0, 1, 2, 2, 3, 4] and bridged.fresh == [1, 2, 3, 3, 4, 5]
    assert iterations(model) == 5


# -- item 4: scaffolds ------------------------------------------------------------------------
class ListenerCounts(train.CheckpointSaverListener):
    def __init__(self):
        self.counts = {"begin": 0, "before_save": 0, "after_save": 0, "end": 0}

    def begin(self):
        self.counts["begin"] += 1

    def before_save(self, session, global_step_value):
        self.counts["before_save"] += 1

    def after_save(self, session, global_step_value):
        self.counts["after_save"] += 1

    def end(self, session, global_step_value):
        self.counts["end"] += 1


def test_scaffold_init_fn_gets_scaffold_and_session_and_local_init_runs():
    calls = []
    local = {}

    def make_scaffold():
        local["v"] = v = tf.compat.v1.Variable(
            42.0, name="local_v", collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        )
        return train.Scaffold(
            init_fn=lambda scaffold, session: calls.append((scaffold, session)),
            local_init_op=v.initializer,
        )

    class ReadLocal(train.SessionRunHook):
        def after_create_session(self, session, coord):
            calls.append(float(session.run(local["v"])))

    fit([hookbridge.HookCallback(lambda: [ReadLocal()], scaffold=make_scaffold)], steps=1)
    bridged, calls[:] = list(calls), []
    with tf.Graph().as_default():
        train.get_or_create_global_step()
        native_scaffold = make_scaffold()
        creator = train.ChiefSessionCreator(scaffold=native_scaffold)
        with train.MonitoredSession(session_creator=creator, hooks=[ReadLocal()]):
            pass
    assert calls[0][0] is native_scaffold  # TF calls init_fn(scaffold, session)
    assert isinstance(bridged[0][0], train.Scaffold)
    assert isinstance(bridged[0][1], tf.compat.v1.Session)
    assert bridged[1] == calls[1] == 42.0  # local_init_op ran before after_create_session


def test_scaffold_not_ready_raises_tf_error():
    def make_scaffold():
        tf.compat.v1.Variable(1.0, name="never_initialized")
        return train.Scaffold(init_op=tf.no_op())

    message = "did not make model ready.*never_initialized"
    with pytest.raises(RuntimeError, match=message):
        fit([hookbridge.HookCallback([], scaffold=make_scaffold)], steps=1)
    with tf.Graph().as_default(), pytest.raises(RuntimeError, match=message):
        train.get_or_create_global_step()
        creator = train.ChiefSessionCreator(scaffold=make_scaffold())
        with train.MonitoredSession(session_creator=creator):
            pass


def test_a_scaffold_instance_used_in_a_second_run_is_refused_clearly():
    scaffold = train.Scaffold()
    cb = hookbridge.HookCallback([], scaffold=scaffold)
    model = fit([cb], steps=1)
    with pytest.raises(ValueError, match="another graph.*zero-argument callable"):
        fit([cb], steps=1, model=model)


# -- item 5: writes to the weight mirrors reach the Keras model ------------------------------
def _frozen_model():
    # weights do not move: what the hooks wrote is what stays
    model = make_model(lr=0.0, reuse=True)
    return model


def _checkpoint_with(path, name, value):
    graph = tf.Graph()
    with graph.as_default():
        v = tf.compat.v1.Variable(value, name=name)
        saver = train.Saver([v])
        with tf.compat.v1.Session() as sess:
            sess.run(v.initializer)
            return saver.save(sess, path)


class FirstStepWeights(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self.kernel = np.array(self.model.weights[0].numpy())


def test_init_from_checkpoint_in_begin_reaches_the_model_before_the_first_step(tmp_path):
    value = np.full((4, 8), 0.25, np.float32)
    ckpt = _checkpoint_with(str(tmp_path / "src"), "src/kernel", value)

    class WarmStart(train.SessionRunHook):
        def __init__(self, target):
            self.target = target

        def begin(self):
            train.init_from_checkpoint(ckpt, {"src/kernel": self.target})  # by name

    model = _frozen_model()
    first = FirstStepWeights()
    fit([hookbridge.HookCallback([WarmStart("model/000/kernel")]), first], model=model, steps=2)
    np.testing.assert_array_equal(first.kernel, value)
    graph = tf.Graph()
    with graph.as_default():
        v = tf.compat.v1.get_variable("model/000/kernel", shape=(4, 8), use_resource=True)
        with train.MonitoredSession(hooks=[WarmStart("model/000/kernel")]) as sess:
            native = sess.run(v)
    np.testing.assert_array_equal(native, value)


class AssignKernel(train.SessionRunHook):
    """Assigns the first mirror through the session: in after_create_session or a later run."""

    def __init__(self, value, at_run=None):
        self.value, self.at_run, self.runs = value, at_run, 0

    def begin(self):
        self.assign = mirror("model/000/kernel").assign(self.value)

    def after_create_session(self, session, coord):
        if self.at_run is None:
            session.run(self.assign)

    def after_run(self, run_context, run_values):
        if self.runs == self.at_run:
            run_context.session.run(self.assign)
        self.runs += 1


def test_assign_in_after_create_session_reaches_the_model_before_the_first_step():
    value = np.full((4, 8), -0.5, np.float32)
    model = _frozen_model()
    first = FirstStepWeights()
    fit([hookbridge.HookCallback([AssignKernel(value)]), first], model=model, steps=2)
    np.testing.assert_array_equal(first.kernel, value)


def test_assign_during_a_later_run_reaches_the_model_before_the_next_step():
    value = np.full((4, 8), 1.5, np.float32)

    class Kernels(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.at_begin = []

        def on_train_batch_begin(self, batch, logs=None):
            self.at_begin.append(float(self.model.weights[0].numpy().sum()))

    model = _frozen_model()
    seen = Kernels()
    before = float(model.weights[0].numpy().sum())
    fit([hookbridge.HookCallback([AssignKernel(value, at_run=1)]), seen], model=model, steps=4)
    assert seen.at_begin == pytest.approx([before, before, value.sum(), value.sum()])


def test_scaffold_init_fn_restoring_a_checkpoint_restores_weights_and_step(tmp_path):
    """A Scaffold init_fn restoring a checkpoint written under HookCallback (TF1's resume):
    the Keras model starts from its weights and global step, as the native session does."""
    trained = fit(
        [hookbridge.HookCallback([train.CheckpointSaverHook(str(tmp_path), save_steps=100)])],
        steps=3,
    )
    path = tf.train.latest_checkpoint(str(tmp_path))
    trained_kernel = trained.get_weights()[0]
    # the same model back in its built state (initial weights, step 0): no second build/trace
    reused_models.release_all()
    fresh = make_model(reuse=True)
    assert not np.allclose(fresh.get_weights()[0], trained_kernel)
    assert iterations(fresh) == 0
    recorder = StepRecorder()
    cb = hookbridge.HookCallback(
        [recorder],
        scaffold=lambda: train.Scaffold(
            init_fn=lambda scaffold, s: scaffold.saver.restore(s, path)
        ),
    )
    first = FirstStepWeights()
    fit([cb, first], model=fresh, steps=1)
    np.testing.assert_allclose(first.kernel, trained_kernel)
    assert recorder.stale == [3]


# -- item 6: fresh weights --------------------------------------------------------------------
def test_weight_summaries_beside_a_checkpoint_saver_are_of_the_step_just_run(tmp_path):
    """SummarySaverHook on a weight mirror beside CheckpointSaverHook: the summary at step s
    holds the weights after Keras step s (TF's rule: a run's fetches see the variables its
    train op left; a read ordered after the update), never the step before."""

    class Kernels(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.sums = {}

        def on_train_batch_end(self, batch, logs=None):
            step = int(np.asarray(self.model.optimizer.iterations))
            self.sums[step] = float(self.model.weights[0].numpy().sum())

    def hooks():
        kernel = mirror("model/000/kernel")
        summary = tf.compat.v1.summary.scalar("kernel_sum", tf.reduce_sum(kernel))
        return [
            train.CheckpointSaverHook(str(tmp_path / "ckpt"), save_steps=1),
            train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=summary),
        ]

    kernels = Kernels()
    fit([hookbridge.HookCallback(hooks), kernels], steps=5)
    acc = EventAccumulator(glob.glob(os.path.join(str(tmp_path), "events.*"))[0])
    acc.Reload()
    got = {e.step: e.value for e in acc.Scalars("kernel_sum")}
    assert sorted(got) == [1, 2, 3, 4, 5]
    for step, value in got.items():
        assert value == pytest.approx(kernels.sums[step], rel=1e-6), step


def test_evaluate_sees_the_trained_global_step_unchanged():
    """In evaluate the global step is ``iterations`` and does not advance (an evaluation run's
    train op is none): stale and fresh reads are both the trained step."""
    model = fit([], steps=3)
    recorder = StepRecorder()
    x, y = make_data(n=32)
    model.evaluate(x, y, batch_size=16, verbose=0, callbacks=[hookbridge.HookCallback([recorder])])
    assert recorder.stale == recorder.fresh == [3, 3]


def test_a_resumed_run_checkpoints_the_model_step_at_session_creation(tmp_path):
    """The Scaffold's init_op re-initializes the graph's global step: the first checkpoint of a
    second fit (written by after_create_session) must still hold ``iterations``, natively the
    step the session was restored at."""
    model = fit([], steps=3)
    fit(
        [hookbridge.HookCallback([train.CheckpointSaverHook(str(tmp_path), save_steps=100)])],
        steps=2,
        model=model,
    )
    state = tf.train.get_checkpoint_state(str(tmp_path))
    steps = [
        int(tf.train.load_checkpoint(p).get_tensor("global_step"))
        for p in state.all_model_checkpoint_paths
    ]
    assert [p.rsplit("-", 1)[1] for p in state.all_model_checkpoint_paths] == ["3", "5"]
    assert steps == [3, 5]


# -- run values: options and run_metadata, as MonitoredSession gives them ----------------------
class RunValuesRecorder(train.SessionRunHook):
    """Keeps every run's ``run_values.options`` / ``run_metadata`` and their values as seen
    in that ``after_run``; every other run requests ``RunOptions(timeout_in_ms=...)`` (10 min
    and its run number)."""

    def __init__(self):
        self.kept: list[tuple] = []
        self.seen: list[tuple] = []
        self.runs = 0

    def before_run(self, run_context):
        self.runs += 1
        if self.runs % 2:
            return None
        # A distinct timeout per run (so each run's options show whose they are), far above any
        # run's time: natively the session applies it, and a loaded machine must not hit it.
        timeout = 600_000 + self.runs
        return train.SessionRunArgs(None, options=tf.compat.v1.RunOptions(timeout_in_ms=timeout))

    def after_run(self, run_context, run_values):
        options, metadata = run_values.options, run_values.run_metadata
        self.kept.append((options, metadata))
        self.seen.append(
            (
                type(run_values),
                run_values.results,
                type(options),
                options.SerializeToString(),
                type(metadata),
                metadata.ByteSize(),
            )
        )


def test_run_values_options_and_metadata_are_fresh_per_run_as_natively():
    """MonitoredSession gives each run a new RunOptions (the hooks' requests merged into it)
    and a new RunMetadata; the bridge makes them 64 at a time, so 150 steps cross two refills."""
    steps = 150
    native = RunValuesRecorder()
    assert native_run(lambda: [native], [1] * steps) == steps
    bridged = RunValuesRecorder()
    fit([hookbridge.HookCallback([bridged])], steps=steps)
    assert bridged.seen == native.seen
    assert {seen[0] for seen in bridged.seen} == {tf.compat.v1.train.SessionRunValues}
    assert {seen[2] for seen in bridged.seen} == {tf.compat.v1.RunOptions}
    assert {m.ByteSize() for _, m in bridged.kept} == {0}  # nothing traced: left empty
    for recorder in (native, bridged):  # one object per run, none handed out twice
        assert len({id(o) for o, _ in recorder.kept}) == steps
        assert len({id(m) for _, m in recorder.kept}) == steps
