"""Bad input, generated: every wrong argument gets a documented exception naming the object, and
nothing is half-run (no session left open, no file written in the output directories)."""

from __future__ import annotations

import functools
import os
import re
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_data, make_model
from hypothesis import example, given, settings
from hypothesis import strategies as st

import hookbridge

keras = tf.keras

# Values that are neither hooks nor callbacks (nor lists of them).
junk = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.builds(object),
    st.just(keras.callbacks.History),  # a class, not an instance
    st.builds(lambda: np.zeros(2)),
)
identifiers = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)


#: The tests that run a fit (or a MonitoredSession) per example draw this many in CI, beside an
#: ``@example`` of every kind of value their strategy can draw (each kind takes a different path
#: into the message); the deep profile keeps its full count. The calls cost ~0.33 s an example.
_FEW = settings(max_examples=min(settings.default.max_examples, 5))

#: One value of each kind ``junk`` draws but None: the ``@example``s those tests pin.
_JUNK_KINDS = (
    1,
    float("nan"),
    "x",
    b"\x00",
    {"a": 1},
    object(),
    keras.callbacks.History,
    np.zeros(2),
)


def _pinned(*values):
    """``@example(bad=value)`` for each of ``values``."""

    def pin(test):
        for value in values:
            test = example(bad=value)(test)
        return test

    return pin


def _names(obj, message):
    """Whether ``message`` names ``obj`` (its repr, as the messages print it)."""
    return repr(obj) in message or type(obj).__name__ in message


@functools.cache
def _model():
    return make_model()


def _fit(callback, outdir=None):
    x, y = make_data(n=32)
    _model().fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[callback])


def _files(directory):
    return [os.path.join(r, f) for r, _, fs in os.walk(directory) for f in fs]


# ------------------------------------------------------------------------ HookCallback (dir. 1)
@given(bad=junk)
def test_hook_callback_rejects_non_hook_lists(bad):
    if callable(bad):  # a class is a hooks callable: checked when it is called, below
        return
    with pytest.raises(TypeError, match="HookCallback") as info:
        hookbridge.HookCallback([tf.compat.v1.train.StopAtStepHook(last_step=1), bad])
    assert "hooks[1]" in str(info.value) and _names(bad, str(info.value))
    if not hasattr(bad, "__iter__") or isinstance(bad, (str, bytes)):
        with pytest.raises(TypeError, match="HookCallback") as info:
            hookbridge.HookCallback(bad)
        assert _names(bad, str(info.value))


@_FEW
@given(bad=st.one_of(junk, st.lists(junk, min_size=1, max_size=2)))
@_pinned(None, *_JUNK_KINDS, [1], [None, "x"])
def test_hooks_callable_returning_junk_is_refused_before_any_hook_runs(bad):
    with tempfile.TemporaryDirectory() as d:
        cb = hookbridge.HookCallback(
            lambda: (
                [tf.compat.v1.train.CheckpointSaverHook(d, save_steps=1), bad]
                if not isinstance(bad, list)
                else bad
            )
        )
        with pytest.raises(TypeError, match="HookCallback") as info:
            _fit(cb)
        assert _names(bad if not isinstance(bad, list) else bad[0], str(info.value))
        assert cb.session is None
        assert _files(d) == []


class Returns(tf.compat.v1.train.SessionRunHook):
    def __init__(self, value):
        self.value = value

    def before_run(self, run_context):
        return self.value


@_FEW
@given(bad=st.one_of(junk.filter(lambda v: v is not None), st.just("loss:0"), st.just(["loss"])))
@_pinned(*_JUNK_KINDS, 0.5, "loss:0", ["loss"])
def test_before_run_returning_non_session_run_args(bad):
    cb = hookbridge.HookCallback([Returns(bad)])
    with pytest.raises(TypeError, match=r"Returns\.before_run returned .*SessionRunArgs") as info:
        _fit(cb)
    assert _names(bad, str(info.value))
    assert cb.session is None


fetch_junk = st.one_of(
    st.integers(),
    st.floats(),
    st.builds(object),
    st.binary(min_size=1, max_size=4),
    identifiers.map(lambda s: "nope_" + s + ":0"),
    identifiers.map(lambda s: {"k": "nope_" + s}),
    st.builds(lambda: [None]),
)


@_FEW
@given(bad=fetch_junk)
@example(bad=1)
@example(bad=0.5)
@example(bad=object())
@example(bad=b"\x01")
@example(bad="nope_a:0")
@example(bad={"k": "nope_a"})
@example(bad=[None])
def test_before_run_fetching_junk(bad):
    cb = hookbridge.HookCallback([Returns(tf.compat.v1.train.SessionRunArgs(bad))])
    with pytest.raises((TypeError, ValueError, KeyError)) as info:
        _fit(cb)
    message = str(info.value)
    leaf = bad["k"] if isinstance(bad, dict) else bad[0] if isinstance(bad, list) else bad
    assert _names(leaf, message) or str(leaf).split(":")[0] in message, message
    assert cb.session is None


