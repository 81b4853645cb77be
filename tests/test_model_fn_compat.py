"""hookbridge.estimator_compat: the tf.estimator names and tf.compat.v1.layers a model_fn uses.

The oracle of the layers is TensorFlow's own ``tf.compat.v1.layers`` (tf_keras, TF 2.15) in a TF1
graph beside hookbridge's in another: the same variables (names, shapes, order, collections),
the same outputs for the same weights, the same ``UPDATE_OPS`` and moving statistics.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hookbridge._migrate.model_fn import compat, v1_layers
from hookbridge.estimator_compat import EstimatorSpec, ModeKeys, TPUEstimatorSpec, layers

try:
    tf.compat.v1.layers.dense  # noqa: B018
    NATIVE_LAYERS = tf.compat.v1.layers
except AttributeError:  # Keras 3
    NATIVE_LAYERS = None
needs_native_layers = pytest.mark.skipif(
    NATIVE_LAYERS is None, reason="Keras 3 has no tf.compat.v1.layers to compare with"
)


def _network(lib, images, training):
    """Every layer, twice where names uniquify, inside an enclosing variable scope."""
    with tf.compat.v1.variable_scope("net"):
        x = lib.conv2d(images, 3, 3, padding="same", activation=tf.nn.relu)
        x = lib.batch_normalization(x, training=training, momentum=0.9)
        x = lib.conv2d(x, 4, (2, 2), strides=(1, 1))
        x = lib.max_pooling2d(x, 2, 2)
        x = lib.flatten(x)
        x = lib.dense(x, 5, activation=tf.nn.tanh)
        x = lib.batch_normalization(x, training=training, name="bn")
        x = lib.dropout(x, rate=0.3, seed=7, training=training)
        a = lib.dense(x, 2, use_bias=False)
        b = lib.dense(x, 2, use_bias=False, name="dense_1", reuse=True)  # dense_1 again
    return a + b


def _run(lib, training, weights=None, steps=2):
    rng = np.random.default_rng(0)
    images = rng.normal(size=(4, 6, 6, 2)).astype("float32")
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(3)
        out = _network(lib, tf.constant(images), training)
        variables = tf.compat.v1.global_variables()
        trainable = {v.op.name for v in tf.compat.v1.trainable_variables()}
        updates = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            if weights is not None:
                for v in variables:
                    v.load(weights[v.op.name], session)
            values = {v.op.name: session.run(v) for v in variables}
            outputs = []
            for _ in range(steps):
                outputs.append(session.run([out, *updates])[0])
            after = {v.op.name: session.run(v) for v in variables}
    shapes = [(v.op.name, tuple(v.shape.as_list())) for v in variables]
    return shapes, trainable, len(updates), values, outputs, after


@needs_native_layers
@pytest.mark.parametrize("training", [True, False])
def test_the_layers_are_tensorflows_in_a_graph(training):
    shapes, trainable, n_updates, values, outputs, after = _run(NATIVE_LAYERS, training)
    mine = _run(v1_layers, training, weights=values)
    assert mine[0] == shapes  # the same variables, names and order
    assert mine[1] == trainable and mine[2] == n_updates == (4 if training else 0)
    for theirs, ours in zip(outputs, mine[4]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    for name, value in after.items():  # the moving statistics after two updates
        np.testing.assert_allclose(mine[5][name], value, rtol=1e-6, atol=1e-7, err_msg=name)
    assert [name for name, _ in shapes][:2] == ["net/conv2d/kernel", "net/conv2d/bias"]
    assert "net/dense_1/kernel" in dict(shapes) and "net/bn/moving_variance" in dict(shapes)


def test_the_public_layers_are_tensorflows_where_they_load():
    assert layers is (NATIVE_LAYERS or v1_layers)


def test_the_layers_run_on_every_stack_with_known_values():
    """On Keras 3 too: dense and conv2d against numpy, batch norm's update in UPDATE_OPS."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3))
        y = v1_layers.dense(x, 2, kernel_initializer=tf.compat.v1.ones_initializer(),
                            bias_initializer=tf.compat.v1.constant_initializer(0.5))
        z = v1_layers.batch_normalization(y, training=True, momentum=0.5, epsilon=0.0)
        update = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
        names = [v.op.name for v in tf.compat.v1.global_variables()]
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            y_value, z_value, *_ = session.run([y, z, *update])
            mean = session.run(tf.compat.v1.global_variables()[4])
    np.testing.assert_allclose(y_value, [[3.5, 3.5], [12.5, 12.5]])
    np.testing.assert_allclose(z_value, [[-1, -1], [1, 1]], atol=1e-6)
    np.testing.assert_allclose(mean, [4.0, 4.0])  # 0 - (0 - 8) * 0.5
    assert names == ["dense/kernel", "dense/bias", "batch_normalization/gamma",
                     "batch_normalization/beta", "batch_normalization/moving_mean",
                     "batch_normalization/moving_variance"]


def test_what_is_not_reproduced_names_the_call_and_the_stacks():
    with tf.Graph().as_default(), pytest.raises(NotImplementedError, match=r"batch_normalization\(renorm=.*tf_keras"):
        v1_layers.batch_normalization(tf.zeros([2, 3]), renorm=True)
