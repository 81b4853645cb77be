"""Linear parts of canned Estimators: one ``[d, units]`` weight per feature column, one bias.

``LinearClassifier``/``LinearRegressor`` and the linear half of ``DNNLinearCombined*`` keep
``linear/linear_model/<column>/weights`` (``[1, units]`` for a scalar numeric column) and
``linear/linear_model/bias_weights``; the logits are the columns' values times their weights,
summed, plus the bias. In Keras that is one ``Dense(units)`` over the columns concatenated, whose
kernel is the columns' weights stacked **in the Estimator's column order**: feature columns
sorted by name (``sorted(columns, key=lambda c: c.name)``, as ``linear_model`` and
``input_layer`` build them), whatever order they were declared in. The DNN half concatenates its
input in the same order.

A Keras model fed the features in another order computes other logits without any error; where
the model names its inputs (``keras.Input(name=<column>)``) and concatenates them, the order it
concatenates is checked here against the Estimator's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_COLUMN_WEIGHTS = re.compile(r"^(?P<scope>(?:.*/)?linear_model)/(?P<column>[^/]+)/weights$")
#: A source: the checkpoint names filling one Keras weight (rows stacked in this order), and the
#: leaf it stands for (``kernel``, ``bias``, or the single name's own leaf).
Source = tuple[tuple[str, ...], str]


def groups(variables: Sequence[str]) -> dict[str, tuple[list[str], str | None]]:
    """``{scope: (column weights in the Estimator's order, bias name or None)}``."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name in variables:
        m = _COLUMN_WEIGHTS.match(name)
        if m:
            found.setdefault(m["scope"], []).append((m["column"], name))
    names = set(variables)
    out = {}
    for scope, columns in found.items():
        bias = f"{scope}/bias_weights"
        out[scope] = ([name for _, name in sorted(columns)], bias if bias in names else None)
    return out


def column(name: str) -> str | None:
    """The feature column a linear weight belongs to (``None``: not a column weight)."""
    m = _COLUMN_WEIGHTS.match(name)
    return m["column"] if m else None


def sources(variables: Sequence[str]) -> list[tuple[str, list[Source]]]:
    """The checkpoint's variables as layers of sources ``(layer name, sources)``: each linear
    model one layer (its columns' weights stacked as one kernel, ``bias_weights`` its bias),
    every other variable a source of its own, grouped by the name up to its last ``/``."""
    linear = groups(variables)
    taken = {n for names, bias in linear.values() for n in [*names, *([bias] if bias else [])]}
    layers: dict[str, list[Source]] = {}
    for scope, (names, bias) in linear.items():
        layers[scope] = [(tuple(names), "kernel")] + ([((bias,), "bias")] if bias else [])
    for name in variables:
        if name not in taken:
            layer, _, leaf = name.rpartition("/")
            layers.setdefault(layer, []).append(((name,), leaf))
    return list(layers.items())


def source_shape(source: Source, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The shape of the sources stacked (rows added), or ``None`` if they cannot stack."""
    names = source[0]
    first = shapes[names[0]]
    if len(names) == 1:
        return first
    if any(len(shapes[n]) != len(first) or shapes[n][1:] != first[1:] for n in names):
        return None
    return (sum(shapes[n][0] for n in names), *first[1:])


def check_feature_order(model: Any, columns: Sequence[str]) -> None:
    """Raises when the Keras model concatenates inputs named after ``columns`` (the Estimator's
    order) in another order.

    Raises:
        ValueError: naming both orders.
    """
    import tensorflow as tf

    wanted = list(columns)
    for layer in getattr(model, "layers", []):
        if not isinstance(layer, tf.keras.layers.Concatenate):
            continue
        try:
            inputs = layer.input
        except (AttributeError, ValueError):
            continue
        names = [str(getattr(t, "name", "")).split(":")[0] for t in inputs]
        if sorted(names) == sorted(wanted) and names != wanted:
            raise ValueError(
                f"restore_checkpoint: the Keras layer {layer.name!r} concatenates the features "
                f"in the order {names}, the Estimator in the order {wanted} (its feature columns "
                "sorted by name): the weights would apply to the wrong features. Concatenate "
                f"the inputs in the order {wanted}, or stack the columns' weights in your order "
                "with a tuple entry: {('<scope>/linear_model/<column>/weights', ...): "
                "'<kernel>'}."
            )
