"""Log tensors: resolving the ``logs`` argument, and the running means Keras 3 reports.

Sums are kept in Python floats (cheaper than any graph-side accumulator): each step adds the
fetched batch values; batch logs are ``sum / n`` within the epoch, epoch logs the same at its end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf


def resolve(graph: tf.Graph, logs: Mapping[str, Any]) -> tuple[list[str], list[tf.Tensor]]:
    """(sorted names, tensors) of ``logs`` in ``graph``; raises naming a missing entry."""
    names = sorted(logs)
    tensors = []
    for name in names:
        value = logs[name]
        if isinstance(value, str):
            key = value if ":" in value else value + ":0"
            try:
                tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (KeyError, ValueError) as e:
                raise ValueError(
                    f"CallbackHook: logs[{name!r}] = {value!r} is not a tensor of the session's "
                    f"graph ({e}). Available scalar float tensors: {_available(graph)}. Give the "
                    "tensor a name in the graph (e.g. tf.identity(loss, name='loss')) or pass the "
                    "tensor itself."
                ) from None
        elif isinstance(value, (tf.Tensor, tf.Variable)) or hasattr(value, "graph"):
            tensor = value
            if getattr(tensor, "graph", None) is not graph:
                raise ValueError(
                    f"CallbackHook: logs[{name!r}] = {value!r} does not belong to the graph the "
                    "session runs. Build it in that graph (or pass its name)."
                )
        else:
            raise TypeError(
                f"CallbackHook: logs[{name!r}] must be a tensor or a tensor name, received "
                f"{value!r} of type {type(value).__name__}."
            )
        tensors.append(tensor)
    return names, tensors


def _available(graph: tf.Graph, limit: int = 30) -> str:
    found = []
    for op in graph.get_operations():
        for t in op.outputs:
            if t.dtype.is_floating and t.shape.rank == 0 and not op.name.startswith("save"):
                found.append(t.name)
    more = f" ... and {len(found) - limit} more" if len(found) > limit else ""
    return ", ".join(found[:limit]) + more if found else "(none)"


class RunningMeans:
    """Per-epoch sums of the log values, in Python floats."""

    __slots__ = ("count", "names", "sums")

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.sums = [0.0] * len(names)
        self.count = 0

    def reset(self) -> None:
        self.sums = [0.0] * len(self.names)
        self.count = 0

    def add(self, values: list) -> None:
        sums = self.sums
        for i, v in enumerate(values):
            sums[i] += _scalar(v)
        self.count += 1

    def means(self) -> dict[str, float]:
        n = self.count
        if not n:
            return {}
        return {name: s / n for name, s in zip(self.names, self.sums)}


def _scalar(value: Any) -> float:
    try:
        return float(value)
    except TypeError:  # a non-scalar log: Keras would report its mean
        return float(np.mean(value))
