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
Keras 2.15 cannot stop ``predict`` early (``HookCallback`` warns, docs/limits.md). A caller's
``HookCallback`` is ``Estimator.predict(hooks=...)`` (``hooked_predict``).
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


def hooked_predict(model: Any, predict: Callable[[Any], Any], callbacks: Any) -> Any:
    """Runs Keras ``predict`` with the spec's ``prediction_hooks`` and the hooks of the caller's
    ``HookCallback``s (``Estimator.predict(hooks=...)``) reading the PREDICT graph; returns the
    predictions.

    As ``Estimator.predict`` ran the caller's hooks and the spec's in ONE session (the caller's
    first), the spec's hooks join the caller's last ``HookCallback`` for this ``predict``, or
    run in a ``HookCallback`` of their own after ``callbacks`` when there is none. The tensors
    the caller's hooks name (as strings, in their attributes, as ``spec.hook_fetches`` finds
    them; a ``HookCallback`` built from a callable is not searched) become log keys of their
    ``HookCallback`` for this ``predict``.

    Args:
        model: the ``ModelFnModel`` (its ``_mfn_hooking`` makes the predict step return the
            hooked tensors too; its hooked and plain predict functions are kept apart).
        predict: Keras ``predict`` with the given callbacks.
        callbacks: the caller's callbacks (or None).

    Raises:
        ValueError: a hook names a tensor no Keras log can hold (not a scalar).
    """
    from hookbridge._hook_callback.callback import HookCallback

    given = list(callbacks or [])
    callers = [c for c in given if isinstance(c, HookCallback)]
    theirs = [hook for c in callers for hook in c._hooks]
    spec = model._mfn_has_hooks.get("infer")
    if spec and model._mfn_predict_refused is not None:
        raise ValueError(str(model._mfn_predict_refused))
    keys = _keys(model, theirs) if theirs else model._mfn_hook_keys.get("infer", [])
    if not spec and not keys:
        return predict(callbacks)
    model._mfn_store.reset_locals("infer")  # as the Estimator's local_init_op
    saved = [(c, c._log_names, c._make_hooks, c._hooks) for c in callers]
    for c in callers:
        c._log_names = [*c._log_names, *keys]
    if spec and callers:
        made = callers[-1]._make_hooks
        callers[-1]._make_hooks = lambda: [*made(), *model._mfn_spec_hooks("infer")[1]]
    elif spec:
        fresh = model._mfn_spec_hooks("infer")[1]
        given.append(HookCallback(fresh, log_names=list(keys)))
    plain, functions = model.predict_function, model._mfn_hooked_predicts
    model.predict_function = functions.get(tuple(keys))
    object.__setattr__(model, "_mfn_hooking", True)
    object.__setattr__(model, "_mfn_caller_hooks", theirs)
    try:
        result = predict([_HookValues(), *given])
    finally:
        functions[tuple(keys)] = model.predict_function
        object.__setattr__(model, "_mfn_hooking", False)
        object.__setattr__(model, "_mfn_caller_hooks", [])
        model.predict_function = plain
        for c, names, make, hooks in saved:
            c._log_names, c._make_hooks, c._hooks = names, make, hooks
    return result[0]


def _keys(model: Any, hooks: list) -> list[str]:
    """The log keys of the PREDICT graph's tensors the spec's hooks and ``hooks`` name."""
    found: dict[str, Any] = {}

    def trace(features: Any) -> Any:
        found.update(model._mfn_run(features, None, "infer")[1])
        return tf.constant(0.0)

    object.__setattr__(model, "_mfn_caller_hooks", hooks)
    try:
        tf.function(trace).get_concrete_function(model._mfn_features)
    finally:
        object.__setattr__(model, "_mfn_caller_hooks", [])
    return sorted(found)
