"""The value of the last batch for every Keras log key, from each key's own metric state."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import tensorflow as tf

#: The kind of a held fetch that is a batch value (``session.py`` names it ``_BATCH``).
_BATCH_KIND = "batch"

#: Built-in hooks that use a fetched batch value only through ``np.isnan`` (their ``after_run``
#: source is pinned by tests/test_graph_free.py and tests/conformance/test_batch_values.py).
#: Whether a batch value is NaN can be told from Keras's logged value alone (see
#: :meth:`BatchValues.batch`), so a step whose only consumers are these hooks reads nothing.
#: Exact classes only.
_NAN_ONLY: frozenset[type] = frozenset({tf.compat.v1.train.NanTensorHook})

#: What a fetch asks of the coming batch's values (:meth:`BatchValues.demand`), one int: the
#: number of NaN checks below ``EXACT``; at or above it, exact values, with one bit per log key
#: (from ``_FIRST_KEY_BIT`` on) for the keys whose counts a step must read before it runs. A
#: step combines its fetches' demands with :func:`combine`.
EXACT = 1 << 16
_FIRST_KEY_BIT = 17

_NONE: Mapping[str, float] = {}  # no exact values / no counts read (never written)

#: How a log key's batch value is found (:class:`MetricKinds` tells them apart).
MEAN = "mean"  # a metric with ``total`` and ``count``: derived from its own count
OTHER = "other"  # a metric without a count (AUC, Precision): Keras's value, with a warning
RAW = "raw"  # no metric of that name (a custom train_step's own value): passed through as is


def combine(demand: int, need: int) -> int:
    """The demand of a step so far plus one fetch's ``need`` (NaN checks add up, key bits
    merge)."""
    return demand | need if need >= EXACT else demand + need


class MetricKinds(Protocol):
    """What the bridge knows of the model's metrics (``keras_access.py`` builds it). Asked only
    once Keras has logged the key (tf_keras builds its metrics at the first step)."""

    def kind(self, key: str, logged: float) -> str:
        """``MEAN``, ``OTHER`` or ``RAW`` for the log key ``key``, whose last logged value is
        ``logged``."""

    def count_reader(self, key: str) -> Callable[[], float]:
        """A reader of the ``count`` of the ``MEAN`` metric logged as ``key``."""


class BatchValues:
    """Turns what Keras logs (each metric's value over the epoch so far) back into the value of
    the last batch, key by key, from that key's own metric.

    A TF1 loss tensor holds the loss of the batch just run; Keras logs ``total / count`` of each
    metric, accumulated over the epoch. With the metric's own ``count`` ``n`` after the batch and
    ``p`` before it, the batch value is ``(n * mean_n - p * mean_p) / (n - p)``: exact for any
    batch sizes, for sample weights (a weighted metric counts weights), for per-output losses
    (Keras 3 counts them per batch) and for a tracker counting batches (``Mean("loss")`` updated
    with a scalar), because each key is derived with its own count. Under
    ``steps_per_execution`` it is the value of the whole execution (docs/limits.md). A key no
    metric is named after (a custom ``train_step``'s own value) is passed through as logged,
    with a warning at its first fetch; a metric without a count (AUC) holds Keras's value, with
    a warning too. A count read costs 20-100 µs, so the bridge reads only what a step needs:

    * ``n`` lazily, on the first request of a key's batch value after the step;
    * ``p`` in :meth:`prepare`, before the Keras step, for the keys whose exact value a hook's
      ``before_run`` asks for, unless the previous step already read it (the first step of an
      epoch needs none: Keras resets its metrics). A hook fetching the loss every step costs
      one read per step; a step nobody asks about costs none;
    * every logged key's ``n`` in :meth:`settle`, before ``fit``'s validation resets Keras's
      metrics, for a fetch in ``end()``;
    * nothing for a plain ``NanTensorHook``: its fetch gets Keras's logged value, which is NaN
      exactly when the batch's value is (as long as the running value was finite before the
      batch; after an infinite batch, an infinite running value means a finite or infinite
      batch, a NaN one a NaN batch).

    A batch that made the running value infinite or NaN loses the following batches' values
    (``inf - inf``): from then on to the epoch's end the key's tensor holds Keras's running value
    (its NaN-ness stays right) and the first exact fetch warns. A batch value asked for on a
    step whose ``p`` was not read (``session.run`` in ``after_run`` or ``end()`` without a
    ``before_run`` request) assumes the batch had the same count as the last one measured (or
    the epoch's mean) and warns once. ``running_mean/<key>`` is always Keras's value itself.
    """

    __slots__ = (
        "_bits",
        "_by_bits",
        "_exact",
        "_keys",
        "_kinds",
        "_last_size",
        "_log_keys",
        "_log_ops",
        "_metrics",
        "_needs",
        "_prev",
        "_prev_seen",
        "_quiet",
        "_quiet_next",
        "_seen",
        "_updates",
        "_warned",
        "means",
    )

    def __init__(self, metrics: MetricKinds | None, log_ops: Mapping[Any, str]) -> None:
        self._metrics = metrics
        self._log_ops = log_ops  # op of a log tensor -> its key
        self._log_keys = frozenset(log_ops.values())
        self._quiet = self._quiet_next = 0  # NaN-check answers owed this (the next) step
        self._warned: set[str] = set()
        self._kinds: dict[str, str] = {}
        self._bits: dict[str, int] = {}  # key -> its demand bit
        self._keys: list[str] = []  # bit index -> key
        self._by_bits: dict[int, tuple[str, ...]] = {}
        self._needs: dict[Any, int] = {}  # FetchPlan -> what it asks (exact fetches)
        self._last_size: dict[str, float] = {}  # key -> count of the last batch measured
        self.reset()

    def reset(self) -> None:
        """A new epoch: Keras's metrics (values and counts) start again from zero."""
        self._seen: dict[str, float] = {}  # counts after the last step (keys read)
        self._prev_seen: dict[str, float] = {}  # ... and before it
        self._updates = 0  # steps this epoch (0: every count is 0)
        self.means: Mapping[str, float] = {}  # Keras's logs: the values over the epoch so far
        self._prev: Mapping[str, float] = {}
        self._exact: Mapping[str, float] = _NONE

    # -- per step --------------------------------------------------------------------------------
    def demand(self, hook: Any, plan: Any) -> int:
        """What ``hook`` fetching ``plan`` asks of the coming batch's values: nothing (0), a NaN
        check (1), or exact values (``EXACT`` plus the bits of the keys it reads)."""
        need = self._needs.get(plan)
        if need is None:
            need = self._plan_need(plan)
            if len(self._needs) > 256:
                self._needs.clear()
            self._needs[plan] = need
        if need and _checks_only_nan(hook, plan):
            return 1
        return need

    def _plan_need(self, plan: Any) -> int:
        keys = {ref[1] for _, ref in plan.known if ref[0] == _BATCH_KIND}
        if plan.unknown:  # a real run of the bridge's graph: fed the batch values it reads
            keys |= log_keys_read([e for _, e in plan.unknown], self._log_ops)
        elif not keys:
            return 0
        need = EXACT
        for key in keys:
            bit = self._bits.get(key)
            if bit is None:
                bit = self._bits[key] = 1 << (_FIRST_KEY_BIT + len(self._keys))
                self._keys.append(key)
            need |= bit
        return need

    def prepare(self, demand: int) -> None:
        """Before a Keras step whose fetches ask ``demand`` (non-zero, see :meth:`demand`):
        reads the counts an exact value will need, unless an earlier read has them."""
        if demand < EXACT:
            self._quiet_next = demand
            return
        self._quiet_next = 0
        if not self._updates or self._metrics is None:  # before the epoch's first step: 0
            return
        bits = demand >> _FIRST_KEY_BIT
        keys = self._by_bits.get(bits)
        if keys is None:
            keys = self._by_bits[bits] = tuple(
                k for i, k in enumerate(self._keys) if bits >> i & 1
            )
        seen = self._seen
        for key in keys:
            if key not in seen and key in self.means and self._kind(key) is MEAN:
                seen[key] = self._read(key)

    def update(self, logs: Mapping[str, float], exact: Mapping[str, float] | None = None) -> None:
        """Records ``logs`` after a Keras step; values are derived on demand (:meth:`batch`), so a
        step where no hook fetches one costs no arithmetic and no read. ``exact``: the batch's
        own values where the driver has them (a custom loop, ``hookbridge/_exact.py``)."""
        # Run after every Keras step, nothing allocated unless a count was read (a shared empty
        # mapping stands for "no count read" before the step).
        seen = self._seen
        if seen:
            self._prev_seen, self._seen = seen, {}
        else:
            self._prev_seen = _NONE
        self._prev, self.means = self.means, logs
        self._exact = exact or _NONE
        self._updates += 1
        self._quiet, self._quiet_next = self._quiet_next, 0

    def settle(self) -> None:
        """Reads every logged metric's count not read yet: Keras is about to reset them (the
        validation inside ``fit``), and a hook may still fetch the last batch's values in
        ``end()``. Once per epoch, only when ``fit`` validates."""
        if not self._updates or self._metrics is None:
            return
        for key in self.means:
            if key not in self._seen and key in self._log_keys and self._kind(key) is MEAN:
                self._seen[key] = self._read(key)

    # -- values --------------------------------------------------------------------------------
    def batch(self, key: str) -> float | None:
        """The value of ``key`` for the last batch, or None if Keras did not log a number."""
        if key in self._exact:  # the driver's own value of the batch (a custom loop)
            return self._exact[key]
        mean = self.means.get(key)
        if not isinstance(mean, (int, float)):
            return None
        if self._quiet:  # a NaN check (see _NAN_ONLY): Keras's value has the batch's NaN-ness
            self._quiet -= 1
            return float(mean)
        kind = self._kinds.get(key) or self._kind(key)
        if kind is not MEAN:
            self._warn_kind(key, kind)
            return float(mean)
        if self._updates <= 1:  # the epoch's first step: the value over the epoch is the batch's
            return float(mean)
        prev_mean = self._prev.get(key, 0.0)
        if not math.isfinite(prev_mean):
            self._warn_once(
                f"nonfinite:{key}",
                f"HookCallback: Keras's running {key!r} became {prev_mean} earlier in this "
                "epoch (a batch with an infinite or NaN value), so the values of the following "
                f"batches cannot be recovered from it (inf - inf): until the epoch ends the "
                f"bridge's {key!r} tensor holds Keras's running value, whose NaN-ness is the "
                "batch's (NanTensorHook behaves as natively) but which shows a finite batch as "
                f"{prev_mean}.",
            )
            return float(mean)
        seen, prev_seen = self._counts(key)
        weight = seen - prev_seen
        if weight <= 0:  # the metric was not updated by this step
            return float(mean)
        return (seen * mean - prev_seen * prev_mean) / weight

    def _kind(self, key: str) -> str:
        kind = self._kinds.get(key)
        if kind is None:
            logged = self.means.get(key)
            if self._metrics is None or not isinstance(logged, (int, float)):
                kind = RAW
            else:
                kind = self._metrics.kind(key, float(logged))
            self._kinds[key] = kind
        return kind

    def _read(self, key: str) -> float:
        return self._metrics.count_reader(key)()

    def _counts(self, key: str) -> tuple[float, float]:
        """(the metric's count after the last step, before it), read or inferred."""
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = self._read(key)
        prev_seen = self._prev_seen.get(key)
        if prev_seen is not None:
            self._last_size[key] = seen - prev_seen
            return seen, prev_seen
        size = self._last_size.get(key, seen / self._updates)
        self._warn_once(
            "unprepared",
            f"HookCallback: a batch value ({key}:0) was read on a step whose hooks did not "
            "request it in before_run (e.g. session.run inside after_run or end()), so the "
            "bridge had not read Keras's count before the step; the value assumes the batch "
            f"had {size:g} samples (or sample weights), as the last one measured (exact when "
            "batch sizes do not vary). Request the tensor in before_run (return "
            "SessionRunArgs) to get the exact value.",
        )
        return seen, seen - size

    def _warn_kind(self, key: str, kind: str) -> None:
        if kind is OTHER:
            self._warn_once(
                f"kind:{key}",
                f"HookCallback: Keras's {key!r} metric is not a mean over samples (it has no "
                "count, e.g. AUC, Precision, or logs a value computed from its mean, e.g. "
                "RootMeanSquaredError): Keras logs its value over the epoch so far and "
                f"no batch value can be recovered from it, so the bridge's {key!r} tensor "
                f"holds Keras's value, as running_mean/{key} does. Compute the batch value in "
                "a hook of your own if you need it.",
            )
        else:
            self._warn_once(
                f"kind:{key}",
                f"HookCallback: Keras logs {key!r} but no metric of the model is named {key!r} "
                "(e.g. a value a custom train_step returns), so the bridge cannot know how it "
                f"was reduced: the bridge's {key!r} tensor holds the logged value as it is, "
                "which is the last batch's value when train_step returns the batch's own value, "
                "and not when it returns a running value of its own. Track such a value with a "
                f"keras.metrics.Mean(name={key!r}) listed in the model's metrics to get exact "
                "batch values.",
            )

    def _warn_once(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, stacklevel=4)


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
