"""Hooks that find the model's variables by the TF1 names a checkpoint uses (issue 24 item 11).

After ``restore_checkpoint(model, path, assignment_map)`` (or ``estimator_hooks(model=...)``),
the weight mirrors in HookCallback's graph answer to the names the map gives (``dense/kernel``,
``w``), as the ``model_fn`` graph's variables did: ``init_from_checkpoint``, a hook reading a
variable by name, and tensorflow-estimator's ``InMemoryEvaluatorHook`` (which copies the
training values into its evaluation graph BY NAME) find them. Before, the mirrors kept
HookCallback's names (``model/000/kernel``): the evaluator silently evaluated its graph's
initial values, the others failed.

Each test runs the scenario natively (a TF1 ``MonitoredSession`` or ``Estimator.train``)
beside the bridged ``fit`` and compares what the hooks read.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras


def _tf1_checkpoint(directory: str, values: dict[str, np.ndarray], step: int = 0) -> None:
    """A TF1 checkpoint of ``get_variable``s named as ``values`` says, and ``global_step``."""
    with tf.Graph().as_default():
        global_step = v1.train.get_or_create_global_step()
        made = [
            v1.get_variable(name, initializer=tf.constant(value)) for name, value in values.items()
        ]
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(global_step.assign(step))
            del made
            v1.train.Saver().save(sess, os.path.join(directory, "model.ckpt"), global_step=step)


def _dense_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


class ReadByName(v1.train.SessionRunHook):
    """Finds ``dense/kernel`` and ``dense/bias`` by name in ``begin`` (as a TF1 hook written
    against the model_fn's layers does) and reads them through the session after each run."""

    def __init__(self) -> None:
        self.seen: list[list[float]] = []

    def begin(self):
        found = {v.op.name: v for v in v1.global_variables()}
        self.kernel, self.bias = found["dense/kernel"], found["dense/bias"]

    def after_run(self, run_context, run_values):
        kernel, bias = run_context.session.run([self.kernel, self.bias])
        self.seen.append([*np.ravel(kernel).tolist(), *np.ravel(bias).tolist()])


def test_hooks_find_the_weights_by_the_names_of_the_assignment_map(tmp_path):
    """restore_checkpoint(model, tf1_dir, "auto") maps ``dense/kernel``/``dense/bias`` to the
    Keras Dense layer: a hook finding the variables by those names reads the trained Keras
    weights after each step, a ``CheckpointSaverHook`` writes them under those names, and
    ``restore_checkpoint`` without a map reads that checkpoint back into the same model. The
    native side: the same hook in a MonitoredSession on a TF1 graph with those variables reads
    the values the training assigns."""
    tf1_dir, out = str(tmp_path / "tf1"), str(tmp_path / "out")
    start = {
        "dense/kernel": np.array([[0.5], [-0.5]], "float32"),
        "dense/bias": np.zeros(1, "float32"),
    }
    _tf1_checkpoint(tf1_dir, start, step=3)
    model = _dense_model()
    assert hookbridge.restore_checkpoint(model, tf1_dir, "auto") == 3

    recorded = []

    class KerasWeights(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            kernel, bias = self.model.get_weights()
            recorded.append([*kernel.ravel().tolist(), *bias.ravel().tolist()])

    hook = ReadByName()
    bridge = hookbridge.HookCallback(
        lambda: [hook, v1.train.CheckpointSaverHook(out, save_steps=100)]
    )
    x = np.arange(16, dtype="float32").reshape(8, 2) / 10
    y = x.sum(axis=1, keepdims=True)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=[bridge, KerasWeights()])
    np.testing.assert_allclose(hook.seen, recorded, rtol=1e-6)
    assert not np.allclose(hook.seen[-1][:2], [0.5, -0.5])  # trained values, not the start

    reader = tf.train.load_checkpoint(out)
    names = sorted(reader.get_variable_to_shape_map())
    assert names == ["dense/bias", "dense/kernel", "global_step"]
    np.testing.assert_allclose(reader.get_tensor("dense/kernel").ravel(), recorded[-1][:2])
    assert hookbridge.restore_checkpoint(model, out) == 3 + 4

    # Native: the same hook on a TF1 graph whose train op writes the same values.
    with tf.Graph().as_default():
        v1.train.get_or_create_global_step()
        kernel = v1.get_variable("dense/kernel", initializer=start["dense/kernel"])
        bias = v1.get_variable("dense/bias", initializer=start["dense/bias"])
        value = v1.placeholder(tf.float32, [3])
        train_op = tf.group(kernel.assign(tf.reshape(value[:2], [2, 1])), bias.assign(value[2:]))
        native = ReadByName()
        with v1.train.MonitoredSession(hooks=[native]) as sess:
            for row in recorded:
                sess.run(train_op, feed_dict={value: row})
    np.testing.assert_allclose(hook.seen, native.seen, rtol=1e-6)


def test_init_from_checkpoint_by_the_tf1_names(tmp_path):
    """A hook calling ``init_from_checkpoint(ckpt, {"dense/": "dense/"})`` in ``begin`` (the
    TF1 way of warm-starting a model_fn's layers) finds the mirrors by the map's names and the
    Keras model starts from the checkpoint's values, as the native MonitoredSession's variables
    do."""
    tf1_dir, warm_dir = str(tmp_path / "tf1"), str(tmp_path / "warm")
    zeros = {"dense/kernel": np.zeros((2, 1), "float32"), "dense/bias": np.zeros(1, "float32")}
    _tf1_checkpoint(tf1_dir, zeros)
    warm = {
        "dense/kernel": np.array([[2.0], [3.0]], "float32"),
        "dense/bias": np.ones(1, "float32"),
    }
    _tf1_checkpoint(warm_dir, warm)

    class WarmStart(v1.train.SessionRunHook):
        def begin(self):
            v1.train.init_from_checkpoint(warm_dir, {"dense/": "dense/"})

    model = _dense_model()
    hookbridge.restore_checkpoint(model, tf1_dir, "auto")
    seen = ReadByName()
    x, y = np.ones((2, 2), "float32"), np.zeros((2, 1), "float32")
    model.fit(
        x, y, batch_size=2, epochs=1, verbose=0,
        callbacks=[hookbridge.HookCallback([WarmStart(), seen])],
    )
    with tf.Graph().as_default():
        v1.train.get_or_create_global_step()
        v1.get_variable("dense/kernel", initializer=zeros["dense/kernel"])
        v1.get_variable("dense/bias", initializer=zeros["dense/bias"])
        native, step = ReadByName(), tf.no_op()
        with v1.train.MonitoredSession(hooks=[WarmStart(), native]) as sess:
            sess.run(step)
    assert native.seen == [[2.0, 3.0, 1.0]]
    # The Keras step ran from the warm-started values: the first read is one SGD step (lr 0.1,
    # mse) from the native values, not from the zeros the restore gave.
    kernel, bias = np.array(native.seen[0][:2]), native.seen[0][2]
    error = x @ kernel + bias - y.ravel()  # the prediction error of each sample
    grad_kernel, grad_bias = 2 * (x.T @ error) / len(x), 2 * error.mean()
    stepped = [*(kernel - 0.1 * grad_kernel), bias - 0.1 * grad_bias]
    np.testing.assert_allclose(seen.seen[0], stepped, rtol=1e-5)


def test_estimator_hooks_names_the_mirrors_from_the_next_run(tmp_path):
    """``estimator_hooks(model_dir, model=model)`` on a model_dir holding a TF1 checkpoint,
    without restore_checkpoint first: its checkpoints keep the TF1 names (as before), this
    run's mirrors were named before the hooks were built, so it warns that hooks finding
    variables by those names find them from the next run on; in the next run they do."""
    model_dir = str(tmp_path)
    start = {"dense/kernel": np.ones((2, 1), "float32"), "dense/bias": np.zeros(1, "float32")}
    _tf1_checkpoint(model_dir, start, step=2)
    model = _dense_model()
    x, y = np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")

    def hooks(*extra):
        return lambda: hookbridge.estimator_hooks(
            model_dir, model=model, hooks=list(extra), log_step_count_steps=None,
            save_checkpoints_steps=100,
        )

    with pytest.warns(UserWarning, match=r"answer to the checkpoint's names \(dense/"):
        model.fit(x, y, batch_size=2, verbose=0, callbacks=[hookbridge.HookCallback(hooks())])
    names = sorted(tf.train.load_checkpoint(model_dir).get_variable_to_shape_map())
    assert names == ["dense/bias", "dense/kernel", "global_step"]
    seen = ReadByName()
    model.fit(x, y, batch_size=2, verbose=0, callbacks=[hookbridge.HookCallback(hooks(seen))])
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(seen.seen[-1], [*kernel.ravel(), *bias.ravel()], rtol=1e-6)


def test_without_a_map_the_names_are_hookcallbacks(tmp_path):
    """Without an assignment map the mirrors keep HookCallback's names: a hook asking for
    ``dense/kernel`` by name gets the bridge's error listing what exists, never a value."""
    model = _dense_model()
    x, y = np.ones((2, 2), "float32"), np.zeros((2, 1), "float32")

    class GetVariable(v1.train.SessionRunHook):
        def begin(self):
            self.kernel = v1.get_default_graph().get_tensor_by_name("dense/kernel:0")

    with pytest.raises((KeyError, ValueError)):
        model.fit(x, y, verbose=0, callbacks=[hookbridge.HookCallback([GetVariable()])])


def _estimator():
    try:
        from tensorflow_estimator.python.estimator import estimator_lib
        from tensorflow_estimator.python.estimator.hooks import hooks as hooks_lib
    except Exception:  # noqa: BLE001 - not installed, or does not import on this TF
        pytest.skip("tensorflow-estimator is not usable on this stack (TF 2.15 only)")
    return estimator_lib, hooks_lib


def _eval_values(eval_dir: str, tag: str) -> dict[int, float]:
    v1.summary.FileWriterCache.clear()
    values = {}
    for path in sorted(glob.glob(os.path.join(eval_dir, "events*"))):
        for event in v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[int(event.step)] = float(value.simple_value)
    return values


def _w_model_fn(estimator_lib):
    """tensorflow-estimator's ``test_uses_latest_variable_value`` model_fn: training sets the
    variable ``w`` to the new global step + 2; evaluation reports the mean of ``w``."""

    def model_fn(features, labels, mode):
        del labels
        step = v1.train.get_global_step()
        w = v1.get_variable("w", shape=[], initializer=v1.initializers.zeros(), dtype=tf.int64)
        if mode == estimator_lib.ModeKeys.TRAIN:
            with tf.control_dependencies([features]):
                step_inc = v1.assign_add(step, 1)
            with tf.control_dependencies([step_inc]):
                train_op = w.assign(step + 2)
            return estimator_lib.EstimatorSpec(mode, loss=tf.constant(3.0), train_op=train_op)
        with tf.control_dependencies([features]):
            loss = tf.constant(5.0)
        mean = keras.metrics.Mean()
        mean.update_state(w)
        return estimator_lib.EstimatorSpec(mode, loss=loss, eval_metric_ops={"mean_of_const": mean})

    return model_fn


class _WModel(keras.Model):
    """The Keras side of that model_fn: one int64 weight ``w`` set to the new step + 2."""

    def __init__(self):
        super().__init__()
        self.w = self.add_weight(
            name="w", shape=(), dtype="int64", initializer="zeros", trainable=False
        )

    def call(self, x):
        return tf.cast(x, tf.float32)

    def train_step(self, data):
        iterations = self.optimizer.iterations
        iterations.assign_add(1)
        self.w.assign(tf.cast(iterations, tf.int64) + 2)
        return {"loss": tf.constant(3.0)}


def _input_fn():
    return v1.data.Dataset.range(10)


def test_in_memory_evaluator_hook_copies_the_trained_values_by_name(tmp_path):
    """tensorflow-estimator's ``InMemoryEvaluatorHookTest.test_uses_latest_variable_value``,
    replayed with the Estimator's variable name: natively ``Estimator.train`` with the hook
    (evaluations at steps 0, 4, 8, 10 see w = 0, 6, 10, 12); bridged, a Keras model whose
    weight ``w`` restore_checkpoint mapped from the Estimator's ``w`` trains 10 steps with the
    same hook in HookCallback (an Estimator of the same model_fn builds the evaluation graph):
    the same values at the same steps. Without the map the evaluator finds no ``w`` in the
    training graph and evaluates its initial 0 at every step (what it did before, silently)."""
    estimator_lib, hooks_lib = _estimator()
    model_fn = _w_model_fn(estimator_lib)

    native = estimator_lib.Estimator(model_fn=model_fn, model_dir=str(tmp_path / "native"))
    evaluator = hooks_lib.InMemoryEvaluatorHook(native, _input_fn, every_n_iter=4)
    native.train(_input_fn, hooks=[evaluator])
    expected = _eval_values(native.eval_dir(), "mean_of_const")
    assert expected == {0: 0.0, 4: 6.0, 8: 10.0, 10: 12.0}

    def bridged(name: str, mapped: bool) -> dict[int, float]:
        ckpt = str(tmp_path / f"{name}_start")
        _tf1_checkpoint(ckpt, {"w": np.int64(0)})
        model = _WModel()
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        model.build((None,))
        if mapped:
            assert hookbridge.restore_checkpoint(model, ckpt, {"w": 0}) == 0
        evaluating = estimator_lib.Estimator(model_fn=model_fn, model_dir=str(tmp_path / name))
        hook = hooks_lib.InMemoryEvaluatorHook(evaluating, _input_fn, every_n_iter=4)
        data = tf.data.Dataset.range(10).batch(1)
        model.fit(data, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback([hook])])
        assert int(model.optimizer.iterations.numpy()) == 10
        return _eval_values(evaluating.eval_dir(), "mean_of_const")

    assert bridged("mapped", mapped=True) == expected
    assert bridged("unmapped", mapped=False) == {0: 0.0, 4: 0.0, 8: 0.0, 10: 0.0}


