"""What the bridges call without switching modes: built-in hook methods HookCallback calls
without entering its graph (graph_free.py), Keras callback methods CallbackHook calls without
switching to eager mode (_tfcompat.EAGER_FREE_CALLBACKS).

The lists are safe only while the source of those methods is what was read: it is pinned here,
and everything else (a user's hook or callback, a subclass, a built-in holding user code) must
still run in the mode it ran in natively.
"""

from __future__ import annotations

import hashlib
import inspect

import pytest
import tensorflow as tf
from conftest import make_data, make_model, step_reads

import hookbridge
from hookbridge._callback_hook.dispatch import needs_eager
from hookbridge._hook_callback.graph_free import GRAPH_FREE, needs_graph
from hookbridge._tfcompat import EAGER_FREE_CALLBACKS as EAGER_FREE

keras = tf.keras
train = tf.compat.v1.train

#: sha256 (first 16 hex digits) of ``inspect.getsource`` of each listed method and helper, as
#: read in TF 2.15.1 and 2.21.0 (identical in both).
PINNED = {
    ("StopAtStepHook", "after_run"): "d8589c672dc5ed39",
    ("StopAtStepHook", "before_run"): "08d60016285a4fa7",
    ("NanTensorHook", "after_run"): "290bbacf50688a10",
    ("NanTensorHook", "before_run"): "6380bbe61a4e85bc",
    ("LoggingTensorHook", "after_run"): "bc05eca60bcddd9c",
    ("LoggingTensorHook", "before_run"): "b84507e98cbf63cd",
    ("LoggingTensorHook", "_log_tensors"): "b2cc6273e0c95af1",
    ("StepCounterHook", "after_run"): "16073ce324d40d9a",
    ("StepCounterHook", "before_run"): "08d60016285a4fa7",
    ("StepCounterHook", "_log_and_record"): "2e884ca1ed6acb55",
    ("SummarySaverHook", "after_run"): "857b3d799d49af66",
    ("SummarySaverHook", "before_run"): "ad947da6a9efe8d3",
    ("SummarySaverHook", "_get_summary_op"): "76f838982ce8578a",
    ("CheckpointSaverHook", "before_run"): "08d60016285a4fa7",
    ("GlobalStepWaiterHook", "before_run"): "38fed202f905ee2f",
}

LISTED = [
    (cls, name)
    for cls, entry in GRAPH_FREE.items()
    for name in (*sorted(entry.methods), *entry.helpers)
]


def test_every_listed_method_is_pinned():
    assert {(cls.__name__, name) for cls, name in LISTED} == set(PINNED)


@pytest.mark.parametrize("cls, name", LISTED, ids=lambda v: getattr(v, "__name__", v))
def test_listed_method_source_is_the_one_read(cls, name):
    source = inspect.getsource(getattr(cls, name))
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    assert digest == PINNED[(cls.__name__, name)], (
        f"TensorFlow {tf.__version__} changed {cls.__name__}.{name}. Re-read it: if it now reads "
        "the default graph, eager mode or calls user code, drop it from GRAPH_FREE in "
        "hookbridge/_hook_callback/graph_free.py; then update PINNED here."
    )


def test_needs_graph_for_everything_not_listed(tmp_path):
    class MyHook(train.SessionRunHook):
        def before_run(self, run_context):
            return None

    class MyNan(train.NanTensorHook):
        pass

    with tf.Graph().as_default():
        train.get_or_create_global_step()
        loss = tf.constant(1.0, name="loss")
        nan = train.NanTensorHook(loss)
        assert not needs_graph(nan, "before_run")
        assert not needs_graph(nan, "after_run")
        assert needs_graph(MyHook(), "before_run")
        assert needs_graph(MyNan(loss), "after_run")  # a subclass may override anything

        saver = train.CheckpointSaverHook(str(tmp_path), save_steps=1)
        assert not needs_graph(saver, "before_run")
        assert needs_graph(saver, "after_run")  # Saver.save needs graph mode

        replaced = train.StopAtStepHook(last_step=3)
        replaced.after_run = lambda run_context, run_values: None
        assert not needs_graph(replaced, "before_run")
        assert needs_graph(replaced, "after_run")

        plain = train.LoggingTensorHook({"loss": loss}, every_n_iter=1)
        formatted = train.LoggingTensorHook({"loss": loss}, every_n_iter=1, formatter=str)
        assert not needs_graph(plain, "after_run")
        assert needs_graph(formatted, "after_run")  # the formatter is user code

        class Writer:  # not a FileWriter: its add_summary is user code
            def add_summary(self, summary, step):
                pass

            def add_session_log(self, log, step):
                pass

        op = tf.compat.v1.summary.scalar("loss", loss)
        to_file = train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path), summary_op=op)
        to_writer = train.SummarySaverHook(save_steps=1, summary_writer=Writer(), summary_op=op)
        to_file.begin()
        to_writer.begin()
        assert not needs_graph(to_file, "after_run")
        assert needs_graph(to_writer, "after_run")


