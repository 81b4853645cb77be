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
from hookbridge._hook_callback.graph import SideGraph


class FetchPlan:
    """One fetch structure, mapped once: which elements come from Python, which need a run."""

    __slots__ = ("elements", "items", "known", "mapper", "source", "unknown")

    def __init__(self, fetches: Any, known: Mapping[Any, str], side: SideGraph) -> None:
        self.source = fetches
        self.items = _shallow_items(fetches)
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

    def still_valid_for(self, fetches: Any) -> bool:
        return fetches is self.source and _same_items(self.items, fetches)


def _shallow_items(fetches: Any) -> tuple | None:
    if isinstance(fetches, Mapping):
        return tuple((k, id(v)) for k, v in fetches.items())
    if isinstance(fetches, list):
        return tuple(id(v) for v in fetches)
    return None


def _same_items(items: tuple | None, fetches: Any) -> bool:
    return items is None or items == _shallow_items(fetches)


class Resolver:
    """Answers fetch structures against the side graph and the values the bridge holds."""

    def __init__(self, side: SideGraph, read_weights: Callable[[], list]) -> None:
        self.side = side
        self._read_weights = read_weights
        self._plans: dict[int, FetchPlan] = {}
        self.session: BridgeSession | None = None
        # element -> key in `self.values`
        self.known: dict[Any, str] = {e: "__step__" for e in side.step_elements}
        for key, t in side.log_tensors.items():
            self.known[t] = key
        for key, t in side.mean_tensors.items():
            self.known[t] = "running_mean/" + key
        if side.outputs is not None:
            self.known[side.outputs] = "__outputs__"
        self.values: dict[str, Any] = {"__step__": np.int64(0)}
        self.feeds: dict[Any, Any] = {}
        self.step = 0

    # -- values -------------------------------------------------------------------------------
    def set_step(self, step: int) -> None:
        self.step = step
        self.values["__step__"] = np.int64(step)

    def set_logs(self, batch_values: Mapping[str, float], means: Mapping[str, float]) -> None:
        values, feeds, side = self.values, self.feeds, self.side
        for key, t in side.log_tensors.items():
            if key in batch_values:
                v = np.float32(batch_values[key])
                values[key] = v
                feeds[t] = v
                m = np.float32(means[key])
                values["running_mean/" + key] = m
                feeds[side.mean_tensors[key]] = m

    def set_outputs(self, outputs: Any) -> None:
        if self.side.outputs is not None:
            v = np.asarray(outputs, dtype=np.float32)
            self.values["__outputs__"] = v
            self.feeds[self.side.outputs] = v

    # -- planning -----------------------------------------------------------------------------
    def plan(self, fetches: Any) -> FetchPlan:
        plan = self._plans.get(id(fetches))
        if plan is not None and plan.still_valid_for(fetches):
            return plan
        with self.side.graph.as_default():
            plan = FetchPlan(fetches, self.known, self.side)
        if len(self._plans) > 256:
            self._plans.clear()
        self._plans[id(fetches)] = plan
        return plan

    # -- running ------------------------------------------------------------------------------
    def known_value(self, key: str, element: Any, feed_dict: Mapping | None) -> Any:
        if feed_dict:
            for fed in (element, element.name):
                if fed in feed_dict:
                    return np.asarray(feed_dict[fed], dtype=element.dtype.as_numpy_dtype)
        if key not in self.values:
            raise ValueError(
                f"hookbridge: {element.name} has no value yet: Keras has not logged "
                f"{key!r} in this run. Fetch it from after_run, or pass log_names=[...] to "
                "HookCallback if Keras logs it under another name."
            )
        return self.values[key]

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
        feeds = dict(self.feeds)
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
        values: list = [None] * len(plan.elements)
        for i, key in plan.known:
            values[i] = self.known_value(key, plan.elements[i], feed_dict)
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
