"""Which epochs and steps ``fit`` runs, beside its ``epochs`` and ``steps_per_epoch``: where a
resumed run starts (``BackupAndRestore``), and after which epochs it validates
(``validation_freq``). ``CallbackLoop`` follows the same rules."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from hookbridge import _tfcompat


def fit_start(model: Any, steps_per_epoch: int | None, initial_epoch: int) -> tuple[int, int]:
    """The epoch ``fit`` starts at and the step it starts that epoch at, read as ``fit`` reads
    them after ``on_train_begin``: where a ``BackupAndRestore`` restored its backup (the epoch;
    on tf_keras / Keras 2 after a mid-epoch backup, the step after it), else
    ``(initial_epoch, 0)``. ``steps_per_epoch``: the epoch's size as ``fit`` infers it."""
    try:
        return _tfcompat.keras_fit_start(model, steps_per_epoch, initial_epoch)
    except TypeError:  # tf_keras: `batch == steps_per_epoch - 1` with the size unknown
        if steps_per_epoch is not None:
            raise
        raise ValueError(
            "CallbackLoop: a BackupAndRestore backup made mid-epoch resumes at its step, which "
            "needs the epoch's size, as fit knows it: pass CallbackLoop(data=...) (a dataset of "
            "known size) or steps_per_epoch=."
        ) from None


def validation_freq_arg(freq: Any) -> int | Collection[int]:
    """``fit``'s ``validation_freq``, checked at once: an int >= 1, or a collection (``fit``: a
    list) of the epochs, counted from 1, after which to validate."""
    if isinstance(freq, (bool, str)) or not isinstance(freq, (int, Collection)):
        raise TypeError(
            f"CallbackLoop: validation_freq={freq!r} must be an int (validate every that many "
            "epochs) or a list of the epochs (counted from 1) to validate after, as in fit."
        )
    if isinstance(freq, int):
        if freq < 1:
            raise ValueError(f"CallbackLoop: validation_freq={freq} must be an int >= 1.")
        return freq
    if not all(isinstance(e, int) and not isinstance(e, bool) for e in freq):
        raise TypeError(f"CallbackLoop: validation_freq={freq!r}: the epochs must be ints.")
    return freq


def validates(freq: int | Collection[int], epoch: int) -> bool:
    """Whether ``fit`` validates after ``epoch`` (0-based): ``fit``'s ``_should_eval``."""
    epoch += 1  # validation_freq counts epochs from 1
    return epoch % freq == 0 if isinstance(freq, int) else epoch in freq
