"""Ops of a ``model_fn``'s graph the Estimator never ran, which a ``tf.function`` would.

The Estimator's session ran only what its fetches depend on (``train_op`` and ``loss`` in TRAIN
mode, ``predictions`` in PREDICT mode): a batch-norm statistics update left out of ``train_op``'s
dependencies (``UPDATE_OPS`` forgotten) never ran. A ``tf.function`` runs every op that changes a
variable, fetched or not (automatic control dependencies), so the same ``model_fn`` would train
something else there: such ops are refused, named.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import tensorflow as tf

#: Ops that take a variable's handle without changing the variable.
_READ_ONLY = frozenset(
    {
        "ReadVariableOp",
        "VarIsInitializedOp",
        "VariableShape",
        "ResourceGather",
        "ResourceGatherNd",
        "Identity",
        "Placeholder",
    }
)


@tf.autograph.experimental.do_not_convert  # a walk over graph ops: autograph only slows it
def refuse_unrun_writes(
    owner: str, mode: str, new_ops: Sequence[Any], fetches: Iterable[Any]
) -> None:
    """Raises when one of ``new_ops`` writes a variable and no fetch depends on it.

    Args:
        owner: how the error names the model.
        mode: the ``ModeKeys`` value the graph was made in.
        new_ops: the ops the ``model_fn`` call made (in creation order).
        fetches: what the Estimator fetched in that mode (tensors, ops, nested).

    Raises:
        ValueError: naming the ops and what to do.
    """
    writes = [op for op in new_ops if _writes_a_variable(op)]
    if not writes:
        return
    run = _ancestors(
        [
            f.op if hasattr(f, "op") and not isinstance(f, tf.Operation) else f
            for f in tf.nest.flatten(fetches)
            if f is not None
        ]
    )
    unrun = [op.name for op in writes if op not in run]
    if unrun:
        fetched = "train_op and loss" if mode == "train" else "predictions"
        raise ValueError(
            f"{owner}: in {mode} mode the model_fn makes op(s) that change variables which its "
            f"{fetched} do not depend on: {', '.join(unrun[:6])}"
            f"{' ...' if len(unrun) > 6 else ''}. The Estimator never ran them (it ran only "
            f"what {fetched} need); Keras fit runs a tf.function, which would run them all, and "
            "train something else. If they should run (batch-norm statistics: UPDATE_OPS), "
            "make the train_op depend on them, as "
            "`with tf.control_dependencies(tf.compat.v1.get_collection("
            "tf.compat.v1.GraphKeys.UPDATE_OPS)): train_op = ...`; else do not create them."
            + (
                " UPDATE_OPS is empty here: TF's own tf.compat.v1.layers (tf_keras, Keras 2) "
                "inside a tf.function are their V2 layers, which run their updates and leave "
                "UPDATE_OPS empty; hookbridge's batch_normalization "
                "(hookbridge._migrate.model_fn.v1_layers) adds them as the TF1 layer did."
                if not tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)
                else ""
            )
        )


def _writes_a_variable(op: Any) -> bool:
    if op.type in _READ_ONLY:
        return False
    return any(t.dtype == tf.resource for t in op.inputs)


def _ancestors(roots: Iterable[Any]) -> set:
    seen: set = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def writes_only(op: Any, handles: set[int]) -> bool:
    """Whether every variable ``op`` takes is one of ``handles`` (ids of its inputs)."""
    resources = [t for t in op.inputs if t.dtype == tf.resource]
    return bool(handles) and bool(resources) and all(id(t) in handles for t in resources)
