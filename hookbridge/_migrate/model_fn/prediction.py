"""``predict`` of ``model_fn_model`` with the PREDICT spec's ``prediction_hooks``, as ``Estimator.predict``.

``Estimator.predict`` ran one ``MonitoredSession`` with hooks = the input_fn's, the caller's
``hooks=`` and the spec's ``prediction_hooks``, and ``mon_sess.run(predictions)`` per batch until
the input ended or a hook asked to stop (the batch of that run was still yielded): each hook's
``before_run`` could fetch any tensor of the PREDICT graph, fetched in the same run as the
predictions. Here the spec's hooks run in a ``HookCallback`` in predict mode after the caller's
callbacks, and the tensors they name (``spec.hook_fetches``, by log key) are returned
by the predict step beside the predictions, so each is the batch's own value, fetched in the
same step. A callback first in the list (``_HookValues``) moves them from Keras's batch logs'
``outputs`` into the logs (scalars), where ``HookCallback`` reads them as that batch's values,
or to ops of the hooks' graph named as in the ``model_fn`` (``_BatchArrays``: a batch tensor, the
batch's whole array, as the Estimator's run fetched it), and puts back the predictions as Keras
gives them; ``predict`` returns the predictions alone. A hook
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
    hooked tensor's value (``model._mfn_hook_values``, set by ``call``) with a leading
    dimension of one (Keras concatenates the steps' outputs, ragged where batches differ)."""
    if not model._mfn_hooking:
        return predictions
    values = model._mfn_hook_values
    return predictions, {key: tf.expand_dims(value, 0) for key, value in values.items()}


def hook_arrays(found: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (dtype, static shape)}`` of the non-scalar tensors among a PREDICT trace's hooked
    tensors (``spec.hook_fetches``): a hook sees them as the batch's whole array."""
    return {k: (t.dtype, t.shape) for k, t in found.items() if not t.shape.is_compatible_with([])}


class _HookValues(keras.callbacks.Callback):
    """Moves the hooked tensors' values of the batch from ``outputs`` into the batch logs
    (scalars) or ``arrays`` (the batch's whole array, which ``_BatchArrays`` hands the hooks),
    and leaves the predictions where Keras puts them (``outputs``; on Keras 3 a dict's
    entries)."""

    def __init__(self, arrays: dict[str, Any]) -> None:
        super().__init__()
        self.arrays = arrays

    def on_predict_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if logs is None or "outputs" not in logs:
            return
        predictions, values = logs.pop("outputs")
        if KERAS3 and isinstance(predictions, dict):  # as Keras 3 flattens a dict of outputs
            logs.update(predictions)
        else:
            logs["outputs"] = predictions
        for key, value in values.items():
            if key in self.arrays:
                self.arrays[key] = np.asarray(value)[0]
            else:
                logs[key] = float(np.asarray(value).reshape(-1)[0])


class _BatchArrays(tf.compat.v1.train.SessionRunHook):
    """First hook of a ``HookCallback`` in ``predict``: each non-scalar hooked tensor as an op of
    the callback's graph named as in the ``model_fn``'s (so the hooks after it resolve it by
    name), whose value in a run is the batch's own array (``_HookValues`` sets it before the
    callback's batch run). Natively the run fetched the batch's tensor itself."""

    def __init__(self, specs: dict[str, tuple[Any, Any]], arrays: dict[str, Any]) -> None:
        self._specs = specs
        self._arrays = arrays

    def begin(self) -> None:
        for key, (dtype, shape) in self._specs.items():
            value = tf.compat.v1.py_func(
                lambda key=key: self._arrays[key], [], dtype, stateful=True, name=key
            )
            value.set_shape(shape)
            if value.op.name != key:  # the name is taken: hooks would read another tensor
                raise ValueError(
                    f"model_fn_model.predict: a prediction hook names the model_fn's tensor "
                    f"{key}:0 (shape {shape}), and the hooks' graph already has a tensor of that "
                    "name (a Keras log: a prediction key's?). Name it otherwise in the model_fn "
                    "(tf.identity(x, name=...))."
                )


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
        ValueError: a hook names a tensor no hook can be handed (not an op's first output, a
            string).
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
    specs = {k: model._mfn_hook_arrays[k] for k in keys if k in model._mfn_hook_arrays}
    scalars = [k for k in keys if k not in specs]
    arrays: dict[str, Any] = dict.fromkeys(specs)
    saved = [(c, c._log_names, c._make_hooks, c._hooks) for c in callers]
    for c in callers:
        c._log_names = [*c._log_names, *scalars]
        if specs:  # fresh hooks at each make, the arrays' ops first
            c._make_hooks = _first(_BatchArrays, specs, arrays, c._make_hooks)
    if spec and callers:
        made = callers[-1]._make_hooks
        callers[-1]._make_hooks = lambda: [*made(), *model._mfn_spec_hooks("infer")[1]]
    elif spec:
        fresh = model._mfn_spec_hooks("infer")[1]
        first = [_BatchArrays(specs, arrays)] if specs else []
        given.append(HookCallback([*first, *fresh], log_names=scalars))
    plain, functions = model.predict_function, model._mfn_hooked_predicts
    model.predict_function = functions.get(tuple(keys))
    object.__setattr__(model, "_mfn_hooking", True)
    object.__setattr__(model, "_mfn_caller_hooks", theirs)
    try:
        result = predict([_HookValues(arrays), *given])
    finally:
        functions[tuple(keys)] = model.predict_function
        object.__setattr__(model, "_mfn_hooking", False)
        object.__setattr__(model, "_mfn_caller_hooks", [])
        model.predict_function = plain
        for c, names, make, hooks in saved:
            c._log_names, c._make_hooks, c._hooks = names, make, hooks
    return result[0]


def _first(hook: Callable[..., Any], specs: dict, arrays: dict, make: Callable[[], Any]) -> Any:
    return lambda: [hook(specs, arrays), *make()]


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
