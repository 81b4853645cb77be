"""HookCallback under predict: a hook reading the model's outputs sees each output's own tensor.

Natively (a TF1 graph over the same model, as ``Estimator.predict``'s predictions dict) a hook
fetches each output's tensor in its own shape and dtype. The bridge's graph holds ``outputs`` for a
model of one output and ``outputs/<name>`` per output of a model of several; nothing is stacked
into one array or cast (hookbridge/_hook_callback/outputs.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

keras = tf.keras
_X = np.random.RandomState(0).rand(20, 3).astype("float32")  # batches 8, 8, 4 (ragged last)


class _ArgMax(keras.layers.Layer):
    def call(self, x):
        return tf.argmax(x, axis=-1)  # int64, as a TF1 classes tensor


class _Record(tf.compat.v1.train.SessionRunHook):
    """Fetches ``make(graph)`` every run; keeps what each run returned."""

    def __init__(self, make):
        self.make, self.got = make, []

    def begin(self):
        self.fetches = self.make(tf.compat.v1.get_default_graph())

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self.fetches)

    def after_run(self, run_context, run_values):
        self.got.append(run_values.results)


def _model(dict_outputs=False):
    inp = keras.Input((3,))
    a = keras.layers.Dense(2, name="a")(inp)
    b = keras.layers.Dense(4, name="b")(inp)
    cls = _ArgMax(name="cls")(b)
    outs = {"zz": b, "aa": a, "cls": cls} if dict_outputs else [a, b, cls]
    return keras.Model(inp, outs)


def _native(model):
    """A TF1 graph computing the model's outputs from its weights, read by a hook each batch
    under a MonitoredSession: what the hook sees natively."""
    (wa, ba), (wb, bb) = model.get_layer("a").get_weights(), model.get_layer("b").get_weights()
    with tf.Graph().as_default():
        x = tf.compat.v1.data.make_one_shot_iterator(
            tf.data.Dataset.from_tensor_slices(_X).batch(8)
        ).get_next()
        b = tf.matmul(x, wb) + bb
        outs = {"a": tf.matmul(x, wa) + ba, "b": b, "cls": tf.argmax(b, axis=-1)}
        outs["sum_b"] = tf.reduce_sum(b)
        hook = _Record(lambda graph: outs)
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as session:
            while not session.should_stop():
                session.run(outs["a"].op)
    return hook.got


def _compare(bridged, native):
    assert len(bridged) == len(native) == 3
    for got, want in zip(bridged, native):
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            assert np.shape(got[key]) == np.shape(value), key
            assert np.asarray(got[key]).dtype == np.asarray(value).dtype, key
            np.testing.assert_allclose(got[key], value, rtol=1e-6, atol=1e-6, err_msg=key)


def test_each_output_of_a_multi_output_model_is_its_own_tensor_as_natively():
    model = _model()

    def fetches(graph):
        b = graph.get_tensor_by_name("outputs/b:0")
        return {
            "a": graph.get_tensor_by_name("outputs/a:0"),
            "b": b,
            "cls": graph.get_tensor_by_name("outputs/cls:0"),
            "sum_b": tf.reduce_sum(b),  # a run of the bridge's graph, fed the batch's array
        }

    cb = hookbridge.HookCallback(lambda: [_Record(fetches)])
    predicted = model.predict(_X, batch_size=8, verbose=0, callbacks=[cb])
    _compare(cb.hooks[0].got, _native(model))
    assert [r["cls"].dtype for r in cb.hooks[0].got] == [predicted[2].dtype] * 3


def test_a_dict_of_outputs_names_each_tensor_by_its_key():
    model = _model(dict_outputs=True)
    names = {"a": "aa", "b": "zz", "cls": "cls"}

    def fetches(graph):
        return {k: graph.get_tensor_by_name(f"outputs/{v}:0") for k, v in names.items()}

    cb = hookbridge.HookCallback(lambda: [_Record(fetches)])
    model.predict(_X, batch_size=8, verbose=0, callbacks=[cb])
    native = [{k: v for k, v in r.items() if k != "sum_b"} for r in _native(model)]
    _compare(cb.hooks[0].got, native)


def test_outputs_of_a_multi_output_model_is_refused_naming_each_output():
    cb = hookbridge.HookCallback(lambda: [_Record(lambda g: g.get_tensor_by_name("outputs:0"))])
    with pytest.raises(KeyError, match=r"outputs/a:0.*outputs/b:0.*outputs/cls:0"):
        _model().predict(_X, batch_size=8, verbose=0, callbacks=[cb])


class TwoOutputs(keras.Model):
    def call(self, x):
        return [x, tf.reduce_sum(x, axis=-1)]


@pytest.mark.parametrize("derived", [False, True])
def test_several_outputs_the_bridge_could_not_see_are_refused_not_stacked(derived):
    def fetches(graph):
        out = graph.get_tensor_by_name("outputs:0")
        return tf.identity(out) if derived else out

    cb = hookbridge.HookCallback(lambda: [_Record(fetches)])
    with pytest.raises(
        ValueError,
        match=r"this batch has 2 \(list \['\[0\]', '\[1\]'\]\).*"
        r"keras.Model\(inputs, outputs\)",
    ):
        TwoOutputs().predict(_X, batch_size=8, verbose=0, callbacks=[cb])
