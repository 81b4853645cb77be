"""``restore_checkpoint`` from a checkpoint whose data file was cut short (a copy interrupted
half-way): a clear error naming the checkpoint and the variable, and the model and its optimizer
left exactly as they were, even when only optimizer state is lost (every value, slots
included, is read before any is set)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

keras = tf.keras
v1 = tf.compat.v1


def _tf1_checkpoint(directory) -> str:
    """A TF1 graph's checkpoint: ``w/kernel``, ``w/bias``, their Adam slots, the beta powers and
    the global step. TF writes a bundle's tensors in name order, so the data file ends with the
    slot ``w/kernel/Adam_1``, after the weights."""
    with tf.Graph().as_default():
        x = v1.constant(np.ones((4, 3), "float32"))
        step = v1.train.get_or_create_global_step()
        with v1.variable_scope("w"):  # a Dense layer's variables, as TF1 names them
            kernel = v1.get_variable("kernel", (3, 2))
            bias = v1.get_variable("bias", (2,), initializer=v1.zeros_initializer())
        y = tf.matmul(x, kernel) + bias
        train = v1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(y * y), global_step=step)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for _ in range(3):
                session.run(train)
            return v1.train.Saver().save(session, os.path.join(directory, "model.ckpt"), step)


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="w")])
    model.compile(keras.optimizers.Adam(0.1), "mse")
    model.optimizer.build(model.trainable_variables)  # its slots exist before the restore
    return model


def _state(model):
    return [np.array(v) for v in [*model.weights, *model.optimizer.variables]]


def test_a_complete_copy_restores(tmp_path):
    prefix = _tf1_checkpoint(str(tmp_path))
    model = _model()
    assert hookbridge.restore_checkpoint(model, prefix, "auto") == 3
    reader = tf.train.load_checkpoint(prefix)
    np.testing.assert_array_equal(model.get_layer("w").kernel, reader.get_tensor("w/kernel"))


def test_a_copy_cut_short_is_refused_naming_the_variable_and_changes_nothing(tmp_path):
    prefix = _tf1_checkpoint(str(tmp_path))
    data = f"{prefix}.data-00000-of-00001"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) - 8)  # the last slot, w/kernel/Adam_1, loses 2 floats
    model = _model()
    before = _state(model)
    with pytest.raises(FileNotFoundError, match=r"cannot read 'w/kernel/Adam_1' from checkpoint"):
        hookbridge.restore_checkpoint(model, prefix, "auto")
    after = _state(model)
    assert len(after) == len(before)
    for a, b in zip(after, before):
        np.testing.assert_array_equal(a, b)
