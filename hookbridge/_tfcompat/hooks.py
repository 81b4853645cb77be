"""TF1 built-in hook and ``Saver`` internals: where a hook writes, its writer, formatter,
last step, NaN tensor, listeners and Saver, and what a Saver saves.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf


def profiler_hook_output_file(hook: Any) -> str | None:
    """The timeline path pattern of a ``tf.compat.v1.train.ProfilerHook`` (a private attribute)."""
    if isinstance(hook, tf.compat.v1.train.ProfilerHook):
        return hook._output_file
    return None


def logging_hook_formatter(hook: Any) -> Any:
    """The ``formatter`` a ``tf.compat.v1.train.LoggingTensorHook`` was built with (private)."""
    return hook._formatter


def hook_summary_writer(hook: Any) -> Any:
    """The writer a ``StepCounterHook`` / ``SummarySaverHook`` writes to once begun (private)."""
    return hook._summary_writer


def hook_output_dir(hook: Any) -> str | None:
    """The directory a built-in file-writing hook writes to (private attributes), or None:
    ``CheckpointSaverHook``'s checkpoint dir, ``SummarySaverHook``'s / ``StepCounterHook``'s
    ``output_dir`` (or their writer's logdir), ``ProfilerHook``'s ``output_dir``. A
    ``StepCounterHook`` given neither writes nothing (None)."""
    train = tf.compat.v1.train
    if isinstance(hook, train.CheckpointSaverHook):
        return hook._checkpoint_dir
    if isinstance(hook, train.ProfilerHook):
        return os.path.dirname(hook._output_file)
    if isinstance(hook, (train.SummarySaverHook, train.StepCounterHook)):
        if hook._output_dir:
            return hook._output_dir
        writer = hook._summary_writer
        return writer.get_logdir() if writer is not None else None
    return None


def stop_at_step_last_step(hook: Any) -> int | None:
    """The last step of a ``StopAtStepHook`` (private; set from ``num_steps`` in
    ``after_create_session``, before that None)."""
    return hook._last_step


def nan_tensor_hook_settings(hook: Any) -> tuple[Any, bool]:
    """The tensor a ``NanTensorHook`` checks and its ``fail_on_nan_loss`` (private)."""
    return hook._loss_tensor, bool(hook._fail_on_nan_loss)


def checkpoint_saver_listeners(hook: Any) -> list:
    """The ``CheckpointSaverListener``s of a ``CheckpointSaverHook`` (private): a listener's
    ``after_save`` returning True asks for a stop."""
    return list(hook._listeners)


def checkpoint_saver_hook_saver(hook: Any) -> tuple[Any, str]:
    """The Saver a ``CheckpointSaverHook`` holds (private ``_saver`` / ``_scaffold``) and how it
    got it (``"saver="``, ``"scaffold="``), or ``(None, "")``: it takes the one Saver of the
    default graph's ``SAVERS`` collection at its first save (``_get_saver``), and keeps it."""
    if hook._saver is not None:
        return hook._saver, "saver="
    scaffold = hook._scaffold
    if scaffold is not None and scaffold.saver is not None:
        return scaffold.saver, "scaffold="
    return None, ""


def forget_checkpoint_saver_hook_saver(hook: Any) -> None:
    """Drops the Saver a ``CheckpointSaverHook`` cached from a graph's ``SAVERS`` collection
    (private ``_saver``), so that its next session takes the one of its own graph."""
    hook._saver = None


def saver_var_list(saver: Any) -> Any:
    """What a built ``tf.compat.v1.train.Saver`` saves (private ``_var_list``: a list or dict of
    variables, tensors or saveables, nested for partitioned ones), or None before it is built
    or when it was built from a ``saver_def``."""
    return saver._var_list
