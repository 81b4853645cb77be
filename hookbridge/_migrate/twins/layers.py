"""The twin's hidden and logits layers: what a canned Estimator's ``dense`` layers compute.

A canned Estimator's hidden and logits layers are TF 1 ``dense``: ``tf.matmul`` then
``tf.nn.bias_add`` then the activation. Keras 3's ``Dense`` adds its bias with ``+`` outside the
matmul Grappler fuses with a ``BiasAdd``: the logits drift from the Estimator's
(``docs/limits.md``). :func:`dense_class` computes ``matmul`` + ``bias_add`` on every stack and
names its weights as the Estimator's checkpoint does (``checkpoint_names()``, contract 1 of
issue 33). The feature-column layers are ``twins/columns.py``'s.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def dense_class(keras: Any) -> Any:
    """``EstimatorDense(units, activation, scope)`` for the Keras module ``keras``."""
    import tensorflow as tf

    class EstimatorDense(keras.layers.Layer):
        """``activation(bias_add(matmul(x, kernel), bias))``, TF 1 ``dense``'s computation."""

        def __init__(self, units, input_dim, activation=None, scope="", **kwargs):
            super().__init__(**kwargs)
            self.units, self.scope, self.activation = int(units), scope, activation
            self.kernel = self.add_weight(
                name="kernel",
                shape=(int(input_dim), self.units),
                initializer="glorot_uniform",
                trainable=True,
            )
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer="zeros", trainable=True
            )

        def call(self, inputs):
            out = tf.nn.bias_add(tf.matmul(inputs, self.kernel), self.bias)
            return self.activation(out) if self.activation is not None else out

        def checkpoint_names(self):
            return [(self.kernel, f"{self.scope}/kernel"), (self.bias, f"{self.scope}/bias")]

    return EstimatorDense
