"""The session hooks get under HookCallback, and how fetches are resolved.

A fetch of a value the bridge already holds in Python (a log tensor, the global step) is answered
without a session run; anything else goes through one real ``Session.run`` of the side graph, with
the log tensors fed, after the global step and weight mirrors are synced if (and only if) the
fetched subgraph reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.batch_values import BatchValues, log_keys_read
from hookbridge._hook_callback.graph import SideGraph


class FetchPlan:
    """One fetch structure, mapped once: which elements come from Python, which need a run."""

    __slots__ = ("elements", "known", "mapper", "single", "source", "unknown")

    def __init__(self, fetches: Any, known: Mapping[Any, tuple], side: SideGraph) -> None:
        self.source = fetches  # keeps the leaves alive, so the ids in the cache key stay valid
        try:
            self.mapper = _tfcompat.fetch_mapper(fetches)
        except (TypeError, ValueError, KeyError) as e:
            raise type(e)(
                f"{e}\nhookbridge: tensors available in the bridge's graph: "
                f"{side.available_names()} (plus any op a hook added in begin())."
            ) from None
        self.elements = list(self.mapper.unique_fetches())
        self.known = [(i, known[e]) for i, e in enumerate(self.elements) if e in known]
        self.unknown = [(i, e) for i, e in enumerate(self.elements) if e not in known]
        # A lone tensor the bridge holds (NanTensorHook's loss, StepCounterHook's global step):
        # its result is the held value itself, no mapping needed.
        self.single = (
            self.known[0][1]
            if len(self.elements) == 1 and self.known and _is_leaf(fetches, self.elements[0])
            else None
        )


def _is_leaf(fetches: Any, element: Any) -> bool:
    """Whether ``fetches`` is the element itself (not a structure holding it)."""
    return fetches is element or (isinstance(fetches, str) and fetches == element.name)


#: Concrete tensor / op classes seen as fetches (graph tensors are a subclass of tf.Tensor).
_LEAF_TYPES: set[type] = set()


def structure_key(fetches: Any) -> Any:
    """A cache key for a fetch structure: its shape and the identity of its leaves.

    Hooks often return a new dict of the same tensors every step (SummarySaverHook does), so the
    key follows the structure, not the container's identity; strings key by value.
    """
    kind = type(fetches)
    if kind in _LEAF_TYPES:  # the common case, without the Mapping ABC check
        return id(fetches)
    if isinstance(fetches, str):
        return fetches
    if isinstance(fetches, Mapping):
        return (type(fetches), tuple((k, structure_key(v)) for k, v in fetches.items()))
    if isinstance(fetches, (list, tuple)):
        return (type(fetches), tuple(structure_key(v) for v in fetches))
    if isinstance(fetches, (tf.Tensor, tf.Operation)):
        _LEAF_TYPES.add(kind)
    return id(fetches)


def is_leaf_fetch(fetches: Any) -> bool:
    """Whether ``fetches`` is one tensor, op or name: immutable, so the same object always
    means the same fetch (a dict or list may have changed since it was last seen)."""
    return type(fetches) in _LEAF_TYPES or type(fetches) is str


# Where a held value comes from: (kind, key).
_STEP, _BATCH, _MEAN, _OUTPUTS = "step", "batch", "mean", "outputs"


class Resolver:
    """Answers fetch structures against the side graph and the values the bridge holds.

    Values stay as Keras handed them (Python floats) until a fetch asks for one: a step where
    no hook fetches anything costs no conversion and no feed dict.
    """

    def __init__(
        self, side: SideGraph, read_weights: Callable[[], list], values: BatchValues
    ) -> None:
        self.side = side
        self.values = values
        self._read_weights = read_weights
        self._plans: dict[Any, FetchPlan] = {}
        self.session: BridgeSession | None = None
        self.known: dict[Any, tuple] = {e: (_STEP, None) for e in side.step_elements}
        for key, t in side.log_tensors.items():
            self.known[t] = (_BATCH, key)
        for key, t in side.mean_tensors.items():
            self.known[t] = (_MEAN, key)
        if side.outputs is not None:
            self.known[side.outputs] = (_OUTPUTS, None)
        self.step = 0
        self._step_value: Any = None  # np.int64(step), made once per step when first fetched
        self._outputs: Any = None
        self._log_ops = {t.op: key for key, t in side.log_tensors.items()}
        self._log_reads: dict[frozenset, set[str]] = {}

    # -- values -------------------------------------------------------------------------------
    def set_step(self, step: int) -> None:
        self.step = step
        self._step_value = None

    def set_outputs(self, outputs: Any) -> None:
        self._outputs = outputs

    def held(self, ref: tuple, element: Any) -> Any:
        """The value the bridge holds for ``element``, as ``Session.run`` would return it."""
        kind, key = ref
        if kind is _STEP:  # most hooks fetch the global step: one (immutable) value per step
            value = self._step_value
            if value is None:
                value = self._step_value = np.int64(self.step)
            return value
        if kind is _OUTPUTS:
            value = self._outputs
            if value is None:
                raise ValueError(f"hookbridge: {element.name} has no value before a predict step.")
            return np.asarray(value, dtype=np.float32)
        value = self.values.batch(key) if kind is _BATCH else self.values.means.get(key)
        if value is None:
            raise ValueError(
                f"hookbridge: {element.name} has no value yet: Keras has not logged "
                f"{key!r} in this run. Fetch it from after_run, or pass log_names=[...] to "
                "HookCallback if Keras logs it under another name."
            )
        return np.float32(value)

    def feeds(self, elements: list) -> dict:
        """The feeds that put the held values into the side graph, for a real run of
        ``elements``: the batch values only of the log tensors the run reads."""
        side, values, feeds = self.side, self.values, {}
        names = frozenset(e.name for e in elements)
        reads = self._log_reads.get(names)
        if reads is None:
            reads = self._log_reads[names] = log_keys_read(elements, self._log_ops)
        for key, t in side.log_tensors.items():
            mean = values.means.get(key)
            if isinstance(mean, (int, float)):
                feeds[side.mean_tensors[key]] = np.float32(mean)
                if key in reads:
                    feeds[t] = np.float32(values.batch(key))
        if side.outputs is not None and self._outputs is not None:
            feeds[side.outputs] = np.asarray(self._outputs, dtype=np.float32)
        return feeds

    # -- planning -----------------------------------------------------------------------------
    def plan(self, fetches: Any) -> FetchPlan:
        key = structure_key(fetches)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        with _tfcompat.graph_default(self.side.graph):
            plan = FetchPlan(fetches, self.known, self.side)
        if len(self._plans) > 256:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    # -- running ------------------------------------------------------------------------------
    def known_value(self, ref: tuple, element: Any, feed_dict: Mapping | None) -> Any:
        if feed_dict:
            for fed in (element, element.name):
                if fed in feed_dict:
                    return np.asarray(feed_dict[fed], dtype=element.dtype.as_numpy_dtype)
        return self.held(ref, element)

    def run_elements(
        self,
        elements: list,
        feed_dict: Mapping | None,
        options: Any,
        run_metadata: Any,
        step: int,
    ) -> list:
        """One real session run of ``elements`` with the log tensors fed."""
        assert self.session is not None
        side = self.side
        needs_step, needs_weights = side.dependencies(elements)
        sync_feeds: dict = {}
        sync_ops = []
        if needs_step and side.step_in_graph != step:
            sync_feeds[side.global_step_value] = step
            sync_ops.append(side.sync_step_op)
        if needs_weights and side.weights_in_graph_at != self.step:
            sync_feeds.update(zip(side.mirror_values, self._read_weights()))
            sync_ops.append(side.sync_weights_op)
        if sync_ops:
            tf.compat.v1.Session.run(self.session, sync_ops, sync_feeds)
            if needs_step:
                side.step_in_graph = step
            if needs_weights:
                side.weights_in_graph_at = self.step
        feeds = self.feeds(elements)
        if feed_dict:
            feeds.update(feed_dict)
        return tf.compat.v1.Session.run(
            self.session, elements, feeds, options=options, run_metadata=run_metadata
        )

    def resolve(
        self,
        fetches: Any,
        feed_dict: Mapping | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        """``Session.run`` semantics, answered from Python where the bridge holds the values."""
        plan = self.plan(fetches)
        if plan.single is not None and not feed_dict:
            # A lone held tensor (CheckpointSaverHook reads the global step on every step).
            return self.held(plan.single, plan.elements[0])
        values: list = [None] * len(plan.elements)
        for i, ref in plan.known:
            values[i] = self.known_value(ref, plan.elements[i], feed_dict)
        if plan.unknown:
            got = self.run_elements(
                [e for _, e in plan.unknown], feed_dict, options, run_metadata, self.step
            )
            for (i, _), v in zip(plan.unknown, got):
                values[i] = v
        return plan.mapper.build_results(values)


class BridgeSession(tf.compat.v1.Session):
    """The ``tf.compat.v1.Session`` hooks receive: a real session on the bridge's graph.

    ``run`` answers fetches of values the bridge holds (log tensors, global step) from Python and
    runs everything else on the side graph, with the current step's values fed. The global step
    it reports is the current (post-step) value, as a ``session.run(global_step)`` in ``after_run``
    would in TF1.
    """

    def __init__(self, resolver: Resolver, config: Any = None) -> None:
        super().__init__(graph=resolver.side.graph, config=config)
        self._resolver = resolver
        resolver.session = self

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        return self._resolver.resolve(fetches, feed_dict, options, run_metadata)
