"""The model's predictions as tensors of the bridge's graph under ``predict``: one per output.

Natively a hook reading a model's outputs fetches each output's own tensor (``Estimator.predict``'s
``predictions`` dict, a TF1 graph's output tensors), each in its own shape and dtype. So the
bridge's graph holds ``outputs`` for a model of one output and ``outputs/<name>`` for each output
of a model of several (``name``: the key of a dict of outputs, else Keras's ``output_names``),
with the dtype the model declares. The structure is read from the model before ``predict`` runs
(``model.output``: a functional model); a model that does not show it (a subclassed model) gets
one ``outputs`` tensor, and a batch whose predictions are several arrays is refused when a hook
reads it, naming them. Nothing is stacked into one array and nothing is cast: a fed value whose
dtype is not the tensor's is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

#: The tensor of a single-output model (and of a model whose outputs are not known in advance).
SINGLE = "outputs"


def output_specs(model: Any) -> list[tuple[str, tf.DType]]:
    """``[(tensor name, dtype)]`` of ``model``'s outputs as the bridge's graph holds them:
    ``[("outputs", dtype)]`` for one output (or an unknown structure: float32), else one
    ``("outputs/<name>", dtype)`` per output in Keras's order."""
    try:
        structure = model.output  # a functional model's (nested) symbolic outputs
    except (AttributeError, ValueError, RuntimeError):
        return [(SINGLE, tf.float32)]
    if isinstance(structure, (list, tuple)) and len(structure) == 1:
        structure = structure[0]  # Keras predicts one array for it
    if isinstance(structure, Mapping):
        items = list(structure.items())
    elif isinstance(structure, (list, tuple)):
        names = list(getattr(model, "output_names", None) or [])
        if len(names) != len(structure) or len(set(names)) != len(names):
            names = [str(i) for i in range(len(structure))]
        items = list(zip(names, structure))
    else:
        return [(SINGLE, _dtype(structure))]
    return [(f"{SINGLE}/{key}", _dtype(t)) for key, t in items]


def _dtype(tensor: Any) -> tf.DType:
    try:
        return tf.as_dtype(tensor.dtype)
    except (AttributeError, TypeError):
        return tf.float32


def value_of(predictions: Any, name: str, position: int, tensor: Any) -> np.ndarray:
    """The batch's array of the output ``name`` (``output_specs``'s ``position``-th) in its own
    dtype; ``tensor``: its tensor of the bridge's graph, for the errors.

    Raises:
        ValueError: no predictions yet; a model of several outputs whose structure the bridge
            could not see (it then has one ``outputs`` tensor), naming them.
    """
    if predictions is None:
        raise ValueError(f"hookbridge: {tensor.name} has no value before a predict step.")
    if name == SINGLE:
        if isinstance(predictions, (list, tuple)) and len(predictions) == 1:
            predictions = predictions[0]
        elif isinstance(predictions, (list, tuple, Mapping)):
            keys = (
                list(predictions)
                if isinstance(predictions, Mapping)
                else [f"[{i}]" for i in range(len(predictions))]
            )
            raise ValueError(
                f"hookbridge: {tensor.name} is one output's predictions, but this batch has "
                f"{len(keys)} ({type(predictions).__name__} {keys}): the bridge did not know the "
                "model's outputs before predict (model.output is not defined: a subclassed "
                "model), so it has no tensor per output and will not stack or pick one. Build "
                "the model as keras.Model(inputs, outputs) (a dict of outputs names each): the "
                "bridge's graph then holds outputs/<name>:0 per output."
            )
        return np.asarray(predictions)
    key = name[len(SINGLE) + 1 :]
    if isinstance(predictions, Mapping):
        return np.asarray(predictions[key])
    if isinstance(predictions, (list, tuple)) and len(predictions) > position:
        return np.asarray(predictions[position])
    raise ValueError(
        f"hookbridge: {tensor.name} is one of the model's outputs, but this batch's predictions "
        f"are a {type(predictions).__name__}, not the model's structure of outputs."
    )


def build(specs: list[tuple[str, tf.DType]]) -> dict[str, tf.Tensor]:
    """The placeholders of ``specs`` in the default graph (the bridge's), name -> tensor."""
    return {name: tf.compat.v1.placeholder(dtype, shape=None, name=name) for name, dtype in specs}


def feed_value(predictions: Any, name: str, position: int, tensor: Any) -> np.ndarray:
    """The array fed to ``tensor`` for a run reading it: refused if its dtype is not the
    tensor's (a cast would change the value a hook computes on)."""
    value = value_of(predictions, name, position, tensor)
    if value.dtype != tensor.dtype.as_numpy_dtype:
        raise ValueError(
            f"hookbridge: {tensor.name} is {tensor.dtype.name} (the dtype the model declares for "
            f"that output), but this batch's predictions are {value.dtype}: a run computing on "
            "it would see a cast value. Fetch the tensor itself (its value comes in its own "
            "dtype), or declare the output's dtype in the model (a Lambda's output dtype, a "
            "tf.cast in the model)."
        )
    return value
