"""One fit / evaluate / predict as one TF1 MonitoredSession: the hooks' whole lifecycle.

``BridgeRun`` owns the order of the hook calls and the exception policy, in one place, as native
``MonitoredSession``: ``OutOfRangeError``/``StopIteration`` from a hook is the end of input (every
hook's ``end()`` runs, the run stops); ``AbortedError``/``UnavailableError`` re-create the session
(every hook's ``after_create_session`` again, ``begin`` not) and retry; a coordinator stop ends
the run at the next step boundary and an exception given to ``coord.request_stop(exc)`` is raised
when the run closes. Any other exception propagates unchanged: HookCallback's one exception
boundary (``callback.py``) then closes the run without ``end()`` (:meth:`BridgeRun.close`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback import profiling
from hookbridge._hook_callback.batch_values import BatchValues, MetricKinds
from hookbridge._hook_callback.global_step import GlobalStep
from hookbridge._hook_callback.graph import SideGraph, tf1_names
from hookbridge._hook_callback.graph_free import needs_graph
from hookbridge._hook_callback.keras_access import KerasAccess
from hookbridge._hook_callback.keras_writes import global_step_for, weight_setter
from hookbridge._hook_callback.names import explain_missing
from hookbridge._hook_callback.other_graph import check_savers
from hookbridge._hook_callback.outputs import output_specs
from hookbridge._hook_callback.resolver import Resolver
from hookbridge._hook_callback.scaffold import (
    ScaffoldArg,
    check_given,
    finalize_scaffold,
    prepare_session,
)
from hookbridge._hook_callback.session import BridgeSession
from hookbridge._hook_callback.step import MergedStep, warn_unknown_keys
from hookbridge._hook_callback.stops import Coordinator, RunContext

SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs

#: ``run_context.original_args``: the bridge has no train op to show (immutable, so shared).
_NO_ARGS = SessionRunArgs(None)

#: The scope of a phase whose hooks all run without the graph entered (see graph_free.py).
_NO_SCOPE = contextlib.nullcontext()

#: What native MonitoredSession treats as the end of input: every hook's end(), then swallowed.
END_OF_INPUT = (tf.errors.OutOfRangeError, StopIteration)
#: What native MonitoredSession recovers from: a new session, after_create_session, a retry.
PREEMPTION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError)


class BridgeRun:
    """The hooks' session for one Keras run (mode ``"train"``, ``"test"`` or ``"predict"``)."""

    def __init__(
        self,
        mode: str,
        side: SideGraph,
        read_weights: Callable[[], list],
        set_weights: Callable[[list], None],
        metrics: MetricKinds | None,
        global_step: GlobalStep,
        steps_per_epoch: int | None,
    ) -> None:
        self.mode = mode
        self.side = side
        self.scope = _tfcompat.GraphScope(side.graph)
        self.batch_values = BatchValues(metrics, {t.op: k for k, t in side.log_tensors.items()})
        self.global_step = global_step
        self.resolver = Resolver(side, read_weights, set_weights, global_step, self.batch_values)
        self.lock = self.resolver.lock  # held while the bridge reads or changes what a run sees
        self.steps_per_epoch = steps_per_epoch
        self.hooks: list = []
        self.scaffold: Any = None
        self.session: BridgeSession | None = None
        self.coord: Coordinator | None = None
        self.stop_requested = False
        self.warned_keys: set = set()
        self.keys_checked = 0  # len(warned_keys), kept as an int: read after every step
        self.begin_batch = 0
        self.step: MergedStep = MergedStep([], side, self.resolver, self.batch_values)
        self._before_scope: Any = self.scope
        self._after_scope: Any = self.scope
        self._context: RunContext | None = None
        self._profile_dirs: list[str] = []
        self._profiling = False
        self._session_config: Any = None
        self._warned_retry = False
        self.deferred_error: BaseException | None = None
        self._cached_savers: list = []

    @classmethod
    def for_model(
        cls,
        mode: str,
        model: Any,
        access: KerasAccess,
        log_names: list[str],
        steps_per_epoch: int | None,
    ) -> BridgeRun:
        """The run of ``model``'s ``mode``: its graph, its global step (watched in training,
        until :meth:`close`), its reads and writes of the model."""
        side = SideGraph(
            log_keys=access.log_keys(log_names),
            weights=_built_weights(model, mode),
            outputs=output_specs(model) if mode == "predict" else None,
            weight_names=tf1_names(model),  # an assignment map's names (restore_checkpoint)
        )
        global_step = global_step_for(model, access.iterations)
        run = cls(
            mode,
            side,
            read_weights=access.weights,
            set_weights=weight_setter(model),
            metrics=access.metric_kinds() if mode != "predict" else None,
            global_step=global_step,
            steps_per_epoch=steps_per_epoch,
        )
        if mode == "train":
            global_step.watch()
        return run

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
        with self.scope:
            with self._names_explained("the hooks callable"):
                self.hooks = list(hooks())
            # Objects of another graph are refused before any begin(): nothing is written.
            check_given(scaffold, self.side.graph)
            check_savers(self.hooks, self.side.graph)
            self._cached_savers = [h for h in self.hooks if _takes_collection_saver(h)]
            for hook in self.hooks:
                with self._names_explained(f"{type(hook).__name__}.begin"):
                    hook.begin()
            # As MonitoredSession: the scaffold is finalized after every begin() (its
            # default Saver then covers what the hooks added), which finalizes the graph.
            self.scaffold = finalize_scaffold(scaffold, self.side)
            check_savers(self.hooks, self.side.graph)  # what a begin() added
            self._create_session()
        self.step = step = MergedStep(self.hooks, self.side, self.resolver, self.batch_values)
        # Each phase enters the graph only if one of its hooks may need it (graph_free.py).
        if not any(needs_graph(h, "before_run") for h in step.before_hooks):
            self._before_scope = _NO_SCOPE
        if not any(needs_graph(h, "after_run") for h in step.after_hooks):
            self._after_scope = _NO_SCOPE
        self._profile_dirs = profiling.output_dirs(self.hooks, profile_dir)

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
                self.coord = Coordinator()
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

    def before(self, batch: int) -> bool:
        """Every hook's ``before_run``, merged as ``_HookedSession`` merges them; returns whether
        the hooks ended (a hook raised end of input: every ``end()`` has run)."""
        self.begin_batch = batch
        self.resolver.generation += 1  # other callbacks may have changed the model since
        while True:
            try:
                # _call_before_run, inlined: a call costs ~0.2 µs here (benchmarks/percall.py)
                self._context = context = RunContext(_NO_ARGS, self.session)
                if self._before_scope is _NO_SCOPE:  # graph-free hooks: no context manager
                    self.step.ask(context)
                else:
                    with self._before_scope:
                        self.step.ask(context)
                break
            except END_OF_INPUT as e:
                # Native: every hook's end(), the run stops, the error is swallowed. Keras's step
                # for this batch still runs (a callback cannot cancel it); fit stops after it.
                _warn_step_not_cancelled(batch, e)
                self._end_of_input()
                return True
            except PREEMPTION_ERRORS as e:
                self._recover(e)
        step = self.step
        with self.lock:  # a hook's thread may be reading the step (resolver.py)
            if step.demand:  # the sample count before this step, if a fetch needs a batch value
                self.batch_values.prepare(step.demand)
            self.global_step.before_step()  # what the step's run fetches: the value as it starts
        if step.options is not None and step.options.trace_level and self._profile_dirs:
            self._profiling = profiling.start(self._profile_dirs[0])
        return False

    def _call_before_run(self) -> None:
        self._context = context = RunContext(_NO_ARGS, self.session)
        if self._before_scope is _NO_SCOPE:  # graph-free hooks: no context manager per step
            self.step.ask(context)
        else:
            with self._before_scope:
                self.step.ask(context)

    def after(self, batch: int, logs: dict, exact: Any = None) -> bool:
        """The merged run and every hook's ``after_run``; returns whether a stop was requested.
        ``exact``: the batch's own values, where the driver has them (``hookbridge/_exact.py``)."""
        if self._profiling:
            profiling.stop()
            self._profiling = False
        mode, step = self.mode, self.step
        with self.lock:  # a hook's thread may be reading these (resolver.py)
            self.resolver.generation += 1  # the Keras step changed the model
            if mode == "train":
                # its one owner (global_step.py), told how many batches Keras reports
                self.global_step.after_step(batch - self.begin_batch + 1)
            if mode == "predict":
                # Keras 3 flattens a dict of outputs into the logs themselves (pythonify_logs)
                self.resolver.set_outputs(logs.get("outputs", logs or None))
                # predict's logs are the batch's own values (no metric runs over batches):
                # what a model puts there beside its outputs (model_fn/prediction.py)
                self.batch_values.update(logs, logs)
            else:
                self.batch_values.update(logs, exact)
            # the fetches answered from what the bridge holds, under the same acquisition
            held = step.held_results() if step.pending else None
        if len(logs) > self.keys_checked and mode != "predict":  # a key not seen before
            warn_unknown_keys(self.side, logs, self.warned_keys)
            self.keys_checked = len(self.warned_keys)
        if step.pending or step.after_hooks:
            while True:
                try:
                    if self._after_scope is _NO_SCOPE:  # graph-free hooks: no context manager
                        step.tell(self._context, held)
                    else:
                        with self._after_scope:
                            step.tell(self._context, held)
                    break
                except END_OF_INPUT:
                    self._end_of_input()
                    return True
                except PREEMPTION_ERRORS as e:
                    self._retry_after(batch, e)
                    held = None  # the hooks asked again: their fetches run again
        # As _HookedSession.run, after every after_run: the run's context, whichever hook (in
        # before_run or after_run, or a thread holding the context) asked, fetching or not;
        # then MonitoredSession.should_stop(): a coordinator stop. Two attribute reads (stops.py).
        if self._context.stopped or self.coord.stopped:
            self.stop_requested = True
        return self.stop_requested

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
        self._recover(error)
        self._call_before_run()

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
            profiling.stop()
            self._profiling = False
        self.global_step.unwatch()
        # A CheckpointSaverHook keeps the Saver it took from this run's graph: the next run
        # (a new graph) must take its own, as the hook's first session did.
        for hook in self._cached_savers:
            _tfcompat.forget_checkpoint_saver_hook_saver(hook)
        self._cached_savers = []
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
                session._close_real()


def _built_weights(model: Any, mode: str) -> list:
    """``model.weights``; a clear error where Keras has not built the model yet."""
    try:
        return list(model.weights)
    except ValueError as error:  # Keras 2 / tf_keras: a model without an input shape
        raise ValueError(
            f"HookCallback: the model {getattr(model, 'name', model)!r} has no weights yet at the "
            f"start of {mode}: Keras 2 builds a model given no input shape on its first batch, "
            "after the callbacks' start, where the hooks' graph is made from the weights "
            "(natively a TF1 graph is whole before the hooks' begin()). Build it before: give "
            "its first layer an input shape (keras.Input), call model.build(input_shape), or "
            "call the model on one batch."
        ) from error


def _takes_collection_saver(hook: Any) -> bool:
    """A ``CheckpointSaverHook`` given no Saver: it takes (and keeps) its graph's one."""
    return (
        isinstance(hook, tf.compat.v1.train.CheckpointSaverHook)
        and _tfcompat.checkpoint_saver_hook_saver(hook)[0] is None
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
