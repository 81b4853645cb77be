"""How fetches are resolved under HookCallback: the one path of every value a hook reads.

A fetch of a value the bridge already holds in Python (a log tensor, the global step) is answered
without a session run; anything else goes through one real ``Session.run`` of the side graph, with
the log tensors fed, after the global step and weight mirrors are synced if (and only if) the
fetched subgraph reads them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback import outputs
from hookbridge._hook_callback.batch_values import BatchValues, log_keys_read
from hookbridge._hook_callback.fetch import FetchPlan, describes_a_run, structure_key
from hookbridge._hook_callback.global_step import GlobalStep
from hookbridge._hook_callback.graph import SideGraph

# Where a held value comes from: (kind, key).
_STEP, _BATCH, _MEAN, _OUTPUTS = "step", "batch", "mean", "outputs"


class Resolver:
    """Answers fetches against the side graph and the values the bridge holds: the one path.

    Both the hooks' merged run after a Keras step (:meth:`run_plans` with ``stale=True``) and
    every ``run_context.session.run`` (:meth:`resolve`) come here. Values stay as Keras handed
    them (Python floats) until a fetch asks for one: a step where no hook fetches anything costs
    no conversion and no feed dict.

    What the graph's variables hold is tracked against one counter, :attr:`generation`, bumped
    whenever the Keras model may have changed (a Keras step ran, or other callbacks ran between
    steps): the weight mirrors are copied in when a run reads them and they are older than the
    current generation; the global step variable is set when a run reads it and it differs from
    the value the run must see (the stale pre-step value in the merged run, the current one in a
    hook's ``session.run``). A run that writes either (a restore, an assign) is copied back into
    the Keras model at once, before the next Keras step.

    :attr:`lock` makes it thread-safe, as a TF1 session is: a hook's own thread may call
    ``session.run`` while ``fit`` trains. The bridge holds it while it reads or changes what a
    run sees (the global step before and after each Keras step, the batch values, the merged
    run) and every ``session.run`` holds it, never while a hook's method runs (a hook waiting
    for its thread cannot deadlock). A thread's long run (a checkpoint) delays the next Keras
    step by as much; natively the two would overlap. Cost: two uncontended acquisitions per
    step (before the Keras step; after it, with the fetches of held values), 0.3-1.4 µs
    inside fit (benchmarks/percall.py, idle_1, with and without it; docs/performance.md).
    """

    def __init__(
        self,
        side: SideGraph,
        weights: Callable[[], list],
        set_weights: Callable[[list], None],
        global_step: GlobalStep,
        values: BatchValues,
    ) -> None:
        self.side = side
        self.values = values
        self.global_step = global_step
        self._read_weights = weights
        self._set_weights = set_weights
        self._plans: dict[Any, FetchPlan] = {}
        self.session: tf.compat.v1.Session | None = None  # the real session, not the proxy
        self.lock = threading.RLock()
        self.known: dict[Any, tuple] = {e: (_STEP, None) for e in side.step_elements}
        for key, t in side.log_tensors.items():
            self.known[t] = (_BATCH, key)
        for key, t in side.mean_tensors.items():
            self.known[t] = (_MEAN, key)
        for i, (name, t) in enumerate(side.output_tensors.items()):
            self.known[t] = (_OUTPUTS, (name, i))
        self.generation = 0  # bumped whenever the Keras model may have changed
        self.weights_at: int | None = None  # generation the mirrors were last equal to Keras's
        self.step_in_graph: int | None = None  # the global step variable's value in the session
        self._step_cache: tuple[int, Any] = (-1, None)  # (value, np.int64(value))
        self._outputs: Any = None
        self._log_ops = {t.op: key for key, t in side.log_tensors.items()}
        self._log_ops.update({t.op: (_MEAN, key) for key, t in side.mean_tensors.items()})
        self._log_ops.update({t.op: (_OUTPUTS, name) for name, t in side.output_tensors.items()})
        self._log_reads: dict[frozenset, set] = {}

    # -- values -------------------------------------------------------------------------------
    def set_outputs(self, predictions: Any) -> None:
        self._outputs = predictions

    def held(self, ref: tuple, element: Any, stale: bool = False) -> Any:
        """The value the bridge holds for ``element``, as ``Session.run`` would return it; the
        global step is the pre-step value in the merged run (``stale``), else the current one."""
        kind, key = ref
        if kind is _BATCH:  # the loss and the metrics: the most fetched
            value = self.values.batch(key)
            if value is not None:
                return np.float32(value)
        elif kind is _STEP:  # most hooks fetch it, every step: GlobalStep.current() inlined
            global_step = self.global_step
            if stale:
                step = global_step.pre
            else:
                if global_step.dirty:
                    global_step.refresh()
                step = global_step.value
            cached, value = self._step_cache
            if cached != step:
                value = np.int64(step)
                self._step_cache = (step, value)
            return value
        elif kind is _OUTPUTS:  # in its own dtype, as a native fetch of that output
            return outputs.value_of(self._outputs, key[0], key[1], element)
        else:
            value = self.values.means.get(key)
        if value is None:
            raise _no_value(element, key)
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
            elif key in reads or (_MEAN, key) in reads:  # loss:0 (or a tensor derived from
                # it) in predict, or a key Keras has not logged yet: the error held() gives
                raise _no_value(t if key in reads else side.mean_tensors[key], key)
        for i, (name, t) in enumerate(side.output_tensors.items()):
            if (_OUTPUTS, name) in reads:  # each output its own array, never stacked or cast
                feeds[t] = outputs.feed_value(self._outputs, name, i, t)
        return feeds

    def weight_feeds(self) -> dict:
        """The Keras weights as feeds of the mirrors' value placeholders."""
        return dict(zip(self.side.mirror_values, self._read_weights()))

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
    def known_value(self, ref: tuple, element: Any, feed_dict: Mapping | None, stale: bool) -> Any:
        if feed_dict:
            for fed in (element, element.name):
                if fed in feed_dict:
                    return np.asarray(feed_dict[fed], dtype=element.dtype.as_numpy_dtype)
        return self.held(ref, element, stale)

    def run_plans(
        self,
        plans: list[FetchPlan],
        feed_dict: Mapping | None,
        options: Any,
        run_metadata: Any,
        *,
        stale: bool,
    ) -> list:
        """The results of ``plans``: held values from Python, the rest in ONE session run.

        A run whose ``options`` ask for a description (a trace, the partition graphs) is made
        even when Python holds every value (``plans`` may then be empty), so ``run_metadata``
        describes a real run of the bridge's graph."""
        describe = options is not None and describes_a_run(options)
        if not feed_dict and not describe:
            for plan in plans:
                if plan.single is None:
                    break
            else:  # the usual step: each plan a lone tensor the bridge holds (loss, step)
                held = self.held
                return [held(plan.single, plan.elements[0], stale) for plan in plans]
        results: list = [None] * len(plans)
        per_plan = []
        unknown: dict = {}
        for j, plan in enumerate(plans):
            if plan.single is not None and not feed_dict and not describe:  # lone, held
                results[j] = self.held(plan.single, plan.elements[0], stale)
                continue
            values = [None] * len(plan.elements)
            for i, ref in plan.known:
                values[i] = self.known_value(ref, plan.elements[i], feed_dict, stale)
            for _, element in plan.unknown:
                unknown.setdefault(element, None)
            per_plan.append((j, plan, values))
        if unknown:
            elements = list(unknown)
            got = self.run_elements(elements, feed_dict, options, run_metadata, stale=stale)
            fetched = dict(zip(elements, got))
            for _, plan, values in per_plan:
                for i, element in plan.unknown:
                    values[i] = fetched[element]
        elif describe:  # for run_metadata only: the held values and the step's read (a run of
            # fed tensors alone, such as loss:0, executes nothing). The Keras step itself is no
            # session run: a trace request profiles it with the TensorFlow Profiler instead.
            known = [plan.elements[i] for _, plan, _ in per_plan for i, _ in plan.known]
            elements = list(dict.fromkeys([*known, self.side.global_step_read]))
            self.run_elements(elements, feed_dict, options, run_metadata, stale=stale)
        for j, plan, values in per_plan:
            results[j] = plan.mapper.build_results(values)
        return results

    def run_elements(
        self,
        elements: list,
        feed_dict: Mapping | None,
        options: Any,
        run_metadata: Any,
        *,
        stale: bool = False,
    ) -> list:
        """One real session run of ``elements`` with the log tensors fed."""
        assert self.session is not None
        deps = self.side.dependencies(elements)
        step = self.global_step.pre if stale else self.global_step.current()
        self.sync(step if deps.reads_step else None, deps.reads_weights)
        feeds = self.feeds(elements)
        if feed_dict:
            feeds.update(feed_dict)
        got = self.session.run(elements, feeds, options=options, run_metadata=run_metadata)
        if deps.writes_step or deps.writes_weights:
            # An op taking the step's handle may write it (an assign, or a cond reading it):
            # the graph held `step` before the run; a stale run's Keras step has advanced the
            # model past `step` since, and a write lands before that advance, as the train op
            # and a hook's fetch run together natively.
            self.step_in_graph = None if deps.writes_step else self.step_in_graph
            lag = self.global_step.current() - step if stale else 0
            self.pull(deps.writes_step, deps.writes_weights, held=step, lag=lag)
        return got

    def sync(self, step: int | None, weights: bool, weight_feeds: dict | None = None) -> None:
        """Copies the global step (when not None) and the weights into the graph if stale
        (``weight_feeds``: the model's weights, when the caller has just read them)."""
        side = self.side
        feeds: dict = {}
        ops = []
        if step is not None and self.step_in_graph != step:
            feeds[side.global_step_value] = step
            ops.append(side.sync_step_op)
        if weights and self.weights_at != self.generation:
            feeds.update(weight_feeds if weight_feeds is not None else self.weight_feeds())
            ops.append(side.sync_weights_op)
        if ops:
            self.session.run(ops, feeds)
            if step is not None:
                self.step_in_graph = step
            if weights:
                self.weights_at = self.generation

    def pull(self, step: bool, weights: bool, *, held: int | None = None, lag: int = 0) -> None:
        """Copies the graph's global step / weight mirrors into the Keras model (a hook wrote
        them through the bridge's session): the next Keras step trains from them.

        ``held``: the step the graph held before the run that may have written it; the model's
        step changes only if the graph's differs from it (a cond reading the step takes its
        handle too), by the write plus ``lag`` (the Keras steps run since ``held``)."""
        side = self.side
        fetches = ([side.global_step_read] if step else []) + (side.mirrors if weights else [])
        values = self.session.run(fetches)
        if step:
            value = int(values.pop(0))
            if value != held:
                self.global_step.write(value + lag)
            self.step_in_graph = value
            self._step_cache = (-1, None)
        if weights:
            self._set_weights(values)
            self.weights_at = self.generation

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
        return self.run_plans([plan], feed_dict, options, run_metadata, stale=False)[0]

    def session_created(self, session: tf.compat.v1.Session) -> None:
        """A new session: nothing of the graph's variables is known to be in sync any more."""
        self.session = session
        self.weights_at = None
        self.step_in_graph = None


def _no_value(element: Any, key: str) -> ValueError:
    """The error for a log tensor (or one derived from it) that has no value in this run."""
    return ValueError(
        f"hookbridge: {element.name} has no value yet: Keras has not logged {key!r} in this "
        "run. Fetch it from after_run, or pass log_names=[...] to HookCallback if Keras logs "
        "it under another name."
    )
