"""The data side of ``CallbackLoop``: what ``fit`` knows of a dataset before reading it, the
sample count of a batch, and each stack's message when the data ends inside an epoch."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")

#: Keras's own message when the input ends before ``steps_per_epoch`` steps (fit warns it).
RAN_OUT = (
    "Your input ran out of data; interrupting training. Make sure that your dataset or "
    "generator can generate at least `steps_per_epoch * epochs` batches. You may need to use "
    "the `.repeat()` function when building your dataset."
)


#: tf_keras's message for the same (logged, not warned), with the batches asked for.
RAN_OUT_TF_KERAS = (
    "Your input ran out of data; interrupting training. Make sure that your dataset or "
    "generator can generate at least `steps_per_epoch * epochs` batches (in this case, {} "
    "batches). You may need to use the repeat() function when building your dataset."
)
END = object()  # what next() gives at the end of the data


def known_batches(data: Any, learned: int | None) -> int | None:
    """The number of batches ``data`` holds, when it can be known without reading it."""
    cardinality = getattr(data, "cardinality", None)  # tf.data.Dataset, DistributedDataset
    if cardinality is not None:
        value = int(cardinality() if callable(cardinality) else cardinality)
        return value if value >= 0 else learned  # -1 infinite, -2 unknown
    try:
        return len(data)  # type: ignore[arg-type]
    except TypeError:
        return learned


def batch_size(batch: Any) -> int | None:
    """The sample count of a batch, as Keras takes it: the first dimension of its first tensor."""
    for leaf in tf.nest.flatten(batch):
        shape = getattr(leaf, "shape", None)
        if shape is not None and len(shape) > 0 and shape[0] is not None:
            return int(shape[0])
        return None
    return None
