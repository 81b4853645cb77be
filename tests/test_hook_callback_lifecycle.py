"""HookCallback: lifecycle, graph contents, global step staleness, stops, reuse, errors."""

from __future__ import annotations

import collections

import conftest
import numpy as np
import pytest
import reused_models
import tensorflow as tf
from conftest import make_data, make_model, run_native
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hookbridge

SessionRunArgs = tf.compat.v1.train.SessionRunArgs


class Recorder(tf.compat.v1.train.SessionRunHook):
    """Records the lifecycle and what the hook sees at each point."""

    def __init__(self, fetch=None, stop_at=None):
        self.events = []
        self.fetch = fetch
        self.stop_at = stop_at
        self.results = []

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        self.events.append(("begin", graph.finalized, tf.executing_eagerly()))
        self.gs = tf.compat.v1.train.get_global_step()

    def after_create_session(self, session, coord):
        self.events.append(("after_create_session", session.graph.finalized))
        assert isinstance(session, tf.compat.v1.Session)
        assert isinstance(coord, tf.compat.v1.train.Coordinator)

    def before_run(self, run_context):
        self.events.append(("before_run",))
        return SessionRunArgs(
            {"gs": self.gs, **({"x": self.fetch} if self.fetch is not None else {})}
        )

    def after_run(self, run_context, run_values):
        fresh = run_context.session.run(self.gs)
        self.events.append(("after_run", int(run_values.results["gs"]), int(fresh)))
        self.results.append(run_values.results)
        if self.stop_at is not None and fresh >= self.stop_at:
            run_context.request_stop()

    def end(self, session):
        self.events.append(("end", int(session.run(self.gs))))


def test_lifecycle_matches_native_monitored_session(data):
    x, y = data
    bridged = Recorder(stop_at=5)
    make_model(reuse=True).fit(
        x, y, batch_size=16, epochs=3, verbose=0, callbacks=[hookbridge.HookCallback([bridged])]
    )
    native = Recorder(stop_at=5)
    run_native([native], steps=12)
    assert bridged.events == native.events
    assert bridged.events[0] == ("begin", False, False)
    assert bridged.events[1] == ("after_create_session", True)
    # stale global step in the step's run, fresh in after_run, stop after exactly step 5
    assert [e for e in bridged.events if e[0] == "after_run"][-1] == ("after_run", 4, 5)
    assert tf.executing_eagerly()


def test_request_stop_stops_fit_after_exactly_that_step(data):
    x, y = data
    model = make_model(reuse=True)
    rec = Recorder(stop_at=7)
    history = model.fit(
        x, y, batch_size=16, epochs=10, verbose=0, callbacks=[hookbridge.HookCallback([rec])]
    )
    assert int(model.optimizer.iterations.numpy()) == 7
    assert len(history.history["loss"]) == 2  # the epoch of the stop still ends


def test_other_hooks_after_run_still_run_on_the_stop_step(data):
    x, y = data
    first, second = Recorder(stop_at=2), Recorder()
    make_model(reuse=True).fit(
        x,
        y,
        batch_size=16,
        epochs=1,
        verbose=0,
        callbacks=[hookbridge.HookCallback([first, second])],
    )
    assert [e for e in second.events if e[0] == "after_run"] == [
        ("after_run", 0, 1),
        ("after_run", 1, 2),
    ]


def test_graph_has_global_step_log_tensors_and_losses_collection(data):
    x, y = data
    seen = {}

    class Inspect(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            g = tf.compat.v1.get_default_graph()
            seen["gs"] = tf.compat.v1.train.get_global_step()
            seen["losses"] = g.get_collection(tf.compat.v1.GraphKeys.LOSSES)
            seen["loss"] = g.get_tensor_by_name("loss:0")
            seen["mae"] = g.get_tensor_by_name("mae:0")
            seen["mean"] = g.get_tensor_by_name("running_mean/loss:0")

    make_model(reuse=True).fit(
        x, y, batch_size=16, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([Inspect()])]
    )
    assert seen["gs"].dtype == tf.int64
    assert seen["losses"] == [seen["loss"]]
    assert seen["loss"].dtype == tf.float32 and seen["mean"].shape == ()


