"""Recovering per-batch values from the running means Keras logs carry."""

from __future__ import annotations

from collections.abc import Callable, Mapping


class BatchValues:
    """Turns Keras's running means over the epoch back into the value of the last batch.

    A TF1 loss tensor holds the loss of the batch just run; Keras logs hold the mean over the epoch
    so far, weighted by the number of samples. With ``n`` samples seen after this batch and ``p``
    before it, the batch value is ``(n * mean_n - p * mean_p) / (n - p)``. Sample counts come from
    the loss tracker's ``count`` (read at the first and, when known, the last batch of an epoch:
    two variable reads per epoch); between them batches are assumed full-sized. Without a loss
    tracker every batch weighs the same. Metrics under ``sample_weight`` are weighted by their own
    weights, so their batch values are approximations; ``running_mean/<key>`` is always exact.
    """

    __slots__ = (
        "_first",
        "_per_step",
        "_prev",
        "_prev_seen",
        "_read_count",
        "_seen",
        "_steps",
        "means",
    )

    def __init__(self, read_count: Callable[[], float | None] | None) -> None:
        self._read_count = read_count
        self.reset()

    def reset(self) -> None:
        self._seen = self._prev_seen = 0.0  # samples (or steps) seen in this epoch, and before
        self._steps = 0
        self._per_step = 1.0
        self._first = True
        self.means: Mapping[str, float] = {}  # Keras's logs: the running means
        self._prev: Mapping[str, float] = {}

    def update(self, logs: Mapping[str, float], steps: int, last_in_epoch: bool) -> None:
        """Records ``logs`` after ``steps`` more training steps; values are derived on demand
        (:meth:`batch`), so a step where no hook fetches one costs no arithmetic."""
        first = self._steps == 0
        self._steps += steps
        seen = None
        if self._read_count is not None and (first or last_in_epoch):
            seen = self._read_count()
            if seen is not None and first and steps:
                self._per_step = seen / steps
        if seen is None:
            seen = self._seen + steps * self._per_step
        self._prev_seen, self._prev = self._seen, self.means
        self._seen, self.means = seen, logs
        self._first = first

    def batch(self, key: str) -> float | None:
        """The value of ``key`` for the last batch, or None if Keras did not log a number."""
        mean = self.means.get(key)
        if not isinstance(mean, (int, float)):
            return None
        seen, prev_seen = self._seen, self._prev_seen
        weight = seen - prev_seen
        if self._first or weight <= 0:
            return float(mean)
        return (seen * mean - prev_seen * self._prev.get(key, 0.0)) / weight
