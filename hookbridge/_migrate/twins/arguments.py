"""A canned Estimator's constructor arguments: the named form of ``keras_twin`` and its checks.

The twin is built from the canned class's name and the arguments its constructor takes, on any
stack (tensorflow-estimator is not needed): ``keras_twin("DNNLinearCombinedClassifier",
linear_feature_columns=..., dnn_feature_columns=..., dnn_hidden_units=...)``. The names without
``V2`` are the ``tf.compat.v1.estimator`` classes (what TF 1 code and census build), those with
``V2`` the ``tf.estimator`` ones; they differ in their default loss reduction (V1
``weighted_sum``: the batch's losses summed; V2 ``sum_over_batch_size``: their mean) and in
their optimizers (``tf.compat.v1.train`` for V1, ``tf.keras.optimizers.legacy`` for V2).

:data:`PARAMETERS` is each class's signature as tensorflow-estimator 2.15 declares it (measured
with ``inspect.signature`` on the TF 2.15 stack), :func:`from_estimator` reads an Estimator
object's arguments back into that form (TF 2.15), and :func:`check` refuses, naming every one,
the arguments the twin does not build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The canned families keras_twin builds (V1 names; ``<name>V2`` is the tf.estimator class).
SUPPORTED = (
    "DNNClassifier",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
)
_REQUIRED = object()
_RELU = "relu"  # stands for tf.nn.relu, the default activation (resolved in build)
_HEAD_CLASSIFIER = {"n_classes": 2, "weight_column": None, "label_vocabulary": None}
_HEAD_REGRESSOR = {"label_dimension": 1, "weight_column": None}
_COMMON = {"model_dir": None, "config": None, "warm_start_from": None}
_FAMILY = {
    "DNN": {
        "hidden_units": _REQUIRED,
        "feature_columns": _REQUIRED,
        "optimizer": "Adagrad",
        "activation_fn": _RELU,
        "dropout": None,
        "batch_norm": False,
    },
    "Linear": {"feature_columns": _REQUIRED, "optimizer": "Ftrl", "sparse_combiner": "sum"},
    "DNNLinearCombined": {
        "linear_feature_columns": None,
        "linear_optimizer": "Ftrl",
        "dnn_feature_columns": None,
        "dnn_optimizer": "Adagrad",
        "dnn_hidden_units": None,
        "dnn_activation_fn": _RELU,
        "dnn_dropout": None,
        "batch_norm": False,
        "linear_sparse_combiner": "sum",
    },
}
#: V1-only arguments: how the variables are partitioned (changes the checkpoint's layout).
_V1_ONLY = {
    "DNN": "input_layer_partitioner",
    "Linear": "partitioner",
    "DNNLinearCombined": "input_layer_partitioner",
}
#: Arguments that do not change the model (where it is saved, how it runs).
IGNORED = ("model_dir", "config")
#: Loss reductions: V1 ``tf.compat.v1.losses.Reduction``, V2 ``tf.keras.losses.Reduction``
#: values, as the head reduces the batch's losses without weights.
REDUCTIONS = {
    "weighted_sum": "sum",
    "sum": "sum",
    "sum_over_batch_size": "sum_over_batch_size",
    "weighted_sum_over_batch_size": "sum_over_batch_size",
    "weighted_mean": "sum_over_batch_size",
    "weighted_sum_by_nonzero_weights": "sum_over_batch_size",
}


def split_name(kind: str) -> tuple[str, str, bool]:
    """``(base, family, v2)`` of a canned class name (``DNNClassifierV2``: ``DNNClassifier``,
    ``DNN``, ``True``).

    Raises:
        ValueError: a name keras_twin does not build, naming those it builds.
    """
    v2 = kind.endswith("V2")
    base = kind[:-2] if v2 else kind
    if base not in SUPPORTED:
        raise ValueError(
            f"keras_twin: {kind} is not supported; it builds the Keras model of "
            f"{', '.join(SUPPORTED)} (V1 names: tf.compat.v1.estimator; add V2 for "
            "tf.estimator). "
            + (
                "BoostedTrees models are trees, not Keras layers: there is no Keras twin to "
                "continue them in."
                if "BoostedTrees" in kind
                else "For a custom model_fn, write the Keras model and map it with "
                "restore_checkpoint(model, model_dir, 'auto')."
            )
        )
    family = next(f for f in ("DNNLinearCombined", "DNN", "Linear") if base.startswith(f))
    return base, family, v2


def parameters(kind: str) -> dict[str, Any]:
    """The constructor's parameters of the canned class ``kind`` and their defaults."""
    base, family, v2 = split_name(kind)
    out = {**_FAMILY[family]}
    out.update(_HEAD_REGRESSOR if base.endswith("Regressor") else _HEAD_CLASSIFIER)
    out.update(_COMMON)
    out["loss_reduction"] = "sum_over_batch_size" if v2 else "weighted_sum"
    if not v2:
        out[_V1_ONLY[family]] = None
    return out


