"""model_fn_model: an Estimator's model_fn trains in Keras fit with its own variables and step.

The oracle on every stack is the model_fn's own TF1 graph run natively in a ``tf.Graph`` /
``Session`` (what the Estimator ran, minus the Estimator), one inter-op thread: it trains K
steps and saves its checkpoint under the Estimator's names; the Keras model restored from it with
no map predicts the same, ``fit`` continues loss by loss as the graph continues, and the graph
continues from the checkpoint ``fit`` wrote as it continues from its own. On TF 2.15 the
Estimator itself is the oracle too.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import hookbridge
from hookbridge._hook_callback.graph import tf1_names

v1 = tf.compat.v1
K, N = 3, 6  # steps before the switch, steps continued
BATCH = 8


class _Spec:
    """What a model_fn returns (EstimatorSpec's fields it uses; the stacks without
    tf.estimator have no EstimatorSpec)."""

    def __init__(self, mode, predictions=None, loss=None, train_op=None):
        self.mode, self.predictions, self.loss, self.train_op = mode, predictions, loss, train_op


def _dense(x, units, scope):
    with v1.variable_scope(scope):
        kernel = v1.get_variable("kernel", [x.shape[-1], units])
        bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
    return tf.matmul(x, kernel) + bias


def two_layer_model_fn(features, labels, mode, params):
    """Two dense layers (get_variable), mean squared error, the TF1 optimizer of params."""
    hidden = tf.nn.relu(_dense(features["x"], 8, "hidden"))
    out = _dense(hidden, 1, "logits")
    if mode == "infer":
        return _Spec(mode, predictions={"y": out})
    loss = v1.losses.mean_squared_error(labels, out)
    optimizer = {
        "adam": lambda: v1.train.AdamOptimizer(0.05),
        "sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
    }[params["optimizer"]]()
    train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
    return _Spec(mode, predictions={"y": out}, loss=loss, train_op=train_op)


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, BATCH, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1)) + 0.1).astype("float32")
    return x, y


class NativeRun:
    """The model_fn's TRAIN graph in a Session (one inter-op thread), fed batch by batch."""

    def __init__(self, params, restore=None, seed=1):
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.set_random_seed(seed)
            self.x = v1.placeholder(tf.float32, [None, 4])
            self.y = v1.placeholder(tf.float32, [None, 1])
            self.spec = two_layer_model_fn({"x": self.x}, self.y, "train", params)
            self.saver = v1.train.Saver()
            config = v1.ConfigProto(inter_op_parallelism_threads=1, intra_op_parallelism_threads=1)
            self.session = v1.Session(graph=self.graph, config=config)
            if restore:
                self.saver.restore(self.session, str(restore))
            else:
                self.session.run(v1.global_variables_initializer())

    def train(self, xs, ys):
        losses = []
        for x, y in zip(xs, ys):
            loss, _ = self.session.run([self.spec.loss, self.spec.train_op], {self.x: x, self.y: y})
            losses.append(float(loss))
        return losses

    def predict(self, x):
        return self.session.run(self.spec.predictions["y"], {self.x: x})

    def save(self, model_dir):
        with self.graph.as_default():
            step = self.session.run(v1.train.get_global_step(self.graph))
            return self.saver.save(self.session, f"{model_dir}/model.ckpt", global_step=step)

    def values(self):
        with self.graph.as_default():
            return {v.op.name: self.session.run(v) for v in v1.global_variables()}


