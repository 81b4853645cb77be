"""The graph's model variables: what Keras's ``model.weights`` would hold for a TF1 graph.

Keras's ``model.weights`` is every layer's variables, trainable (kernels, biases, BatchNorm's
``gamma``/``beta``) and not (BatchNorm's ``moving_mean``/``moving_variance``), and never the
optimizer's (slots, ``iterations``, the learning rate). A TF1 graph keeps all of them in one
``GLOBAL_VARIABLES`` collection, so the optimizer's are told apart by what they are:

* the global step and the learning-rate variable (known to the hook);
* the variables of ``CallbackHook(optimizer=...)`` (``optimizer.variables()``);
* any variable an optimizer's update op (``Apply*`` / ``ResourceApply*`` / ``SparseApply*``)
  takes after the variable it updates: the slots (``<var>/Adam``, ``<var>/Momentum``) and
  Adam's ``beta1_power``/``beta2_power``, whatever optimizer built them;
* a non-trainable variable named ``<trainable variable>/<name>``: a slot (an optimizer whose
  update op is not found above) or an ``ExponentialMovingAverage`` shadow (Keras keeps EMA
  weights in its optimizer too);
* a non-trainable variable outside any scope (``lr``, ``total``, ``epoch``): bookkeeping, not a
  layer's, unless it is in ``MODEL_VARIABLES`` or an ``UPDATE_OPS`` op assigns it.

Local variables (metrics, input epochs) are not global variables: never model variables. Any
other non-trainable global variable, i.e. one inside a scope (``bn/moving_mean``, a frozen
``embedding/embeddings``), counts as the model's, as a layer's non-trainable weight; one the
hook cannot tell from them (``schedule/lr`` read by no update op, not passed as
``learning_rate=``) is one too: pass ``learning_rate=`` or ``variables=``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf

_UPDATE_OP_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")
_VARIABLE_OPS = ("VariableV2", "Variable", "VarHandleOp")
_PASS_THROUGH = ("Identity", "ReadVariableOp", "Enter")


def model_variables(graph: tf.Graph, exclude: Iterable[Any] = ()) -> list:
    """The global variables of ``graph`` that are model weights (see the module docstring).

    Args:
        graph: the session's graph.
        exclude: variables known to belong to the optimizer (global step, learning rate, the
            TF1 optimizer's variables); ``None`` entries are ignored.

    Returns:
        The model variables in creation order (``GLOBAL_VARIABLES`` order), as Keras lists
        a layer's weights in the order it created them.
    """
    trainable = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
    trainable_ids = {id(v) for v in trainable}
    trainable_names = {v.op.name for v in trainable}
    excluded = {v.op.name for v in exclude if v is not None and hasattr(v, "op")}
    excluded |= _optimizer_state_names(graph)
    declared = {v.op.name for v in graph.get_collection(tf.compat.v1.GraphKeys.MODEL_VARIABLES)}
    declared |= _updated_names(graph)
    out = []
    for var in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
        name = var.op.name
        scope = name.rpartition("/")[0]
        if id(var) in trainable_ids:
            out.append(var)
        elif name in excluded or name.startswith("hookbridge"):
            continue
        elif name in declared or (scope and scope not in trainable_names):
            out.append(var)
    return out


def _variable_name(tensor: Any) -> str | None:
    """The name of the variable ``tensor`` reads or is (through Identity / ReadVariableOp)."""
    source = tensor.op
    for _ in range(4):
        if source.type in _VARIABLE_OPS or source.type not in _PASS_THROUGH:
            break
        source = source.inputs[0].op
    return source.name if source.type in _VARIABLE_OPS else None


def _updated_names(graph: tf.Graph) -> set[str]:
    """Names of the variables the ``UPDATE_OPS`` collection's ops assign (moving statistics)."""
    names = set()
    for op in graph.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS):
        op = getattr(op, "op", op)
        if op.inputs:
            name = _variable_name(op.inputs[0])
            if name is not None:
                names.add(name)
    return names


def _optimizer_state_names(graph: tf.Graph) -> set[str]:
    """Names of the variables an optimizer's update op reads besides the one it updates."""
    names: set[str] = set()
    for op in graph.get_operations():
        if not op.type.startswith(_UPDATE_OP_PREFIXES):
            continue
        for tensor in list(op.inputs)[1:]:
            name = _variable_name(tensor)  # a variable's read: Identity / ReadVariableOp
            if name is not None:
                names.add(name)
    return names
