"""``tf.compat.v1.layers`` for a ``model_fn`` on Keras 3, where that module does not load.

On TF 2.21 with Keras 3, ``tf.compat.v1.layers.dense`` raises ``AttributeError: `dense` is not
available with Keras 3``, and a ``model_fn`` written with ``tf.layers`` stops there. The six
functions here compute what TensorFlow's (tf_keras's ``legacy_tf_layers``) compute in a TF1
graph, built on ``tf.compat.v1.get_variable`` only, so that :func:`hookbridge.model_fn_model`
tracks their variables like any other ``get_variable`` of the ``model_fn``:

* the same variables, under the same names and in the same order: a layer opens
  ``variable_scope(None, default_name=name or "dense")`` (``dense``, ``dense_1``, ... within
  the enclosing variable scope), or ``variable_scope(name, reuse=reuse)`` when ``reuse`` is set,
  and creates ``kernel``/``bias`` (``gamma``, ``beta``, ``moving_mean``, ``moving_variance`` for
  batch normalization), with the same default initializers;
* the same ops on the same values: ``matmul``/``tensordot`` + ``bias_add``; ``convolution``;
  ``max_pool``; ``tf.nn.dropout`` with the layer's seed; batch normalization fused (4-D, channel
  axis 1 or 3) or not as the V1 layer chooses, its moving statistics updated as in a TF1 graph
  (``moving -= (moving - batch) * (1 - momentum)``; the batch variance is
  ``fused_batch_norm``'s, with Bessel's correction, when fused, ``tf.nn.moments``'s, without,
  when not) by ops added to ``UPDATE_OPS``.

They are reached as ``hookbridge.estimator_compat.layers`` on every stack: inside a
``tf.function`` (``model_fn_model``) TensorFlow's own V1 layers (tf_keras, TF 2.15) behave as
their V2 layers (batch normalization updates its moving statistics itself, with fused averaging,
and adds nothing to ``UPDATE_OPS``), which is not what the Estimator's graph ran; these do.
Arguments this module does not reproduce (``activity_regularizer``, ``renorm``,
``virtual_batch_size``, ``adjustment``, ``channels_first`` data) raise ``NotImplementedError``
naming the call and the stacks that run it.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Iterator
from typing import Any

import tensorflow as tf

#: The default initializers of TF's V1 layers (one instance each, as there).
_ZEROS = tf.compat.v1.zeros_initializer()
_ONES = tf.compat.v1.ones_initializer()

_ELSEWHERE = (
    "tf.compat.v1.layers.{call}({arg}=...) is not reproduced by "
    "hookbridge.estimator_compat.layers: call TensorFlow's tf.compat.v1.layers.{call} (TF 2.21 "
    "with tf_keras, TF_USE_LEGACY_KERAS=1, or TF 2.15), or run this model_fn under the Estimator "
    "on TF 2.15"
)


def _refuse(call: str, **arguments: Any) -> None:
    for arg, value in arguments.items():
        if value:
            raise NotImplementedError(_ELSEWHERE.format(call=call, arg=arg))


@contextlib.contextmanager
def _scope(name: str | None, default: str, reuse: Any) -> Iterator[Any]:
    """The variable scope a V1 layer's first call opens (``base.Layer._set_scope``)."""
    if reuse:
        with tf.compat.v1.variable_scope(name or default, reuse=reuse) as scope:
            yield scope
    else:
        with tf.compat.v1.variable_scope(None, default_name=name or default) as scope:
            yield scope


def _variable(name, shape, dtype, initializer, regularizer, constraint, trainable, **kwargs):
    return tf.compat.v1.get_variable(
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        constraint=constraint,
        trainable=trainable,
        **kwargs,
    )


def _activate(outputs: Any, activation: Any) -> Any:
    return activation(outputs) if activation is not None else outputs