def test_conflicting_feeds_and_feed_of_unknown_tensor():
    class Feeds(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            return tf.compat.v1.train.SessionRunArgs(None, feed_dict={loss: 1.0})

    cb = hookbridge.HookCallback([Feeds(), Feeds()])
    with pytest.raises(RuntimeError, match=r"Same tensor is fed by two hooks.*loss"):
        _fit(cb)
    assert cb.session is None


def test_feed_of_an_unknown_tensor_is_refused():
    cb = hookbridge.HookCallback([Returns(tf.compat.v1.train.SessionRunArgs(None, {"nope:0": 1}))])
    with pytest.raises((TypeError, ValueError, KeyError), match="nope"):
        _fit(cb)
    assert cb.session is None


# ------------------------------------------------------------------------ CallbackHook (dir. 2)
@given(bad=junk)
def test_callback_hook_rejects_non_callbacks(bad):
    with pytest.raises(TypeError, match="CallbackHook") as info:
        hookbridge.CallbackHook([keras.callbacks.History(), bad], logs={"loss": "loss"})
    assert "callbacks[1]" in str(info.value) and _names(bad, str(info.value))


@given(bad=st.one_of(st.integers(), st.text(max_size=4), st.lists(st.integers(), max_size=2)))
def test_callback_hook_rejects_bad_logs_mapping(bad):
    with pytest.raises(TypeError, match="logs must be a mapping") as info:
        hookbridge.CallbackHook([keras.callbacks.History()], logs=bad)
    assert _names(bad, str(info.value))


@given(spe=st.one_of(st.integers(max_value=0), st.floats(), st.text(max_size=3), st.just(True)))
def test_callback_hook_rejects_bad_steps_per_epoch(spe):
    if spe is True:  # bool is an int: True is a valid 1
        return
    with pytest.raises(ValueError, match="steps_per_epoch") as info:
        hookbridge.CallbackHook([], logs={}, steps_per_epoch=spe)
    assert repr(spe) in str(info.value)


def _session(hook, steps=2):
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.constant(1.0, name="loss")
        train = gs.assign_add(1)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(steps):
                sess.run(train)
        del loss


@given(
    key=identifiers,
    value=st.one_of(
        identifiers.map(lambda s: "nope_" + s),
        st.integers(),
        st.floats(),
        st.none(),
        st.builds(object),
    ),
)
def test_callback_hook_bad_log_values_fail_in_begin_before_any_callback(key, value):
    with tempfile.TemporaryDirectory() as d:
        csv_logger = keras.callbacks.CSVLogger(os.path.join(d, "log.csv"))
        hook = hookbridge.CallbackHook([csv_logger], logs={key: value})
        with pytest.raises((TypeError, ValueError), match=re.escape(f"logs[{key!r}]")) as info:
            _session(hook)
        assert _names(value, str(info.value))
        assert _files(d) == []  # the session never started: no callback ran


@_FEW
@given(attr=identifiers)
@example(attr="zz")  # unknown to the model and to the optimizer
@example(attr="optimizer")  # a model attribute Keras has
@example(attr="layers")
@example(attr="stop_training")
def test_callback_reading_an_odd_model_attribute_is_named(attr):
    seen = {}

    class Curious(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["value"] = getattr(self.model, attr, "missing")
            self.model.stop_training = attr  # any value: truthiness decides, as in Keras
            setattr(self.model, "x_" + attr, 1)  # callbacks may set their own attributes

        def on_epoch_end(self, epoch, logs=None):
            seen["set"] = getattr(self.model, "x_" + attr)
            getattr(self.model.optimizer, attr)

    g_attrs = {
        "layers",
        "train_function",
        "train_tf_function",
        "make_train_function",
        "distribute_strategy",
        "built",
        "name",
        "optimizer",
        "metrics",
        "weights",
        "trainable_weights",
        "trainable_variables",
        "stop_training",
        "get_weights",
        "set_weights",
        "save",
        "save_weights",
    }
    hook = hookbridge.CallbackHook([Curious()], logs={"loss": "loss"}, steps_per_epoch=1)
    try:
        _session(hook, steps=1)
    except hookbridge.UnsupportedModelAttributeError as e:
        assert f"Curious accessed `model.optimizer.{attr}`" in str(e)
        assert e.attribute == attr and e.callback == "Curious"
    if attr not in g_attrs:
        assert seen["value"] == "missing"  # hasattr() is False, as Keras expects
    assert seen.get("set", 1) == 1
