"""CallbackHook and the R hooks in a legacy Estimator (TF 2.15 with tensorflow-estimator)."""

from __future__ import annotations

import csv

import pytest
import tensorflow as tf

tfe = pytest.importorskip("tensorflow_estimator")

import hookbridge  # noqa: E402 - after the importorskip above
from hookbridge.hooks import HistorySaverHook  # noqa: E402

keras = tf.keras


def model_fn(features, labels, mode):
    w = tf.compat.v1.get_variable("w", [1, 1])
    pred = tf.matmul(features, w)
    per_example = tf.square(pred - labels)[:, 0]
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, per_example)
    loss = tf.reduce_mean(per_example, name="loss")  # named: CallbackHook logs={"loss": "loss"}
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step()
    )
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    x = tf.constant([[1.0], [2.0], [3.0], [4.0]])
    return tf.data.Dataset.from_tensor_slices((x, 2 * x)).repeat().batch(2)


def test_estimator_train_and_evaluate_with_callbacks(tmp_path):
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"))
    history = keras.callbacks.History()
    path = str(tmp_path / "log.csv")
    saver = HistorySaverHook(every_n_step=2)
    est.train(
        input_fn,
        steps=6,
        hooks=[
            hookbridge.CallbackHook(
                [history, keras.callbacks.CSVLogger(path)], logs={"loss": "loss"}, steps_per_epoch=3
            ),
            saver,
        ],
    )
    assert history.epoch == [0, 1] and len(history.history["loss"]) == 2
    with open(path) as f:
        assert [r["epoch"] for r in csv.DictReader(f)] == ["0", "1"]
    assert saver.history.steps == [2, 4, 6]

    # Estimator.evaluate is Keras's evaluate (on_test_* only): History records nothing there,
    # natively either (tests/conformance/test_keras_callbacks_ported.py compares the events).
    evaluated, seen = keras.callbacks.History(), []
    test_end = keras.callbacks.LambdaCallback()
    test_end.on_test_end = lambda logs: seen.append(dict(logs))
    est.evaluate(
        input_fn,
        steps=2,
        hooks=[hookbridge.CallbackHook([evaluated, test_end], logs={"loss": "loss"})],
    )
    assert evaluated.history == {} and len(seen) == 1 and seen[0]["loss"] >= 0.0
