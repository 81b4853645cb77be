"""model_fn_model names every variable as a TF1 graph names it, on every stack.

A variable made under ``init_scope`` (every ``ResourceVariable``; an optimizer's ``beta1_power``
and slots, made by ``apply_gradients`` inside a ``tf.cond`` branch) is named by the name scope
it is asked for in as a TF1 graph has it (a branch starts at the root there, not at the scope of
its ``cond`` as in a ``tf.function``) and made unique in the model_fn's graph
(``beta1_power_1`` for a second optimizer). The oracle on every stack is the same ``model_fn``
built in a ``tf.Graph`` and run in a ``Session``: the same names, and from its checkpoint (read
by name, no map) ``fit`` trains loss by loss and variable by variable as the graph trains; on
TF 2.15 the names are also the Estimator's own checkpoint's.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import hookbridge
from hookbridge._hook_callback.graph import tf1_names

v1 = tf.compat.v1
BATCH, STEPS = 8, 4


class _Spec:
    """What a model_fn returns (the stacks without tf.estimator have no EstimatorSpec)."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None):
        self.mode, self.predictions, self.loss, self.train_op = mode, predictions, loss, train_op


def model_fn(features, labels, mode, params):
    """One dense layer; two Adam optimizers on the same variables. ``params["kind"]``:
    ``"cond"``: named ``fast``/``slow``, alternating by global step in the branches of a
    ``tf.cond`` under a name scope, the even branch also counting its runs in a ``tf.Variable``
    made in a name scope of the branch; ``"same"``: both named ``Adam`` (their slots ``Adam`` to
    ``Adam_3``), one train op after the other."""
    with v1.variable_scope("dense"):
        kernel = v1.get_variable("kernel", [3, 1])
        bias = v1.get_variable("bias", [1], initializer=v1.zeros_initializer())
    out = tf.matmul(features["x"], kernel) + bias
    if mode == "infer":
        return _Spec(mode, predictions={"y": out})
    loss = tf.reduce_mean(tf.square(out - labels))
    step = v1.train.get_or_create_global_step()
    pairs = list(zip(tf.gradients(loss, [kernel, bias]), [kernel, bias]))
    if params["kind"] == "same":
        first = v1.train.AdamOptimizer(0.05).apply_gradients(pairs)
        with tf.control_dependencies([first]):
            train_op = v1.train.AdamOptimizer(0.02, beta1=0.5, beta2=0.9).apply_gradients(
                pairs, global_step=step
            )
        return _Spec(mode, loss=loss, train_op=train_op)
    fast = v1.train.AdamOptimizer(0.05, name="fast")
    slow = v1.train.AdamOptimizer(0.02, beta1=0.5, beta2=0.9, name="slow")

    def even():
        with tf.name_scope("inner"):
            runs = v1.Variable(0.0, trainable=False, name="runs")
        with tf.control_dependencies([fast.apply_gradients(pairs, global_step=step)]):
            return runs.assign_add(1.0).op

    def odd():
        with tf.control_dependencies([slow.apply_gradients(pairs, global_step=step)]):
            return tf.no_op()

    with tf.name_scope("train"):
        train_op = tf.cond(tf.equal(step % 2, 0), even, odd)
    return _Spec(mode, loss=loss, train_op=train_op)


EXPECTED = {
    "cond": {
        "beta1_power",  # fast's (made first), in the cond branch under name scope "train"
        "beta2_power",
        "beta1_power_1",  # slow's
        "beta2_power_1",
        "inner/runs",  # tf.Variable in a name scope of the branch: not train/cond/inner/runs
        "dense/kernel/fast",
        "dense/kernel/fast_1",
        "dense/bias/fast",
        "dense/bias/fast_1",
        "dense/kernel/slow",
        "dense/kernel/slow_1",
        "dense/bias/slow",
        "dense/bias/slow_1",
    },
    "same": {
        "beta1_power",
        "beta2_power",
        "beta1_power_1",
        "beta2_power_1",
        "dense/kernel/Adam",  # the first optimizer's m and v
        "dense/kernel/Adam_1",
        "dense/kernel/Adam_2",  # the second's
        "dense/kernel/Adam_3",
        "dense/bias/Adam",
        "dense/bias/Adam_1",
        "dense/bias/Adam_2",
        "dense/bias/Adam_3",
    },
}
BASE = {"dense/kernel", "dense/bias", "global_step"}


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, BATCH, 3)).astype("float32")
    y = (x @ rng.normal(size=(3, 1)) + 0.3).astype("float32")
    return x, y


