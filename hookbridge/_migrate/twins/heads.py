"""The canned heads' losses as Keras losses (no weights, integer labels).

* binary classifier (``n_classes=2``, one logit): sigmoid cross-entropy on the logit;
* multi-class (``n_classes > 2``): sparse softmax cross-entropy on the logits;
* regressor: squared error;

reduced over the batch as the head reduces them (``arguments.REDUCTIONS``): V1 ``weighted_sum``
sums them, V2 ``sum_over_batch_size`` (and V1's means, without weights) averages them.
"""

from __future__ import annotations

from typing import Any

from hookbridge._migrate.twins.arguments import REDUCTIONS


def logits_dimension(base: str, args: dict[str, Any]) -> int:
    """The number of logits the head takes (1 for a binary classifier)."""
    if base.endswith("Regressor"):
        return int(args["label_dimension"])
    n_classes = int(args["n_classes"])
    if n_classes < 2:
        raise ValueError(f"keras_twin: n_classes={n_classes}; a classifier needs at least 2.")
    return 1 if n_classes == 2 else n_classes


def loss(keras: Any, base: str, args: dict[str, Any]) -> Any:
    """The Keras loss computing the head's training loss."""
    reduction = REDUCTIONS[str(args["loss_reduction"])]
    if base.endswith("Regressor"):
        if reduction == "sum" and int(args["label_dimension"]) > 1:
            raise ValueError(
                "keras_twin: a regressor with label_dimension > 1 and a SUM reduction sums "
                "every label; Keras's MeanSquaredError averages them first. Not supported."
            )
        return keras.losses.MeanSquaredError(reduction=reduction)
    if int(args["n_classes"]) > 2:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    return keras.losses.BinaryCrossentropy(from_logits=True, reduction=reduction)
