"""One step's hook requests, merged as ``_HookedSession`` merges them, and their one run.

Every ``before_run``'s ``SessionRunArgs`` (fetches, feeds, options) is collected by
:meth:`MergedStep.ask`; after the Keras step, :meth:`MergedStep.tell` runs every hook's fetches
in one run (the global step fetched there is the stale, pre-step value) and gives each
``after_run`` its results. The exception policy is not here: ``run.py`` owns it.
"""

from __future__ import annotations

import warnings
from typing import Any

import tensorflow as tf

from hookbridge import _merge, _tfcompat
from hookbridge._hook_callback.batch_values import EXACT, BatchValues
from hookbridge._hook_callback.fetch import describes_a_run, is_leaf_fetch
from hookbridge._hook_callback.graph import SideGraph
from hookbridge._hook_callback.resolver import Resolver

SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs
RunOptions = tf.compat.v1.RunOptions
RunMetadata = tf.compat.v1.RunMetadata

#: Fresh ``RunOptions`` / ``RunMetadata`` pairs (and the ``SessionRunValues`` of a step where
#: nobody fetched anything, holding them) are made (and released) this many at a time:
#: ``MonitoredSession`` gives every run a new pair, and making and freeing one pair right after a
#: Keras step, when protobuf's code is out of the CPU caches, costs ≈ 4 µs (measured inside fit);
#: in batches of 64 it costs under 1 µs per step.
_PROTO_BATCH = 64

_run_values = _tfcompat.new_session_run_values


def overrides(hook: SessionRunHook, name: str) -> bool:
    """Whether ``hook`` overrides ``SessionRunHook.<name>`` (the base methods do nothing)."""
    return getattr(type(hook), name, None) is not getattr(SessionRunHook, name)


