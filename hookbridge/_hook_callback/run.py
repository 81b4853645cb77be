"""One fit / evaluate / predict as one TF1 MonitoredSession: the hooks' whole lifecycle.

``BridgeRun`` owns the order of the hook calls and the exception policy, in one place, as native
``MonitoredSession``: ``OutOfRangeError``/``StopIteration`` from a hook is the end of input (every
hook's ``end()`` runs, the run stops); ``AbortedError``/``UnavailableError`` re-create the session
(every hook's ``after_create_session`` again, ``begin`` not) and retry; a coordinator stop ends
the run at the next step boundary and an exception given to ``coord.request_stop(exc)`` is raised
when the run closes; after any other exception the session is closed without ``end()`` and the
exception propagates unchanged.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _merge, _tfcompat
from hookbridge._hook_callback.batch_values import BatchValues
from hookbridge._hook_callback.global_step import GlobalStep
from hookbridge._hook_callback.graph import SideGraph
from hookbridge._hook_callback.graph_free import needs_graph
from hookbridge._hook_callback.names import explain_missing
from hookbridge._hook_callback.scaffold import ScaffoldArg, finalize_scaffold, prepare_session
from hookbridge._hook_callback.session import (
    BridgeSession,
    Resolver,
    describes_a_run,
    is_leaf_fetch,
)

SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs
SessionRunContext = tf.compat.v1.train.SessionRunContext
SessionRunValues = tf.compat.v1.train.SessionRunValues
RunOptions = tf.compat.v1.RunOptions
RunMetadata = tf.compat.v1.RunMetadata

#: ``run_context.original_args``: the bridge has no train op to show (immutable, so shared).
_NO_ARGS = SessionRunArgs(None)

#: ``SessionRunValues`` (a namedtuple) built by ``tuple.__new__`` in C, as its generated
#: ``__new__`` builds it, without that Python frame per hook per step (tests/test_tfcompat.py
#: fails if TensorFlow gives the class a constructor of its own; the one-time deprecation log
#: line TF 2.15's estimator wraps around it is not printed).
_new_tuple = tuple.__new__

#: Fresh ``RunOptions`` / ``RunMetadata`` pairs are made (and released) this many at a time:
#: ``MonitoredSession`` gives every run a new pair, and making and freeing one pair right after a
#: Keras step, when protobuf's code is out of the CPU caches, costs ≈ 4 µs (measured inside fit);
#: in batches of 64 it costs under 1 µs per step.
_PROTO_BATCH = 64


#: The scope of a phase whose hooks all run without the graph entered (see graph_free.py).
_NO_SCOPE = contextlib.nullcontext()

#: What native MonitoredSession treats as the end of input: every hook's end(), then swallowed.
END_OF_INPUT = (tf.errors.OutOfRangeError, StopIteration)
#: What native MonitoredSession recovers from: a new session, after_create_session, a retry.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


def overrides(hook: SessionRunHook, name: str) -> bool:
    """Whether ``hook`` overrides ``SessionRunHook.<name>`` (the base methods do nothing)."""
    return getattr(type(hook), name, None) is not getattr(SessionRunHook, name)


class BridgeRun:
    """The hooks' session for one Keras run (mode ``"train"``, ``"test"`` or ``"predict"``)."""

    def __init__(
        self,
        mode: str,
        side: SideGraph,
        read_weights: Callable[[], list],
        set_weights: Callable[[list], None],
        read_count: Callable[[], float | None] | None,
        global_step: GlobalStep,
        steps_per_epoch: int | None,
    ) -> None:
        self.mode = mode
        self.side = side
        self.scope = _tfcompat.GraphScope(side.graph)
        self.batch_values = BatchValues(read_count)
        self.global_step = global_step
        self.resolver = Resolver(side, read_weights, set_weights, global_step, self.batch_values)
        self.steps_per_epoch = steps_per_epoch
        self.hooks: list = []
        self.scaffold: Any = None
        self.session: BridgeSession | None = None
        self.coord: Any = None
        self.stop_requested = False
        self.warned_keys: set = set()
        self.begin_batch = 0
        self._pending: list = []  # the hooks that fetched something this step
        self._pending_plans: list = []  # their FetchPlans, in the same order
        self._before_hooks: list = []
        # per before-hook: (fetches, FetchPlan, what it asks of the batch values)
        self._last_plans: list[tuple[Any, Any, int]] = []
        self._demand = 0  # what this step's fetches ask of the batch values (BatchValues.demand)
        self._after_hooks: list = []
        self._same_hooks = False  # whether the before_run and the after_run hooks are the same
        self._before_scope: Any = self.scope
        self._after_scope: Any = self.scope
        self._feeds: dict = {}
        self._options: Any = None
        self._protos: list = []  # (RunOptions, RunMetadata) pairs, one per step's run ...
        self._next_proto = 0  # ... of which this is the next fresh one
        self._context: Any = None
        self._profile_dirs: list[str] = []
        self._profiling = False
        self._valid_feeds: set = set()
        self._session_config: Any = None
        self._warned_retry = False
        self._coord_stopped: Callable[[], bool] = bool  # the coordinator's should_stop()
        self.deferred_error: BaseException | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(
        self,
        hooks: Callable[[], Sequence[SessionRunHook]],
        session_config: Any,
        profile_dir: str | None = None,
        scaffold: ScaffoldArg = None,
    ) -> None:
        """``begin`` for every hook, finalize the scaffold (and graph), create the session."""
        self._session_config = session_config
        try:
            with self.scope:
                with self._names_explained("the hooks callable"):
                    self.hooks = list(hooks())
                for hook in self.hooks:
                    with self._names_explained(f"{type(hook).__name__}.begin"):
                        hook.begin()
                # As MonitoredSession: the scaffold is finalized after every begin() (its
                # default Saver then covers what the hooks added), which finalizes the graph.
                self.scaffold = finalize_scaffold(scaffold, self.side)
                self._create_session()
        except BaseException:
            self.close()
            raise
        self._before_hooks = [h for h in self.hooks if overrides(h, "before_run")]
        self._last_plans = [(None, None, 0)] * len(self._before_hooks)
        self._after_hooks = [h for h in self.hooks if overrides(h, "after_run")]
        self._same_hooks = len(self._before_hooks) == len(self._after_hooks) and all(
            b is a for b, a in zip(self._before_hooks, self._after_hooks)
        )
        # Each phase enters the graph only if one of its hooks may need it (graph_free.py).
        if not any(needs_graph(h, "before_run") for h in self._before_hooks):
            self._before_scope = _NO_SCOPE
        if not any(needs_graph(h, "after_run") for h in self._after_hooks):
            self._after_scope = _NO_SCOPE
        self._profile_dirs = (
            [profile_dir]
            if profile_dir
            else [
                os.path.dirname(path)
                for path in map(_tfcompat.profiler_hook_output_file, self.hooks)
                if path
            ]
        )

    @contextlib.contextmanager
    def _names_explained(self, where: str) -> Iterator[None]:
        """TF's bare KeyError for a name the bridge's graph lacks becomes the bridge's error."""
        try:
            yield
        except (KeyError, ValueError) as e:
            missing = explain_missing(self.side, e, where)
            if missing is None:
                raise
            raise missing from e

    def _create_session(self) -> None:
        """A session initialized from the scaffold, a coordinator, every after_create_session.

        As ``_RecoverableSession``: a preemption error while doing so starts over. Must run
        with the graph entered.
        """
        while True:
            try:
                self.session = session = BridgeSession(self.resolver, config=self._session_config)
                prepare_session(self.scaffold, session, self.resolver)
                self.coord = coord = tf.compat.v1.train.Coordinator()
                self._coord_stopped = _tfcompat.coordinator_stop_flag(coord)
                for hook in self.hooks:
                    hook.after_create_session(session, self.coord)
                return
            except PREEMPTION_ERRORS as e:
                _log_preemption(e)
                self._close_session()

    def _recover(self, error: BaseException) -> None:
        """``AbortedError``/``UnavailableError``: a new session, as ``_RecoverableSession``."""
        _log_preemption(error)
        self._close_session()
        with self.scope:
            self._create_session()

    def before(self, batch: int) -> None:
        """Every hook's ``before_run``, merged as ``_HookedSession`` merges them."""
        self.begin_batch = batch
        self.resolver.generation += 1  # other callbacks may have changed the model since
        while True:
            try:
                self._call_before_run()
                break
            except END_OF_INPUT as e:
                # Native: every hook's end(), the run stops, the error is swallowed. Keras's step
                # for this batch still runs (a callback cannot cancel it); fit stops after it.
                _warn_step_not_cancelled(batch, e)
                self._end_of_input()
                return
            except PREEMPTION_ERRORS as e:
                self._recover_or_close(e)
            except BaseException:
                self.close()
                raise
        if self._demand:  # the sample count before this step, if a fetch needs a batch value
            self.batch_values.prepare(self._demand)
        self.global_step.before_step()  # what the step's run fetches: the value as it starts
        if self._options is not None and self._options.trace_level and self._profile_dirs:
            self._profiling = _start_profiler(self._profile_dirs[0])

    def _call_before_run(self) -> None:
        self._context = context = SessionRunContext(_NO_ARGS, self.session)
        if self._pending:
            self._pending.clear()
            self._pending_plans.clear()
            self._demand = 0
        if self._feeds:
            self._feeds = {}
        self._options = None
        if not self._before_hooks:
            return
        if self._before_scope is _NO_SCOPE:  # graph-free hooks: no context manager per step
            self._ask(context)
        else:
            with self._before_scope:
                self._ask(context)

    def _ask(self, context: Any) -> None:
        """Every ``before_run``: the step's fetch plans, feeds and options."""
        last, demand = self._last_plans, 0
        for i, hook in enumerate(self._before_hooks):
            request = hook.before_run(context)
            if request is None:
                continue
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
                source, plan, need = last[i]
                if fetches is not source:
                    plan = self.resolver.plan(fetches)
                    need = self.batch_values.demand(hook, plan)
                    last[i] = (fetches, plan, need) if is_leaf_fetch(fetches) else (None, None, 0)
                self._pending.append(hook)
                self._pending_plans.append(plan)
                demand += need
            if feed_dict:
                self._check_feeds(hook, feed_dict)
                _merge.merge_feeds(self._feeds, feed_dict)
            if options:
                if self._options is None:
                    self._options = RunOptions()
                _merge.merge_run_options(self._options, options)
        self._demand = demand

    def _recover_or_close(self, error: BaseException) -> None:
        """Recovers from a preemption error; if that fails, closes and raises."""
        try:
            self._recover(error)
        except BaseException:
            self.close()
            raise

    def after(self, batch: int, logs: dict) -> bool:
        """The merged run and every hook's ``after_run``; returns whether a stop was requested."""
        if self._profiling:
            _stop_profiler()
            self._profiling = False
        steps = batch - self.begin_batch + 1
        mode = self.mode
        self.resolver.generation += 1  # the Keras step changed the model
        if mode == "predict":
            outputs = logs.get("outputs")
            if outputs is not None:
                self.resolver.set_outputs(outputs)
        else:
            if mode == "train":
                self.global_step.after_step(steps)  # the one owner of the step (global_step.py)
            self.batch_values.update(logs, steps, batch + 1 == self.steps_per_epoch)
            if len(self.warned_keys) < len(logs):
                self._check_keys(logs)
        if self._pending or self._after_hooks:
            while True:
                try:
                    if self._after_scope is _NO_SCOPE:  # graph-free hooks: no context manager
                        self._tell()
                    else:
                        with self._after_scope:
                            self._tell()
                    break
                except END_OF_INPUT:
                    self._end_of_input()
                    return True
                except PREEMPTION_ERRORS as e:
                    self._retry_after(batch, e)
                except BaseException:
                    self.close()
                    raise
            self.stop_requested = self.stop_requested or self._context.stop_requested
        if self._coord_stopped():  # MonitoredSession.should_stop(): a coordinator stop
            self.stop_requested = True
        return self.stop_requested

    def _tell(self) -> None:
        """The merged run of the step's fetches (one run of every hook's fetches; the global
        step fetched in it is the stale value), then every ``after_run`` with its results."""
        context, after_hooks, pending = self._context, self._after_hooks, self._pending
        i = self._next_proto
        if i == len(self._protos):  # the used ones are released here, all at once
            self._protos = [(RunOptions(), RunMetadata()) for _ in range(_PROTO_BATCH)]
            i = 0
        options, run_metadata = self._protos[i]
        self._next_proto = i + 1
        options = self._options or options
        if not pending:  # nobody fetched: one (immutable) value for every hook
            if self._options is not None and describes_a_run(self._options):
                self.resolver.run_plans([], self._feeds, self._options, run_metadata, stale=True)
            values = _new_tuple(SessionRunValues, (None, options, run_metadata))
            for hook in after_hooks:
                hook.after_run(context, values)
            return
        results = self.resolver.run_plans(
            self._pending_plans, self._feeds, self._options, run_metadata, stale=True
        )
        if self._same_hooks and len(pending) == len(after_hooks):
            # the hooks that fetched are the after_run hooks, in order: no mapping per step
            for hook, result in zip(after_hooks, results):
                hook.after_run(
                    context, _new_tuple(SessionRunValues, (result, options, run_metadata))
                )
        else:
            by_hook = dict(zip(pending, results))
            for hook in after_hooks:
                hook.after_run(
                    context,
                    _new_tuple(SessionRunValues, (by_hook.get(hook), options, run_metadata)),
                )

    def _retry_after(self, batch: int, error: BaseException) -> None:
        """A preemption error after the Keras step: new session, then every before_run again
        (the merged run and after_run follow), on the values of the step already run."""
        if not self._warned_retry:
            self._warned_retry = True
            warnings.warn(
                f"HookCallback: {type(error).__name__} was raised after the Keras step of batch "
                f"{batch} had run: as MonitoredSession does, the hooks' session was re-created "
                "(every hook's after_create_session again, begin not) and the hooks' "
                "before_run, merged run and after_run were retried, on that step's values. The "
                "Keras step itself was not run again (natively the retry runs the train op once "
                "more). See docs/limits.md.",
                stacklevel=5,
            )
        self._recover_or_close(error)
        try:
            self._call_before_run()
        except BaseException:
            self.close()
            raise

    def finish(self) -> None:
        """Every hook's ``end(session)``, then closes the session.

        As ``MonitoredSession.close()``: an exception a hook or thread gave
        ``coord.request_stop(exc)`` is raised by the coordinator's join, after every ``end()``.
        """
        try:
            with self.scope:
                for hook in self.hooks:
                    hook.end(self.session)
        finally:
            self.close()

    def _end_of_input(self) -> None:
        """A hook raised OutOfRangeError/StopIteration: end the hooks, as MonitoredSession does.

        An ``end()`` that raises one of those too must reach the user, but raised from a Keras
        batch callback Keras would take it for the end of its data and swallow it: it is kept in
        ``deferred_error`` and raised from ``on_*_end``, after Keras's loop.
        """
        self.stop_requested = True
        try:
            self.finish()
        except END_OF_INPUT as e:
            self.deferred_error = e

    def close(self) -> None:
        """Ends the run without calling ``end()``: closes the session and coordinator (raising
        an exception given to ``coord.request_stop(exc)``); idempotent."""
        if self._profiling:
            _stop_profiler()
            self._profiling = False
        self.global_step.unwatch()
        self._close_session()

    def _close_session(self) -> None:
        coord, session = self.coord, self.session
        self.coord = self.session = None
        try:
            if coord is not None:
                coord.request_stop()
                coord.join(stop_grace_period_secs=30, ignore_live_threads=True)
        finally:
            if session is not None:
                session.close()

    # -- internals ----------------------------------------------------------------------------
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

    def _check_keys(self, logs: dict) -> None:
        if len(self.warned_keys) >= len(logs):
            return
        for key in logs:
            if key not in self.warned_keys:
                self.warned_keys.add(key)
                if key not in self.side.log_tensors and key not in ("batch", "size"):
                    warnings.warn(
                        f"HookCallback: Keras logs {key!r} but the bridge's graph has no tensor "
                        f"for it; pass log_names=[{key!r}] to HookCallback to get one.",
                        stacklevel=4,
                    )


