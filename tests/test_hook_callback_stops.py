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
from conftest import make_model, step_reads

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
    model = make_model()
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
