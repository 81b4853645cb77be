"""The logs a custom loop's callbacks see, reduced over an epoch as ``fit`` reduces them.

A step function returns a dict of scalars. ``fit`` gives its callbacks, for a compiled loss or
metric, the running result of a ``keras.metrics.Mean`` (or of the metric itself) since the epoch
began, each batch weighted by its sample count; the epoch's logs are those results at its end.
:class:`EpochLogs` keeps that reduction per key:

* a plain scalar (a tensor, NumPy or Python number) is a batch value: its running mean, weighted
  by the batch's ``batch_size`` (1 when not given), as Keras's ``Mean`` weights it;
* a ``keras.metrics.Metric`` is reported by its ``result()``; the loop resets it when an epoch
  (or the validation) begins, as ``fit`` resets the model's metrics.

The running sums are Python floats; Keras's ``Mean`` sums in float32, so values agree to float32
rounding (``docs/custom-loops.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def _is_metric(value: Any) -> bool:
    """Whether ``value`` is a stateful Keras metric (``result()`` and ``reset_state()``)."""
    return callable(getattr(value, "result", None)) and callable(
        getattr(value, "reset_state", None)
    )


def to_float(value: Any, key: str) -> float:
    """A scalar of a step's logs as a Python float, or a clear error naming the key."""
    try:
        array = value.numpy() if hasattr(value, "numpy") else value
        if getattr(array, "shape", ()) not in ((), (1,)):
            raise TypeError(f"shape {array.shape}")
        return float(array.reshape(()) if hasattr(array, "reshape") else array)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"CallbackLoop: the step's log {key!r} is not a scalar ({type(value).__name__}: "
            f"{err}). Return one scalar per key (e.g. tf.reduce_mean(...)), or a "
            "keras.metrics.Metric to report its result()."
        ) from None


class EpochLogs:
    """The reduction of one phase's logs (training, or one validation) over an epoch."""

    def __init__(self, metrics: Sequence[Any] = ()) -> None:
        self._sums: dict[str, list[float]] = {}  # key -> [weighted sum, weight]
        self._metrics: dict[str, Any] = {}
        self._order: list[str] = []  # keys in the order the step first returned them
        self._declared: dict[str, Any] = {}  # the loop's metrics=, reported after the keys
        self.raw: dict[str, float] = {}  # the last step's own values (not the metrics')
        for metric in metrics:
            if not _is_metric(metric):
                raise TypeError(
                    f"CallbackLoop(metrics=...): {metric!r} is not a keras.metrics.Metric "
                    "(it needs result() and reset_state())."
                )
            self._declared[metric.name] = metric

    def reset(self) -> None:
        """Forgets the running means and resets the metrics seen so far (an epoch begins)."""
        self._sums.clear()
        for metric in (*self._metrics.values(), *self._declared.values()):
            metric.reset_state()

    def add(self, logs: Mapping[str, Any], batch_size: float | None) -> dict[str, float]:
        """Adds one step's values; returns the logs the callbacks see for that step."""
        if not isinstance(logs, Mapping):
            raise TypeError(
                f"CallbackLoop: a step's logs must be a dict of scalars, got "
                f"{type(logs).__name__}. Return e.g. {{'loss': loss}} from the step function."
            )
        weight = 1.0 if batch_size is None else float(batch_size)
        self.raw = {}
        for key, value in logs.items():
            if key not in self._order:
                self._order.append(key)
            if _is_metric(value):
                self._metrics[key] = value
                continue
            sums = self._sums.setdefault(key, [0.0, 0.0])
            self.raw[key] = number = to_float(value, key)
            sums[0] += number * weight
            sums[1] += weight
        return self.result(keys=[*logs, *(k for k in self._declared if k not in logs)])

    def result(self, keys: list[str] | None = None) -> dict[str, float]:
        """The current results, in the order the step returned its keys."""
        out: dict[str, float] = {}
        if keys is None:
            keys = [*self._order, *(k for k in self._declared if k not in self._order)]
        for key in keys:
            metric = self._metrics.get(key, self._declared.get(key))
            if metric is not None:
                out[key] = to_float(metric.result(), key)
            elif key in self._sums:
                total, weight = self._sums[key]
                out[key] = total / weight if weight else math.nan
        return out

    def track_metrics(self, logs: Mapping[str, Any]) -> None:
        """Registers the metrics of a step's logs without adding a value (reset at epoch start)."""
        for key, value in logs.items():
            if _is_metric(value):
                self._metrics[key] = value
