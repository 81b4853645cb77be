"""The bridge's error for a name a hook asks for that the bridge's graph does not have.

TF1 hooks are built on names from the user's old ``model_fn`` graph (``"dense/kernel:0"``,
``"accuracy:0"``); under HookCallback the default graph is the bridge's small side graph, so TF
raises a bare ``KeyError`` from ``Graph.as_graph_element``. The bridge re-raises it naming what
was asked for, what the graph has, and how to expose the value.
"""

from __future__ import annotations

import re
from typing import Any

#: TF's messages for a missing tensor or operation (``Graph.as_graph_element``,
#: ``get_tensor_by_name``, ``get_operation_by_name``).
_MISSING = re.compile(
    r"The name '([^']+)' refers to an? (?:Tensor|Operation) (?:which does not|not)"
)


class MissingTensorError(KeyError):
    """A name a hook asked for is not in the bridge's graph (a ``KeyError``, as TF raises)."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


def explain_missing(side: Any, error: BaseException, where: str) -> MissingTensorError | None:
    """The bridge's error for ``error`` if it is TF's "name not in the graph", else None.

    Args:
        side: the run's ``SideGraph``.
        error: what a hook's method raised.
        where: the hook method, for the message (``"LoggingTensorHook.begin"``).
    """
    if not isinstance(error, (KeyError, ValueError)) or isinstance(error, MissingTensorError):
        return None
    match = _MISSING.search(str(error))
    if match is None:
        return None
    name = match.group(1)
    return MissingTensorError(_message(side, name, where) + f"\n(TensorFlow: {error})")


def _message(side: Any, name: str, where: str) -> str:
    op_name = name.split(":")[0]
    leaf = op_name.split("/")[-1]
    mirrors = [m.name.split(":")[0] for m in side.mirrors]
    near = [f"{m}/Read/ReadVariableOp:0" for m in mirrors if m.split("/")[-1] == leaf]
    hint = f", e.g. {near}" if near else ""
    lines = [
        f"HookCallback: {where} asked for {name!r}, which the bridge's graph does not have.",
        (
            "Under HookCallback a hook sees the bridge's graph, not your old model_fn graph: it "
            "holds the global step, one tensor per Keras log value, Keras's running means and "
            "mirrors of the model's weights."
        ),
        (
            f"Tensors available: {_tensor_names(side)}, and the global step "
            "(tf.compat.v1.train.get_global_step())."
        ),
        f"Weight mirrors: {mirrors or '(the model has no weights)'}",
        "To expose the value:",
        (
            "  * a metric or loss value: compile it as a metric (model.compile(metrics=[...])); "
            "the bridge names the tensor after the Keras log key (metrics=['accuracy'] -> "
            "'accuracy:0');"
        ),
        "  * a value Keras logs under another key: pass log_names=[key] to HookCallback;",
        (
            "  * a weight: use its mirror variable model/NNN/<name> (NNN = its index in "
            "model.weights; tf.compat.v1.global_variables() lists them), whose value is the "
            f"tensor model/NNN/<name>/Read/ReadVariableOp:0{hint}."
        ),
    ]
    return "\n".join(lines)


def _tensor_names(side: Any) -> list[str]:
    names = [t.name for t in side.log_tensors.values()]
    names += [t.name for t in side.mean_tensors.values()]
    names += [t.name for t in side.output_tensors.values()]
    return names
