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
    for theirs, ours in zip(outputs, mine[4]):  # the same ops: the same bits
        np.testing.assert_array_equal(ours, theirs)
    for name, value in after.items():  # the moving statistics after two updates
        np.testing.assert_array_equal(mine[5][name], value, err_msg=name)
    assert [name for name, _ in shapes][:2] == ["net/conv2d/kernel", "net/conv2d/bias"]
    assert "net/dense_1/kernel" in dict(shapes) and "net/bn/moving_variance" in dict(shapes)


def test_the_public_layers_are_hookbridges_on_every_stack():
    """TF's own V1 layers are V2 layers inside model_fn_model's tf.function (batch norm then
    adds no UPDATE_OPS): ours are what the Estimator's graph ran, on every stack."""
    assert layers is v1_layers


def test_the_layers_run_on_every_stack_with_known_values():
    """On Keras 3 too: dense and conv2d against numpy, batch norm's update in UPDATE_OPS."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.constant(np.arange(6, dtype="float32").reshape(2, 3))
        y = v1_layers.dense(
            x,
            2,
            kernel_initializer=tf.compat.v1.ones_initializer(),
            bias_initializer=tf.compat.v1.constant_initializer(0.5),
        )
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
    assert names == [
        "dense/kernel",
        "dense/bias",
        "batch_normalization/gamma",
        "batch_normalization/beta",
        "batch_normalization/moving_mean",
        "batch_normalization/moving_variance",
    ]


def test_what_is_not_reproduced_names_the_call_and_the_stacks():
    with (
        tf.Graph().as_default(),
        pytest.raises(NotImplementedError, match=r"batch_normalization\(renorm=.*tf_keras"),
    ):
        v1_layers.batch_normalization(tf.zeros([2, 3]), renorm=True)


def _spec_cases():
    """(mode, kwargs) a model_fn may pass; each is accepted or refused the same way."""
    loss = tf.constant([2.0])  # shape [1]: reshaped to a scalar
    train_op = tf.no_op()
    predictions = {"y": tf.constant([1.0])}
    metric = tf.compat.v1.metrics.mean(tf.constant([1.0]))
    hook = tf.compat.v1.train.StopAtStepHook(last_step=1)
    return [
        ("train", {"loss": loss, "train_op": train_op, "training_hooks": [hook]}),
        ("train", {"loss": loss}),
        ("train", {"train_op": train_op}),
        ("eval", {"loss": loss, "eval_metric_ops": {"m": metric}}),
        ("eval", {"loss": loss, "eval_metric_ops": {"m": 1.0}}),
        ("eval", {"loss": tf.constant([1.0, 2.0])}),
        ("eval", {"loss": 1.0}),
        ("infer", {"predictions": predictions}),
        ("infer", {}),
        ("infer", {"predictions": [1.0]}),
        ("train", {"loss": loss, "train_op": train_op, "training_hooks": [object()]}),
        ("train", {"loss": loss, "train_op": train_op, "scaffold": object()}),
    ]


def _outcome(cls, mode, kwargs):
    try:
        spec = cls(mode, **kwargs)
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error).split(",")[0].split(":")[0]
    return (
        spec._fields,
        spec.loss.shape.as_list() if spec.loss is not None else None,
        sorted(spec.export_outputs or {}),
        len(spec.training_hooks),
        type(spec.scaffold).__name__,
    )


def test_the_estimator_names_are_tensorflows_where_tensorflow_estimator_is():
    if compat.NATIVE:
        assert EstimatorSpec is tf.estimator.EstimatorSpec and ModeKeys is tf.estimator.ModeKeys
        assert TPUEstimatorSpec is tf.compat.v1.estimator.tpu.TPUEstimatorSpec
    else:
        assert (
            EstimatorSpec is compat._EstimatorSpec and TPUEstimatorSpec is compat._TPUEstimatorSpec
        )
    assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == ("train", "eval", "infer")


@pytest.mark.skipif(
    not compat.NATIVE, reason="the oracle is tensorflow-estimator's class (TF 2.15)"
)
def test_the_spec_validates_as_tensorflow_estimators_does():
    with tf.Graph().as_default():
        cases = _spec_cases()
        for mode, kwargs in cases:
            assert _outcome(compat._EstimatorSpec, mode, kwargs) == _outcome(
                tf.estimator.EstimatorSpec, mode, kwargs
            ), (mode, kwargs)


def test_the_spec_refuses_what_an_estimator_refuses_on_every_stack():
    with tf.Graph().as_default():
        outcomes = [_outcome(compat._EstimatorSpec, m, k) for m, k in _spec_cases()]
    assert [o[0] if isinstance(o[0], str) else "ok" for o in outcomes] == [
        "ok",
        "ValueError",
        "ValueError",
        "ok",
        "TypeError",
        "ValueError",
        "TypeError",
        "ok",
        "ValueError",
        "TypeError",
        "TypeError",
        "TypeError",
    ]
    assert outcomes[1][1] == "Missing train_op." and outcomes[8][1] == "Missing predictions."
    assert outcomes[0][1] == [] and outcomes[7][2] == ["serving_default"]


def test_a_tpu_spec_becomes_the_estimator_spec_use_tpu_false_runs():
    def metric_fn(labels, logits):
        return {"mean": tf.compat.v1.metrics.mean(logits - labels)}

    with tf.Graph().as_default():
        loss = tf.constant(1.0)
        tensors = {"labels": tf.constant([1.0]), "logits": tf.constant([3.0])}
        for cls in {compat._TPUEstimatorSpec, TPUEstimatorSpec}:
            spec = cls("eval", loss=loss, eval_metrics=(metric_fn, tensors)).as_estimator_spec()
            assert sorted(spec.eval_metric_ops) == ["mean"] and spec.loss is loss
        with pytest.raises(ValueError, match="eval_metrics"):
            compat._TPUEstimatorSpec("eval", loss=loss, eval_metrics=metric_fn)
        spec = compat._TPUEstimatorSpec(
            "train", loss=loss, train_op=tf.no_op(), host_call=(lambda x: [], [loss])
        )
        with pytest.raises(NotImplementedError, match="host_call"):
            spec.as_estimator_spec()
        assert compat.as_estimator_spec(spec._replace(host_call=None)).train_op is not None
        with pytest.raises(TypeError, match="must return an EstimatorSpec"):
            compat.as_estimator_spec({"loss": loss})
