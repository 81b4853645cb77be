"""``predict`` of ``model_fn_model`` with the PREDICT spec's ``prediction_hooks``, as ``Estimator.predict``.

``Estimator.predict`` ran one ``MonitoredSession`` with hooks = the input_fn's, the caller's
``hooks=`` and the spec's ``prediction_hooks``, and ``mon_sess.run(predictions)`` per batch until
the input ended or a hook asked to stop (the batch of that run was still yielded): each hook's
``before_run`` could fetch any tensor of the PREDICT graph, fetched in the same run as the
predictions. Here the spec's hooks run in a ``HookCallback`` in predict mode after the caller's
callbacks, and the tensors they name (``spec.hook_fetches``: scalars, by log key) are returned
by the predict step beside the predictions, so each is the batch's own value, fetched in the
same step. A callback first in the list (``_HookValues``) moves them from Keras's batch logs'
``outputs`` into the logs, where ``HookCallback`` reads them as that batch's values, and puts
back the predictions as Keras gives them; ``predict`` returns the predictions alone. A hook
asking to stop ends ``predict`` after that batch on Keras 3 (``stop_predicting``); tf_keras and
Keras 2.15 cannot stop ``predict`` early (``HookCallback`` warns, docs/limits.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")


def with_hook_values(model: Any, predictions: Any) -> Any:
    """What the predict step returns: the predictions, and when the spec's hooks run, each
    hooked tensor's value (``model._mfn_hook_values``, set by ``call``) with a batch dimension
    of one (Keras concatenates the steps' outputs)."""
    if not model._mfn_hooking:
        return predictions
    values = model._mfn_hook_values
    return predictions, {key: tf.reshape(value, [1]) for key, value in values.items()}


class _HookValues(keras.callbacks.Callback):
    """Moves the hooked tensors' values of the batch from ``outputs`` into the batch logs, and
    leaves the predictions where Keras puts them (``outputs``; on Keras 3 a dict's entries)."""

    def on_predict_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if logs is None or "outputs" not in logs:
            return
        predictions, values = logs.pop("outputs")
        if KERAS3 and isinstance(predictions, dict):  # as Keras 3 flattens a dict of outputs
            logs.update(predictions)
        else:
            logs["outputs"] = predictions
        for key, value in values.items():
            logs[key] = float(np.asarray(value).reshape(-1)[0])


def hooked_predict(
    model: Any, predict: Callable[[list], Any], callbacks: Any, bridge: Callable[[list], list]
) -> Any:
    """Runs Keras ``predict`` with the spec's ``prediction_hooks`` if it has any; returns the
    predictions.

    Args:
        model: the ``ModelFnModel`` (its ``_mfn_hooking`` makes the predict step return the
            hooked tensors too; its hooked and plain predict functions are kept apart).
        predict: Keras ``predict`` with the given callbacks.
        callbacks: the caller's callbacks (or None).
        bridge: appends the ``HookCallback`` of fresh spec hooks to a callbacks list.

    Raises:
        ValueError: a prediction hook names a tensor no Keras log can hold (not a scalar).
    """
    if not model._mfn_has_hooks.get("infer"):
        return predict(callbacks)
    if model._mfn_predict_refused is not None:
        raise ValueError(str(model._mfn_predict_refused))
    callbacks = [_HookValues(), *bridge(list(callbacks or []))]
    plain = model.predict_function
    model.predict_function = getattr(model, "_mfn_hooked_predict", None)
    object.__setattr__(model, "_mfn_hooking", True)
    try:
        result = predict(callbacks)
    finally:
        object.__setattr__(model, "_mfn_hooked_predict", model.predict_function)
        object.__setattr__(model, "_mfn_hooking", False)
        model.predict_function = plain
    return result[0]