def test_loss_is_the_batch_loss_and_running_mean_is_keras_logs():
    """With learning rate 0 the model is fixed: each batch loss can be computed directly."""
    x, y = make_data(n=80)
    model = make_model(lr=0.0, reuse=True)

    def hooks():
        g = tf.compat.v1.get_default_graph()
        return [
            Recorder(
                fetch={
                    "loss": g.get_tensor_by_name("loss:0"),
                    "mean": g.get_tensor_by_name("running_mean/loss:0"),
                }
            )
        ]

    cb = hookbridge.HookCallback(hooks)
    logged = []

    class Logs(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            logged.append(logs["loss"])

    model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False, callbacks=[cb, Logs()])
    pred = model.predict(x, verbose=0)
    expected = [float(np.mean((pred[i : i + 16] - y[i : i + 16]) ** 2)) for i in range(0, 80, 16)]
    rec = cb.hooks[0]
    got = [float(r["x"]["loss"]) for r in rec.results]
    means = [float(r["x"]["mean"]) for r in rec.results]
    np.testing.assert_allclose(got, expected * 2, rtol=1e-4)
    np.testing.assert_allclose(means, logged, rtol=1e-6)
    assert not np.allclose(got[1:5], means[1:5])  # the running mean is a different quantity


def test_partial_last_batch_uses_sample_counts():
    x, y = make_data(n=70)  # batches of 16,16,16,16,6
    model = make_model(lr=0.0, reuse=True)
    cb = hookbridge.HookCallback(
        lambda: [Recorder(fetch=tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0"))]
    )
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False, callbacks=[cb])
    pred = model.predict(x, verbose=0)
    expected = [float(np.mean((pred[i : i + 16] - y[i : i + 16]) ** 2)) for i in range(0, 70, 16)]
    np.testing.assert_allclose([float(r["x"]) for r in cb.hooks[0].results], expected, rtol=1e-4)


def test_reuse_across_fits_and_global_step_continues(data):
    x, y = data
    model = make_model(reuse=True)
    rec = Recorder()
    cb = hookbridge.HookCallback([rec])
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    begins = [e for e in rec.events if e[0] == "begin"]
    ends = [e for e in rec.events if e[0] == "end"]
    assert len(begins) == 2 and ends == [("end", 4), ("end", 8)]
    assert cb.session is None


def test_fetch_structures_come_back_in_the_shape_asked_for(data):
    x, y = data
    Pair = collections.namedtuple("Pair", "loss step")
    got = []

    class Structured(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            g = tf.compat.v1.get_default_graph()
            self.gs = tf.compat.v1.train.get_global_step()
            self.fetches = {
                "list": ["loss:0", self.gs],
                "tuple": (g.get_tensor_by_name("mae:0"),),
                "nt": Pair(g.get_tensor_by_name("loss:0"), self.gs),
                "op": g.get_operation_by_name("loss"),
                "sum": g.get_tensor_by_name("loss:0") * 2.0,
            }

        def before_run(self, run_context):
            return SessionRunArgs(self.fetches)

        def after_run(self, run_context, run_values):
            got.append(run_values.results)

    make_model(reuse=True).fit(
        x,
        y,
        batch_size=16,
        epochs=1,
        verbose=0,
        callbacks=[hookbridge.HookCallback([Structured()])],
    )
    r = got[-1]
    assert isinstance(r["list"], list) and isinstance(r["tuple"], tuple)
    assert isinstance(r["nt"], Pair) and r["nt"].step == 3 and r["op"] is None
    assert r["list"][1] == 3 and r["nt"].loss == r["list"][0]
    np.testing.assert_allclose(r["sum"], 2 * r["list"][0], rtol=1e-6)


def test_feed_conflict_between_hooks_raises_native_error(data):
    x, y = data

    class Feeder(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs(None, feed_dict={"loss:0": 1.0})

    with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks"):
        make_model(reuse=True).fit(
            x,
            y,
            batch_size=16,
            epochs=1,
            verbose=0,
            callbacks=[hookbridge.HookCallback([Feeder(), Feeder()])],
        )
    # same error natively
    with pytest.raises(RuntimeError, match="Same tensor is fed by two hooks"):
        run_native(lambda: [Feeder(), Feeder()], steps=2)


def test_exception_in_hook_propagates_without_end_and_next_fit_works(data):
    x, y = data

    class Boom(Recorder):
        def after_run(self, run_context, run_values):
            super().after_run(run_context, run_values)
            if len(self.results) == 2:
                raise ValueError("boom")

    boom = Boom()
    cb = hookbridge.HookCallback([boom])
    model = make_model(reuse=True)
    with pytest.raises(ValueError, match="boom"):
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert [e[0] for e in boom.events if e[0] == "end"] == []
    assert cb.session is None
    native = Boom()
    with pytest.raises(ValueError, match="boom"):
        run_native([native], steps=4)
    assert boom.events == native.events
    ok = Recorder()
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([ok])])
    assert ok.events[-1] == ("end", 6)


def test_non_hook_is_rejected_at_construction():
    with pytest.raises(TypeError, match=r"hooks\[1\] = 'loss'.*not a tf.compat.v1.train"):
        hookbridge.HookCallback([Recorder(), "loss"])
    with pytest.raises(TypeError, match="list of tf.compat.v1.train.SessionRunHook"):
        hookbridge.HookCallback(42)


def test_unknown_tensor_name_lists_available_names(data):
    x, y = data

    class Bad(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            return SessionRunArgs("accuracy:0")

    with pytest.raises((KeyError, ValueError), match="(?s)accuracy:0.*available.*loss:0"):
        make_model(reuse=True).fit(
            x, y, batch_size=16, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([Bad()])]
        )


def test_before_run_returning_non_args_names_the_hook(data):
    x, y = data

    class Odd(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            return {"loss": "loss:0"}

    cb = hookbridge.HookCallback([Odd()])
    with pytest.raises(TypeError, match="Odd.before_run returned"):
        make_model(reuse=True).fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert cb.session is None


def test_evaluate_and_predict_run_hooks(data):
    x, y = data
    model = make_model(reuse=True)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    rec = Recorder(fetch="loss:0")
    model.evaluate(x, y, batch_size=16, verbose=0, callbacks=[hookbridge.HookCallback([rec])])
    assert [e[0] for e in rec.events].count("after_run") == 4
    assert rec.events[-1] == ("end", 4)  # evaluation does not advance the global step
    preds = []

    def hooks():
        out = tf.compat.v1.get_default_graph().get_tensor_by_name("outputs:0")
        return [Recorder(fetch=out)]

    cb = hookbridge.HookCallback(hooks)
    full = model.predict(x, batch_size=16, verbose=0, callbacks=[cb])
    preds = np.concatenate([r["x"] for r in cb.hooks[0].results])
    np.testing.assert_allclose(preds, full, rtol=1e-6)


def test_training_hooks_do_not_run_during_validation(data):
    x, y = data
    rec = Recorder()
    make_model(reuse=True).fit(
        x,
        y,
        batch_size=16,
        epochs=2,
        verbose=0,
        validation_data=(x, y),
        callbacks=[hookbridge.HookCallback([rec])],
    )
    assert [e[0] for e in rec.events].count("after_run") == 8


class _EndsInput(tf.compat.v1.train.SessionRunHook):
    """Signals the end of input after its second run; its end() then raises it too."""

    def __init__(self):
        self.events = []

    def begin(self):
        self.events.append("begin")

    def after_run(self, run_context, run_values):
        self.events.append("after_run")
        if self.events.count("after_run") == 2:
            raise tf.errors.OutOfRangeError(None, None, "input ended")

    def end(self, session):
        self.events.append("end")
        raise tf.errors.OutOfRangeError(None, None, "end() failed")


def test_end_of_input_with_validation_keeps_the_end_error_and_runs_no_hooks_there(data):
    """Natively the error end() raises reaches the caller; fit's validation, after the hooks
    ended, must neither start the training hooks again nor lose that error."""
    native = _EndsInput()
    with pytest.raises(tf.errors.OutOfRangeError, match=r"end\(\) failed"):
        run_native([native], steps=5)
    x, y = data
    bridged = _EndsInput()
    with pytest.raises(tf.errors.OutOfRangeError, match=r"end\(\) failed"):
        make_model(reuse=True).fit(
            x,
            y,
            batch_size=16,
            epochs=2,
            verbose=0,
            validation_data=(x, y),
            callbacks=[hookbridge.HookCallback([bridged])],
        )
    assert bridged.events == native.events == ["begin", "after_run", "after_run", "end"]


#: "keras" in deep only: test_one_hook_callback_through_runs_that_raise pins a Keras callback
#: raising in fit then an evaluate with the same HookCallback (the crashed run's hooks get no
#: end(), the evaluation's hooks every step and end() at the trained step), in CI on every stack.
@pytest.mark.parametrize("where", ["hook", pytest.param("keras", marks=pytest.mark.deep)])
def test_evaluate_after_a_fit_that_raised_runs_the_hooks(data, where):
    """Keras calls no on_train_end when fit raises. The same HookCallback passed to evaluate
    afterwards runs its hooks there (fit is no longer running), and the crashed run's session
    is closed without end(), as MonitoredSession closes on an exception."""
    x, y = data
    made = []

    class Fails(Recorder):
        raise_at = None  # raises in the after_run of this run (counted from 1)

        def after_run(self, run_context, run_values):
            super().after_run(run_context, run_values)
            if len(self.results) == self.raise_at:
                raise RuntimeError("hook failed")

    class KerasFails(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if where == "keras" and batch == 1:
                raise RuntimeError("keras callback failed")

    def hooks():
        made.append(Fails())
        if where == "hook" and len(made) == 1:
            made[-1].raise_at = 2
        return [made[-1]]

    cb = hookbridge.HookCallback(hooks)
    model = make_model(reuse=True)
    with pytest.raises(RuntimeError, match="failed"):
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb, KerasFails()])
    if where == "hook":  # the same hook raising in a native MonitoredSession
        native = Fails()
        native.raise_at = 2
        with pytest.raises(RuntimeError, match="hook failed"):
            run_native([native], steps=8)
        assert made[0].events == native.events
    model.evaluate(x, y, batch_size=16, verbose=0, callbacks=[cb])
    assert len(made) == 2
    trained, evaluated = made
    assert [e[0] for e in trained.events].count("after_run") == 2
    assert "end" not in [e[0] for e in trained.events]  # closed without end(), as natively
    assert [e[0] for e in evaluated.events] == [
        "begin",
        "after_create_session",
        *["before_run", "after_run"] * 4,
        "end",
    ]
    assert evaluated.events[-1] == ("end", 2)
    assert cb.session is None


_RUNS = ("fit", "fit_hook_raises", "fit_keras_raises", "evaluate", "predict")


#: CI draws one sequence beside two pinned ones (six drawn sequences were ~18 runs of ~0.5 s):
#: between them every kind of run, a run after each raising kind (an evaluation, a prediction,
#: a fit whose global step continues from the raised one), each raising kind at the first step
#: (``at=0``) and at the last (``at=3``: the epoch's fourth batch). Deep draws 100 sequences.
#: The first pins test_evaluate_after_a_fit_that_raised_runs_the_hooks[keras]'s sequence.
@settings(max_examples=max(1, settings.default.max_examples // 100))
@example(runs=["fit_keras_raises", "evaluate", "fit_hook_raises", "predict"], at=0)
@example(runs=["fit", "fit_hook_raises", "fit", "fit_keras_raises"], at=3)
@given(runs=st.lists(st.sampled_from(_RUNS), min_size=2, max_size=4), at=st.integers(0, 3))
def test_one_hook_callback_through_runs_that_raise(runs, at):
    """One HookCallback through a sequence of fit / evaluate / predict, some of which raise (a
    hook in after_run, or a Keras callback after the HookCallback, at step ``at``): each run is
    its own TF1 session, as natively each is its own MonitoredSession: every hook begins, sees
    every step of its run, and ends, except in a run that raised, which gets no end()."""
    x, y = make_data()
    # One test, many examples: the model the last example used is free again (the per-test
    # release comes only after the last example), so each example gets it back reset, traced.
    reused_models.release_all()
    model = make_model(reuse=True)
    made: list = []
    current: dict = {}

    class Rec(Recorder):
        def after_run(self, run_context, run_values):
            super().after_run(run_context, run_values)
            if current["run"] == "fit_hook_raises" and len(self.results) == at + 1:
                raise RuntimeError("hook failed")

    class KerasFails(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if current["run"] == "fit_keras_raises" and batch == at:
                raise RuntimeError("keras callback failed")

    def hooks():
        made.append(Rec())
        return [made[-1]]

    cb = hookbridge.HookCallback(hooks)
    for run in runs:
        current["run"] = run
        if run.startswith("fit"):
            call = lambda: model.fit(  # noqa: E731
                x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb, KerasFails()]
            )
        elif run == "evaluate":
            call = lambda: model.evaluate(x, y, batch_size=16, verbose=0, callbacks=[cb])  # noqa: E731
        else:
            call = lambda: model.predict(x, batch_size=16, verbose=0, callbacks=[cb])  # noqa: E731
        if run.endswith("raises"):
            with pytest.raises(RuntimeError, match="failed"):
                call()
        else:
            call()
    cb.close()
    assert len(made) == len(runs)  # one session, one set of hooks, per run
    step = 0
    for run, rec in zip(runs, made):
        steps = at + 1 if run.endswith("raises") else 4
        names = [e[0] for e in rec.events]
        assert names[:2] == ["begin", "after_create_session"], (runs, run)
        assert names[2:] == ["before_run", "after_run"] * steps + (
            [] if run.endswith("raises") else ["end"]
        ), (runs, run, names)
        # the global step a run's hooks see: fit advances it, evaluate / predict do not
        first_stale = next(e[1] for e in rec.events if e[0] == "after_run")
        assert first_stale == step, (runs, run)
        if run.startswith("fit"):
            step += steps
    assert cb.session is None


def test_steps_per_execution_runs_hooks_once_per_execution_and_warns(data):
    x, y = data
    model = make_model(steps_per_execution=2, reuse=True)
    rec = Recorder()
    with pytest.warns(UserWarning, match="steps per execution"):
        model.fit(
            x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([rec])]
        )
    assert [e for e in rec.events if e[0] == "after_run"] == [
        ("after_run", 0, 2),
        ("after_run", 2, 4),
        ("after_run", 4, 6),
        ("after_run", 6, 8),
    ]


_GRAPH_MODE_SCRIPT = r"""
import os, sys, tempfile
import numpy as np, tensorflow as tf
tf.compat.v1.disable_eager_execution()
import hookbridge
keras = tf.keras
m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
m.compile(optimizer=keras.optimizers.legacy.SGD(0.01), loss="mse", metrics=["mae"])
x = np.random.rand(64, 4).astype("float32"); y = np.random.rand(64, 1).astype("float32")
d = tempfile.mkdtemp()
hooks = [tf.compat.v1.train.StopAtStepHook(last_step=6), tf.compat.v1.train.NanTensorHook("loss:0"),
         tf.compat.v1.train.LoggingTensorHook(["loss:0", "mae:0"], every_n_iter=2),
         tf.compat.v1.train.CheckpointSaverHook(d, save_steps=2)]
m.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[hookbridge.HookCallback(hooks)])
step = keras.backend.get_value(m.optimizer.iterations)
reader = tf.train.load_checkpoint(d)
w = keras.backend.get_value(m.weights[0])
np.testing.assert_array_equal(reader.get_tensor("model/000/kernel"), w)
print("STEP", step, int(reader.get_tensor("global_step")))
"""


@pytest.mark.skipif(conftest.KERAS3, reason="Keras 3 cannot run fit in graph mode")
def test_tf_keras_graph_mode_fit(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _GRAPH_MODE_SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STEP 6 6" in out.stdout


def test_error_in_the_keras_step_is_closed_by_the_context_manager(data):
    x, y = data
    rec = Recorder()
    model = make_model(reuse=True)

    def batches():  # the input pipeline fails at the third batch: the Keras step raises
        for i in range(4):
            if i == 2:
                raise OSError("disk gone")
            yield x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16]

    with pytest.raises(Exception, match="disk gone"), hookbridge.HookCallback([rec]) as cb:
        model.fit(batches(), steps_per_epoch=4, epochs=1, verbose=0, callbacks=[cb])
    assert cb.session is None
    assert "end" not in [e[0] for e in rec.events]


@pytest.mark.skipif(not conftest.KERAS3, reason="only Keras 3 can stop evaluate early")
def test_request_stop_in_evaluate_stops_evaluation(data):
    x, y = data
    model = make_model(reuse=True)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)

    class StopAfterTwoEvals(tf.compat.v1.train.SessionRunHook):  # like Estimator's eval hook
        def __init__(self):
            self.evals = 0

        def after_run(self, run_context, run_values):
            self.evals += 1
            if self.evals == 2:
                run_context.request_stop()

    hook = StopAfterTwoEvals()
    model.evaluate(x, y, batch_size=8, verbose=0, callbacks=[hookbridge.HookCallback([hook])])
    assert hook.evals == 2


def test_a_feed_overrides_the_value_the_bridge_holds(data):
    """Feeding a log tensor (by tensor or by name) changes what every fetch of it sees, as in TF1."""
    x, y = data
    got = []

    class Feed(tf.compat.v1.train.SessionRunHook):
        def __init__(self, key):
            self.key = key

        def before_run(self, run_context):
            return SessionRunArgs(None, feed_dict={self.key: 42.0})

    class Fetch(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            self.loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            self.twice = self.loss * 2.0

        def before_run(self, run_context):
            return SessionRunArgs([self.loss, self.twice])

        def after_run(self, run_context, run_values):
            got.append([float(v) for v in run_values.results])

    for key in ("loss:0", None):
        got.clear()

        def hooks(key=key):
            k = key or tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            return [Feed(k), Fetch()]

        make_model(reuse=True).fit(
            x, y, batch_size=16, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback(hooks)]
        )
        assert got == [[42.0, 84.0]] * 4


def test_a_fetch_container_changed_in_place_is_fetched_as_it_is_now(data):
    """A hook returning the same dict every step, changed in place, gets what the dict holds at
    that step (the bridge reuses plans by identity only for single tensors, ops and names)."""
    x, y = data
    seen = []

    class Growing(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            self.fetches = {"gs": tf.compat.v1.train.get_global_step()}
            self.loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            self.calls = 0

        def before_run(self, run_context):
            self.calls += 1
            if self.calls == 3:
                self.fetches["loss"] = self.loss  # the same dict object, one key more
            return SessionRunArgs(self.fetches)

        def after_run(self, run_context, run_values):
            seen.append(sorted(run_values.results))

    make_model(reuse=True).fit(
        x, y, batch_size=16, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([Growing()])]
    )
    assert seen == [["gs"], ["gs"], ["gs", "loss"], ["gs", "loss"]]
