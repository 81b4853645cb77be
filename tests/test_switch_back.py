"""The way back to a TF1 job, when the Keras side cannot give everything: what is written, what
is said (every stack; the TF1 side is a real graph restored by a real ``Saver``, as
``Estimator.train`` restores ``model_dir``).

A TF1 graph trained with ``MomentumOptimizer`` writes ``model_dir``; Keras continues it with an
``SGD`` *without* momentum (the user's mistake) under ``estimator_hooks(model=...)``. The TF1
graph must still restore the Keras checkpoint (no ``NotFoundError``), and both the restore and the
write must say which state is missing and what to do.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
X = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
Y = np.ones((8, 1), "float32")


def _tf1_graph():
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, 3])
        h = x
        for scope, units in (("dnn/hiddenlayer_0", 4), ("dnn/logits", 1)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
            h = tf.matmul(h, kernel) + bias
        v1.get_variable("ema/counter", [], initializer=v1.constant_initializer(7.0))
        loss = tf.reduce_mean(tf.square(h - 1.0))
        train = v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
    return graph, x, train


def _tf1_train(model_dir, steps):
    graph, x, train = _tf1_graph()
    with graph.as_default(), v1.Session() as sess:
        saver = v1.train.Saver()
        prefix = tf.train.latest_checkpoint(str(model_dir))
        if prefix:
            saver.restore(sess, prefix)  # what Estimator.train does with model_dir
        else:
            sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            sess.run(train, {x: X})
        prefix = os.path.join(str(model_dir), "model.ckpt")
        return saver.save(sess, prefix, global_step=v1.train.get_global_step())


def _keras_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")  # no momentum: a mistake
    return model


def _fit_under_estimator_hooks(keras_model, model_dir, **kwargs):
    """One epoch of ``fit`` under ``HookCallback(estimator_hooks(model_dir, **kwargs))``: a
    checkpoint every step, no step-count log, no summaries."""

    def hooks():
        return hookbridge.estimator_hooks(
            str(model_dir),
            save_checkpoints_steps=1,
            log_step_count_steps=None,
            save_summary_steps=0,
            **kwargs,
        )

    callbacks = [hookbridge.HookCallback(hooks)]
    keras_model.fit(X, Y, batch_size=4, epochs=1, verbose=0, callbacks=callbacks)


def test_missing_state_is_named_both_ways_and_the_tf1_job_still_restores(tmp_path):
    _tf1_train(tmp_path, 3)
    model = _keras_model()
    with pytest.warns(UserWarning) as restored:
        assert hookbridge.restore_checkpoint(model, tmp_path, "auto") == 3
    message = " ".join(str(w.message) for w in restored)
    assert "dnn/logits/kernel/Momentum (state of a momentum optimizer; the model's SGD has " \
        "momentum=0" in message
    with warnings.catch_warnings(record=True) as written:
        warnings.simplefilter("always")
        _fit_under_estimator_hooks(model, tmp_path, model=model)
    said = [str(w.message) for w in written if "estimator_hooks" in str(w.message)]
    assert any("ema/counter" in m and "carry them unchanged" in m for m in said), said
    assert any("keeps no counterpart" in m and "dnn/logits/kernel/Momentum" in m for m in said)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert int(reader.get_tensor("global_step")) == 5
    assert float(reader.get_tensor("ema/counter")) == 7.0
    np.testing.assert_allclose(reader.get_tensor("dnn/logits/kernel"), model.weights[2].numpy())
    # The way back does not fail on a missing key: the TF1 job restores and trains on.
    _tf1_train(tmp_path, 1)
    assert int(tf.train.load_checkpoint(str(tmp_path)).get_tensor("global_step")) == 6


@pytest.mark.parametrize("restored", [True, False])
def test_without_model_the_warning_names_the_key_the_tf1_job_misses(tmp_path, restored):
    # Restored through a map, the weights keep the checkpoint's names even without model=: what
    # the TF1 job misses is the optimizer state (dnn/hiddenlayer_0/bias/Momentum, ema/counter),
    # not dnn/hiddenlayer_0/bias. Not restored: the weights are model/NNN/..., so it is that.
    _tf1_train(tmp_path, 2)
    model = _keras_model()
    if restored:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hookbridge.restore_checkpoint(model, tmp_path, "auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit_under_estimator_hooks(model, tmp_path)
    said = [str(w.message) for w in caught if "Without model=" in str(w.message)]
    assert len(said) == 1
    # TF's own error when the TF1 job takes the model_dir back names the key the warning named.
    with pytest.raises(tf.errors.NotFoundError) as native:
        _tf1_train(tmp_path, 1)
    (key,) = re.findall(r"Key (\S+) not found", str(native.value))[:1]
    assert key == ("dnn/hiddenlayer_0/bias/Momentum" if restored else "dnn/hiddenlayer_0/bias")
    assert f"(NotFoundError: Key {key} not found)" in said[0]
    written = set(tf.train.load_checkpoint(str(tmp_path)).get_variable_to_shape_map())
    named = said[0].split("will not hold: ")[1].split(". Without")[0]
    for name in named.replace(", ...", "").split(", "):
        if " (" not in name:
            assert name not in written


def test_the_first_write_keeps_the_tf1_checkpoint_once(tmp_path):
    prefix = _tf1_train(tmp_path, 2)
    reader = tf.train.load_checkpoint(prefix)
    before = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    model = _keras_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hookbridge.restore_checkpoint(model, tmp_path, "auto")
    for _ in range(2):  # a restart of the Keras job keeps the first backup
        _fit_under_estimator_hooks(model, tmp_path, model=model, keep_checkpoint_max=1)
    assert not os.path.exists(prefix + ".index")  # keep_checkpoint_max deleted the TF1 one
    backup = tmp_path / "estimator-backup"
    kept = tf.train.latest_checkpoint(str(backup))
    assert os.path.basename(kept) == "model.ckpt-2"
    kept_reader = tf.train.load_checkpoint(kept)
    assert sorted(kept_reader.get_variable_to_shape_map()) == sorted(before)
    for name, value in before.items():
        np.testing.assert_array_equal(kept_reader.get_tensor(name), value)


# --------------------------------------------- optimizer state on every stack, TF1 graph side
OPTIMIZERS = {
    "adam": (
        lambda: v1.train.AdamOptimizer(0.01),
        lambda: keras.optimizers.Adam(0.01, epsilon=1e-8),
    ),
    "momentum": (
        lambda: v1.train.MomentumOptimizer(0.02, 0.9),
        lambda: keras.optimizers.SGD(0.02, momentum=0.9),
    ),
    "rmsprop": (
        lambda: v1.train.RMSPropOptimizer(0.005, momentum=0.5),
        lambda: keras.optimizers.RMSprop(0.005, momentum=0.5, epsilon=1e-10),
    ),
}


def _tf1_job(model_dir, which, steps):
    """A TF1 graph (a model_fn's layers, ``which`` optimizer) continuing ``model_dir`` for
    ``steps`` batches of 4 (batch k of X every epoch); returns its batch losses."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        x, y = v1.placeholder(tf.float32, [None, 3]), v1.placeholder(tf.float32, [None, 1])
        h = x
        for scope, units in (("dnn/hiddenlayer_0", 4), ("dnn/logits", 1)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
            h = tf.matmul(h, kernel) + bias
        loss = tf.reduce_mean(tf.square(h - y))
        train = OPTIMIZERS[which][0]().minimize(loss, global_step=step)
        saver = v1.train.Saver()
        losses = []
        with v1.Session() as sess:
            prefix = tf.train.latest_checkpoint(str(model_dir))
            if prefix:
                saver.restore(sess, prefix)
            else:
                v1.set_random_seed(0)
                sess.run(v1.global_variables_initializer())
            for _ in range(steps):
                k = int(sess.run(step)) % 2
                rows = slice(4 * k, 4 * k + 4)
                feed = {x: X[rows], y: Y[rows] + X[rows, :1]}
                losses.append(float(sess.run([train, loss], feed)[1]))
            saver.save(sess, os.path.join(str(model_dir), "model.ckpt"), global_step=step)
    return losses


@pytest.mark.parametrize("which", sorted(OPTIMIZERS))
def test_optimizer_state_continues_both_ways_on_this_stack(tmp_path, which):
    import shutil

    job, native = tmp_path / "job", tmp_path / "native"
    _tf1_job(job, which, 4)
    shutil.copytree(job, native)
    native_losses = _tf1_job(native, which, 4)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer=OPTIMIZERS[which][1](), loss="mse")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # every piece of state loads
        assert hookbridge.restore_checkpoint(model, job, "auto") == 4

    class Losses(v1.train.SessionRunHook):
        def __init__(self):
            self.values = []

        def before_run(self, run_context):
            return v1.train.SessionRunArgs("loss:0")

        def after_run(self, run_context, run_values):
            self.values.append(float(run_values.results))

    targets = Y[:8] + X[:8, :1]
    recorder = Losses()
    hooks = lambda: [  # noqa: E731
        recorder,
        *hookbridge.estimator_hooks(
            str(job), model=model, save_checkpoints_steps=100, log_step_count_steps=None,
            save_summary_steps=0,
        ),
    ]
    model.fit(X[:8], targets, batch_size=4, shuffle=False, initial_epoch=2, epochs=4, verbose=0,
              callbacks=[hookbridge.HookCallback(hooks)])
    np.testing.assert_allclose(recorder.values, native_losses, rtol=2e-5, atol=1e-7)
    back = _tf1_job(job, which, 4)  # the TF1 job takes the Keras checkpoint over
    recorder = Losses()
    model.fit(X[:8], targets, batch_size=4, shuffle=False, initial_epoch=4, epochs=6, verbose=0,
              callbacks=[hookbridge.HookCallback(lambda: [recorder])])
    np.testing.assert_allclose(back, recorder.values, rtol=2e-5, atol=1e-7)
