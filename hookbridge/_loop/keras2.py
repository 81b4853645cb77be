"""What tf_keras / Keras 2's ``fit`` keeps for its callbacks beside the events and logs, which
``CallbackLoop`` keeps the same way (Keras 3's ``fit`` keeps neither):

* the model's step counters, ``model._train_counter`` and ``model._test_counter`` (private
  names, in ``_tfcompat``): set to 0 when training (or a validation) begins, advanced by the
  steps run before the batch callbacks. Their ``TensorBoard`` takes them as the step of its
  ``batch_*`` summaries (without them, every one is written at step 0). An eager
  ``assign_add`` costs 20-40 us a step (fit's runs inside its compiled step), so the loop keeps
  them only when a ``TensorBoard`` is among the callbacks, their one reader in Keras;
* ``ProgbarLogger.stateful_metrics``: the progress bar averages again every key the model's
  metrics do not name (``fit``'s keys are its compiled metrics). The loop's values are running
  means already, so the loop names its keys there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._loop.data import KERAS3

keras = tf.keras
TRAIN, TEST = 0, 1


class FitState:
    """The counters and progress bars of one loop's model and callbacks (inert on Keras 3)."""

    def __init__(self, model: Any, callbacks: Iterable[Any]) -> None:
        names = (_tfcompat.KERAS_TRAIN_COUNTER_ATTRIBUTE, _tfcompat.KERAS_TEST_COUNTER_ATTRIBUTE)
        board = any(isinstance(cb, keras.callbacks.TensorBoard) for cb in callbacks)
        counters = [getattr(model, name, None) if board and not KERAS3 else None for name in names]
        self._counters = [c if hasattr(c, "assign_add") else None for c in counters]
        progbar = keras.callbacks.ProgbarLogger
        self._progbars = [] if KERAS3 else [cb for cb in callbacks if isinstance(cb, progbar)]
        self._stateful: set[str] = set()

    def reset(self, which: int) -> None:
        """Training (``TRAIN``) or a validation (``TEST``) begins: its counter set to 0."""
        if self._counters[which] is not None:
            self._counters[which].assign(0)

    def count(self, which: int, steps: int) -> None:
        """``steps`` steps ran: the counter advanced, before the batch callbacks."""
        if self._counters[which] is not None:
            self._counters[which].assign_add(steps)

    def running_means(self, logs: dict[str, float]) -> None:
        """``logs``' keys are running means: the progress bars must not average them again."""
        if self._progbars and not self._stateful.issuperset(logs):
            self._stateful.update(logs)
            for progbar in self._progbars:
                progbar.stateful_metrics = set(progbar.stateful_metrics) | self._stateful