class MergedStep:
    """The hooks' requests of the current step and their merged run (see the module docstring).

    Args:
        hooks: the run's hooks, in order.
        side: the bridge's graph.
        resolver: answers the merged fetches.
        batch_values: told what the fetches ask of the batch values (:attr:`demand`).
    """

    def __init__(
        self, hooks: list, side: SideGraph, resolver: Resolver, batch_values: BatchValues
    ) -> None:
        self.side = side
        self.resolver = resolver
        self.batch_values = batch_values
        self.before_hooks = [h for h in hooks if overrides(h, "before_run")]
        self.after_hooks = [h for h in hooks if overrides(h, "after_run")]
        # whether the before_run and the after_run hooks are the same, in order
        self._same_hooks = len(self.before_hooks) == len(self.after_hooks) and all(
            b is a for b, a in zip(self.before_hooks, self.after_hooks)
        )
        self.pending: list = []  # the hooks that fetched something this step
        self._pending_plans: list = []  # their FetchPlans, in the same order
        self._all_held = True  # whether each of those is a lone tensor the bridge holds
        # each before-hook with what it fetched last: [fetches, FetchPlan, what it asks of the
        # batch values (BatchValues.demand)]
        self._asking: list[tuple[SessionRunHook, list]] = [
            (h, [None, None, 0]) for h in self.before_hooks
        ]
        self._requested = False  # whether a hook returned SessionRunArgs this step
        self.demand = 0  # what this step's fetches ask of the batch values (BatchValues.demand)
        self.feeds: dict = {}
        self.options: Any = None  # the merged RunOptions, if a hook asked for any
        self._fresh: list = []  # SessionRunValues of fresh protos, one per step's run ...
        self._next_proto = 0  # ... of which this is the next fresh one
        self._valid_feeds: set = set()

    def ask(self, context: Any) -> None:
        """Every ``before_run``: the step's fetch plans, feeds and options (the last step's
        are forgotten first)."""
        if self._requested:  # one flag: a step where every before_run returned None reads
            # nothing else of the last step (benchmarks/percall.py)
            self._requested = False
            self.pending.clear()
            self._pending_plans.clear()
            self._all_held = True
            self.demand = 0
            if self.feeds:
                self.feeds = {}
            self.options = None
        demand = 0
        for hook, last in self._asking:
            request = hook.before_run(context)
            if request is None:
                continue
            self._requested = True
            if not isinstance(request, SessionRunArgs):
                raise TypeError(
                    f"{type(hook).__name__}.before_run returned {request!r} of type "
                    f"{type(request).__name__}; a SessionRunHook must return None or "
                    "tf.compat.v1.train.SessionRunArgs."
                )
            fetches, feed_dict, options = request
            if fetches is not None:
                # Most hooks fetch the same tensor object every step: its plan is the one
                # this hook used last time, with no lookup. (A container is planned by its
                # contents every time: the hook may have changed it.)
                source, plan, need = last
                if fetches is not source:
                    plan = self.resolver.plan(fetches)
                    need = self.batch_values.demand(hook, plan)
                    last[:] = (fetches, plan, need) if is_leaf_fetch(fetches) else (None, None, 0)
                self.pending.append(hook)
                self._pending_plans.append(plan)
                if plan.single is None:
                    self._all_held = False
                demand = demand | need if need >= EXACT else demand + need  # combine(), inlined
            if feed_dict:
                self._check_feeds(hook, feed_dict)
                _merge.merge_feeds(self.feeds, feed_dict)
            if options:
                if self.options is None:
                    self.options = RunOptions()
                _merge.merge_run_options(self.options, options)
        if demand:
            self.demand = demand

    def held_results(self) -> list | None:
        """The results of the step's fetches, when every one is a lone tensor the bridge holds
        and nothing is fed (the usual step: a loss, the global step): no run is needed, and
        ``BridgeRun.after`` reads them with the step's bookkeeping, under one acquisition of the
        lock. None otherwise (:meth:`tell` runs them)."""
        if not self.pending or not self._all_held or self.feeds or self.options is not None:
            return None
        held, results = self.resolver.held, []
        for plan in self._pending_plans:  # a loop, not a comprehension: no frame of its own
            results.append(held(plan.single, plan.elements[0], True))
        return results

    def tell(self, context: Any, results: list | None = None) -> None:
        """The merged run of the step's fetches (one run of every hook's fetches; the global
        step fetched in it is the stale value), then every ``after_run`` with its results.
        ``results``: those of :meth:`held_results`, if it had them."""
        after_hooks, pending = self.after_hooks, self.pending
        i = self._next_proto
        if i == len(self._fresh):  # the used ones are released here, all at once
            self._fresh = [
                _run_values((None, RunOptions(), RunMetadata())) for _ in range(_PROTO_BATCH)
            ]
            i = 0
        fresh = self._fresh[i]  # SessionRunValues(None, a fresh RunOptions, a fresh RunMetadata)
        self._next_proto = i + 1
        if not pending:  # nobody fetched: one (immutable) value for every hook
            if self.options is not None:
                _, _, run_metadata = fresh
                if describes_a_run(self.options):
                    with self.resolver.lock:
                        self.resolver.run_plans(
                            [], self.feeds, self.options, run_metadata, stale=True
                        )
                fresh = _run_values((None, self.options, run_metadata))
            for hook in after_hooks:
                hook.after_run(context, fresh)
            return
        _, options, run_metadata = fresh
        if self.options is not None:
            options = self.options
        if results is None:
            with self.resolver.lock:  # a hook's thread may be running (resolver.py)
                results = self.resolver.run_plans(
                    self._pending_plans, self.feeds, self.options, run_metadata, stale=True
                )
        if self._same_hooks and len(pending) == len(after_hooks):
            # the hooks that fetched are the after_run hooks, in order: no mapping per step
            for hook, result in zip(after_hooks, results):
                hook.after_run(context, _run_values((result, options, run_metadata)))
        else:
            by_hook = dict(zip(pending, results))
            for hook in after_hooks:
                hook.after_run(context, _run_values((by_hook.get(hook), options, run_metadata)))

    def _check_feeds(self, hook: SessionRunHook, feed_dict: dict) -> None:
        """Refuses a feed of something the graph lacks, as ``Session.run`` would (even when no
        run happens because every fetch is answered from Python). Checked once per key."""
        for key in feed_dict:
            if key in self._valid_feeds:
                continue
            try:
                self.side.graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (TypeError, ValueError, KeyError) as e:
                raise TypeError(
                    f"Cannot interpret feed_dict key {key!r} from {type(hook).__name__}.before_run "
                    f"as Tensor: {e}\nhookbridge: tensors available in the bridge's graph: "
                    f"{self.side.available_names()} (plus any a hook added in begin())."
                ) from None
            self._valid_feeds.add(key)


def warn_unknown_keys(side: SideGraph, logs: dict, warned: set) -> None:
    """Warns once per Keras log key the bridge's graph has no tensor for."""
    for key in logs:
        if key not in warned:
            warned.add(key)
            if key not in side.log_tensors and key not in ("batch", "size"):
                warnings.warn(
                    f"HookCallback: Keras logs {key!r} but the bridge's graph has no tensor "
                    f"for it; pass log_names=[{key!r}] to HookCallback to get one.",
                    stacklevel=5,
                )


def warn_steps_per_execution(steps: int) -> None:
    """Once per run: Keras runs several steps per batch callback (``steps_per_execution``)."""
    warnings.warn(
        f"HookCallback: Keras runs {steps} steps per execution (steps_per_execution); hooks "
        "run once per execution, the global step advances by that much, and a stop requested "
        "mid-execution takes effect at the end of the execution.",
        stacklevel=4,
    )
