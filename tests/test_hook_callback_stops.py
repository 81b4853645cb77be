"""How hooks ask for a stop under HookCallback (``_hook_callback/stops.py``) against native
MonitoredSession: ``run_context.request_stop()``, ``coord.request_stop()`` then
``coord.clear_stop()``, ``coord.stop_on_exception()``. The bridge reads the stop flags as plain
attributes of its subclasses of TF's classes; each case runs the same hooks natively and through
``fit`` and compares the runs made, the ``after_run`` calls and what the close raised.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import KERAS3, make_model, step_reads

import hookbridge

train = tf.compat.v1.train


class Stopper(train.SessionRunHook):
    """At run ``at``'s ``after_run``, does ``how``: ``"context"`` (run_context.request_stop()),
    ``"cleared"`` (coord.request_stop() then coord.clear_stop()), ``"exception"`` (a ValueError
    inside ``coord.stop_on_exception()``). Records the classes it was given."""

    def __init__(self, at, how):
        self.at, self.how = at, how
        self.runs = 0
        self.types: set[str] = set()

    def after_create_session(self, session, coord):
        self.coord = coord
        assert isinstance(coord, train.Coordinator)

    def before_run(self, run_context):
        assert isinstance(run_context, train.SessionRunContext)

    def after_run(self, run_context, run_values):
        if self.runs == self.at:
            if self.how == "context":
                run_context.request_stop()
                assert run_context.stop_requested
            elif self.how == "cleared":
                self.coord.request_stop()
                assert self.coord.should_stop()
                self.coord.clear_stop()
                assert not self.coord.should_stop()
            else:
                with self.coord.stop_on_exception():
                    raise ValueError("stopped on exception")
                assert self.coord.should_stop()
        self.runs += 1


class Counter(train.SessionRunHook):
    """Counts ``after_run`` calls (a hook after the stopper: its after_run still runs)."""

    def __init__(self):
        self.after = 0
        self.ended = False

    def after_run(self, run_context, run_values):
        self.after += 1

    def end(self, session):
        self.ended = True


def native(hooks, steps):
    """Runs ``steps`` train ops in a native MonitoredSession; returns (runs, error at close)."""
    graph = tf.Graph()
    runs, error = 0, None
    with graph.as_default():
        gs = train.get_or_create_global_step()
        with tf.control_dependencies(step_reads(gs)):
            train_op = tf.compat.v1.assign_add(gs, 1)
        try:
            with train.MonitoredSession(hooks=hooks) as sess:
                while not sess.should_stop() and runs < steps:
                    sess.run(train_op)
                    runs += 1
        except ValueError as e:
            error = e
    return runs, error


def bridged(hooks, steps):
    """The same hooks through ``fit`` (one Keras step per run); returns (runs, error)."""
    model = make_model(reuse=True)
    x = np.zeros((steps, 4), np.float32)
    y = np.zeros((steps, 1), np.float32)
    error = None
    try:
        model.fit(
            x, y, batch_size=1, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback(hooks)]
        )
    except ValueError as e:
        error = e
    return int(model.optimizer.iterations.numpy()), error


@pytest.mark.parametrize("how", ["context", "cleared", "exception"])
def test_stop_requests_end_the_run_as_natively(how):
    got = {}
    for name, run in (("native", native), ("bridged", bridged)):
        stopper, counter = Stopper(2, how), Counter()
        runs, error = run([stopper, counter], 6)
        got[name] = (runs, stopper.runs, counter.after, counter.ended, repr(error))
    assert got["bridged"] == got["native"]
    expected_runs = 6 if how == "cleared" else 3
    assert got["native"][0] == expected_runs
    assert ("stopped on exception" in got["native"][4]) == (how == "exception")


# -- issue 31 item 11: a stop asked by a hook that fetches nothing and has no after_run ---------
class BeforeOnly(train.SessionRunHook):
    """A deadline or signal hook: only ``before_run``, which fetches nothing; at its ``at``-th
    call it asks for a stop through ``how``: the run context or the coordinator."""

    def __init__(self, at, how):
        self.at, self.how = at, how
        self.calls = 0

    def after_create_session(self, session, coord):
        self.coord = coord

    def before_run(self, run_context):
        self.calls += 1
        if self.calls == self.at:
            if self.how == "context":
                run_context.request_stop()
            else:
                self.coord.request_stop()


class StepReader(train.SessionRunHook):
    """``after_run`` only: the global step read through the session after each run."""

    def begin(self):
        self.gs = train.get_global_step()
        self.read: list[int] = []

    def after_run(self, run_context, run_values):
        self.read.append(int(run_context.session.run(self.gs)))


def _native_loop(hooks, steps, train_op_of):
    """``steps`` runs at most of ``train_op_of(global_step)`` in a native MonitoredSession,
    stopping when it says so, as ``Estimator.train``/``evaluate``/``predict`` loop; returns the
    runs made."""
    runs = 0
    with tf.Graph().as_default():
        op = train_op_of(train.get_or_create_global_step())
        with train.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop() and runs < steps:
                sess.run(op)
                runs += 1
    return runs


def _incremented(gs):
    with tf.control_dependencies(step_reads(gs)):
        return tf.compat.v1.assign_add(gs, 1)


def _bridged_mode(mode, hooks, steps):
    """``steps`` batches of ``mode`` (``"fit"``, ``"evaluate"``, ``"predict"``) with the hooks;
    returns the batches Keras ran and the model's ``optimizer.iterations`` after."""
    model = make_model(reuse=True)
    x, y = np.zeros((steps, 4), np.float32), np.zeros((steps, 1), np.float32)
    batches: list[int] = []
    count = tf.keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda b, logs: batches.append(b),
        on_test_batch_end=lambda b, logs: batches.append(b),
        on_predict_batch_end=lambda b, logs: batches.append(b),
    )
    callbacks = [hookbridge.HookCallback(hooks), count]
    if mode == "fit":
        model.fit(x, y, batch_size=1, epochs=1, verbose=0, callbacks=callbacks)
    elif mode == "evaluate":
        model.evaluate(x, y, batch_size=1, verbose=0, callbacks=callbacks)
    else:
        model.predict(x, batch_size=1, verbose=0, callbacks=callbacks)
    return len(batches), int(model.optimizer.iterations.numpy())


