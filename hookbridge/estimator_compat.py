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
* ``layers``: ``tf.compat.v1.layers`` wherever it loads (tf_keras, TF 2.15); on Keras 3,
  hookbridge's ``dense``, ``conv2d``, ``max_pooling2d``, ``dropout``, ``batch_normalization``
  and ``flatten``, with the same variables (names, shapes, order) and the same values
  (:mod:`hookbridge._migrate.model_fn.v1_layers`).

``hookbridge upgrade --model-fn`` rewrites a tree's ``tf.estimator.ModeKeys`` /
``EstimatorSpec`` / ``TPUEstimatorSpec`` and ``tf.layers.*`` to these names (``docs/upgrade.md``).
This module imports TensorFlow: ``import hookbridge`` alone does not load it.
"""

from __future__ import annotations

import tensorflow as tf

from hookbridge._migrate.model_fn import v1_layers
from hookbridge._migrate.model_fn.compat import EstimatorSpec, ModeKeys, TPUEstimatorSpec


def _v1_layers():
    try:
        tf.compat.v1.layers.dense  # noqa: B018 - Keras 3 raises AttributeError here
    except AttributeError:
        return v1_layers
    return tf.compat.v1.layers


#: ``tf.compat.v1.layers`` where it loads, hookbridge's six layers on Keras 3.
layers = _v1_layers()

__all__ = ["EstimatorSpec", "ModeKeys", "TPUEstimatorSpec", "layers"]
