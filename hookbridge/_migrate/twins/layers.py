"""The twin's dense layers and its numeric-column layers, computing what the Estimator computes.

* :func:`dense_class`: a canned Estimator's hidden and logits layers are TF 1 ``dense``:
  ``tf.matmul`` then ``tf.nn.bias_add`` then the activation. Keras 3's ``Dense`` adds its bias
  with ``+`` outside the matmul Grappler fuses with a ``BiasAdd``: the logits drift from the
  Estimator's (``docs/limits.md``). This layer computes ``matmul`` + ``bias_add`` on every stack.
* :func:`numeric_classes`: ``input_layer`` / ``DenseFeatures`` of numeric columns (each
  feature cast to float32 and flattened to ``[batch, width]``, concatenated in the Estimator's
  order: sorted by column name) and ``linear_model`` of numeric columns (one ``[width, units]``
  weight per column, ``tf.matmul`` each, ``tf.add_n`` in that order, ``tf.nn.bias_add``).

Every layer names its weights as the Estimator's checkpoint does: ``checkpoint_names()`` gives
``(weight, checkpoint name)`` pairs (contract 1 of issue 33), which the twin declares with
``set_tf1_names``. A layer reads its features by name from the dict the twin is given.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
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
            out = tf.nn.bias_add(tf.matmul(inputs, _value(self.kernel)), _value(self.bias))
            return self.activation(out) if self.activation is not None else out

        def checkpoint_names(self):
            return [(self.kernel, f"{self.scope}/kernel"), (self.bias, f"{self.scope}/bias")]

    return EstimatorDense


def _value(variable: Any) -> Any:
    """What TF ops take of a Keras weight (Keras 3's KerasVariable converts itself)."""
    return variable


def numeric_width(column: Any, kind: str) -> int:
    """The width of a numeric column's flattened value.

    Raises:
        ValueError: not a numeric column, or one with a ``normalizer_fn``.
    """
    name = type(column).__name__
    if name != "NumericColumn":
        raise ValueError(name)
    if getattr(column, "normalizer_fn", None) is not None:
        raise ValueError("NumericColumn with a normalizer_fn")
    width = 1
    for d in tuple(column.shape):
        width *= int(d)
    return width


@functools.cache
def numeric_classes(keras: Any) -> tuple[Any, Any]:
    """``(NumericFeatures, NumericLinearModel)`` for the Keras module ``keras``."""
    import tensorflow as tf

    from hookbridge._migrate import linear as _linear

    def column_value(features, column, width):
        value = tf.cast(features[column.key], tf.float32)
        return tf.reshape(value, (-1, width))

    class NumericFeatures(keras.layers.Layer):
        """``input_layer`` of numeric columns: their values concatenated, sorted by name."""

        def __init__(self, columns: Sequence[Any], widths: Sequence[int], **kwargs):
            super().__init__(**kwargs)
            self.columns, self.widths = list(columns), list(widths)
            self.width = sum(self.widths)

        def call(self, features):
            values = [column_value(features, c, w) for c, w in zip(self.columns, self.widths)]
            return values[0] if len(values) == 1 else tf.concat(values, axis=1)

        def checkpoint_names(self):
            return []

    class NumericLinearModel(keras.layers.Layer):
        """``linear_model`` of numeric columns: per column ``matmul(value, weights)``, their
        ``add_n`` in the Estimator's order, then ``bias_add`` of ``bias_weights``."""

        def __init__(self, columns, widths, units, scope="linear/linear_model", **kwargs):
            super().__init__(**kwargs)
            self.columns, self.widths, self.scope = list(columns), list(widths), scope
            self.column_weights = [
                self.add_weight(
                    name=_linear.scope(c.name),
                    shape=(w, int(units)),
                    initializer="zeros",
                    trainable=True,
                )
                for c, w in zip(self.columns, self.widths)
            ]
            self.bias = self.add_weight(
                name="bias_weights", shape=(int(units),), initializer="zeros", trainable=True
            )

        def call(self, features):
            sums = [
                tf.matmul(column_value(features, c, w), v)
                for c, w, v in zip(self.columns, self.widths, self.column_weights)
            ]
            return tf.nn.bias_add(tf.add_n(sums), self.bias)

        def checkpoint_names(self):
            return [
                *(
                    (v, f"{self.scope}/{_linear.scope(c.name)}/weights")
                    for c, v in zip(self.columns, self.column_weights)
                ),
                (self.bias, f"{self.scope}/bias_weights"),
            ]

    return NumericFeatures, NumericLinearModel
