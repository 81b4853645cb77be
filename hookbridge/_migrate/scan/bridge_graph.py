"""What the bridge's graph holds: whether a tensor, op or collection a hook names exists in ``fit``.

Under ``HookCallback`` a hook sees the bridge's side graph (hookbridge/_hook_callback/graph.py),
never the TF1 model graph: the global step, ``loss`` and one scalar per Keras log value, Keras's
running mean of each (``running_mean/<key>``), and one variable mirroring each Keras weight,
named ``model/NNN/<leaf>`` (NNN: the weight's index in ``model.weights``, three digits or more)
with the ops TF makes for a resource variable. Any other name is not there
(``MissingTensorError`` when the hook asks for it), whatever scope it is written under: a TF1
model's ``model/logits/BiasAdd:0`` is no mirror. ``tests/test_scan.py`` builds the real side
graph and checks every op of it against :func:`tensor_status`.
"""

from __future__ import annotations

import re
from typing import Final

from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.catalog import Bridged

#: Tensors HookCallback's graph always has.
BRIDGE_TENSORS: Final = {
    "loss": "the bridge's batch loss (Keras's loss of the step just run)",
    "global_step": "the bridge's global step (model.optimizer.iterations)",
}
RUNNING_MEAN: Final = "running_mean/"
#: A weight mirror and the ops TF makes for it (graph.mirror_name: model/NNN/<leaf>, the leaf
#: with characters other than ``[A-Za-z0-9_.-]`` replaced).
MIRROR_OPS: Final = ("/Read/ReadVariableOp", "/IsInitialized/VarIsInitializedOp", "/Assign")
MIRROR: Final = re.compile(
    r"model/\d{3,}/[A-Za-z0-9_.\-]+(?:" + "|".join(re.escape(o) for o in MIRROR_OPS) + ")?"
)
BRIDGE_COLLECTIONS: Final = {
    "losses": "holds the bridge's loss",
    "global_step": "holds the bridge's global step",
    "variables": "the global step and the weight mirrors",
    "trainable_variables": "the weight mirrors",
    "summaries": "the summaries your hooks callable builds on the bridge's graph",
}
#: tf.compat.v1.GraphKeys attributes, by collection name.
GRAPH_KEYS: Final = {
    "LOSSES": "losses",
    "GLOBAL_STEP": "global_step",
    "GLOBAL_VARIABLES": "variables",
    "TRAINABLE_VARIABLES": "trainable_variables",
    "SUMMARIES": "summaries",
    "UPDATE_OPS": "update_ops",
    "REGULARIZATION_LOSSES": "regularization_losses",
    "MODEL_VARIABLES": "model_variables",
    "LOCAL_VARIABLES": "local_variables",
    "METRIC_VARIABLES": "metric_variables",
    "TRAIN_OP": "train_op",
    "SAVERS": "savers",
    "READY_OP": "ready_op",
    "INIT_OP": "init_op",
}
_FIELD: Final = re.compile(r"\{[^{}]*\}")


def base_name(name: str) -> str:
    """The op name of a tensor or op name (``^`` and the ``:N`` output index removed)."""
    base = name.removeprefix("^")
    return base.rsplit(":", 1)[0] if ":" in base else base


def tensor_status(name: str) -> Bridged:
    """Whether the bridge's graph has the tensor or op ``name``, and how to expose it if not.

    A name with ``{field}`` parts is a template formatted at run time
    (``'{loss_prefix}head/truediv'``): it is judged by what the fields cannot change.
    """
    base = base_name(name)
    if _FIELD.search(base):
        return _template_status(base)
    if base in BRIDGE_TENSORS:
        return Bridged(f.CONFORMS, BRIDGE_TENSORS[base])
    if MIRROR.fullmatch(base):
        index = base.split("/")[1]
        return Bridged(
            f.CONFORMS,
            f"a mirror of the Keras weight model.weights[{int(index)}] (model/NNN/<name>); "
            "the index is the weight's position, check it against model.weights",
        )
    if base.startswith(RUNNING_MEAN) and "/" not in base[len(RUNNING_MEAN) :]:
        key = base[len(RUNNING_MEAN) :]
        if key in BRIDGE_TENSORS:
            return Bridged(f.CONFORMS, f"Keras's running mean of '{key}' over the epoch")
        return Bridged(
            f.NEEDS_TENSOR,
            f"the bridge's graph has '{base}:0' (Keras's running mean of '{key}') only if Keras "
            f"logs a value named '{key}'",
            f"compile the Keras model with a metric named '{key}', or pass "
            f"HookCallback(log_names=['{key}']) for a log key the bridge does not infer",
        )
    if base == "outputs":
        return Bridged(f.CONFORMS, "the batch's predictions (under predict only)")
    if "/" not in base:
        return Bridged(
            f.NEEDS_TENSOR,
            f"the bridge's graph has '{base}:0' only if Keras logs a value named '{base}'",
            f"compile the Keras model with a metric named '{base}', or pass "
            f"HookCallback(log_names=['{base}']) for a log key the bridge does not infer",
        )
    key = base.strip("/").replace("/", "_")
    mirror = (
        " (under model/ the bridge has only its weight mirrors, model/NNN/<name>)"
        if base.startswith("model/")
        else ""
    )
    return Bridged(
        f.NEEDS_TENSOR,
        f"'{base}' is an op of the TF1 model graph; the bridge's graph holds no model ops "
        f"(only loss, the global step, one tensor per Keras log value, weight mirrors){mirror}",
        f"compute it in Keras as a scalar metric (or log value) named e.g. '{key}' and read "
        f"'{key}:0' in the hook",
    )


def _template_status(base: str) -> Bridged:
    """A name formatted at run time: an op of the model graph when its fixed text has a scope
    no bridge name can have, else the tree cannot tell."""
    fixed = _FIELD.split(base)
    tail = fixed[-1]
    if "/" in tail.strip("/") and not tail.endswith(MIRROR_OPS):
        key = _FIELD.sub("", base).strip("/").replace("/", "_")
        return Bridged(
            f.NEEDS_TENSOR,
            f"'{base}' (formatted at run time) is an op of the TF1 model graph whatever its "
            f"fields hold ('.../{tail.strip('/')}'); the bridge's graph holds no model ops",
            f"compute it in Keras as a scalar metric (or log value) named e.g. '{key}' and read "
            f"'{key}:0' in the hook",
        )
    return Bridged(
        f.UNVERIFIED,
        f"'{base}' is formatted at run time: the tree cannot tell the name",
        "write the tensor names as strings the scan can read, or check the hook with "
        "hookbridge check",
    )


def collection_status(name: str) -> Bridged:
    """Whether the bridge's graph fills the collection ``name``."""
    if name in BRIDGE_COLLECTIONS:
        return Bridged(f.CONFORMS, BRIDGE_COLLECTIONS[name])
    return Bridged(
        f.NEEDS_TENSOR,
        f"the bridge's graph fills only the {', '.join(sorted(BRIDGE_COLLECTIONS))} "
        f"collections, not '{name}'",
        "read the value from a Keras log tensor instead (a metric), or add to the collection "
        "in the hooks callable, which runs with the bridge's graph as the default graph",
    )
