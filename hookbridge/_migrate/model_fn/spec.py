"""The ``EstimatorSpec``'s hooks under ``model_fn_model``: what they name, as Keras logs.

A hook the ``model_fn`` returns (``training_hooks``) names tensors of the ``model_fn``'s graph,
by name (``LoggingTensorHook(["train_accuracy"])``) or as tensor objects
(``NanTensorHook(loss)``). Under ``fit`` that graph is a ``tf.function``'s, which no session can
run: each such tensor becomes a Keras log of the model's step (a scalar, the value of that
step, under the tensor's op name), which ``HookCallback``'s graph holds as a tensor of the same
name; a tensor object held by the hook is replaced by that name, which the hook's ``begin`` and
``before_run`` resolve in ``HookCallback``'s graph as they resolved names in the Estimator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

#: Log keys HookCallback's graph already holds (its own ``loss`` and global step).
_BRIDGE_KEYS = frozenset({"loss", "global_step"})


def hook_fetches(owner: str, mode: str, hooks: Sequence[Any], graph: tf.Graph) -> dict[str, Any]:
    """The tensors of ``graph`` that ``hooks`` name, by log key; tensor objects in the hooks'
    attributes are replaced by their names.

    Args:
        owner: how errors name the model.
        mode: the ``ModeKeys`` value the hooks come from (for errors).
        hooks: the spec's hooks of that mode.
        graph: the ``model_fn``'s graph.

    Returns:
        ``{log key: scalar float32 tensor}`` (the key is the tensor's op name).

    Raises:
        ValueError: a hook names a tensor that is not a scalar, or not an op's first output.
    """
    found: dict[str, Any] = {}
    changed = [False]

    def visit(hook: Any, value: Any) -> Any:
        if isinstance(value, str):
            tensor = _tensor_named(graph, value)
            if tensor is not None:
                _add(owner, mode, hook, tensor, found)
            return value
        if isinstance(value, (tf.Tensor, tf.Operation)) and value.graph is graph:
            changed[0] = True
            if isinstance(value, tf.Operation):
                return value.name
            return _add(owner, mode, hook, value, found)
        return value

    for hook in hooks:
        for attribute, value in list(vars(hook).items()):
            changed[0] = False
            if isinstance(value, dict):
                new: Any = {k: visit(hook, v) for k, v in value.items()}
            elif isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
                new = type(value)(visit(hook, v) for v in value)
            else:
                new = visit(hook, value)
            if changed[0]:
                setattr(hook, attribute, new)
    return found


def _tensor_named(graph: tf.Graph, name: str) -> Any:
    try:
        element = graph.as_graph_element(name, allow_tensor=True, allow_operation=True)
    except (KeyError, ValueError, TypeError):
        return None
    if isinstance(element, tf.Operation):
        return element.outputs[0] if element.outputs else None
    return element


def _add(owner: str, mode: str, hook: Any, tensor: Any, found: dict[str, Any]) -> str:
    key = tensor.op.name
    if tensor.value_index != 0 or not tensor.shape.is_compatible_with([]) or key in _BRIDGE_KEYS:
        if key in _BRIDGE_KEYS:
            return f"{key}:0"
        raise ValueError(
            f"{owner}: the {mode} hook {type(hook).__name__} names tensor {tensor.name!r} "
            f"(shape {tensor.shape}); under fit a hook reads the model_fn's tensors as Keras "
            "logs, which are scalars of an op's first output. Name a scalar (tf.identity(x, "
            "name=...)) or reduce it (tf.reduce_mean) in the model_fn."
        )
    if tensor.dtype in (tf.string, tf.variant, tf.resource):
        raise ValueError(
            f"{owner}: the {mode} hook {type(hook).__name__} names tensor {tensor.name!r} of "
            f"dtype {tensor.dtype.name}, which a Keras log cannot hold."
        )
    found[key] = tf.cast(tensor, tf.float32)
    return f"{key}:0"
