"""Edges where ``model_fn_model`` could silently differ from the Estimator.

The global step: the Estimator makes it before calling the ``model_fn`` in every mode, so the
pattern of TensorFlow's custom-Estimator guide, ``minimize(loss,
global_step=tf.compat.v1.train.get_global_step())`` (and a learning-rate decay on that step),
finds it. ``model_fn_model`` made it only when the ``model_fn`` asked ``get_or_create``: such a
``model_fn`` trained without counting its steps, or failed in its decay. The native side is the
``model_fn`` trained in a TF1 graph and session, as the Estimator runs it.

Mixed precision: under a ``mixed_float16`` global policy, Keras' ``__call__`` would cast the
float32 features to float16 before the ``model_fn`` ran; the Estimator fed the ``model_fn`` what
the ``input_fn`` gave. The native side here is the ``model_fn`` run in a TF1 graph and session
(what ``Estimator.predict`` does) on the same features and initial weights.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import hookbridge
from hookbridge._hook_callback.graph import tf1_names
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


# ---- a SparseTensor example batch (what an input_fn's parse_example yields) ----
#: (mode, whether get_global_step() found the step) per model_fn call.
STEP_FOUND: list = []


def _guide_model_fn(features, labels, mode, params):
    """The custom-Estimator guide's pattern: the step from ``get_global_step()``, never made."""
    step = v1.train.get_global_step()
    STEP_FOUND.append((mode, step is not None))
    w = v1.get_variable("w", [2, 1], initializer=v1.constant_initializer(W))
    b = v1.get_variable("b", [1], initializer=v1.constant_initializer([0.1]))
    pred = tf.matmul(features["x"], w) + b
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions={"y": pred})
    loss = tf.reduce_mean(tf.square(pred - labels))
    if mode == ModeKeys.EVAL:
        return EstimatorSpec(mode, loss=loss)
    rate = v1.train.exponential_decay(0.1, step, decay_steps=2, decay_rate=0.5, staircase=True)
    train_op = v1.train.GradientDescentOptimizer(rate).minimize(loss, global_step=step)
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def _guide_batches():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 2, 2)).astype(np.float32)
    return x, (x @ np.array([[0.5], [-1.0]], np.float32) + 0.2).astype(np.float32)


def test_get_global_step_finds_the_step_as_under_the_estimator():
    x, y = _guide_batches()
    with tf.Graph().as_default():  # native: the Estimator's graph, its step made first
        step = v1.train.get_or_create_global_step()
        xs, ys = v1.placeholder(tf.float32, [None, 2]), v1.placeholder(tf.float32, [None, 1])
        spec = _guide_model_fn({"x": xs}, ys, ModeKeys.TRAIN, {})
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for k in range(4):
                sess.run(spec.train_op, {xs: x[k], ys: y[k]})
            native_step = sess.run(step)
            native = {v.op.name: sess.run(v) for v in v1.trainable_variables()}
    STEP_FOUND.clear()
    model = hookbridge.model_fn_model(_guide_model_fn, features={"x": x[0]}, labels=y[0])
    model.fit({"x": x.reshape(-1, 2)}, y.reshape(-1, 1), batch_size=2, shuffle=False, verbose=0)
    model.evaluate({"x": x[0]}, y[0], verbose=0)
    assert native_step == 4 and int(model.optimizer.iterations.numpy()) == 4
    names = tf1_names(model)
    trained = {names[i]: w.numpy() for i, w in enumerate(model.weights) if i in names}
    assert sorted(trained) == sorted(native) == ["b", "w"]
    for name, value in native.items():  # the decayed rate (0.1, 0.1, 0.05, 0.05) applied
        np.testing.assert_allclose(trained[name], value, rtol=1e-6, err_msg=name)
    modes = {mode for mode, _ in STEP_FOUND}
    assert modes == {ModeKeys.PREDICT, ModeKeys.TRAIN, ModeKeys.EVAL}, STEP_FOUND
    assert all(found for _, found in STEP_FOUND), STEP_FOUND


def _sparse_batch() -> tf.SparseTensor:
    return tf.sparse.SparseTensor([[0, 0], [1, 1], [1, 2]], [1.0, -0.5, 2.0], [2, 3])


def _sparse_model_fn(features, labels, mode):
    x = tf.sparse.to_dense(features["s"])
    w = v1.get_variable("w", [3, 1], initializer=v1.constant_initializer([[0.5], [-0.25], [0.125]]))
    pred = tf.matmul(x, w)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=pred)
    loss = tf.reduce_mean(tf.square(pred - labels))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_or_create_global_step()
    )
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_sparse_example_batch_builds_and_trains_as_the_session():
    labels = np.array([[1.0], [-1.0]], np.float32)
    # Native: one TRAIN step of the model_fn in a TF1 session, then its predictions.
    with tf.Graph().as_default():
        sp = v1.sparse_placeholder(tf.float32, [None, 3])
        y = v1.placeholder(tf.float32, [None, 1])
        spec = _sparse_model_fn({"s": sp}, y, ModeKeys.TRAIN)
        pred = v1.get_default_graph().get_tensor_by_name("MatMul:0")
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            value = v1.SparseTensorValue([[0, 0], [1, 1], [1, 2]], [1.0, -0.5, 2.0], [2, 3])
            native_loss = sess.run([spec.train_op, spec.loss], {sp: value, y: labels})[1]
            native = sess.run(pred, {sp: value})
    model = hookbridge.model_fn_model(
        _sparse_model_fn, features={"s": _sparse_batch()}, labels=labels
    )
    history = model.fit(tf.data.Dataset.from_tensors(({"s": _sparse_batch()}, labels)), verbose=0)
    np.testing.assert_allclose(history.history["loss"], [native_loss], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model({"s": _sparse_batch()})), native, rtol=1e-6)


# ---- a model_fn's own TRAIN summaries: not written under fit, and said so ----
def _summary_model_fn(features, labels, mode):
    w = v1.get_variable("w", [3, 1], initializer=v1.constant_initializer(0.1))
    pred = tf.matmul(features, w)
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=pred)
    loss = tf.reduce_mean(tf.square(pred - labels))
    v1.summary.scalar("my_metric", loss * 2.0)
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=v1.train.get_or_create_global_step()
    )
    return EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_train_summaries_not_written_are_named_in_a_warning():
    import warnings

    x = np.arange(12, dtype="float32").reshape(4, 3) / 10
    y = np.ones((4, 1), "float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = hookbridge.model_fn_model(_summary_model_fn, features=x, labels=y)
        model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(2), verbose=0)
    named = [
        str(w.message)
        for w in caught
        if "summaries ['my_metric'] are not written" in str(w.message)
    ]
    assert len(named) == 1, [str(w.message) for w in caught]
