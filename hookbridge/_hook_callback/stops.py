"""The run context and coordinator hooks get under HookCallback: TF's own, with the stop flag kept
as a plain attribute.

After every Keras step the bridge asks both whether a stop was requested, as
``MonitoredSession.run`` asks ``run_context.stop_requested`` and ``coord.should_stop()``. Both are
Python calls on TF's classes (a property; ``threading.Event.is_set``), which cost a few tenths of a
µs each right after a Keras step, when the CPU caches are cold (``benchmarks/percall.py``). These
subclasses set :attr:`stopped` where TF records the request, so the bridge reads one attribute.
Hooks see TF's classes (``isinstance`` holds) and every method as TF defines it.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class RunContext(tf.compat.v1.train.SessionRunContext):
    """``SessionRunContext`` whose :attr:`stopped` is ``stop_requested``."""

    stopped = False

    def request_stop(self) -> None:
        super().request_stop()
        self.stopped = True


class Coordinator(tf.compat.v1.train.Coordinator):
    """``Coordinator`` whose :attr:`stopped` is ``should_stop()`` (only ``request_stop`` and
    ``clear_stop`` change it; ``stop_on_exception`` goes through ``request_stop``)."""

    stopped = False

    def request_stop(self, ex: Any = None) -> None:
        try:
            super().request_stop(ex)
        finally:
            self.stopped = self.should_stop()

    def clear_stop(self) -> None:
        try:
            super().clear_stop()
        finally:
            self.stopped = self.should_stop()
