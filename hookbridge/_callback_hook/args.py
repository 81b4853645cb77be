"""CallbackHook's arguments: what ``__init__`` checks before anything runs, each error naming what
was received and how to fix it (Keras's habit), the callbacks it refuses (with the reason), and
what ``mode="auto"`` resolves to once ``begin`` sees the graph (:func:`resolve_mode`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import tensorflow as tf

from hookbridge._callback_hook import dispatch

UNSUPPORTED = {
    "BackupAndRestore": (
        "it saves and reloads a built Keras model and its optimizer between fit() calls, and "
        "there is no Keras model under a MonitoredSession. Use "
        "tf.compat.v1.train.MonitoredTrainingSession(checkpoint_dir=...) (CheckpointSaverHook "
        "plus automatic restore on restart), which is the TF1 way to resume."
    ),
    "SwapEMAWeights": "it swaps the EMA variables of a Keras optimizer, which a TF1 graph lacks.",
}


#: mode -> the kind of Keras events it drives (on_<kind>_begin, on_<kind>_batch_*, ...).
EVENT_KIND: Final = {"auto": "train", "train": "train", "evaluate": "test", "predict": "predict"}


def check_no_epochs(
    mode: str, steps_per_epoch: Any, validation_fn: Any, epochs: Any, why: str
) -> None:
    """Keras's evaluate / predict have no epochs and no validation: refuse those arguments."""
    given = [
        name
        for name, value in (
            ("steps_per_epoch", steps_per_epoch),
            ("validation_fn", validation_fn),
            ("epochs", epochs),
        )
        if value is not None
    ]
    if given:
        raise ValueError(
            f"CallbackHook(mode={mode!r}) drives Keras's on_{EVENT_KIND[mode]}_* methods, as "
            f"Keras's {mode}() does, which has no epochs or validation{why}: remove "
            f"{', '.join(given)}."
        )


def check_cluster_mode(is_chief: bool | None, mode: str, steps_per_epoch: Any) -> None:
    """Cluster mode trains, with epochs of ``steps_per_epoch`` global steps."""
    if is_chief is None:
        return
    if mode not in ("auto", "train"):
        raise ValueError(
            f"CallbackHook: is_chief= drives training on a worker of a cluster; mode={mode!r} "
            "has no epochs or stop to share. Remove is_chief= (each worker's evaluation or "
            "prediction runs on its own), or pass mode='train'."
        )
    if steps_per_epoch is None:
        raise ValueError(
            "CallbackHook(is_chief=...) numbers epochs from the global step the workers share: "
            "pass steps_per_epoch= (epoch e covers global steps [e * steps_per_epoch, "
            "(e + 1) * steps_per_epoch))."
        )


def to_float(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"CallbackHook: validation_fn returned {name!r}: {value!r}, which is not a number. "
            "Return a dict of name -> scalar value (e.g. session.run(loss))."
        ) from None


def check_callbacks(callbacks: Any) -> list:
    bases = dispatch.callback_bases()
    if isinstance(callbacks, bases):
        callbacks = [callbacks]
    if isinstance(callbacks, (str, bytes, Mapping)) or not isinstance(callbacks, Sequence):
        raise TypeError(
            "CallbackHook expected a list of Keras callbacks, received "
            f"{callbacks!r} of type {type(callbacks).__name__}."
        )
    for i, cb in enumerate(callbacks):
        if not isinstance(cb, bases):
            raise TypeError(
                f"CallbackHook: callbacks[{i}] = {cb!r} (type {type(cb).__name__}) is not a Keras "
                "callback. Pass keras.callbacks.Callback instances (tf.keras.callbacks on "
                "tf_keras / Keras 2); to run a SessionRunHook inside Keras fit use "
                "hookbridge.HookCallback."
            )
        if type(cb).__module__.endswith("callbacks_v1"):
            raise TypeError(
                f"CallbackHook cannot use callbacks[{i}] = {type(cb).__module__}."
                f"{type(cb).__name__}: it is the graph-mode (v1) class tf_keras returns when the "
                "callback is built while a TF1 graph is the default graph, and it needs a Keras "
                "model. Build the callback before entering `with graph.as_default()`."
            )
        for klass in type(cb).__mro__:
            if klass.__name__ in UNSUPPORTED:
                raise ValueError(
                    f"CallbackHook cannot run callbacks[{i}] = {klass.__name__}: "
                    f"{UNSUPPORTED[klass.__name__]}"
                )
    return list(callbacks)


def check_args(logs: Any, steps_per_epoch: Any, validation_fn: Any) -> None:
    """``logs`` is a mapping, ``steps_per_epoch`` a positive int or None, ``validation_fn`` a
    callable or None."""
    if not isinstance(logs, Mapping):
        raise TypeError(
            "CallbackHook: logs must be a mapping of log name -> tensor or tensor name, "
            f"received {logs!r} of type {type(logs).__name__}."
        )
    if steps_per_epoch is not None and (
        not isinstance(steps_per_epoch, int) or steps_per_epoch < 1
    ):
        raise ValueError(
            f"CallbackHook: steps_per_epoch must be a positive int or None, received "
            f"{steps_per_epoch!r}."
        )
    if validation_fn is not None and not callable(validation_fn):
        raise TypeError(
            f"CallbackHook: validation_fn must be callable(session) -> dict, received "
            f"{validation_fn!r}."
        )


def check_mode(
    mode: Any, steps_per_epoch: Any, validation_fn: Any, epochs: Any, is_chief: Any
) -> None:
    """``mode`` is known, and takes the epoch / cluster arguments given."""
    if mode not in EVENT_KIND:
        raise ValueError(
            f"CallbackHook: mode must be one of {list(EVENT_KIND)}, received {mode!r}."
        )
    if mode in ("evaluate", "predict"):
        check_no_epochs(mode, steps_per_epoch, validation_fn, epochs, "")
    check_cluster_mode(is_chief, mode, steps_per_epoch)


def check_epochs(epochs: Any) -> None:
    """``epochs`` is a non-negative int or None."""
    if epochs is not None and (not isinstance(epochs, int) or epochs < 0):
        raise ValueError(
            f"CallbackHook: epochs must be a non-negative int or None, received {epochs!r}."
        )


def resolve_mode(mode: str, graph: Any, steps_per_epoch: Any, validation_fn: Any) -> str:
    """``mode="auto"``: ``"evaluate"`` in an evaluation session (the graph has an eval step,
    as under ``Estimator.evaluate``), else ``"train"``. Done in ``begin``."""
    if mode != "auto":
        return mode
    if not graph.get_collection(tf.compat.v1.GraphKeys.EVAL_STEP):
        return "train"
    check_no_epochs(
        "evaluate",
        steps_per_epoch,
        validation_fn,
        None,
        " (mode='auto' found an evaluation session: the graph has an eval step, as under "
        "Estimator.evaluate; pass mode='train' to drive the training methods anyway)",
    )
    return "evaluate"
