"""What an Estimator ``model_fn`` names from ``tf.estimator`` and ``tf.layers``, on every stack.

A ``model_fn`` run by :func:`hookbridge.model_fn_model` on TF 2.21 cannot name
``tf.estimator.ModeKeys``, ``tf.estimator.EstimatorSpec`` or ``TPUEstimatorSpec`` (``tf.estimator``
is gone from TF 2.16), and on Keras 3 not ``tf.compat.v1.layers`` either. It names them here::

    from hookbridge.estimator_compat import EstimatorSpec, ModeKeys, TPUEstimatorSpec, layers

    def model_fn(features, labels, mode, params):
        logits = layers.dense(features["x"], 10)
        ...
        return EstimatorSpec(mode, loss=loss, train_op=train_op)

* ``ModeKeys``, ``EstimatorSpec``, ``TPUEstimatorSpec``: TensorFlow's own classes where
  tensorflow-estimator is installed (TF 2.15), so the same ``model_fn`` still runs under the
  Estimator; elsewhere hookbridge's, with the same fields, mode strings and validation
  (:mod:`hookbridge._migrate.model_fn.compat`).
* ``layers``: hookbridge's ``dense``, ``conv2d``, ``max_pooling2d``, ``dropout``,
  ``batch_normalization`` and ``flatten`` (:mod:`hookbridge._migrate.model_fn.v1_layers`), on
  every stack: in a TF1 graph (the Estimator's) they make the same variables and compute the
  same values, bit for bit, as TensorFlow's ``tf.compat.v1.layers``; inside
  ``model_fn_model``'s ``tf.function`` they still do, where TensorFlow's own (tf_keras, TF 2.15)
  become their V2 layers (batch normalization then updates its statistics itself, another way,
  and leaves ``UPDATE_OPS`` empty). On Keras 3 ``tf.compat.v1.layers`` does not load at all.

* ``export``: ``tf.estimator.export`` where tensorflow-estimator is installed; elsewhere
  ``PredictOutput``, ``ClassificationOutput``, ``RegressionOutput`` (TensorFlow's own classes)
  and ``ServingInputReceiver`` / ``TensorServingInputReceiver``, what a ``model_fn``'s
  ``export_outputs`` and a ``serving_input_receiver_fn`` name for
  ``model_fn_model(...).export_saved_model``.

``hookbridge upgrade --model-fn`` rewrites a tree's ``tf.estimator.ModeKeys`` /
``EstimatorSpec`` / ``TPUEstimatorSpec`` and ``tf.layers.*`` to these names (``docs/upgrade.md``).
This module imports TensorFlow: ``import hookbridge`` alone does not load it.
"""

from __future__ import annotations

import types

from hookbridge import _tfcompat
from hookbridge._migrate.model_fn import v1_layers
from hookbridge._migrate.model_fn.compat import (
    NATIVE,
    EstimatorSpec,
    ModeKeys,
    TPUEstimatorSpec,
)
from hookbridge._migrate.model_fn.export import ServingInputReceiver, TensorServingInputReceiver

#: hookbridge's ``tf.compat.v1.layers`` functions, on every stack (see the module docstring).
layers = v1_layers


def _export() -> types.SimpleNamespace:
    if NATIVE:
        import tensorflow as tf

        return tf.estimator.export
    return types.SimpleNamespace(
        **_tfcompat.export_output_classes(),
        ServingInputReceiver=ServingInputReceiver,
        TensorServingInputReceiver=TensorServingInputReceiver,
    )


#: ``tf.estimator.export`` (see the module docstring).
export = _export()

__all__ = ["EstimatorSpec", "ModeKeys", "TPUEstimatorSpec", "export", "layers"]