def dense(
    inputs,
    units,
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=_ZEROS,
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """``tf.compat.v1.layers.dense``: ``activation(inputs @ kernel + bias)``."""
    _refuse("dense", activity_regularizer=activity_regularizer)
    inputs = tf.convert_to_tensor(inputs)
    dtype = inputs.dtype.base_dtype
    rank = inputs.shape.rank
    with _scope(name, "dense", reuse):
        kernel = _variable(
            "kernel",
            [int(inputs.shape[-1]), int(units)],
            dtype,
            kernel_initializer,
            kernel_regularizer,
            kernel_constraint,
            trainable,
        )
        bias = None
        if use_bias:
            bias = _variable(
                "bias",
                [int(units)],
                dtype,
                bias_initializer,
                bias_regularizer,
                bias_constraint,
                trainable,
            )
        if rank == 2 or rank is None:
            outputs = tf.matmul(inputs, kernel)
        else:
            outputs = tf.tensordot(inputs, kernel, [[rank - 1], [0]])
            outputs.set_shape(inputs.shape[:-1].concatenate([int(units)]))
        if bias is not None:
            outputs = tf.nn.bias_add(outputs, bias)
        return _activate(outputs, activation)


def _pair(value: Any) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else tuple(int(v) for v in value)


def conv2d(
    inputs,
    filters,
    kernel_size,
    strides=(1, 1),
    padding="valid",
    data_format="channels_last",
    dilation_rate=(1, 1),
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=_ZEROS,
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
    kernel_constraint=None,
    bias_constraint=None,
    trainable=True,
    name=None,
    reuse=None,
):
    """``tf.compat.v1.layers.conv2d`` (channels-last): convolution, bias, activation."""
    _refuse(
        "conv2d",
        activity_regularizer=activity_regularizer,
        data_format=data_format != "channels_last",
    )
    inputs = tf.convert_to_tensor(inputs)
    dtype = inputs.dtype.base_dtype
    height, width = _pair(kernel_size)
    with _scope(name, "conv2d", reuse):
        kernel = _variable(
            "kernel",
            [height, width, int(inputs.shape[-1]), int(filters)],
            dtype,
            kernel_initializer,
            kernel_regularizer,
            kernel_constraint,
            trainable,
        )
        bias = None
        if use_bias:
            bias = _variable(
                "bias",
                [int(filters)],
                dtype,
                bias_initializer,
                bias_regularizer,
                bias_constraint,
                trainable,
            )
        outputs = tf.nn.convolution(
            inputs,
            kernel,
            strides=list(_pair(strides)),
            padding=padding.upper(),
            dilations=list(_pair(dilation_rate)),
            data_format="NHWC",
        )
        if bias is not None:
            outputs = tf.nn.bias_add(outputs, bias, data_format="NHWC")
        return _activate(outputs, activation)


def max_pooling2d(
    inputs, pool_size, strides, padding="valid", data_format="channels_last", name=None
):
    """``tf.compat.v1.layers.max_pooling2d`` (channels-last)."""
    _refuse("max_pooling2d", data_format=data_format != "channels_last")
    with _scope(name, "max_pooling2d", None):
        return tf.compat.v1.nn.max_pool(
            inputs,
            ksize=(1, *_pair(pool_size), 1),
            strides=(1, *_pair(strides), 1),
            padding=padding.upper(),
            data_format="NHWC",
        )


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """``tf.compat.v1.layers.dropout``: ``tf.nn.dropout`` with the layer's seed when
    ``training``, the inputs (``identity``) otherwise."""
    with _scope(name, "dropout", None):
        if isinstance(rate, (int, float)) and rate == 0:
            return tf.identity(inputs)
        return _smart_cond(
            training,
            lambda: tf.nn.dropout(inputs, rate=rate, noise_shape=noise_shape, seed=seed),
            lambda: tf.identity(inputs),
        )


def flatten(inputs, name=None, data_format="channels_last"):
    """``tf.compat.v1.layers.flatten`` (channels-last): ``[batch, -1]``."""
    _refuse("flatten", data_format=data_format != "channels_last")
    inputs = tf.convert_to_tensor(inputs)
    with _scope(name, "flatten", None):
        if inputs.shape.rank == 1:
            return tf.expand_dims(inputs, axis=1)
        rest = inputs.shape[1:]
        if rest.is_fully_defined():
            last = int(functools.reduce(operator.mul, rest.as_list(), 1))
            outputs = tf.reshape(inputs, tf.constant([-1, last]))
        else:
            outputs = tf.reshape(inputs, tf.stack([tf.shape(inputs)[0], -1]))
        batch = tf.compat.dimension_value(inputs.shape[0])
        if batch is not None:
            outputs.set_shape([batch, None])
        return outputs


def _smart_cond(predicate: Any, true_fn, false_fn):
    if isinstance(predicate, (bool, int)):
        return true_fn() if predicate else false_fn()
    static = tf.get_static_value(predicate)
    if static is not None:
        return true_fn() if static else false_fn()
    return tf.cond(predicate, true_fn, false_fn)


# batch normalization lives in its own module (it needs the helpers above)
from hookbridge._migrate.model_fn.v1_layers_norm import batch_normalization  # noqa: E402

__all__ = ["batch_normalization", "conv2d", "dense", "dropout", "flatten", "max_pooling2d"]
