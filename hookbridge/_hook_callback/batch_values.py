"""Recovering per-batch values from the running means Keras logs carry."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import tensorflow as tf

#: The kind of a held fetch that is a batch value (``session.py`` names it ``_BATCH``).
_BATCH_KIND = "batch"

#: Built-in hooks that use a fetched batch value only through ``np.isnan`` (their ``after_run``
#: source is pinned by tests/test_graph_free.py and tests/conformance/test_batch_values.py).
#: Whether a recovered batch value is NaN does not depend on the sample counts, so a step whose
#: only consumers are these hooks needs no count read. Exact classes only.
_NAN_ONLY: frozenset[type] = frozenset({tf.compat.v1.train.NanTensorHook})

#: What a fetch asks of the coming batch's values (:meth:`BatchValues.demand`): nothing (0), a
#: NaN check (1), or an exact value (``EXACT``). A step's demand is the sum of its fetches': the
#: number of NaN checks below ``EXACT``, an exact value at or above it.
EXACT = 1 << 30


class BatchValues:
    """Turns Keras's running means over the epoch back into the value of the last batch.

    A TF1 loss tensor holds the loss of the batch just run; Keras logs hold the mean over the epoch
    so far, weighted by the number of samples. With ``n`` samples seen after this batch and ``p``
    before it, the batch value is ``(n * mean_n - p * mean_p) / (n - p)``: exact for any batch
    sizes (ragged, filtered, generator batches of 16, 4, 16, 28) when both counts are read from
    the loss tracker's ``count``. A read costs 20-100 µs, so the bridge reads only what a step
    needs:

    * ``n`` lazily, on the first request of a batch value after the step (none on a step where
      no hook asks for one);
    * ``p`` in :meth:`prepare`, called before the Keras step when a hook's ``before_run`` asks
      for a batch value (or for a run of the bridge's graph), unless the previous step already
      read it. A hook fetching the loss every step thus costs one read per step; one fetching it
      every 100 steps two reads per 100 steps; a step nobody asks about costs none;
    * ``n`` again at the last step of an epoch of known length, for a fetch in ``end()``;
    * nothing for a plain ``NanTensorHook``: it only asks whether its fetch is NaN, and a
      recovered value is NaN exactly when the batch's is, whatever the counts (up to the first
      non-finite batch, where it stops the run). A step where it is the only consumer reads
      nothing (the value it receives is exact in NaN-ness only); with any other consumer on the
      step every consumer gets the exact value.

    A batch value asked for on a step whose ``p`` was not read (``session.run`` inside a hook's
    ``after_run`` without a ``before_run`` request) assumes the batch had as many samples as the
    last one measured, and says so in a one-time warning. Without a loss tracker every step
    weighs the same. Metrics are recovered with the loss's sample counts (Keras weighs mean
    metrics by samples too); ``running_mean/<key>`` is always Keras's value itself.
    """

    __slots__ = (
        "_first",
        "_is_mean",
        "_kinds",
        "_last_size",
        "_prev",
        "_prev_seen",
        "_quiet",
        "_quiet_next",
        "_read_count",
        "_seen",
        "_step_inc",
        "_steps",
        "_warned",
        "means",
    )

    def __init__(self, read_count: Callable[[], float | None] | None) -> None:
        self._read_count = read_count
        self._quiet = self._quiet_next = 0  # batch values of this (the next) step for them
        self._warned: set[str] = set()
        self._is_mean = getattr(read_count, "is_sample_mean", None)
        self._kinds: dict[str, bool] = {}  # key -> whether its metric is a mean over samples
        self.reset()

    def reset(self) -> None:
        """A new epoch: Keras's running means (and sample counts) start again from zero."""
        self._seen: float | None = 0.0  # samples seen after the last step (None: not read)
        self._prev_seen: float | None = 0.0  # ... and before it
        self._last_size: float | None = None  # samples of the last batch measured
        self._steps = 0
        self._step_inc = 1  # Keras steps in the last update (steps_per_execution)
        self._first = True
        self.means: Mapping[str, float] = {}  # Keras's logs: the running means
        self._prev: Mapping[str, float] = {}

    # -- per step --------------------------------------------------------------------------------
    @staticmethod
    def demand(hook: Any, plan: Any) -> int:
        """What ``hook`` fetching ``plan`` asks of the coming batch's values: nothing (0), a NaN
        check (1) or an exact value (``EXACT``). The run adds up its step's demands."""
        if not _plan_needs_batch(plan):
            return 0
        return 1 if _checks_only_nan(hook, plan) else EXACT

    def prepare(self, demand: int) -> None:
        """Before a Keras step whose fetches ask ``demand`` (non-zero, see :meth:`demand`):
        reads the samples seen so far if an exact value will be needed and no earlier read
        already has them."""
        if self._read_count is None:
            return
        if demand >= EXACT:
            if self._seen is None:
                self._seen = self._read_count()
            self._quiet_next = 0
        else:
            self._quiet_next = demand

    def update(self, logs: Mapping[str, float], steps: int, last_in_epoch: bool) -> None:
        """Records ``logs`` after ``steps`` more training steps; values are derived on demand
        (:meth:`batch`), so a step where no hook fetches one costs no arithmetic and no read."""
        self._first = self._steps == 0
        self._steps += steps
        self._step_inc = steps
        self._prev_seen, self._prev = self._seen, self.means
        self._seen, self.means = None, logs
        self._quiet, self._quiet_next = self._quiet_next, 0
        if last_in_epoch and self._read_count is not None:
            self._seen = self._read_count()

    # -- values --------------------------------------------------------------------------------
    def batch(self, key: str) -> float | None:
        """The value of ``key`` for the last batch, or None if Keras did not log a number."""
        mean = self.means.get(key)
        if not isinstance(mean, (int, float)):
            return None
        if self._first:
            return float(mean)
        if key != "loss" and not self._is_sample_mean(key):
            return float(mean)
        prev_mean = self._prev.get(key, 0.0)
        if not math.isfinite(prev_mean):
            self._warn_once(
                "nonfinite",
                f"HookCallback: Keras's running mean of {key!r} is already {prev_mean} in this "
                "epoch, so the batch values of the following steps cannot be recovered from it; "
                f"the bridge's {key!r} tensor holds NaN until the epoch ends "
                f"(running_mean/{key} holds Keras's value).",
            )
            return math.nan
        if self._quiet:
            # for a NaN check (see _NAN_ONLY): any positive weights give the exact NaN-ness
            self._quiet -= 1
            return (self._steps * mean - (self._steps - self._step_inc) * prev_mean) / (
                self._step_inc
            )
        seen, prev_seen = self._counts()
        weight = seen - prev_seen
        if weight <= 0:
            return float(mean)
        return (seen * mean - prev_seen * prev_mean) / weight

    def _is_sample_mean(self, key: str) -> bool:
        """Whether ``key``'s batch value can be recovered (its metric is a mean over samples);
        warns once for a key whose metric is not (its tensor then holds Keras's value)."""
        known = self._kinds.get(key)
        if known is None:
            found = self._is_mean(key) if self._is_mean is not None else None
            known = self._kinds[key] = found is not False
            if not known:
                self._warn_once(
                    f"kind:{key}",
                    f"HookCallback: Keras's {key!r} metric is not a mean over samples (it has no "
                    "count, e.g. AUC, Precision): Keras logs its value over the epoch so far and "
                    f"no batch value can be recovered from it, so the bridge's {key!r} tensor "
                    f"holds Keras's value, as running_mean/{key} does. Compute the batch value in "
                    "a hook of your own if you need it.",
                )
        return known

    def _counts(self) -> tuple[float, float]:
        """(samples after the last step, samples before it), read or inferred."""
        read = self._read_count
        if read is None:  # no loss tracker: every step weighs the same
            return float(self._steps), float(self._steps - self._step_inc)
        seen = self._seen
        if seen is None:
            seen = self._seen = read()
            if seen is None:
                return float(self._steps), float(self._steps - self._step_inc)
        prev_seen = self._prev_seen
        if prev_seen is not None:
            self._last_size = seen - prev_seen
            return seen, prev_seen
        size = self._last_size
        if size is None:
            size = seen / self._steps * self._step_inc
        self._warn_once(
            "unprepared",
            "HookCallback: a batch value (loss:0 or a metric) was read on a step whose hooks did "
            "not request it in before_run (e.g. session.run inside after_run or end()), so the "
            "bridge had not read Keras's sample count before the step; the value assumes the "
            "batch had "
            f"{size:g} samples, as the last one measured (exact when batch sizes do not vary). "
            "Request the tensor in before_run (return SessionRunArgs) to get the exact value.",
        )
        return seen, seen - size

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, stacklevel=4)


def _plan_needs_batch(plan: Any) -> bool:
    """Whether a fetch plan reads a batch value: a held batch value, or a real run of the
    bridge's graph (which is fed the batch values)."""
    return bool(plan.unknown) or any(ref[0] == _BATCH_KIND for _, ref in plan.known)


def log_keys_read(elements: Iterable[Any], log_ops: Mapping[Any, str]) -> set[str]:
    """The log keys whose tensors (ops in ``log_ops``, op -> key) a run of ``elements`` reads:
    a run is fed only the batch values it uses (a Saver's run reads none)."""
    stack = [e.op if isinstance(e, tf.Tensor) else e for e in elements]
    seen: set = set()
    keys: set[str] = set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        key = log_ops.get(op)
        if key is not None:
            keys.add(key)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return keys


def _checks_only_nan(hook: Any, plan: Any) -> bool:
    """Whether ``hook`` (a plain built-in in ``_NAN_ONLY``) fetches one held batch value."""
    return (
        type(hook) in _NAN_ONLY
        and "after_run" not in getattr(hook, "__dict__", {})
        and len(plan.elements) == 1
        and not plan.unknown
    )
