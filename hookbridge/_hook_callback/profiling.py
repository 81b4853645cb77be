"""Where a ProfilerHook's trace request profiles the real Keras step (TensorFlow Profiler)."""

from __future__ import annotations

import os
import warnings

import tensorflow as tf

from hookbridge import _tfcompat


def output_dirs(hooks: list, profile_dir: str | None) -> list[str]:
    """``[profile_dir]`` if given, else the output directories of the ProfilerHooks among
    ``hooks`` (the first is used)."""
    if profile_dir:
        return [profile_dir]
    return [
        os.path.dirname(path)
        for path in map(_tfcompat.profiler_hook_output_file, hooks)
        if path
    ]


def start(logdir: str) -> bool:
    """Starts profiling into ``logdir``; False (with a warning) if the profiler refused."""
    try:
        tf.profiler.experimental.start(logdir)
    except Exception as e:  # noqa: BLE001 - e.g. another profiler session is running
        warnings.warn(f"HookCallback: could not profile the Keras step: {e}", stacklevel=4)
        return False
    return True


def stop() -> None:
    try:
        tf.profiler.experimental.stop()
    except Exception:  # noqa: BLE001, S110 - already stopped: nothing to do
        pass