class NativeRun:
    """The model_fn's TRAIN graph in a ``tf.Graph`` and ``Session`` (one inter-op thread)."""

    def __init__(self, params):
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.set_random_seed(1)
            self.x = v1.placeholder(tf.float32, [None, 3])
            self.y = v1.placeholder(tf.float32, [None, 1])
            self.spec = model_fn({"x": self.x}, self.y, "train", params)
            self.saver = v1.train.Saver()
            config = v1.ConfigProto(inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1)
            self.session = v1.Session(graph=self.graph, config=config)
            self.session.run(v1.global_variables_initializer())
            self.variables = {v.op.name: v for v in v1.global_variables()}

    def train(self, xs, ys):
        feeds = ({self.x: x, self.y: y} for x, y in zip(xs, ys))
        return [float(self.session.run([self.spec.loss, self.spec.train_op], f)[0]) for f in feeds]

    def values(self):
        return {name: self.session.run(v) for name, v in self.variables.items()}


def _model(params):
    x, y = _batches(1)
    return hookbridge.model_fn_model(model_fn, params=params, features={"x": x[0]}, labels=y[0])


@pytest.mark.parametrize("kind", ["cond", "same"])
def test_names_and_values_are_the_tf1_graphs(kind, tmp_path):
    params = {"kind": kind}
    native = NativeRun(params)
    assert set(native.variables) == BASE | EXPECTED[kind]
    with native.graph.as_default():
        native.saver.save(native.session, str(tmp_path / "model.ckpt"), global_step=0)

    model = _model(params)
    names = tf1_names(model)
    assert sorted(names.values()) == sorted(set(native.variables) - {"global_step"})  # iterations
    assert hookbridge.restore_checkpoint(model, str(tmp_path)) == 0
    assert int(model.optimizer.iterations.numpy()) == 0

    xs, ys = _batches(STEPS, seed=1)
    expected = native.train(xs, ys)
    data = tf.data.Dataset.from_tensor_slices(({"x": xs.reshape(-1, 3)}, ys.reshape(-1, 1)))
    history = model.fit(data.batch(BATCH), epochs=STEPS, steps_per_epoch=1, verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected, rtol=2e-5)
    assert int(model.optimizer.iterations.numpy()) == STEPS
    values = native.values()
    for i, name in names.items():  # the slots and powers of each optimizer, not swapped
        np.testing.assert_allclose(
            np.asarray(model.weights[i]), values[name], rtol=2e-5, atol=1e-7, err_msg=name
        )
    if kind == "cond":
        assert values["inner/runs"] == STEPS // 2


@pytest.mark.skipif(not hasattr(tf, "estimator"), reason="tf.estimator exists on TF 2.15 only")
@pytest.mark.parametrize("kind", ["cond", "same"])
def test_names_are_the_estimators_checkpoints(kind, tmp_path):
    from hookbridge.estimator_compat import EstimatorSpec

    def estimator_model_fn(features, labels, mode, params):
        spec = model_fn(features, labels, mode, params)
        return EstimatorSpec(
            mode, predictions=spec.predictions, loss=spec.loss, train_op=spec.train_op
        )

    xs, ys = _batches(2)
    estimator = tf.estimator.Estimator(
        estimator_model_fn, model_dir=str(tmp_path), params={"kind": kind}
    )
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices(({"x": xs}, ys)), steps=2)
    stored = {name for name, _ in tf.train.list_variables(str(tmp_path))}
    assert stored == BASE | EXPECTED[kind]
    model = hookbridge.model_fn_model(
        estimator_model_fn, params={"kind": kind}, features={"x": xs[0]}, labels=ys[0]
    )
    assert set(tf1_names(model).values()) == stored - {"global_step"}
    assert hookbridge.restore_checkpoint(model, str(tmp_path)) == 2
    reader = tf.train.load_checkpoint(str(tmp_path))
    for i, name in tf1_names(model).items():
        np.testing.assert_array_equal(np.asarray(model.weights[i]), reader.get_tensor(name))


def test_the_build_runs_the_model_fn_once_per_mode():
    """The weights are made eagerly, so the tracing tf.function lifts none and traces once: the
    build runs the model_fn once in PREDICT and once in TRAIN mode (twice each before)."""
    modes = []

    def counted(features, labels, mode, params):
        modes.append(mode)
        return model_fn(features, labels, mode, params)

    x, y = _batches(1)
    hookbridge.model_fn_model(counted, params={"kind": "cond"}, features={"x": x[0]}, labels=y[0])
    assert modes == ["infer", "train"]