def test_in_memory_evaluator_hook_runs_eval_metrics(tmp_path):
    """``InMemoryEvaluatorHookTest.test_runs_eval_metrics`` replayed: evaluations before
    training, every 4 steps and at the end (steps 0, 4, 8, 10), the mean of the features 4.5,
    natively and under HookCallback alike."""
    estimator_lib, hooks_lib = _estimator()

    def model_fn(features, labels, mode):
        del labels
        if mode == estimator_lib.ModeKeys.TRAIN:
            with tf.control_dependencies([features]):
                train_op = v1.assign_add(v1.train.get_global_step(), 1)
            return estimator_lib.EstimatorSpec(mode, loss=tf.constant(3.0), train_op=train_op)
        mean = keras.metrics.Mean()
        mean.update_state(features)
        return estimator_lib.EstimatorSpec(
            mode, loss=tf.constant(5.0), eval_metric_ops={"mean_of_features": mean}
        )

    native = estimator_lib.Estimator(model_fn=model_fn, model_dir=str(tmp_path / "native"))
    native.train(
        _input_fn, hooks=[hooks_lib.InMemoryEvaluatorHook(native, _input_fn, every_n_iter=4)]
    )
    expected = _eval_values(native.eval_dir(), "mean_of_features")
    assert expected == {0: 4.5, 4: 4.5, 8: 4.5, 10: 4.5}

    model = _WModel()
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    evaluating = estimator_lib.Estimator(model_fn=model_fn, model_dir=str(tmp_path / "bridged"))
    hook = hooks_lib.InMemoryEvaluatorHook(evaluating, _input_fn, every_n_iter=4)
    model.fit(
        tf.data.Dataset.range(10).batch(1), epochs=1, verbose=0,
        callbacks=[hookbridge.HookCallback([hook])],
    )
    assert _eval_values(evaluating.eval_dir(), "mean_of_features") == expected