def _warn_step_not_cancelled(batch: int, error: BaseException) -> None:
    """A hook ended the input in ``before_run``: natively that run's train op never runs."""
    warnings.warn(
        f"HookCallback: a hook raised {type(error).__name__} in before_run of batch {batch} (the "
        "end of input, to TF1): every hook's end() ran and Keras stops after this batch, but "
        "the Keras step for it still runs, as a Keras callback cannot cancel a step about to "
        "run; natively that run would not have happened (one step more, which the hooks do not "
        "see). Raise it in after_run to end the input after a step instead.",
        stacklevel=2,
    )


def _log_preemption(error: BaseException) -> None:
    tf.compat.v1.logging.info(
        "HookCallback: %s was raised; the hooks' session will be closed and a new one created, "
        "as MonitoredSession does. Error: %s",
        type(error).__name__,
        error,
    )


def _start_profiler(logdir: str) -> bool:
    try:
        tf.profiler.experimental.start(logdir)
    except Exception as e:  # noqa: BLE001 - e.g. another profiler session is running
        warnings.warn(f"HookCallback: could not profile the Keras step: {e}", stacklevel=4)
        return False
    return True


def _stop_profiler() -> None:
    try:
        tf.profiler.experimental.stop()
    except Exception:  # noqa: BLE001, S110 - already stopped: nothing to do
        pass
