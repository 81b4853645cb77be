"""Keras model, layer and variable internals: the ``tf.Variable`` behind a Keras weight,
tracking a weight or a loss as Keras 3 does, and the inputs a symbolic tensor comes from.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf


def keras_weight_variable(weight: Any) -> Any:
    """The ``tf.Variable`` holding a Keras weight: the weight itself on Keras 2 / tf_keras, the
    Keras 3 ``KerasVariable``'s ``_value`` (``.value`` may be an autocast copy)."""
    import tensorflow as tf

    if isinstance(weight, tf.Variable):
        return weight
    return weight._value


def keras3_track_weight(layer: Any, variable: Any) -> None:
    """Keras 3: makes ``variable`` (a ``keras.Variable`` made outside ``add_weight``, which
    would scope its TensorFlow name under the layer's) one of ``layer``'s weights: the private
    ``Layer._track_variable`` ``add_weight`` ends with."""
    layer._track_variable(variable)


def keras3_tf_variable(variable: Any) -> Any:
    """Keras 3: the ``tf.Variable`` a ``keras.Variable`` holds (its private ``_value``; the
    public ``.value`` is a cast tensor under autocast), for TF1 code that assigns to it."""
    value = getattr(variable, "_value", None)
    if value is None or not isinstance(value, tf.Variable):
        raise TypeError(
            f"Keras {getattr(tf.keras, '__version__', '?')}: {variable!r} holds no tf.Variable "
            "in _value: update hookbridge._tfcompat.keras3_tf_variable"
        )
    return value


def keras3_track_loss(model: Any, loss: Any, x: Any) -> None:
    """In a custom ``train_step`` of a Keras 3 model, counts the batch loss into the ``loss``
    Keras logs, as Keras 3's own ``train_step`` does (private ``_loss_tracker``, weighted by the
    batch size). Keras 2 / tf_keras count it in ``compute_loss``: nothing to do there."""
    roots = (c.__module__.partition(".")[0] for c in type(model).__mro__)
    package = sys.modules.get(next((r for r in roots if r in ("keras", "tf_keras")), ""))
    if not str(getattr(package, "__version__", "")).startswith("3."):
        return
    tracker = getattr(model, "_loss_tracker", None)
    if tracker is None:
        raise AttributeError(
            "Keras 3 Model has no _loss_tracker: update hookbridge._tfcompat.keras3_track_loss"
        )
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    tracker.update_state(loss, sample_weight=tf.shape(first)[0])


def keras_tensor_inputs(tensor: Any) -> set[str] | None:
    """The names of the functional model's ``Input`` layers a symbolic Keras tensor is computed
    from (through every layer between: private ``_keras_history`` and ``_inbound_nodes``, Keras
    2 and 3 alike); ``None`` when it cannot be traced (not a functional model's tensor)."""
    found: set[str] = set()
    todo, seen = [tensor], set()
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        history = getattr(current, "_keras_history", None)
        if history is None:
            return None
        layer, node_index = history[0], history[1]
        nodes = getattr(layer, "_inbound_nodes", None) or []
        inputs = tf.nest.flatten(nodes[node_index].input_tensors) if node_index < len(nodes) else []
        if type(layer).__name__ == "InputLayer" or not inputs:
            found.add(str(layer.name))
            continue
        todo.extend(inputs)
    return found


def keras_tensor_layer(tensor: Any) -> Any | None:
    """The layer (Keras 3: the layer or operation) whose call made a symbolic Keras tensor
    (private ``_keras_history``), ``None`` when it is not a functional model's tensor."""
    history = getattr(tensor, "_keras_history", None)
    return None if history is None else history[0]


def keras_concatenated(tensor: Any) -> list[Any] | None:
    """The symbolic tensors a functional model's tensor concatenates along its last axis, in
    their order, when it is the output of ``keras.layers.Concatenate``, Keras 3's
    ``keras.ops.concatenate`` (an ``Operation`` node) or tf_keras's ``tf.concat`` (a
    ``TFOpLambda``); ``None`` for anything else (a ``Lambda`` is opaque). Reads the private
    ``_keras_history`` and ``_inbound_nodes`` (Keras 2 and 3), ``call_args``/``call_kwargs`` of
    a tf_keras node."""
    history = getattr(tensor, "_keras_history", None)
    if history is None:
        return None
    layer, node_index = history[0], history[1]
    nodes = getattr(layer, "_inbound_nodes", None) or []
    if node_index >= len(nodes):
        return None
    node = nodes[node_index]
    kind = type(layer).__name__
    if kind == "Concatenate" and hasattr(layer, "axis"):
        axis = layer.axis
    elif kind == "TFOpLambda" and getattr(layer, "function", None) in (
        tf.concat,
        tf.compat.v1.concat,
    ):
        args, kwargs = list(node.call_args), dict(node.call_kwargs)
        axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
    else:
        return None
    try:
        axis, rank = int(axis), len(tensor.shape)
    except (TypeError, ValueError):
        return None
    if axis not in (-1, rank - 1):
        return None
    return list(tf.nest.flatten(node.input_tensors))


def keras_steps_per_execution(model: Any) -> int:
    """How many steps a compiled model's ``train_function`` runs per call: Keras 3's
    ``steps_per_execution``, tf_keras's / Keras 2's private ``_steps_per_execution`` variable."""
    steps = getattr(model, "steps_per_execution", None)
    if steps is None:
        steps = getattr(model, "_steps_per_execution", None)
    if steps is None:
        raise AttributeError(
            f"{type(model).__name__} has no steps_per_execution: update "
            "hookbridge._tfcompat.keras_steps_per_execution"
        )
    return int(steps.numpy()) if hasattr(steps, "numpy") else int(steps)
