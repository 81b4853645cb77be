"""``model.layers`` under CallbackHook: the graph's model variables grouped as layers.

A TF1 graph has no layer objects, but its variables are named by the scope that built them
(``dense/kernel``, ``dense/bias``, ``batch_normalization/moving_mean``): one
:class:`GraphLayer` per scope, in the order of the variables. What Keras's TensorBoard reads
for weight histograms and images (``histogram_freq``, ``write_images``): each layer's
``weights``, whose ``name`` is the variable's (``dense/kernel:0``, tf_keras's tag) and ``path``
its op name (``dense/kernel``, Keras 3's tag), and whose value is the variable's now in the
session. ``get_weights()`` too, for callbacks that read layers' values.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class WeightValue(np.ndarray):
    """A variable's value with the variable's ``name``, ``path`` and ``trainable``."""

    name: str
    path: str
    trainable: bool


def _value(var: Any, value: Any, trainable: bool) -> WeightValue:
    out = np.asarray(value).view(WeightValue)
    out.name, out.path, out.trainable = var.name, var.op.name, trainable
    return out


class GraphLayer:
    """The variables of one scope of the graph, read with the hook's session."""

    def __init__(self, name: str, variables: list, state: Any) -> None:
        self.name = name
        self.variables = variables
        self._state = state

    trainable = True

    @property
    def weights(self) -> list[WeightValue]:
        ids = self._state.trainable_ids
        values = self._state.session.run(self.variables)
        return [_value(v, x, id(v) in ids) for v, x in zip(self.variables, values)]

    @property
    def trainable_weights(self) -> list[WeightValue]:
        return [w for w in self.weights if w.trainable]

    @property
    def non_trainable_weights(self) -> list[WeightValue]:
        return [w for w in self.weights if not w.trainable]

    def get_weights(self) -> list[np.ndarray]:
        return [np.asarray(w) for w in self.weights]

    def __repr__(self) -> str:
        return f"<hookbridge GraphLayer {self.name!r}: {[v.op.name for v in self.variables]}>"


def graph_layers(state: Any) -> list[GraphLayer]:
    """One :class:`GraphLayer` per scope of ``state.variables`` (a top-level variable is its
    own layer), in the order the scopes first appear."""
    groups: dict[str, list] = {}
    for var in state.variables:
        scope = var.op.name.rpartition("/")[0] or var.op.name
        groups.setdefault(scope, []).append(var)
    return [GraphLayer(name, variables, state) for name, variables in groups.items()]
