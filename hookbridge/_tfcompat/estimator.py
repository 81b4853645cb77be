"""tensorflow-estimator internals: a canned Estimator's arguments and head settings, and a
PREDICT spec's default export outputs.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

from typing import Any


def canned_estimator_arguments(estimator: Any) -> dict[str, Any]:
    """The constructor arguments of a canned ``tf.estimator`` Estimator (``DNNClassifier``,
    ``LinearRegressor``, ...): the variables its private ``_model_fn`` closes over
    (``hidden_units``, ``feature_columns``, ``head``, ``optimizer``, ``activation_fn``,
    ``dropout``, ``batch_norm``, ...), as tensorflow-estimator 2.15 builds them."""
    import inspect

    return dict(inspect.getclosurevars(estimator._model_fn).nonlocals)


#: Private attributes of tensorflow-estimator heads read by ``canned_head_settings``.
_HEAD_ATTRIBUTES = ("_loss_reduction", "_n_classes", "_weight_column", "_label_vocabulary")


def canned_head_settings(head: Any) -> dict[str, Any]:
    """A canned Estimator head's ``logits_dimension`` (public) and its private settings
    (``loss_reduction``, ``n_classes``, ``weight_column``, ``label_vocabulary``) when it has
    them."""
    settings = {"logits_dimension": head.logits_dimension}
    for attribute in _HEAD_ATTRIBUTES:
        if hasattr(head, attribute):
            settings[attribute[1:]] = getattr(head, attribute)
    return settings


def default_export_outputs(export_outputs: Any, predictions: Any) -> dict[str, Any]:
    """A PREDICT ``EstimatorSpec``'s ``export_outputs`` as tensorflow-estimator validates them
    (TensorFlow's private ``saved_model.model_utils.export_utils.get_export_outputs``): a dict of
    ``ExportOutput``s, with the default serving ``PredictOutput`` of ``predictions`` added."""
    from tensorflow.python.saved_model.model_utils import export_utils

    return export_utils.get_export_outputs(export_outputs, predictions)


def export_output_classes() -> dict[str, type]:
    """TensorFlow's ``PredictOutput``, ``ClassificationOutput`` and ``RegressionOutput`` (what
    ``tf.estimator.export`` named; private ``saved_model.model_utils.export_output`` in TF)."""
    from tensorflow.python.saved_model.model_utils import export_output

    names = ("PredictOutput", "ClassificationOutput", "RegressionOutput")
    return {name: getattr(export_output, name) for name in names}
