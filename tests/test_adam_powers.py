"""TF1 Adam's ``beta1_power``/``beta2_power`` against Keras's ``beta ** (iterations + 1)``.

TF1's ``AdamOptimizer`` keeps its bias correction as float32 variables multiplied by ``beta`` at
every step; Keras derives it from ``iterations``. After a few hundred steps the float32 product
drifts from the exact power by more than ``1e-5`` relative: the restore must not call that a run
that "did not run from step 0", and must still say so of a run that did start elsewhere. The
native side is a real TF1 graph trained by ``tf.compat.v1.train.AdamOptimizer`` and saved by a
``Saver``; its next step is compared with Keras's next step from the restored state.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge
from hookbridge._migrate.optimizer_state import power_matches

v1 = tf.compat.v1
keras = tf.keras
X = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")
Y = np.random.default_rng(1).normal(size=(8, 1)).astype("float32")


def _tf1_adam(model_dir, steps, first_step=0, more=0):
    """Trains a 3-4-1 MLP ``steps`` steps with TF1 Adam (global step from ``first_step``) and
    saves; then ``more`` steps without saving. Returns (checkpoint prefix, weights after all)."""
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, 3])
        h, variables = x, []
        for scope, units in (("dnn/hiddenlayer_0", 4), ("dnn/logits", 1)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
            variables += [kernel, bias]
            h = tf.matmul(h, kernel) + bias
        loss = tf.reduce_mean(tf.square(h - Y))
        train = v1.train.AdamOptimizer(0.01).minimize(loss, global_step=step)
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(step.assign(first_step))
            for _ in range(steps):
                sess.run(train, {x: X})
            prefix = saver.save(sess, str(model_dir / "model.ckpt"), global_step=step)
            for _ in range(more):
                sess.run(train, {x: X})
            return prefix, sess.run(variables)


def _keras_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(0.01, epsilon=1e-8), loss="mse")
    return model


def _restore(model, prefix):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hookbridge.restore_checkpoint(model, prefix, "auto")
    return step, " ".join(str(w.message) for w in caught)


def test_a_long_tf1_adam_run_restores_without_a_false_alarm(tmp_path):
    prefix, native = _tf1_adam(tmp_path, 500, more=1)
    reader = tf.train.load_checkpoint(prefix)
    # The float32 drift the old check (rtol=1e-5) took for a run that did not start at 0.
    assert abs(reader.get_tensor("beta1_power") / 0.9**501 - 1) > 1e-5
    model = _keras_model()
    step, said = _restore(model, prefix)
    assert step == 500
    assert "beta1_power" not in said and "beta2_power" not in said and "step 0" not in said
    # The state is TF1's: Keras's next step is the TF1 graph's next step.
    model.train_on_batch(X, Y)
    for keras_weight, tf1_weight in zip(model.get_weights(), native):
        np.testing.assert_allclose(keras_weight, tf1_weight, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("first_step", [1, 7])
def test_powers_of_another_step_still_warn(tmp_path, first_step):
    # A run whose global step started at `first_step`: its powers are beta**(500 + 1), the
    # step says beta**(500 + first_step + 1).
    prefix, _ = _tf1_adam(tmp_path, 500, first_step=first_step)
    step, said = _restore(_keras_model(), prefix)
    assert step == 500 + first_step
    assert "beta1_power (=" in said and "did not run from step 0" in said
    assert "beta2_power (=" in said


def _tf1_power(beta, steps):
    """TF1's running power after ``steps`` steps: float32 ``beta``, times float32 ``beta`` at each
    step, as ``AdamOptimizer._finish`` multiplies it (one graph, a ``while_loop``)."""
    graph = tf.Graph()
    with graph.as_default():
        b = tf.constant(beta, tf.float32)
        _, power = tf.while_loop(
            lambda i, p: i < steps, lambda i, p: (i + 1, p * b), (tf.constant(0), b)
        )
        with v1.Session() as sess:
            return float(sess.run(power))


@pytest.mark.parametrize("beta", [0.9, 0.99, 0.999, 0.9999])
def test_the_tolerance_covers_tf1s_float32_drift_and_no_step_offset(beta):
    for steps in (10, 300, 500, 2000, 8000, 20000):
        found = _tf1_power(beta, steps)
        assert power_matches(found, beta ** (steps + 1), steps), (beta, steps, found)
        for offset in (1, 2, 10):
            expected = beta ** (steps + 1 + offset)
            # An offset is told where it moves the power by more than twice the bound, and
            # while the power is a normal float32 (see power_matches).
            if 1 - beta**offset > 2 * (2 * steps + 2) * 2.0**-24 and expected > 1e-37:
                assert not power_matches(found, expected, steps + offset), (beta, steps, offset)
