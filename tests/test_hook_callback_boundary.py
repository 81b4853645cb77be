"""One exception boundary per Keras entry point (issue 24, item 8).

Natively, an exception leaving ``with MonitoredSession(...)`` closes the session and calls no
``end()``. Through the bridge, an error raised by the bridge's own code (here: its warnings,
turned into errors as ``-W error`` / ``warnings.simplefilter("error")`` turn them) must do the
same: the session closed, ``optimizer.iterations``'s watched ``assign*`` methods restored, and
the next ``fit`` as good as a first one.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_data, make_model

import hookbridge

train = tf.compat.v1.train
keras = tf.keras


class Witness(train.SessionRunHook):
    """Records the session it was given, whether end() ran, and the global steps it saw."""

    def __init__(self):
        self.session, self.ended, self.steps = None, False, []

    def begin(self):
        self.gs = train.get_global_step()

    def after_create_session(self, session, coord):
        self.session = session

    def before_run(self, run_context):
        return train.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        self.steps.append(int(run_values.results))

    def end(self, session):
        self.ended = True


def _patched(variable):
    """The assign methods the bridge watches that are patched on ``variable`` itself."""
    try:
        own = vars(variable)
    except TypeError:
        return []
    return [name for name in ("assign", "assign_add", "assign_sub") if name in own]


def test_native_an_exception_leaving_the_session_closes_it_without_end():
    witness = Witness()
    with tf.Graph().as_default():
        gs = train.get_or_create_global_step()
        train_op = tf.compat.v1.assign_add(gs, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning):
                with train.MonitoredSession(hooks=[witness]) as sess:
                    sess.run(train_op)
                    warnings.warn("an error now", UserWarning, stacklevel=2)
    # One step's after_run ran. Its global step is 0 or 1: natively the hook's read of the step
    # and the unordered assign_add race in one run (DESIGN.md: the fresh value in ~18 % of
    # runs; a CI run on tfkeras read 1); the step's value is not this test's subject.
    assert witness.session._closed and not witness.ended
    assert len(witness.steps) == 1 and witness.steps[0] in (0, 1), witness.steps


class LogsExtra(keras.Model):
    """A model whose train_step logs a key the bridge's graph has no tensor for (the bridge
    warns about it at the first step)."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)

    def call(self, x):
        return self.dense(x)

    def train_step(self, data):
        logs = super().train_step(data)
        return {**logs, "extra": 1.0}


def _warning_fit(kind):
    """A fit whose bridge warns at its first step: ``spe`` (steps_per_execution, warned by the
    callback) or ``key`` (a Keras log key without a tensor, warned by the run)."""
    x, y = make_data(n=64)
    if kind == "spe":
        model = make_model(steps_per_execution=2, reuse=True)
    else:
        model = LogsExtra()
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model, x, y


@pytest.mark.parametrize("kind", ["spe", "key"])
def test_a_warning_turned_error_in_the_bridge_closes_the_run_and_the_next_fit_works(kind):
    model, x, y = _warning_fit(kind)
    witness = Witness()
    callback = hookbridge.HookCallback([witness])
    with warnings.catch_warnings():
        # the bridge's own warnings as errors (Keras 2.15's own DeprecationWarnings stay off)
        warnings.filterwarnings("error", message="HookCallback")
        with pytest.raises(UserWarning, match="HookCallback"):
            model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False,
                      callbacks=[callback])
    # as natively: the session closed, no end(); and nothing of the bridge left behind
    assert witness.session is not None and witness.session._closed
    assert not witness.ended
    assert callback.session is None and callback.graph is None
    assert _patched(model.optimizer.iterations) == []
    # the next fit (warnings as usual) runs its hooks as a first fit would
    start = int(np.asarray(model.optimizer.iterations))
    again = Witness()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False,
                  callbacks=[hookbridge.HookCallback([again])])
    end = int(np.asarray(model.optimizer.iterations))
    assert again.ended and again.session._closed
    assert again.steps == list(range(start, end, 2 if kind == "spe" else 1))
    assert _patched(model.optimizer.iterations) == []


def test_a_failure_at_the_start_of_a_run_leaves_nothing_open():
    """A hook's begin() that raises: the run closes (no session, no patch) before fit raises."""

    class Fails(train.SessionRunHook):
        def begin(self):
            raise ValueError("begin fails")

    model = make_model(reuse=True)
    x, y = make_data(n=32)
    callback = hookbridge.HookCallback([Fails()])
    with pytest.raises(ValueError, match="begin fails"):
        model.fit(x, y, batch_size=16, verbose=0, callbacks=[callback])
    assert callback.session is None and _patched(model.optimizer.iterations) == []
