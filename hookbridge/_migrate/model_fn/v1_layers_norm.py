"""``tf.compat.v1.layers.batch_normalization`` for Keras 3 (see :mod:`.v1_layers`).

As TF's V1 layer computes it in a TF1 graph: fused (``fused_batch_norm``) for 4-D inputs whose
channel axis is 1 or 3, ``tf.nn.moments`` + ``tf.nn.batch_normalization`` otherwise; in training,
``moving -= (moving - batch) * (1 - momentum)`` for the mean and the variance (fused: the batch
variance with Bessel's correction and the momentum as a tensor; not fused: without, and the
momentum a Python float: the two round ``1 - momentum`` differently), added to ``UPDATE_OPS``.
"""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf

from hookbridge._migrate.model_fn.v1_layers import (
    _ONES,
    _ZEROS,
    _refuse,
    _scope,
    _smart_cond,
    _variable,
)


def _moving_average(variable: Any, value: Any, momentum: Any) -> Any:
    """``moving -= (moving - value) * (1 - momentum)``, as the V1 layer runs it in a graph."""
    with tf.name_scope("AssignMovingAvg") as scope:
        decay = tf.cast(tf.convert_to_tensor(1.0 - momentum, name="decay"), variable.dtype)
        delta = (variable - tf.cast(value, variable.dtype)) * decay
        return tf.compat.v1.assign_sub(variable, delta, name=scope)


def batch_normalization(
    inputs,
    axis=-1,
    momentum=0.99,
    epsilon=1e-3,
    center=True,
    scale=True,
    beta_initializer=_ZEROS,
    gamma_initializer=_ONES,
    moving_mean_initializer=_ZEROS,
    moving_variance_initializer=_ONES,
    beta_regularizer=None,
    gamma_regularizer=None,
    beta_constraint=None,
    gamma_constraint=None,
    training=False,
    trainable=True,
    name=None,
    reuse=None,
    renorm=False,
    renorm_clipping=None,
    renorm_momentum=0.99,
    fused=None,
    virtual_batch_size=None,
    adjustment=None,
):
    """``tf.compat.v1.layers.batch_normalization`` over one channel axis; in training its two
    moving-statistics updates go to ``UPDATE_OPS`` (run them with the train op)."""
    _refuse(
        "batch_normalization",
        renorm=renorm,
        virtual_batch_size=virtual_batch_size is not None,
        adjustment=adjustment is not None,
    )
    inputs = tf.convert_to_tensor(inputs)
    rank = inputs.shape.rank
    channel = axis % rank
    if fused is None:
        fused = True
    fused = bool(fused) and rank == 4 and channel in (1, 3)
    channels = int(inputs.shape[channel])
    dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype.base_dtype
    with _scope(name, "batch_normalization", reuse):
        gamma = beta = None
        if scale:
            gamma = _variable(
                "gamma",
                [channels],
                dtype,
                gamma_initializer,
                gamma_regularizer,
                gamma_constraint,
                trainable,
            )
        if center:
            beta = _variable(
                "beta",
                [channels],
                dtype,
                beta_initializer,
                beta_regularizer,
                beta_constraint,
                trainable,
            )
        statistics = {
            "synchronization": tf.VariableSynchronization.ON_READ,
            "aggregation": tf.VariableAggregation.MEAN,
        }
        moving_mean = _variable(
            "moving_mean",
            [channels],
            dtype,
            moving_mean_initializer,
            None,
            None,
            False,
            **statistics,
        )
        moving_variance = _variable(
            "moving_variance",
            [channels],
            dtype,
            moving_variance_initializer,
            None,
            None,
            False,
            **statistics,
        )
        if fused:
            outputs, mean, variance = _fused(
                inputs, gamma, beta, moving_mean, moving_variance, epsilon, training, channel
            )
        else:
            outputs, mean, variance = _plain(
                inputs, gamma, beta, moving_mean, moving_variance, epsilon, training, channel
            )
        if tf.get_static_value(training) is not False and training is not False:
            rate = _smart_cond(training, lambda: momentum, lambda: 1.0)
            rate = tf.convert_to_tensor(rate) if fused else momentum
            for variable, value in ((moving_mean, mean), (moving_variance, variance)):
                update = _smart_cond(
                    training,
                    functools.partial(_moving_average, variable, value, rate),
                    lambda variable=variable: variable,
                )
                tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.UPDATE_OPS, update)
        return outputs


def _fused(inputs, gamma, beta, moving_mean, moving_variance, epsilon, training, channel):
    data_format = "NHWC" if channel == 3 else "NCHW"
    if gamma is None:
        gamma = tf.constant(1.0, dtype=moving_mean.dtype, shape=moving_mean.shape)
    if beta is None:
        beta = tf.constant(0.0, dtype=moving_mean.dtype, shape=moving_mean.shape)

    def train():
        return tf.compat.v1.nn.fused_batch_norm(
            inputs,
            gamma,
            beta,
            mean=moving_mean,
            variance=moving_variance,
            epsilon=epsilon,
            is_training=True,
            data_format=data_format,
        )

    def infer():
        return tf.compat.v1.nn.fused_batch_norm(
            inputs,
            gamma,
            beta,
            mean=moving_mean,
            variance=moving_variance,
            epsilon=epsilon,
            is_training=False,
            data_format=data_format,
        )

    return _smart_cond(training, train, infer)  # the batch variance with Bessel's correction


def _plain(inputs, gamma, beta, moving_mean, moving_variance, epsilon, training, channel):
    rank = inputs.shape.rank
    reduction = [i for i in range(rank) if i != channel]
    shape = [1] * rank
    shape[channel] = int(inputs.shape[channel])

    def broadcast(value):
        if value is not None and reduction != list(range(rank - 1)):
            return tf.reshape(value, shape)
        return value

    if tf.get_static_value(training) is False or training is False:
        mean, variance = moving_mean, moving_variance
    else:
        batch_mean, batch_variance = tf.nn.moments(
            tf.cast(inputs, moving_mean.dtype), reduction, keepdims=False
        )
        mean = _smart_cond(training, lambda: batch_mean, lambda: tf.convert_to_tensor(moving_mean))
        variance = _smart_cond(
            training, lambda: batch_variance, lambda: tf.convert_to_tensor(moving_variance)
        )
    outputs = tf.nn.batch_normalization(
        inputs, broadcast(mean), broadcast(variance), broadcast(beta), broadcast(gamma), epsilon
    )
    return tf.cast(outputs, inputs.dtype), mean, variance
