"""The TRAIN ``model_fn``'s own summaries, written as the Estimator's ``SummarySaverHook`` did.

``Estimator.train``'s ``MonitoredTrainingSession`` ran ``SummarySaverHook(save_steps=
save_summary_steps, output_dir=model_dir)`` on the merged ``SUMMARIES`` collection: fetched on the
first step of each ``train`` call and then whenever the step reached the last written one plus
``save_steps``, written at the global step read in that run plus one. Under ``fit`` the summary
ops live in the step's ``tf.function``: the step merges them and, on those steps only (a
``tf.cond``), hands the serialized ``Summary`` to the ``FileWriter`` that ``estimator_hooks``'
``SummarySaverHook`` writes through (``FileWriterCache``, keyed by ``model_dir``): the same event
file, tags and steps. ``estimator_hooks`` gives ``model_dir`` and ``save_summary_steps`` when it
takes the spec's hooks (``model_fn/training_hooks.py``); without it nothing is written.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class SummaryWrites:
    """Per ``model_fn_model``: where and how often its TRAIN summaries are written (Python
    state, read by the step through ``tf.py_function``: set from ``HookCallback``'s graph)."""

    def __init__(self) -> None:
        self.model_dir: str | None = None
        self.every = 0  # save_summary_steps of the running fit (0: not written)
        self.last = -1  # the step of the last write in this fit (-1: none, the next is due)
        #: The last step's Summary, written once the hooks' after_run has run (see _write).
        self._held: tuple[bytes, int] | None = None

    def start(self, model_dir: str, every: int | None) -> None:
        """Called by ``estimator_hooks`` (through the joined callback) as the fit's hooks begin."""
        self.model_dir, self.every, self.last = model_dir, int(every or 0), -1

    def stop(self) -> bool:
        """After a fit: no writes until the next ``start``; whether this fit wrote them."""
        written = self.model_dir is not None and self.every > 0
        self._flush()
        self.model_dir, self.every = None, 0
        return written

    def op(self, summaries: list, step_before: tf.Tensor) -> tf.Tensor:
        """In the step's graph: writes the merged ``summaries`` at ``step_before + 1`` when due
        (merged on those steps only).

        Args:
            summaries: the ``model_fn``'s ``SUMMARIES`` collection (serialized ``Summary``s).
            step_before: the global step read before the ``train_op`` ran.
        """
        step = tf.cast(step_before, tf.int64) + 1
        due = tf.py_function(self._due, [step], tf.bool)
        due.set_shape([])

        def write() -> tf.Tensor:
            merged = tf.compat.v1.summary.merge(summaries)
            tf.py_function(self._write, [merged, step], [])
            return tf.constant(True)

        return tf.cond(due, write, lambda: tf.constant(False))

    def _due(self, step: Any) -> bool:
        # SummarySaverHook's SecondOrStepTimer: the first step, then every `every` steps on.
        self._flush()  # the previous step's: its hooks' after_run has run
        step = int(step.numpy())
        if self.model_dir is None or self.every <= 0:
            return False
        if self.last >= 0 and step < self.last + self.every:
            return False
        self.last = step
        return True

    def _write(self, merged: Any, step: Any) -> None:
        # Held until the step's hooks have run: SummarySaverHook writes SessionLog.START at the
        # first step in its after_run, and readers drop what came before it at that step.
        self._held = (merged.numpy(), int(step.numpy()))

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is None or self.model_dir is None:
            return
        with tf.Graph().as_default():  # a FileWriter is made (once) in graph mode
            writer = tf.compat.v1.summary.FileWriterCache.get(self.model_dir)
        writer.add_summary(*held)
        writer.flush()
