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
from hookbridge._migrate.model_fn import v1_layers

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


def clipped_two_ops_model_fn(features, labels, mode, params):
    """Gradients clipped by global norm; two optimizers (Adam on the hidden layer, momentum on
    the logits), their train ops grouped; the step counted by one of them."""
    hidden = tf.nn.relu(_dense(features["x"], 8, "hidden"))
    out = _dense(hidden, 1, "logits")
    if mode == "infer":
        return _Spec(mode, predictions={"y": out})
    loss = v1.losses.mean_squared_error(labels, out)
    step = v1.train.get_or_create_global_step()
    hidden_vars = v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES, "hidden")
    logits_vars = v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES, "logits")
    grads = tf.gradients(loss, hidden_vars + logits_vars)
    grads, _ = tf.clip_by_global_norm(grads, 0.5)
    first = v1.train.AdamOptimizer(0.05).apply_gradients(
        zip(grads[:2], hidden_vars), global_step=step
    )
    second = v1.train.MomentumOptimizer(0.05, 0.9).apply_gradients(zip(grads[2:], logits_vars))
    return _Spec(mode, predictions={"y": out}, loss=loss, train_op=tf.group(first, second))


class DecayedAdam(v1.train.Optimizer):
    """An optimizer of one's own, as BERT's AdamWeightDecayOptimizer is one: slots made with
    get_variable as ``<var>/adam_m`` and ``<var>/adam_v``, no bias correction, weight decay."""

    def __init__(self, rate, decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6):
        super().__init__(False, "DecayedAdam")
        self.rate, self.decay = rate, decay
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        updates = []
        for grad, var in grads_and_vars:
            base = var.name.split(":")[0]
            m = v1.get_variable(
                base + "/adam_m", var.shape, trainable=False, initializer=v1.zeros_initializer()
            )
            v = v1.get_variable(
                base + "/adam_v", var.shape, trainable=False, initializer=v1.zeros_initializer()
            )
            new_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
            new_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
            step = new_m / (tf.sqrt(new_v) + self.epsilon) + self.decay * var
            updates += [var.assign(var - self.rate * step), m.assign(new_m), v.assign(new_v)]
        with tf.control_dependencies(updates):
            return global_step.assign_add(1)


def custom_optimizer_model_fn(features, labels, mode, params):
    """A polynomial-decay rate read from the global step, the optimizer above."""
    hidden = tf.nn.relu(_dense(features["x"], 8, "hidden"))
    out = _dense(hidden, 1, "logits")
    if mode == "infer":
        return _Spec(mode, predictions={"y": out})
    loss = v1.losses.mean_squared_error(labels, out)
    step = v1.train.get_or_create_global_step()
    rate = v1.train.polynomial_decay(0.05, step, 20, end_learning_rate=0.0)
    optimizer = DecayedAdam(rate)
    grads_and_vars = optimizer.compute_gradients(loss)
    train_op = optimizer.apply_gradients(grads_and_vars, global_step=step)
    return _Spec(mode, predictions={"y": out}, loss=loss, train_op=train_op)


def batch_norm_model_fn(features, labels, mode, params):
    """Batch normalization (hookbridge's TF1 layer: TF's own under tf_keras is its V2 layer in
    a tf.function, see the test below) with its UPDATE_OPS run by the train op, as the TF1
    guides wrote it, unless params say forget."""
    norm = params.get("batch_normalization", v1_layers.batch_normalization)
    hidden = tf.nn.relu(_dense(features["x"], 8, "hidden"))
    hidden = norm(hidden, training=mode == "train", momentum=0.9)
    out = _dense(hidden, 1, "logits")
    if mode == "infer":
        return _Spec(mode, predictions={"y": out})
    loss = v1.losses.mean_squared_error(labels, out)
    optimizer = v1.train.AdamOptimizer(0.05)
    step = v1.train.get_or_create_global_step()
    if params.get("forget_update_ops"):
        train_op = optimizer.minimize(loss, global_step=step)
    else:
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(loss, global_step=step)
    return _Spec(mode, predictions={"y": out}, loss=loss, train_op=train_op)


SUBJECTS = {
    "adam": (two_layer_model_fn, {"optimizer": "adam"}),
    "sgd": (two_layer_model_fn, {"optimizer": "sgd"}),
    "clipped_two_ops": (clipped_two_ops_model_fn, {}),
    "custom_optimizer": (custom_optimizer_model_fn, {}),
    "batch_norm": (batch_norm_model_fn, {}),
}


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, BATCH, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1)) + 0.1).astype("float32")
    return x, y


