"""Canned Estimators' Keras twins (issue 33).

The feature-column layers (``columns``: the ids and values ``tf.feature_column`` computes, as
Keras weights under the Estimator's names), the optimizers computing the Estimator's updates
(``optimizers``), and the twin itself (``keras_twin``, built from an Estimator on TF 2.15 or from
the canned class's name and constructor arguments on any stack).
"""
