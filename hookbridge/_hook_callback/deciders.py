"""Which hooks and Keras callbacks can stop one worker of a multi-worker ``fit`` alone.

The stop agreement (``agreement.py``) costs one collective round per training step: a worker
cannot know that no other worker wants to stop without hearing from each. That round is needed
only while something could decide differently on different workers. At the start of a ``fit``
each worker sorts what can stop its training steps into three kinds:

* **never**: cannot ask for a stop during a step. Built-in hooks that only log, count, save or
  write (``LoggingTensorHook``, ``StepCounterHook``, ``SummarySaverHook``, ``ProfilerHook``,
  ``CheckpointSaverHook`` without listeners, ...), any hook overriding none of
  ``after_create_session`` / ``before_run`` / ``after_run`` (the only places a hook gets a
  ``run_context`` or the coordinator), Keras callbacks without batch methods, and Keras's own
  callbacks that never set ``stop_training`` in a batch.
* **alike**: decides from what is the same on every worker, so every worker running the same
  one decides the same at the same step: ``StopAtStepHook`` (the shared global step),
  ``NanTensorHook`` on a log tensor (the loss Keras reduced across workers), Keras's
  ``TerminateOnNaN``, another ``HookCallback`` (its own stops are agreed). Each is summed up by
  a description (``StopAtStepHook(last_step=5)``); the descriptions of a worker make its
  fingerprint.
* **unknown**: anything else (a user's hook with ``after_run``, a ``LambdaCallback`` with batch
  methods, a ``CheckpointSaverHook`` with listeners, a list of callbacks the bridge cannot see).

The workers exchange, in the agreement's start round, whether they hold something unknown and
their fingerprints: when none does and the fingerprints are equal, every worker stops on its own
at the very step its hooks ask, and no step needs a round; otherwise every step has one.
Only Keras callbacks listed before the HookCallback count (as for the agreement itself).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

_t = tf.compat.v1.train
keras = tf.keras

#: Built-in hooks that never ask for a stop (exact classes: a subclass may).
_NEVER_HOOKS: frozenset[type] = frozenset(
    {
        _t.LoggingTensorHook,
        _t.StepCounterHook,
        _t.SummarySaverHook,
        _t.ProfilerHook,
        _t.FinalOpsHook,
        _t.FeedFnHook,
        _t.GlobalStepWaiterHook,
    }
)
#: hookbridge's own hooks (hookbridge.hooks), which never ask for a stop.
_NEVER_SEED_HOOKS = frozenset({"HistorySaverHook", "ProgressBarHook"})
#: The methods through which a hook can ask for a stop during the steps.
_STOPPING_METHODS = ("after_create_session", "before_run", "after_run")
#: Keras's own callbacks that never set ``stop_training`` during the steps (exact classes).
_NEVER_CALLBACKS = tuple(
    getattr(keras.callbacks, name)
    for name in (
        "BaseLogger",
        "History",
        "ProgbarLogger",
        "TensorBoard",
        "ModelCheckpoint",
        "CSVLogger",
        "LearningRateScheduler",
        "ReduceLROnPlateau",
        "BackupAndRestore",
        "RemoteMonitor",
        "EarlyStopping",  # decides in on_epoch_end, from logs reduced across workers
    )
    if hasattr(keras.callbacks, name)
)
#: Stands for "could decide differently per worker".
UNKNOWN = "?"


def _overrides(hook: Any, name: str) -> bool:
    return getattr(type(hook), name, None) is not getattr(_t.SessionRunHook, name)


def hook_kind(hook: Any, log_tensors: Iterable[str]) -> str | None:
    """``None`` (never), a description (alike), or ``UNKNOWN``, for one hook after its
    ``after_create_session`` (``StopAtStepHook`` knows its last step only then)."""
    cls = type(hook)
    if cls is _t.StopAtStepHook:
        return f"StopAtStepHook(last_step={_tfcompat.stop_at_step_last_step(hook)})"
    if cls is _t.NanTensorHook:
        tensor, fail = _tfcompat.nan_tensor_hook_settings(hook)
        name = getattr(tensor, "name", None)
        if name in log_tensors:
            return f"NanTensorHook({name}, fail_on_nan_loss={fail})"
        return UNKNOWN
    if cls is _t.CheckpointSaverHook:
        return None if not _tfcompat.checkpoint_saver_listeners(hook) else UNKNOWN
    if cls in _NEVER_HOOKS:
        return None
    if cls.__module__ == "hookbridge.hooks" and cls.__name__ in _NEVER_SEED_HOOKS:
        return None
    if not any(_overrides(hook, m) for m in _STOPPING_METHODS):
        return None
    return UNKNOWN


def _has_batch_methods(callback: Any) -> bool:
    answer = _tfcompat.implements_train_batch_hooks(callback)
    if answer is not None:
        return answer
    return not all(
        _tfcompat.keras_is_default(getattr(callback, name, None))
        for name in ("on_train_batch_begin", "on_train_batch_end")
    )


def callback_kind(callback: Any) -> str | None:
    """``None`` (never), a description (alike), or ``UNKNOWN``, for one Keras callback."""
    cls = type(callback)
    if cls.__name__ == "HookCallback" and cls.__module__.startswith("hookbridge."):
        return "HookCallback"
    if cls is getattr(keras.callbacks, "TerminateOnNaN", None):
        return "TerminateOnNaN"
    if cls in _NEVER_CALLBACKS or not _has_batch_methods(callback):
        return None
    return UNKNOWN


def callbacks_before(model: Any, bridge: Any) -> list | None:
    """The Keras callbacks of the running ``model.fit`` listed before ``bridge`` (read from
    ``fit``'s own ``CallbackList``, on its frame), or None when they cannot be seen."""
    import inspect

    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            listed = getattr(frame.f_locals.get("callbacks"), "callbacks", None)
            if isinstance(listed, list) and any(c is bridge for c in listed):
                return listed[: next(i for i, c in enumerate(listed) if c is bridge)]
            return None
        frame = frame.f_back
    return None


def stop_profile(
    hooks: Sequence[Any], callbacks: Sequence[Any] | None, log_tensors: Iterable[str]
) -> tuple[bool, int]:
    """Whether this worker holds something that can stop it alone (``unknown``), and the
    fingerprint of its ``alike`` deciders (24 bits: exact in the agreement's float32 sum)."""
    names = set(log_tensors)
    kinds = [hook_kind(h, names) for h in hooks]
    kinds += [callback_kind(c) for c in callbacks] if callbacks is not None else [UNKNOWN]
    alike = sorted(k for k in kinds if k is not None and k != UNKNOWN)
    fingerprint = zlib.crc32("\n".join(alike).encode()) & 0xFFFFFF
    return UNKNOWN in kinds, fingerprint