@pytest.mark.parametrize("reader", [False, True], ids=["alone", "with_reader"])
@pytest.mark.parametrize("how", ["context", "coord"])
def test_a_stop_asked_in_before_run_by_a_hook_fetching_nothing_ends_fit_as_natively(how, reader):
    """A hook with only ``before_run``, fetching nothing, asks for a stop at its 3rd call: the
    native session runs that 3rd step, calls every after_run, then stops; ``fit`` ran all 12
    batches when no hook fetched anything and none had an ``after_run``."""
    got = {}
    for side in ("native", "bridged"):
        stopper, step_reader = BeforeOnly(3, how), StepReader()
        hooks = [stopper, step_reader] if reader else [stopper]
        if side == "native":
            runs = _native_loop(hooks, 12, _incremented)
            steps = runs  # the train op adds one per run
        else:
            runs, steps = _bridged_mode("fit", hooks, 12)
        got[side] = (runs, steps, stopper.calls, step_reader.read if reader else None)
    assert got["bridged"] == got["native"]
    assert got["native"][:3] == (3, 3, 3)
    if reader:
        assert got["native"][3] == [1, 2, 3]


@pytest.mark.parametrize("mode", ["evaluate", "predict"])
@pytest.mark.parametrize("reader", [False, True], ids=["alone", "with_reader"])
def test_a_stop_asked_in_before_run_ends_evaluate_and_predict_as_natively(mode, reader):
    """The same hook in evaluate / predict: natively Estimator.evaluate and predict loop
    ``while not session.should_stop()``, so 3 runs; Keras 3 stops there too (stop_evaluating /
    stop_predicting); tf_keras cannot stop them and says so."""
    stopper, step_reader = BeforeOnly(3, "context"), StepReader()
    hooks = [stopper, step_reader] if reader else [stopper]
    native_runs = _native_loop(hooks, 12, lambda gs: gs.read_value())
    native = (native_runs, stopper.calls, step_reader.read if reader else None)
    assert native == (3, 3, [0, 0, 0] if reader else None)
    stopper, step_reader = BeforeOnly(3, "context"), StepReader()
    hooks = [stopper, step_reader] if reader else [stopper]
    if KERAS3:
        runs, _ = _bridged_mode(mode, hooks, 12)
        assert (runs, stopper.calls, step_reader.read if reader else None) == native
    else:
        with pytest.warns(UserWarning, match="cannot stop evaluate/predict early"):
            runs, _ = _bridged_mode(mode, hooks, 12)
        assert runs == 12  # docs/troubleshooting.md: Keras 2 / tf_keras run to the end