def check(kind: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of ``kind(**given)`` with the defaults filled in.

    Raises:
        ValueError: naming every argument the class does not take, every required one
            missing, and every value the twin does not build (with the reason).
    """
    _, family, v2 = split_name(kind)
    declared = parameters(kind)
    unknown = sorted(set(given) - set(declared))
    missing = sorted(k for k, v in declared.items() if v is _REQUIRED and k not in given)
    args = {k: given.get(k, v) for k, v in declared.items()}
    refused = []
    if unknown:
        refused.append(f"{kind} takes no argument {', '.join(map(repr, unknown))}")
    if missing:
        refused.append(f"{kind} needs {', '.join(map(repr, missing))}")
    for name in ("weight_column", "label_vocabulary"):
        if args.get(name) is not None:
            refused.append(
                f"{name}={args[name]!r} (the twin's loss takes no weights and integer labels only)"
            )
    if args.get("batch_norm"):
        refused.append("batch_norm=True (its moving averages are not built)")
    partitioner = _V1_ONLY[family]
    if not v2 and args.get(partitioner) is not None:
        refused.append(f"{partitioner}={args[partitioner]!r} (partitioned variables)")
    if args.get("warm_start_from") is not None:
        refused.append(
            "warm_start_from (load the weights with restore_checkpoint(twin, "
            "model_dir, 'auto') instead)"
        )
    if str(args["loss_reduction"]) not in REDUCTIONS:
        refused.append(
            f"loss_reduction={args['loss_reduction']!r} (one of {', '.join(REDUCTIONS)})"
        )
    for name in ("sparse_combiner", "linear_sparse_combiner"):
        if name in args and args[name] not in ("sum", "mean", "sqrtn"):
            refused.append(f"{name}={args[name]!r} (sum, mean or sqrtn)")
    if family == "DNNLinearCombined":
        if not args["linear_feature_columns"] and not args["dnn_feature_columns"]:
            refused.append("neither linear_feature_columns nor dnn_feature_columns")
        if args["dnn_feature_columns"] and not args["dnn_hidden_units"]:
            refused.append("dnn_feature_columns without dnn_hidden_units")
    if refused:
        raise ValueError(
            f"keras_twin: cannot build the twin of {kind}: " + "; ".join(refused) + "."
        )
    return args


def from_estimator(estimator: Any) -> tuple[str, dict[str, Any]]:
    """``(class name, constructor arguments)`` of a canned Estimator object (TF 2.15): what its
    model function closes over, and its head's settings (classes, label dimension, loss
    reduction, weights, vocabulary)."""
    from hookbridge import _tfcompat

    kind = type(estimator).__name__
    base, _, _ = split_name(kind)
    closed = _tfcompat.canned_estimator_arguments(estimator)
    head = _tfcompat.canned_head_settings(closed["head"])
    declared = parameters(kind)
    args = {k: v for k, v in closed.items() if k in declared}
    logits = int(head["logits_dimension"])
    if base.endswith("Regressor"):
        args["label_dimension"] = logits
    else:
        args["n_classes"] = int(head.get("n_classes") or (2 if logits == 1 else logits))
        args["label_vocabulary"] = head.get("label_vocabulary")
    args["weight_column"] = head.get("weight_column")
    args["loss_reduction"] = str(head.get("loss_reduction") or declared["loss_reduction"])
    return kind, args