class NativeRun:
    """The model_fn's TRAIN graph in a Session (one inter-op thread), fed batch by batch."""

    def __init__(self, model_fn, params, restore=None, seed=1):
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.set_random_seed(seed)
            self.x = v1.placeholder(tf.float32, [None, 4])
            self.y = v1.placeholder(tf.float32, [None, 1])
            self.spec = model_fn({"x": self.x}, self.y, "train", params)
            self.saver = v1.train.Saver()
            config = v1.ConfigProto(inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1)
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

    def save(self, model_dir):
        with self.graph.as_default():
            step = self.session.run(v1.train.get_global_step(self.graph))
            return self.saver.save(self.session, f"{model_dir}/model.ckpt", global_step=step)

    def values(self):
        with self.graph.as_default():
            return {v.op.name: self.session.run(v) for v in v1.global_variables()}


class BatchLosses(tf.keras.callbacks.Callback):
    """Each step's loss, from fit's running mean of one epoch (mean_i * (i+1) - mean_(i-1) * i)."""

    def __init__(self):
        super().__init__()
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))

    def losses(self):
        m = np.array(self.means, dtype=np.float64)
        totals = m * np.arange(1, len(m) + 1)
        return np.diff(totals, prepend=0.0)


def native_predict(model_fn, params, prefix, x):
    """The model_fn's PREDICT graph restored from ``prefix``, run on ``x``."""
    with tf.Graph().as_default() as graph:
        features = v1.placeholder(tf.float32, [None, 4])
        spec = model_fn({"x": features}, None, "infer", params)
        with v1.Session(graph=graph) as session:
            v1.train.Saver().restore(session, str(prefix))
            return session.run(spec.predictions["y"], {features: x})


