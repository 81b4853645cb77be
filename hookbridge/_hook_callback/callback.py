"""HookCallback: real, unmodified TF1 SessionRunHooks inside Keras fit / evaluate / predict."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import tensorflow as tf

from hookbridge._hook_callback.agreement import CONTINUE, FAILED, STOP, StopAgreement
from hookbridge._hook_callback.graph import SideGraph
from hookbridge._hook_callback.keras_access import KerasAccess
from hookbridge._hook_callback.keras_writes import global_step_for, weight_setter
from hookbridge._hook_callback.run import BridgeRun
from hookbridge._hook_callback.scaffold import ScaffoldArg

keras = tf.keras
SessionRunHook = tf.compat.v1.train.SessionRunHook

HooksArg = Sequence[SessionRunHook] | Callable[[], Iterable[SessionRunHook]]


def _check_hooks(hooks: Any, where: str, name: str = "hooks") -> list:
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Iterable):
        raise TypeError(
            f"HookCallback expected a list of tf.compat.v1.train.SessionRunHook{where}, "
            f"received {hooks!r} of type {type(hooks).__name__}."
        )
    hooks = list(hooks)
    for i, hook in enumerate(hooks):
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"HookCallback: {name}[{i}] = {hook!r} (type {type(hook).__name__}) is not a "
                "tf.compat.v1.train.SessionRunHook. Pass SessionRunHook instances; to wrap a "
                "Keras callback in the other direction use hookbridge.CallbackHook."
            )
    return hooks


def _hook_factory(hooks: Any, what: str) -> tuple[Callable[[], list], list]:
    """A zero-argument callable returning the checked hooks of ``hooks`` (a list, one hook, a
    callable returning them, or None), and the list itself when it is one (else empty)."""
    if hooks is None and what != "hooks":  # an optional argument left out
        return list, []
    if callable(hooks) and not isinstance(hooks, SessionRunHook):
        factory = hooks
        return (lambda: _check_hooks(factory(), f" from the {what} callable", what)), []
    if isinstance(hooks, SessionRunHook):
        hooks = [hooks]
    checked = _check_hooks(hooks, "" if what == "hooks" else f" as {what}", what)
    return (lambda: list(checked)), list(checked)


def _is_chief(model: Any) -> bool:
    """Whether this process is the chief of the model's distribution strategy (the one that
    checkpoints, as ``MonitoredTrainingSession(is_chief=...)``); True without a strategy."""
    strategy = getattr(model, "distribute_strategy", None)
    extended = getattr(strategy, "extended", None)
    return bool(getattr(extended, "should_checkpoint", True))


def _worker_count(model: Any) -> int:
    """How many workers (chief included) the model's distribution strategy trains on: 1 unless
    it is a multi-worker strategy with a cluster."""
    resolver = getattr(getattr(model, "distribute_strategy", None), "cluster_resolver", None)
    if resolver is None:
        return 1
    spec = resolver.cluster_spec()
    return max(1, sum(spec.num_tasks(job) for job in ("chief", "worker") if job in spec.jobs))


def _fit_is_running(model: Any) -> bool:
    """Whether ``model.fit`` is on this thread's call stack, so that test events are fit's
    validation. (A flag set in ``on_train_begin`` would outlive a ``fit`` that raised: Keras
    calls no ``on_train_end`` then, and a later ``evaluate`` would run no hooks.) Walks the
    frames once per ``evaluate``/``predict``, reading the locals only of frames named ``fit``."""
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            return True
        frame = frame.f_back
    return False


def _warn_multi_worker(model: Any, mode: str, agreed: bool) -> None:
    workers = _worker_count(model)
    if workers <= 1:
        return
    if agreed:
        stops = (
            "Stops are agreed: after each training step the workers share, in one collective, "
            "whether any wants to stop (a hook's request_stop(), a coordinator stop, a hook "
            "that raised), and every worker stops after that same step"
        )
    else:
        stops = (
            f"In {'evaluate' if mode == 'test' else mode}, stops are not agreed across "
            "workers: a hook that raises on one worker leaves the others waiting in their next "
            "collective"
            if mode != "train"
            else "agree_stops=False: stops are not agreed across workers, so stop every "
            "worker on the same condition (StopAtStepHook, the reduced loss): a worker stopping "
            "alone leaves the others waiting in their next collective"
        )
    warnings.warn(
        f"HookCallback runs its hooks on each of the {workers} workers of this multi-worker "
        "strategy (chief_only_hooks= on the chief only): pass hooks that write files "
        "(CheckpointSaverHook, SummarySaverHook, StepCounterHook) as chief_only_hooks, as "
        f"MonitoredTrainingSession runs them, or every worker writes the same directory. {stops} "
        "(docs/distributed.md).",
        stacklevel=4,
    )


class HookCallback(keras.callbacks.Callback):
    """A Keras callback that runs TF1 ``SessionRunHook``s as ``MonitoredSession`` would.

    Each Keras ``fit`` (or ``evaluate`` / ``predict``) becomes one TF1 session: every hook's
    ``begin()`` on a small side graph (see below), ``after_create_session`` with a real
    ``tf.compat.v1.Session``, one ``before_run``/``after_run`` pair per Keras step with the hooks'
    fetches, feeds and options merged into one run, and ``end(session)`` when Keras ends.

    The graph a hook sees (the default graph during every hook call) holds:

    * the global step (``tf.compat.v1.train.get_global_step()``), which is
      ``model.optimizer.iterations``: fetched in the step's run it is the pre-step (stale) value,
      read with ``run_context.session.run`` in ``after_run`` it is the new value, as in TF1; a
      step the optimizer skips leaves it unchanged, a change made elsewhere is what the next
      read sees, and a hook assigning it through the session sets ``iterations``;
    * one float32 scalar per Keras log key, named after it (``"loss"`` / ``"loss:0"``): the value
      of the **batch just run**, as a TF1 loss tensor; ``loss`` is in the ``LOSSES`` collection;
    * ``running_mean/<key>``: Keras's own running mean over the epoch (what Keras logs carry);
    * ``model/NNN/<name>``: variables mirroring the model's weights, copied in only when a fetch
      reads them (a ``Saver``), so ``CheckpointSaverHook`` writes the real Keras weights; a run
      that writes them (``init_from_checkpoint``, an assign, ``Saver.restore``) is copied back
      into the Keras model before the next Keras step;
    * ``outputs`` (``predict`` only): the batch's predictions, for a single-output model.

    Built-in hooks whose per-step methods never look at the default graph or eager mode
    (``NanTensorHook``, ``StopAtStepHook``, ...: ``graph_free.py`` lists them) are called
    without entering the graph, which costs about 10 µs right after a Keras step; any other
    hook in the same phase makes it enter.

    Fetches of values the bridge already holds (log tensors, global step) are answered without a
    session run; anything else runs once on the side graph. ``run_context.request_stop()`` and
    ``coord.request_stop()`` set ``model.stop_training``, so ``fit`` stops after that step; an
    exception given to ``coord.request_stop(exc)`` is raised from ``on_train_end`` after every
    ``end()``, as ``MonitoredSession.close()`` raises it. ``AbortedError``/``UnavailableError``
    re-create the session (every ``after_create_session`` again) and retry, as
    ``MonitoredSession`` does; after the Keras step has run only the hooks' part is retried
    (a warning says so).

    Under ``MultiWorkerMirroredStrategy`` with more than one worker, the workers agree on stops:
    after each training step's hooks, one small collective tells every worker whether any of
    them wants to stop (a hook's ``request_stop()``, a coordinator stop, ``model.stop_training``
    set by an earlier callback, a hook that raised), and every worker stops after that same
    step, so none is left waiting in a collective. The worker whose hook raised raises that
    exception from ``on_train_end`` (after Keras's end of epoch, which every worker must run
    together), the others stop cleanly with a warning naming it. A hook raising in ``begin`` /
    ``after_create_session`` on one worker makes every worker's ``fit`` raise before its first
    step. Single-worker runs have no collective and no cost. The collective costs one round
    trip between the workers per step (``docs/distributed.md``); ``agree_stops=False`` leaves it
    out when every worker stops on the same condition anyway.

    Not forwarded:
        * The train op: there is none in the side graph; the Keras step is the "run".
        * Validation inside ``fit``: training hooks do not run during ``fit``'s validation (as
          Estimator's training hooks do not run during evaluation). Pass a HookCallback to
          ``evaluate`` for evaluation hooks.
        * ``steps_per_execution=k``: hooks run once per execution of k steps and the global step
          advances by k; a stop requested mid-execution takes effect at its end.
        * Optimizer slots (e.g. Adam moments) are not mirrored into checkpoints.
        * Multi-worker: a hook raising in ``before_run`` on one worker does not cancel that
          step (the other workers are already in its collectives): every worker runs it, then
          stops. ``evaluate`` / ``predict`` have no agreement (a warning says so).
        * ``ProfilerHook``'s timeline covers the bridge's graph; the real Keras step is profiled
          with the TensorFlow Profiler into ``profile_dir`` (default: the ProfilerHook's
          ``output_dir``), readable in TensorBoard's Profile tab.

    Args:
        hooks: a list of ``tf.compat.v1.train.SessionRunHook``, or a zero-argument callable
            returning one, called at the start of each run while the bridge's graph is the
            default graph (so hooks can be built on its tensors, as TF1 code built them inside
            ``model_fn``).
        log_names: extra Keras log keys to create tensors for. The bridge infers ``loss`` and
            the compiled metrics' names; name others here (e.g. multi-output metrics).
        session_config: a ``tf.compat.v1.ConfigProto`` for the bridge's session. Default: one
            intra-op thread and ``inter_op_parallelism_threads=-1``, which runs the side graph's
            ops in the calling thread: its runs (summaries, checkpoints) are small, and waking
            a pool thread after each Keras step costs more than the ops themselves.
        profile_dir: where a tracing request (ProfilerHook) profiles the real Keras step.
        scaffold: a ``tf.compat.v1.train.Scaffold`` (or a zero-argument callable returning one,
            called while the bridge's graph is the default graph), finalized after every hook's
            ``begin()`` and run as ``MonitoredSession(scaffold=...)`` runs it. Hooks built on the
            same scaffold (``CheckpointSaverHook(dir, scaffold=scaffold)``) use its saver. A
            Scaffold is finalized in one graph: pass a callable to reuse it across runs.
        chief_only_hooks: hooks (same forms as ``hooks``) run only on the chief of a
            multi-worker strategy (``strategy.extended.should_checkpoint``), before the others,
            as ``MonitoredTrainingSession(chief_only_hooks=...)``: the hooks that write files.
            Without a multi-worker strategy this process is the chief and they always run.
        agree_stops: under ``MultiWorkerMirroredStrategy``, whether the workers agree on stops
            after each training step (default ``True``). ``False`` saves that collective per
            step; then every worker must stop on the same condition (``StopAtStepHook``,
            a ``NanTensorHook`` on the reduced loss), or the others wait for ever in their next
            collective. No effect on a single worker.

    Raises:
        TypeError: at construction, when ``hooks`` holds something that is not a SessionRunHook;
            at the start of a run, when ``scaffold`` is not a Scaffold (or callable of one).
        ValueError: at the start of a run, when the Scaffold's ops belong to another graph.
        RuntimeError: TF's own, when the Scaffold's initialization leaves the model not ready.

    Example:
        >>> hooks = [tf.compat.v1.train.StopAtStepHook(last_step=100),
        ...          tf.compat.v1.train.NanTensorHook("loss")]
        >>> model.fit(x, y, epochs=10, callbacks=[hookbridge.HookCallback(hooks)])
    """

    def __init__(
        self,
        hooks: HooksArg,
        *,
        log_names: Sequence[str] = (),
        session_config: Any = None,
        profile_dir: str | None = None,
        scaffold: ScaffoldArg = None,
        chief_only_hooks: HooksArg | None = None,
        agree_stops: bool = True,
    ) -> None:
        super().__init__()
        self._make_hooks, self._hooks = _hook_factory(hooks, "hooks")
        self._make_chief_hooks, _ = _hook_factory(chief_only_hooks, "chief_only_hooks")
        if not isinstance(agree_stops, bool):
            raise TypeError(
                f"HookCallback: agree_stops must be True or False, received {agree_stops!r}."
            )
        self._agree_stops = agree_stops
        self._log_names = list(log_names)
        self._session_config = session_config or tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=1, inter_op_parallelism_threads=-1
        )
        self._profile_dir = profile_dir
        self._scaffold = scaffold
        self._run: BridgeRun | None = None
        self._deferred: tuple = (None, None)  # (mode, exception raised by an end() mid-loop)
        self._keras: KerasAccess | None = None
        self._warned_spe = False
        self._agreement: StopAgreement | None = None  # a multi-worker fit's, while it runs
        self._step_error: BaseException | None = None  # a before_run error, agreed after the step

    # ------------------------------------------------------------------------------ public
    @property
    def hooks(self) -> list:
        """The hooks of the current (or last) run."""
        return list(self._hooks)

    @property
    def session(self) -> tf.compat.v1.Session | None:
        """The bridge's session while a run is active, else None."""
        return self._run.session if self._run else None

    @property
    def graph(self) -> tf.Graph | None:
        """The bridge's graph while a run is active, else None."""
        return self._run.side.graph if self._run else None

    def close(self) -> None:
        """Closes a run left open by an exception in the Keras step (no ``end()`` is called).

        Keras calls no callback when its own training step raises (or on KeyboardInterrupt), so
        the bridge learns of it only at the next ``fit``/``evaluate``/``predict``, which closes
        the stale session first. Call ``close()`` (or use the callback as a context manager) to
        close it at once.
        """
        run, self._run = self._run, None
        if run is not None:
            run.close()

    def __enter__(self) -> HookCallback:  # noqa: PYI034 - Self needs typing_extensions on 3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- Keras entry points
    def on_train_begin(self, logs=None):
        self._start("train")

    def on_train_end(self, logs=None):
        self._finish("train")

    def on_epoch_begin(self, epoch, logs=None):
        if self._active("train"):
            self._run.batch_values.reset()
            # What no watch sees (a checkpoint restored into iterations, another worker) is
            # read here: one variable read per epoch.
            self._run.global_step.dirty = self._run.global_step.variable is not None

    def on_train_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "train":
            if self._agreement is None:
                self._before(batch)
            else:
                self._agreed_before(batch)

    def on_train_batch_end(self, batch, logs=None):
        if self._agreement is not None:
            self._agreed_after(batch, logs)
            return
        run = self._run
        if run is not None and run.mode == "train":
            self._after(batch, logs)

    def on_test_begin(self, logs=None):
        # fit's validation runs no hooks: the training hooks are not evaluation hooks (and
        # their run may have ended early, by end of input, with an end() error pending)
        if not _fit_is_running(self.model):
            self._start("test")

    def on_test_end(self, logs=None):
        self._finish("test")

    def on_test_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "test":
            self._before(batch)

    def on_test_batch_end(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "test":
            self._after(batch, logs)

    def on_predict_begin(self, logs=None):
        if self._run is None or not _fit_is_running(self.model):
            self._start("predict")

    def on_predict_end(self, logs=None):
        self._finish("predict")

    def on_predict_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "predict":
            self._before(batch)

    def on_predict_batch_end(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "predict":
            self._after(batch, logs)

    # ------------------------------------------------------------------------ internals
    def _hooks_for(self, model: Any) -> Callable[[], list]:
        """As ``MonitoredTrainingSession``: on the chief, the chief-only hooks first, then the
        others; on any other worker, the others only."""
        if not _is_chief(model):
            return self._make_hooks
        make_chief, make = self._make_chief_hooks, self._make_hooks
        return lambda: [*make_chief(), *make()]

    def _active(self, mode: str) -> bool:
        return self._run is not None and self._run.mode == mode

    def _start(self, mode: str) -> None:
        self.close()  # a run left open by an exception in a Keras step
        self._deferred = (None, None)
        self._agreement = self._step_error = None
        model = self.model
        if model is None:
            raise RuntimeError(
                "HookCallback has no model: pass it to model.fit/evaluate/predict(callbacks=...)."
            )
        agreed = mode == "train" and self._agree_stops
        agreement = StopAgreement.for_model(model) if agreed else None
        _warn_multi_worker(model, mode, agreement is not None)
        try:
            run = self._start_run(mode, model)
        except BaseException:
            if agreement is not None:  # tell the others, so that none starts its first step
                agreement.agree(FAILED)
            raise
        if agreement is not None:
            self._agree_start(agreement, run)
        self._hooks = run.hooks
        self._run = run
        self._agreement = agreement

    def _start_run(self, mode: str, model: Any) -> BridgeRun:
        """Every hook's ``begin``, the session and every ``after_create_session``."""
        self._keras = access = KerasAccess(model)
        side = SideGraph(
            log_keys=access.log_keys(self._log_names),
            weights=list(model.weights),
            with_outputs=(mode == "predict"),
        )
        global_step = global_step_for(model, access.iterations)
        run = BridgeRun(
            mode,
            side,
            read_weights=access.weights,
            set_weights=weight_setter(model),
            read_count=access.loss_count_reader() if mode != "predict" else None,
            global_step=global_step,
            steps_per_epoch=(self.params or {}).get("steps"),
        )
        if mode == "train":
            global_step.watch()
        try:
            run.start(
                self._hooks_for(model), self._session_config, self._profile_dir, self._scaffold
            )
        except BaseException:
            global_step.unwatch()
            raise
        return run

    @staticmethod
    def _agree_start(agreement: StopAgreement, run: BridgeRun) -> None:
        """Whether every worker's hooks started: if one worker's ``begin`` or
        ``after_create_session`` raised, every worker's ``fit`` raises before its first step
        (a step would wait in its collectives for the failed worker for ever)."""
        codes = agreement.agree(CONTINUE)
        failed = agreement.others(codes, FAILED)
        if failed:
            run.close()
            raise RuntimeError(
                f"HookCallback: the hooks of {', '.join(failed)} raised while their session was "
                f"being created (begin / after_create_session; that worker raises the error "
                f"itself). {agreement.name} stops too, before the first step: under "
                "MultiWorkerMirroredStrategy every step waits for every worker."
            )

    def _agreed_before(self, batch: int) -> None:
        """``_before`` under a multi-worker agreement: an exception is kept until the step's
        end, where every worker learns of it (the Keras step runs regardless: the other
        workers are already in its collectives)."""
        run = self._run
        try:
            self._before(batch)
        except BaseException as error:  # noqa: BLE001 - agreed, then raised in on_train_end
            self._step_error = error
            self._run = run  # closed, kept so that fit's validation starts no run of its own

    def _agreed_after(self, batch: int, logs: dict | None) -> None:
        """The step's hooks, then one collective: if any worker wants to stop, every worker
        stops after this step. An exception from this worker's hooks is raised from
        ``on_train_end``, after Keras's end of epoch (whose metric reads are collectives every
        worker must join), instead of from the step."""
        error, self._step_error = self._step_error, None
        run = self._run
        if error is None and run is not None and run.mode == "train":
            try:
                self._after(batch, logs)
            except BaseException as e:  # noqa: BLE001 - agreed, then raised in on_train_end
                error = e
                self._run = run  # closed, kept so that fit's validation starts no run of its own
        model = self.model
        code = FAILED if error is not None else STOP if model.stop_training else CONTINUE
        agreement = self._agreement
        codes = agreement.agree(code)
        if not any(codes):
            return
        self._keras.request_stop("train")
        if error is not None:
            self._deferred = ("train", error)
        elif code == CONTINUE:
            self._warn_stopped_by(agreement, codes)

    def _warn_stopped_by(self, agreement: StopAgreement, codes: list[int]) -> None:
        failed, asked = agreement.others(codes, FAILED), agreement.others(codes, STOP)
        why = []
        if failed:
            why.append(f"a hook on {', '.join(failed)} raised (that worker raises it)")
        if asked:
            why.append(f"{', '.join(asked)} asked to stop")
        run = self._run
        step = f" (global step {run.global_step.value})" if run is not None else ""
        warnings.warn(
            f"HookCallback: {' and '.join(why)} after this step{step}: {agreement.name} stops "
            "after the same step, as every worker of the MultiWorkerMirroredStrategy does, and "
            "its hooks end normally.",
            stacklevel=4,
        )

    def _before(self, batch: int) -> None:
        run = self._run
        try:
            run.before(batch)
        except BaseException:
            self._run = None
            raise
        if run.session is None:  # a hook raised end of input: the hooks have ended
            self._ended(run)

    def _after(self, batch: int, logs: dict | None) -> None:
        run = self._run
        if run.mode == "train" and not self._warned_spe and batch > run.begin_batch:
            self._warned_spe = True
            warnings.warn(
                f"HookCallback: Keras runs {batch - run.begin_batch + 1} steps per execution "
                "(steps_per_execution); hooks run once per execution, the global step advances "
                "by that much, and a stop requested mid-execution takes effect at the end of the "
                "execution.",
                stacklevel=3,
            )
        try:
            stop = run.after(batch, logs or {})
        except BaseException:
            self._run = None
            raise
        if run.session is None:  # ended by end of input from a hook (every end() has run)
            self._ended(run)
        if stop:
            self._keras.request_stop(run.mode)

    def _ended(self, run: BridgeRun) -> None:
        """The hooks ended early (end of input from a hook): stop Keras after this step."""
        self._run = None
        self._deferred = (run.mode, run.deferred_error)
        self._keras.request_stop(run.mode)

    def _finish(self, mode: str) -> None:
        if mode == "train":
            self._agreement = None
        deferred_mode, error = self._deferred
        if error is not None and deferred_mode == mode:
            self._deferred = (None, None)
            raise error  # an end() raised it; Keras would have swallowed it inside its loop
        run = self._run
        if run is None or run.mode != mode:
            return
        self._run = None
        run.finish()
