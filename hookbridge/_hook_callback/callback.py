"""HookCallback: real, unmodified TF1 SessionRunHooks inside Keras fit / evaluate / predict."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from hookbridge._exact import CURRENT as EXACT_VALUES
from hookbridge._exact import current as exact_values
from hookbridge._hook_callback.agreement import StopAgreement
from hookbridge._hook_callback.hooks_arg import HooksArg, hook_factory
from hookbridge._hook_callback.keras_access import (
    KerasAccess,
    fit_is_running,
    require_tensorflow_backend,
)
from hookbridge._hook_callback.lifecycle import RunLifecycle
from hookbridge._hook_callback.run import BridgeRun
from hookbridge._hook_callback.scaffold import ScaffoldArg
from hookbridge._hook_callback.step import warn_steps_per_execution
from hookbridge._hook_callback.workers import AgreedSteps

keras = tf.keras


def _boundary(entry: Callable) -> Callable:
    """The one exception boundary of a Keras entry point (pluggy's call loop is the model).

    Any ``BaseException`` leaving ``entry`` (a hook's, TensorFlow's, Keras's, or the bridge's
    own, such as a warning turned into an error by ``-W error``) first closes the run
    (:meth:`HookCallback._abandon`), then propagates unchanged. What the TF1 lifecycle treats
    otherwise (end of input, preemption, a coordinator stop, an agreed multi-worker stop) is
    handled inside, by ``run.py`` and ``workers.py``, and never reaches here as an error.
    """

    @functools.wraps(entry)
    def guarded(self: HookCallback, *args: Any, **kwargs: Any) -> Any:
        try:
            return entry(self, *args, **kwargs)
        except BaseException:
            self._abandon()
            raise

    return guarded


class HookCallback(AgreedSteps, RunLifecycle, keras.callbacks.Callback):
    """A Keras callback that runs TF1 ``SessionRunHook``s as ``MonitoredSession`` would.

    Each Keras ``fit`` (or ``evaluate`` / ``predict``) becomes one TF1 session: every hook's
    ``begin()`` on a small side graph (see below), ``after_create_session`` with a
    ``tf.compat.v1.Session`` (a thread-safe proxy of a real one: ``session.py`` says what it
    refuses), one ``before_run``/``after_run`` pair per Keras step with the hooks' fetches, feeds
    and options merged into one run, and ``end(session)`` when Keras ends. An exception leaving
    any of its Keras events closes the run first, without ``end()``, as natively.

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
    * ``outputs`` (``predict`` only): the batch's predictions, for a single-output model; for a
      model of several, ``outputs/<name>`` per output (a dict's key, else ``output_names``).

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
    trip between the workers per step, so it runs only when some worker holds a hook or an
    earlier callback that could stop it alone (a user's hook with ``after_run``, a
    ``LambdaCallback``...), or the workers' deciders differ (a chief-only ``StopAtStepHook``):
    with built-in hooks that decide alike on every worker (``StopAtStepHook``, ``NanTensorHook``
    on ``loss:0``, the file writers chief-only) no step has one (``docs/distributed.md``).
    ``agree_stops=False`` leaves out even the start round.

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
        log_names: extra Keras log keys to create tensors for. The bridge infers the keys
            Keras logs for the compiled loss and metrics (``loss``, ``mae``; for several
            outputs ``out_a_loss``, ``out_a_mae``); name others here (a custom ``train_step``'s
            keys, a metric added outside ``compile``).
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
            (default ``True``): a round at the start of each ``fit``, and one after each
            training step only when some worker could stop alone (see above). ``False`` leaves
            out every round; then every worker must stop on the same condition
            (``StopAtStepHook``, a ``NanTensorHook`` on the reduced loss), or the others wait
            for ever in their next collective. No effect on a single worker.

    Raises:
        TypeError: at construction, when ``hooks`` holds something that is not a SessionRunHook;
            at the start of a run, when ``scaffold`` is not a Scaffold (or callable of one).
        ValueError: at the start of a run, when the Scaffold's ops, or a Saver a
            ``CheckpointSaverHook`` would use, belong to another graph (before any ``begin()``).
        RuntimeError: at construction, when Keras runs on another backend than TensorFlow
            (``KERAS_BACKEND=jax``/``torch``/``numpy``); TF's own, when the Scaffold's
            initialization leaves the model not ready.

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
        require_tensorflow_backend()
        super().__init__()
        self._make_hooks, self._hooks = hook_factory(hooks, "hooks")
        self._make_chief_hooks, _ = hook_factory(chief_only_hooks, "chief_only_hooks")
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
        self._warned_writers = False  # file-writing hooks on a non-chief worker (once)
        self._agreement: StopAgreement | None = None  # a multi-worker fit's, while it runs
        self._stop_rounds = False  # whether the last fit agreed on stops at every step
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

    def __enter__(self) -> HookCallback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- Keras entry points
    # Each runs inside the one exception boundary: whatever it raises closes the run first
    # (``_abandon``), then propagates.
    @_boundary
    def on_train_begin(self, logs=None):
        self._start("train")

    @_boundary
    def on_train_end(self, logs=None):
        self._finish("train")

    @_boundary
    def on_epoch_begin(self, epoch, logs=None):
        if self._active("train"):
            self._run.batch_values.reset()
            # What no watch sees (a checkpoint restored into iterations, another worker, a
            # mispredicted step) is read here: one variable read per epoch.
            self._run.global_step.verify()

    # The per-step entry points hold the boundary inline (no wrapper frame on the hot path).
    def on_train_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "train":
            try:
                if self._agreement is None:
                    if run.before(batch):  # a hook raised end of input: the hooks have ended
                        self._ended(run)
                else:
                    self._agreed_before(batch)
            except BaseException:
                self._abandon()
                raise

    def on_train_batch_end(self, batch, logs=None):
        try:
            if self._agreement is not None:
                self._agreed_after(batch, logs)
                return
            run = self._run
            if run is not None and run.mode == "train":
                # _after, inlined (a call costs ~0.2 µs here, benchmarks/percall.py)
                if batch > run.begin_batch and not self._warned_spe:
                    self._warned_spe = True
                    warn_steps_per_execution(batch - run.begin_batch + 1)
                exact = exact_values(self.model) if EXACT_VALUES else None  # a custom loop's
                if run.after(batch, logs or {}, exact):
                    if run.session is None:  # ended by end of input from a hook
                        self._ended(run)
                    else:
                        self._keras.request_stop("train")
        except BaseException:
            self._abandon()
            raise

    @_boundary
    def on_test_begin(self, logs=None):
        # fit's validation runs no hooks: the training hooks are not evaluation hooks (and
        # their run may have ended early, by end of input, with an end() error pending)
        if not fit_is_running(self.model):
            self._start("test")
        elif self._active("train"):  # the last batch's values, before validation resets them
            self._run.batch_values.settle()

    @_boundary
    def on_test_end(self, logs=None):
        self._finish("test")

    def on_test_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "test":
            try:
                self._before(batch)
            except BaseException:
                self._abandon()
                raise

    def on_test_batch_end(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "test":
            try:
                self._after(batch, logs)
            except BaseException:
                self._abandon()
                raise

    @_boundary
    def on_predict_begin(self, logs=None):
        if self._run is None or not fit_is_running(self.model):
            self._start("predict")

    @_boundary
    def on_predict_end(self, logs=None):
        self._finish("predict")

    def on_predict_batch_begin(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "predict":
            try:
                self._before(batch)
            except BaseException:
                self._abandon()
                raise

    def on_predict_batch_end(self, batch, logs=None):
        run = self._run
        if run is not None and run.mode == "predict":
            try:
                self._after(batch, logs)
            except BaseException:
                self._abandon()
                raise

    def _abandon(self) -> None:
        """The exception policy's one teardown: the run ends without ``end()`` (as when an
        exception leaves ``with MonitoredSession(...)``): session and coordinator closed,
        ``optimizer.iterations``'s watch removed, the multi-worker agreement dropped."""
        self._agreement = self._step_error = None
        self.close()