def _model(params, labels=True, model_fn=two_layer_model_fn):
    x, y = _batches(1)
    return hookbridge.model_fn_model(
        model_fn,
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


#: sgd is deep: it is adam's model_fn (the same variables, minimize, step) with an optimizer that
#: keeps no state, so its checkpoint is adam's without the slots; adam, clipped_two_ops,
#: custom_optimizer and batch_norm each add to that path (slots, two optimizers, get_variable
#: slots, update ops) and run in CI; test_the_model_fns_variables_are_the_models_weights_and_fit_
#: moves_them[sgd] still holds its names (no slots) and its fit.
@pytest.mark.parametrize(
    "subject",
    [pytest.param(s, marks=pytest.mark.deep) if s == "sgd" else s for s in sorted(SUBJECTS)],
)
def test_fit_continues_as_the_native_graph_from_its_checkpoint(tmp_path, subject):
    model_fn, params = SUBJECTS[subject]
    xs, ys = _batches(K + N + N)
    native = NativeRun(model_fn, params)
    native.train(xs[:K], ys[:K])
    prefix = native.save(tmp_path / "native")
    expected = native.train(xs[K : K + N], ys[K : K + N])
    expected_values = native.values()

    model = _model(params, model_fn=model_fn)
    assert hookbridge.restore_checkpoint(model, tmp_path / "native") == K  # no map
    np.testing.assert_allclose(
        model.predict({"x": xs[K]}, verbose=0)["y"],
        native_predict(model_fn, params, prefix, xs[K]),
        atol=1e-5,
    )
    # One fit of N steps writing the Estimator's checkpoint at its end (estimator_hooks).
    keras_dir = str(tmp_path / "keras")
    callback = hookbridge.HookCallback(
        lambda: hookbridge.estimator_hooks(
            keras_dir,
            model=model,
            save_checkpoints_steps=1000,
            save_summary_steps=0,
            log_step_count_steps=None,
        )
    )
    means = BatchLosses()
    data = tf.data.Dataset.from_tensor_slices(({"x": xs[K : K + N]}, ys[K : K + N]))
    model.fit(data, verbose=0, shuffle=False, callbacks=[callback, means])
    np.testing.assert_allclose(means.losses(), expected, rtol=2e-5)
    assert int(model.optimizer.iterations.numpy()) == K + N
    names = tf1_names(model)
    for i, w in enumerate(model.weights):
        np.testing.assert_allclose(
            w.numpy(), expected_values[names[i]], rtol=1e-5, atol=1e-6, err_msg=names[i]
        )

    # The graph continues from fit's checkpoint as it continues from its own.
    written = tf.train.load_checkpoint(keras_dir)
    assert set(written.get_variable_to_shape_map()) == set(expected_values), "names, slots, step"
    assert int(written.get_tensor("global_step")) == K + N
    continued = NativeRun(model_fn, params, restore=tf.train.latest_checkpoint(keras_dir))
    rest = slice(K + N, K + N + N)
    np.testing.assert_allclose(
        continued.train(xs[rest], ys[rest]), native.train(xs[rest], ys[rest]), rtol=2e-5
    )


def test_update_ops_left_out_of_the_train_op_are_refused_not_run():
    """The Estimator never ran batch-norm statistics its train_op does not depend on; a
    tf.function would run them: refused, named."""
    with pytest.raises(ValueError, match=r"AssignMovingAvg.*UPDATE_OPS"):
        _model({"forget_update_ops": True}, model_fn=batch_norm_model_fn)


def test_tfs_own_v1_batch_norm_under_tf_keras_is_refused_with_the_reason():
    """TF's tf.compat.v1.layers on tf_keras / Keras 2 inside a tf.function are the V2 layers:
    they run their statistics updates and leave UPDATE_OPS empty, so the train op the model_fn
    builds on UPDATE_OPS is not the Estimator's: refused, saying why."""
    try:
        own = tf.compat.v1.layers.batch_normalization
    except AttributeError:
        pytest.skip("Keras 3: tf.compat.v1.layers does not load (hookbridge's layers serve)")
    with pytest.raises(ValueError, match=r"AssignMovingAvg.*UPDATE_OPS is empty here"):
        _model({"batch_normalization": own}, model_fn=batch_norm_model_fn)


# ---- the Estimator itself (TF 2.15) ----
class LossRecorder(tf.compat.v1.train.SessionRunHook):
    """Each step's loss in an Estimator's training (the tensor the model_fn named)."""

    def __init__(self):
        self.losses = []

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs("recorded_loss:0")

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def _for_estimator(model_fn):
    from hookbridge.estimator_compat import EstimatorSpec

    def estimator_model_fn(features, labels, mode, params):
        spec = model_fn(features, labels, mode, params)
        if spec.loss is not None:
            tf.identity(spec.loss, name="recorded_loss")
        return EstimatorSpec(
            mode, predictions=spec.predictions, loss=spec.loss, train_op=spec.train_op
        )

    estimator_model_fn.__name__ = model_fn.__name__
    return estimator_model_fn


def _estimator(model_fn, params, model_dir):
    config = tf.estimator.RunConfig(
        model_dir=str(model_dir),
        tf_random_seed=1,
        save_checkpoints_steps=1000,
        save_summary_steps=1000,
        log_step_count_steps=1000,
        session_config=v1.ConfigProto(
            inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1
        ),
    )
    return tf.estimator.Estimator(_for_estimator(model_fn), params=params, config=config)


def _input_fn(xs, ys):
    return lambda: tf.data.Dataset.from_tensor_slices(({"x": xs}, ys))


#: adam represents the family in CI: what this test adds to the graph oracle above (the
#: Estimator's own checkpoint restored by name, an Estimator continuing from fit's model_dir) is
#: the same code for every optimizer. custom_optimizer is deep: its get_variable slots
#: (``<var>/adam_m``, ``adam_v``) and step-read decay go to the Estimator and back in CI with
#: BERT's optimizer of the same kind (test_model_fn_walk.py, test_model_fn_back_across.py), and
#: against the graph on every stack above.
@pytest.mark.parametrize(
    "subject", ["adam", pytest.param("custom_optimizer", marks=pytest.mark.deep)]
)
def test_the_estimator_and_fit_continue_alike_from_each_others_checkpoints(tmp_path, subject):
    if not hasattr(tf, "estimator"):
        pytest.skip("tf.estimator exists on TF 2.15 only (the other stacks: the graph oracle)")
    import shutil

    model_fn, params = SUBJECTS[subject]
    xs, ys = _batches(K + N + N)
    estimator = _estimator(model_fn, params, tmp_path / "estimator")
    estimator.train(_input_fn(xs[:K], ys[:K]), steps=K)
    shutil.copytree(tmp_path / "estimator", tmp_path / "keras")
    predicted = next(estimator.predict(lambda: {"x": xs[K]}, yield_single_examples=False))
    recorder = LossRecorder()
    estimator.train(_input_fn(xs[K : K + N], ys[K : K + N]), steps=N, hooks=[recorder])

    model = hookbridge.model_fn_model(
        _for_estimator(model_fn), params=params, features={"x": xs[0]}, labels=ys[0]
    )
    assert hookbridge.restore_checkpoint(model, tmp_path / "keras") == K
    np.testing.assert_allclose(
        model.predict({"x": xs[K]}, verbose=0)["y"], predicted["y"], atol=1e-5
    )
    keras_dir = str(tmp_path / "keras")
    callback = hookbridge.HookCallback(
        lambda: hookbridge.estimator_hooks(
            keras_dir,
            model=model,
            save_checkpoints_steps=1000,
            save_summary_steps=0,
            log_step_count_steps=None,
            backup=None,
        )
    )
    means = BatchLosses()
    data = tf.data.Dataset.from_tensor_slices(({"x": xs[K : K + N]}, ys[K : K + N]))
    model.fit(data, verbose=0, shuffle=False, callbacks=[callback, means])
    np.testing.assert_allclose(means.losses(), recorder.losses, rtol=2e-5)

    # An Estimator on fit's model_dir continues as the first one continues.
    rest = slice(K + N, K + N + N)
    theirs, ours = LossRecorder(), LossRecorder()
    estimator.train(_input_fn(xs[rest], ys[rest]), steps=N, hooks=[theirs])
    _estimator(model_fn, params, keras_dir).train(
        _input_fn(xs[rest], ys[rest]), steps=N, hooks=[ours]
    )
    assert len(ours.losses) == N
    np.testing.assert_allclose(ours.losses, theirs.losses, rtol=2e-5)


def test_a_variable_made_after_the_build_is_refused():
    """A model_fn making a variable on a later call than the build's (none the Estimator's
    checkpoint holds) fails at that call, naming it."""
    later = []

    def later_model_fn(features, labels, mode, params):
        spec = two_layer_model_fn(features, labels, mode, params)
        if later:
            v1.get_variable("extra", [1])
        return spec

    x, y = _batches(1)
    model = hookbridge.model_fn_model(
        later_model_fn, params={"optimizer": "sgd"}, features={"x": x[0]}, labels=y[0]
    )
    later.append(True)
    with pytest.raises(ValueError, match=r"created variable 'extra' in infer mode after"):
        model({"x": x[0]})


def test_a_tpu_estimator_spec_runs_as_use_tpu_false():
    """A model_fn returning TPUEstimatorSpec (hookbridge.estimator_compat's: TF's own on TF
    2.15) runs as TPUEstimator ran it without a TPU: its as_estimator_spec()."""
    from hookbridge.estimator_compat import TPUEstimatorSpec

    def tpu_model_fn(features, labels, mode, params):
        spec = two_layer_model_fn(features, labels, mode, params)
        return TPUEstimatorSpec(
            mode, predictions=spec.predictions, loss=spec.loss, train_op=spec.train_op
        )

    xs, ys = _batches(2)
    model = hookbridge.model_fn_model(
        tpu_model_fn, params={"optimizer": "sgd"}, features={"x": xs[0]}, labels=ys[0]
    )
    reference = _model({"optimizer": "sgd"})
    reference.set_weights(model.get_weights())
    np.testing.assert_allclose(model({"x": xs[1]})["y"], reference({"x": xs[1]})["y"], rtol=1e-6)
    first = model.fit({"x": xs[1]}, ys[1], batch_size=BATCH, verbose=0).history["loss"]
    second = reference.fit({"x": xs[1]}, ys[1], batch_size=BATCH, verbose=0).history["loss"]
    np.testing.assert_allclose(first, second, rtol=1e-6)
    assert int(model.optimizer.iterations.numpy()) == 1


def test_the_model_fn_is_not_rewritten_by_autograph_as_the_estimator_never_did():
    """A Python ``if`` on a tensor fails in the Estimator's graph; autograph would turn it into a
    ``tf.cond`` inside fit's tf.function and train something the Estimator never ran."""

    def branching_model_fn(features, labels, mode, params):
        if tf.reduce_sum(features["x"]) > 0:  # a tensor as a Python bool
            features = {"x": features["x"] * 2.0}
        return two_layer_model_fn(features, labels, mode, params)

    with tf.Graph().as_default():  # natively: refused where the graph is built
        with pytest.raises(TypeError, match="Python `bool`|as a Python bool"):
            branching_model_fn({"x": v1.placeholder(tf.float32, [None, 4])}, None, "infer", {})
    with pytest.raises(TypeError, match="Python `bool`|as a Python bool"):
        _model({"optimizer": "sgd"}, model_fn=branching_model_fn)
