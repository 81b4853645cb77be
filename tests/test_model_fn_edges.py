"""Edges where ``model_fn_model`` could silently differ from the Estimator.

Mixed precision: under a ``mixed_float16`` global policy, Keras' ``__call__`` would cast the
float32 features to float16 before the ``model_fn`` ran; the Estimator fed the ``model_fn`` what
the ``input_fn`` gave. The native side here is the ``model_fn`` run in a TF1 graph and session
(what ``Estimator.predict`` does) on the same features and initial weights.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import hookbridge
from hookbridge.estimator_compat import EstimatorSpec, ModeKeys

v1 = tf.compat.v1
#: Values float16 rounds (float16 keeps ~3 decimal digits).
FEATURES = {"x": np.array([[1.2345678, -2.7182817], [3.1415927, 0.5772157]], np.float32)}
W = [[0.3123457], [-0.2718282]]
#: The dtype of the features each model_fn call saw (params are deep-copied).
SEEN: list = []


def _model_fn(features, labels, mode, params):
    x = features["x"]
    SEEN.append(x.dtype.name)
    w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(W))
    b = v1.get_variable("b", [1], initializer=v1.constant_initializer([0.1]))
    pred = tf.matmul(x, w) + b
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"y": pred})
    loss = tf.reduce_mean(tf.square(pred - labels))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_or_create_global_step()
    )
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def _native() -> np.ndarray:
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None, 2])
        spec = _model_fn({"x": x}, None, ModeKeys.PREDICT, {})
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            return sess.run(spec.predictions["y"], {x: FEATURES["x"]})


def test_mixed_float16_policy_does_not_cast_the_features():
    native = _native()
    before = tf.keras.mixed_precision.global_policy()
    SEEN.clear()
    try:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
        model = hookbridge.model_fn_model(
            _model_fn, params={}, features=FEATURES, labels=np.zeros((2, 1), "float32")
        )
        call = np.asarray(model(FEATURES)["y"])
        predict = np.asarray(model.predict(FEATURES, verbose=0)["y"])
    finally:
        tf.keras.mixed_precision.set_global_policy(before)
    assert set(SEEN) == {"float32"}, SEEN
    np.testing.assert_array_equal(call, native)
    np.testing.assert_array_equal(predict, native)