def test_hooks_needing_the_graph_see_it_beside_graph_free_ones():
    """A user's hook (and a LoggingTensorHook formatter) next to graph-free built-ins still runs
    with the bridge's graph as the default graph, in graph mode, as in MonitoredSession."""
    seen = []

    class Probe(train.SessionRunHook):
        def begin(self):
            self.graph = tf.compat.v1.get_default_graph()

        def before_run(self, run_context):
            seen.append(("before", tf.compat.v1.get_default_graph() is self.graph))
            seen.append(("before eager", tf.executing_eagerly()))

        def after_run(self, run_context, run_values):
            seen.append(("after", tf.compat.v1.get_default_graph() is self.graph))
            seen.append(("after eager", tf.executing_eagerly()))
            seen.append(("step", tf.compat.v1.train.get_global_step() is not None))

    def formatter(values):
        seen.append(("formatter eager", tf.executing_eagerly()))
        return f"loss={values['loss']}"

    def hooks():
        return [
            train.NanTensorHook("loss:0"),
            Probe(),
            train.LoggingTensorHook({"loss": "loss:0"}, every_n_iter=2, formatter=formatter),
            train.StopAtStepHook(last_step=4),
        ]

    x, y = make_data(n=64)
    model = make_model(reuse=True)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback(hooks)])
    assert int(model.optimizer.iterations.numpy()) == 4  # StopAtStepHook, graph-free, stopped it
    assert seen.count(("before", True)) == seen.count(("after", True)) == 4
    assert seen.count(("before eager", False)) == seen.count(("after eager", False)) == 4
    assert seen.count(("step", True)) == 4
    assert seen.count(("formatter eager", False)) == 2  # steps 1 and 3
    assert ("formatter eager", True) not in seen


# -- CallbackHook: Keras callback methods called without switching to eager mode ---------------
#: (module, class, method) -> sha256 prefix, for each stack's TerminateOnNaN (tf_keras 2.21 and
#: Keras 2.15 share one source). ``on_train_batch_end`` is the base class's.
PINNED_CALLBACKS = {
    ("keras.src.callbacks.terminate_on_nan", "on_train_batch_end"): "df49b6f88f935299",
    ("keras.src.callbacks.terminate_on_nan", "on_batch_end"): "7e2df94764cf967a",
    ("tf_keras.src.callbacks", "on_train_batch_end"): "78dd769c3cfd61e1",
    ("tf_keras.src.callbacks", "on_batch_end"): "1cc8a7c29aae69ce",
    ("keras.src.callbacks", "on_train_batch_end"): "78dd769c3cfd61e1",
    ("keras.src.callbacks", "on_batch_end"): "1cc8a7c29aae69ce",
}


def test_this_stacks_terminate_on_nan_is_listed_and_pinned():
    kind = keras.callbacks.TerminateOnNaN
    names = EAGER_FREE.get((kind.__module__, kind.__qualname__))
    assert names, f"{kind.__module__}.{kind.__qualname__} is not in _tfcompat.EAGER_FREE_CALLBACKS"
    for name in names:
        source = inspect.getsource(getattr(kind, name))
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        assert digest == PINNED_CALLBACKS[(kind.__module__, name)], (
            f"Keras changed {kind.__module__}.TerminateOnNaN.{name}. Re-read it: if it now needs "
            "eager mode, drop it from EAGER_FREE_CALLBACKS in hookbridge/_tfcompat/callbacks.py; then "
            "update PINNED_CALLBACKS here."
        )


def test_needs_eager_for_everything_not_listed():
    class MyNaN(keras.callbacks.TerminateOnNaN):
        pass

    nan = keras.callbacks.TerminateOnNaN()
    assert not needs_eager(nan.on_train_batch_end)
    assert needs_eager(MyNaN().on_train_batch_end)
    assert needs_eager(keras.callbacks.LambdaCallback(on_batch_end=print).on_train_batch_end)
    assert needs_eager(keras.callbacks.EarlyStopping().on_epoch_end)
    replaced = keras.callbacks.TerminateOnNaN()
    replaced.on_batch_end = lambda batch, logs=None: None
    assert needs_eager(replaced.on_train_batch_end)


def _nan_graph():
    g = tf.Graph()
    with g.as_default():
        gs = train.get_or_create_global_step()
        value = tf.compat.v1.placeholder(tf.float32, [], name="value")
        tf.identity(value, name="loss")
        with tf.control_dependencies(step_reads(gs)):
            step = tf.compat.v1.assign_add(gs, 1)
    return g, value, step


def _run_session(g, value, step, hooks, values):
    n = 0
    with g.as_default(), train.MonitoredSession(hooks=hooks) as sess:
        for v in values:
            if sess.should_stop():
                break
            sess.run(step, {value: v})
            n += 1
    return n


def test_terminate_on_nan_alone_stops_at_the_nan_batch():
    g, value, step = _nan_graph()
    hook = hookbridge.CallbackHook([keras.callbacks.TerminateOnNaN()], logs={"loss": "loss"})
    assert _run_session(g, value, step, [hook], [1.0, 2.0, float("inf"), 1.0, 1.0]) == 3


def test_callbacks_needing_eager_mode_get_it_beside_terminate_on_nan():
    seen = []

    class Probe(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(tf.executing_eagerly())

    g, value, step = _nan_graph()
    callbacks = [keras.callbacks.TerminateOnNaN(), Probe()]
    hook = hookbridge.CallbackHook(callbacks, logs={"loss": "loss"})
    assert _run_session(g, value, step, [hook], [1.0, 2.0, float("nan"), 1.0]) == 3
    assert seen == [True, True, True]
