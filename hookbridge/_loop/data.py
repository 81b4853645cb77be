"""The data side of ``CallbackLoop``: what ``fit`` knows of a dataset before reading it, the
sample count of a batch, the epochs' batches (:class:`Feed`) and what each stack does when the
data ends inside an epoch."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
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


class Feed:
    """The batches of a ``CallbackLoop``'s epochs, read as ``fit`` reads its data.

    With ``steps_per_epoch`` one iterator runs across the epochs (each epoch goes on where the
    last stopped, as in ``fit``); without it each epoch iterates the data afresh. When the data
    ends inside an epoch, :meth:`ran_out` does what ``fit`` does on each stack.

    Args:
        steps_per_epoch: the loop's ``steps_per_epoch`` (``None``: each epoch runs to the end of
            the data).
    """

    def __init__(self, steps_per_epoch: int | None) -> None:
        self.steps_per_epoch = steps_per_epoch
        self.iterator: Iterator[Any] | None = None  # kept across epochs with steps_per_epoch
        self.learned_batches: int | None = None  # the data's size, once an epoch ran it out
        self.insufficient = False  # tf_keras: the data ended before steps_per_epoch

    def epoch_iterator(self, data: Iterable[Any] | None) -> Iterator[Any] | None:
        """The iterator this epoch's steps read (``None`` without data)."""
        if data is None:
            return None
        if self.steps_per_epoch is None:
            return iter(data)
        if self.iterator is None:
            self.iterator = iter(data)
        return self.iterator

    @staticmethod
    def take(iterator: Iterator[Any], n: int) -> list[Any]:
        """Up to ``n`` batches (fewer where the data ends: a partial execution)."""
        batches = []
        for _ in range(n):
            batch = next(iterator, END)
            if batch is END:
                break
            batches.append(batch)
        return batches

    def ran_out(self, began: bool, step: int, epochs: int) -> None:
        """The data ended inside the epoch, before ``steps_per_epoch`` steps or with its size
        unknown: what ``fit`` does on each stack.

        Args:
            began: whether the step that found no data had begun (``on_train_batch_begin``).
            step: the epoch's steps run so far.
            epochs: the epochs the loop runs (from its first), for tf_keras's message.
        """
        self.iterator = None
        if KERAS3:  # warned whenever a begun step found no data, the size never learned
            if began or self.steps_per_epoch is not None:
                warnings.warn(RAN_OUT, stacklevel=3)
            return
        if self.steps_per_epoch is None:
            self.learned_batches = step  # tf_keras: the size the first epoch found
            return
        self.insufficient = True  # tf_keras: training stops after this epoch
        total = epochs * self.steps_per_epoch
        tf.get_logger().warning(RAN_OUT_TF_KERAS.format(total))
