"""Loading a CheckpointSaverHook checkpoint written under HookCallback back into a Keras model."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.graph import mirror_name


def restore_checkpoint(model: Any, path: str | os.PathLike) -> int:
    """Restores a checkpoint written by ``CheckpointSaverHook`` under ``HookCallback``.

    Sets the model's weights and ``model.optimizer.iterations`` (when the model has an optimizer)
    from the checkpoint, and returns its global step.

    Args:
        model: a built Keras model of the same architecture as the one trained.
        path: a checkpoint prefix (``.../model.ckpt-100``) or a directory (its latest checkpoint).

    Returns:
        The checkpoint's global step.

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint.
        ValueError: the model is not built, or its weights do not match the checkpoint.

    Example:
        >>> step = hookbridge.restore_checkpoint(model, "ckpts/")
        >>> model.fit(x, y, initial_epoch=...)   # resumes at `step`
    """
    path = os.fspath(path)
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if not prefix:
        raise FileNotFoundError(f"restore_checkpoint: no checkpoint found in {path!r}.")
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as e:  # NotFoundError / DataLossError from the reader
        raise FileNotFoundError(
            f"restore_checkpoint: cannot read checkpoint {prefix!r}: {e}"
        ) from e
    weights = list(model.weights)
    if not weights:
        raise ValueError(
            f"restore_checkpoint: {type(model).__name__} has no weights yet; build it first "
            "(call it on a batch or give it an Input) with the architecture that was trained."
        )
    shapes = reader.get_variable_to_shape_map()
    values = []
    for i, w in enumerate(weights):
        name = mirror_name(i, w)
        if name not in shapes:
            available = sorted(k for k in shapes if k.startswith("model/"))
            raise ValueError(
                f"restore_checkpoint: the model's weight #{i} ({w.name}) has no entry {name!r} in "
                f"{prefix!r}; the checkpoint holds {available}. Was it written under HookCallback "
                "for a model of the same architecture?"
            )
        if tuple(shapes[name]) != tuple(w.shape):
            raise ValueError(
                f"restore_checkpoint: weight #{i} ({w.name}) has shape {tuple(w.shape)}, the "
                f"checkpoint's {name!r} has {tuple(shapes[name])}."
            )
        values.append(reader.get_tensor(name))
    step = int(reader.get_tensor("global_step")) if "global_step" in shapes else 0
    with _tfcompat.eager():
        model.set_weights(values)
        iterations = getattr(getattr(model, "optimizer", None), "iterations", None)
        if iterations is not None:
            iterations.assign(np.asarray(step, dtype=np.asarray(iterations).dtype))
    return step