def _model(params, labels=True):
    x, y = _batches(1)
    return hookbridge.model_fn_model(
        two_layer_model_fn,
        params=params,
        features={"x": x[0]},
        labels=y[0] if labels else None,
    )


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_the_model_fns_variables_are_the_models_weights_and_fit_moves_them(optimizer):
    model = _model({"optimizer": optimizer})
    names = tf1_names(model)
    by_id = {id(w): names[i] for i, w in enumerate(model.weights) if i in names}
    trainable = [by_id[id(w)] for w in model.trainable_weights]
    assert trainable == ["hidden/kernel", "hidden/bias", "logits/kernel", "logits/bias"]
    slots = sorted(by_id[id(w)] for w in model.non_trainable_weights if id(w) in by_id)
    if optimizer == "adam":
        assert "beta1_power" in slots and "hidden/kernel/Adam_1" in slots and len(slots) == 10
    else:
        assert slots == []
    assert len(names) == len(model.weights), "every weight answers to a TF1 name"
    before = [w.numpy().copy() for w in model.trainable_weights]
    x, y = _batches(4)
    model.fit({"x": x.reshape(-1, 4)}, y.reshape(-1, 1), batch_size=BATCH, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 4, "the model_fn's global step is the step"
    for b, w in zip(before, model.trainable_weights):
        assert np.abs(b - w.numpy()).max() > 1e-4, f"{w.name} did not move"


def test_compile_refuses_another_optimizer_or_loss():
    model = _model({"optimizer": "sgd"})
    with pytest.raises(ValueError, match="own train_op"):
        model.compile(optimizer="adam")
    model.compile()  # no arguments: allowed


def test_without_labels_it_predicts_and_fit_says_why_not():
    model = _model({"optimizer": "sgd"}, labels=False)
    x, y = _batches(1)
    assert model({"x": x[0]})["y"].shape == (BATCH, 1)
    with pytest.raises(ValueError, match="pass labels="):
        model.fit({"x": x[0]}, y[0], verbose=0)


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_fit_continues_as_the_native_graph_from_its_checkpoint(tmp_path, optimizer):
    params = {"optimizer": optimizer}
    xs, ys = _batches(K + N + N)
    native = NativeRun(params)
    native.train(xs[:K], ys[:K])
    prefix = native.save(tmp_path / "native")
    expected = native.train(xs[K : K + N], ys[K : K + N])
    expected_values = native.values()

    model = _model(params)
    assert hookbridge.restore_checkpoint(model, tmp_path / "native") == K  # no map
    reference = NativeRun(params, restore=prefix)
    np.testing.assert_allclose(
        model.predict({"x": xs[K]}, verbose=0)["y"], reference.predict(xs[K]), atol=1e-5
    )
    losses = []
    for x, y in zip(xs[K : K + N], ys[K : K + N]):
        history = model.fit({"x": x}, y, batch_size=BATCH, verbose=0)
        losses.append(history.history["loss"][0])
    np.testing.assert_allclose(losses, expected, rtol=2e-5)
    assert int(model.optimizer.iterations.numpy()) == K + N
    names = tf1_names(model)
    for i, w in enumerate(model.weights):
        np.testing.assert_allclose(
            w.numpy(), expected_values[names[i]], rtol=1e-5, atol=1e-6, err_msg=names[i]
        )

    # fit writes the Estimator's names back: the graph continues from fit's checkpoint as
    # it continues from its own.
    keras_dir = str(tmp_path / "keras")
    callback = hookbridge.HookCallback(
        lambda: hookbridge.estimator_hooks(
            keras_dir, save_checkpoints_steps=1000, save_summary_steps=0, log_step_count_steps=None
        )
    )
    x, y = xs[K + N], ys[K + N]
    model.fit({"x": x}, y, batch_size=BATCH, verbose=0, callbacks=[callback])
    native.train(xs[K + N : K + N + 1], ys[K + N : K + N + 1])
    written = tf.train.load_checkpoint(keras_dir)
    shapes = written.get_variable_to_shape_map()
    assert set(shapes) == set(native.values()), "the Estimator's names, slots and step"
    assert int(written.get_tensor("global_step")) == K + N + 1
    continued = NativeRun(params, restore=tf.train.latest_checkpoint(keras_dir))
    rest = slice(K + N + 1, K + N + N)
    np.testing.assert_allclose(
        continued.train(xs[rest], ys[rest]), native.train(xs[rest], ys[rest]), rtol=2e-5
    )
