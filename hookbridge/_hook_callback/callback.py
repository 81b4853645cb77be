"""HookCallback: real, unmodified TF1 SessionRunHooks inside Keras fit / evaluate / predict."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable, Sequence, Union

import numpy as np
import tensorflow as tf

from hookbridge import _merge, _tfcompat
from hookbridge._hook_callback.batch_values import BatchValues
from hookbridge._hook_callback.graph import SideGraph
from hookbridge._hook_callback.session import BridgeSession, Resolver

keras = tf.keras
SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs
SessionRunContext = tf.compat.v1.train.SessionRunContext
SessionRunValues = tf.compat.v1.train.SessionRunValues

HooksArg = Union[Sequence[SessionRunHook], Callable[[], Iterable[SessionRunHook]]]


def _overrides(hook: SessionRunHook, name: str) -> bool:
    return getattr(type(hook), name, None) is not getattr(SessionRunHook, name)


def _check_hooks(hooks: Iterable[Any], where: str) -> list:
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Iterable):
        raise TypeError(
            f"HookCallback expected a list of tf.compat.v1.train.SessionRunHook {where}, "
            f"received {hooks!r} of type {type(hooks).__name__}."
        )
    hooks = list(hooks)
    for i, hook in enumerate(hooks):
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"HookCallback: hooks[{i}] = {hook!r} (type {type(hook).__name__}) is not a "
                "tf.compat.v1.train.SessionRunHook. Pass SessionRunHook instances; to wrap a "
                "Keras callback in the other direction use hookbridge.CallbackHook."
            )
    return hooks


class _Run:
    """State of one fit / evaluate / predict under the bridge."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.session: BridgeSession | None = None
        self.coord: Any = None
        self.step = 0
        self.begin_batch = 0
        self.pending: list = []
        self.feeds: dict = {}
        self.options: Any = None
        self.context: Any = None
        self.stop_requested = False
        self.profiling = False
        self.warned_keys: set = set()


class HookCallback(keras.callbacks.Callback):
    """A Keras callback that runs TF1 ``SessionRunHook``s as ``MonitoredSession`` would.

    Each Keras ``fit`` (or ``evaluate`` / ``predict``) becomes one TF1 session: every hook's
    ``begin()`` on a small side graph (see below), ``after_create_session`` with a real
    ``tf.compat.v1.Session``, one ``before_run``/``after_run`` pair per Keras step with the hooks'
    fetches, feeds and options merged into one run, and ``end(session)`` when Keras ends.

    The graph a hook sees (the default graph during every hook call) holds:

    * the global step (``tf.compat.v1.train.get_global_step()``), equal to
      ``model.optimizer.iterations``: fetched in the step's run it is the pre-step (stale) value,
      read with ``run_context.session.run`` in ``after_run`` it is the new value, as in TF1;
    * one float32 scalar per Keras log key, named after it (``"loss"`` / ``"loss:0"``): the value
      of the **batch just run**, as a TF1 loss tensor; ``loss`` is in the ``LOSSES`` collection;
    * ``running_mean/<key>``: Keras's own running mean over the epoch (what Keras logs carry);
    * ``model/NNN/<name>``: variables mirroring the model's weights, copied in only when a fetch
      reads them (a ``Saver``), so ``CheckpointSaverHook`` writes the real Keras weights;
    * ``outputs`` (``predict`` only): the batch's predictions, for a single-output model.

    Fetches of values the bridge already holds (log tensors, global step) are answered without a
    session run; anything else runs once on the side graph. ``run_context.request_stop()`` sets
    ``model.stop_training``, so ``fit`` stops after exactly that step.

    Not forwarded:
        * The train op: there is none in the side graph; the Keras step is the "run".
        * Validation inside ``fit``: training hooks do not run during ``fit``'s validation (as
          Estimator's training hooks do not run during evaluation). Pass a HookCallback to
          ``evaluate`` for evaluation hooks.
        * ``steps_per_execution=k``: hooks run once per execution of k steps and the global step
          advances by k; a stop requested mid-execution takes effect at its end.
        * Optimizer slots (e.g. Adam moments) are not mirrored into checkpoints.
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
        session_config: a ``tf.compat.v1.ConfigProto`` for the bridge's session.
        profile_dir: where a tracing request (ProfilerHook) profiles the real Keras step.

    Raises:
        TypeError: at construction, when ``hooks`` holds something that is not a SessionRunHook.

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
    ) -> None:
        super().__init__()
        if callable(hooks) and not isinstance(hooks, SessionRunHook):
            self._hook_factory: Callable[[], Iterable[SessionRunHook]] | None = hooks
            self._hooks: list = []
        else:
            if isinstance(hooks, SessionRunHook):
                hooks = [hooks]
            self._hook_factory = None
            self._hooks = _check_hooks(hooks, "")
        self._log_names = list(log_names)
        self._session_config = session_config or tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=1, inter_op_parallelism_threads=2
        )
        self._profile_dir = profile_dir
        self._run: _Run | None = None

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
        return self._side.graph if self._run else None

    def close(self) -> None:
        """Closes a run left open by an exception in the Keras step (no ``end()`` is called).

        Keras calls no callback when its own training step raises (or on KeyboardInterrupt), so
        the bridge learns of it only at the next ``fit``/``evaluate``/``predict``, which closes
        the stale session first. Call ``close()`` (or use the callback as a context manager) to
        close it at once.
        """
        self._abort()

    def __enter__(self) -> HookCallback:
        return self

    def __exit__(self, *exc: object) -> None:
        self._abort()

    # ---------------------------------------------------------------- Keras entry points
    def on_train_begin(self, logs=None):
        self._start("train")

    def on_train_end(self, logs=None):
        self._finish("train")

    def on_epoch_begin(self, epoch, logs=None):
        if self._run is not None and self._run.mode == "train":
            self._batch_values.reset()

    def on_epoch_end(self, epoch, logs=None):
        run = self._run
        if run is not None and run.mode == "train":
            # Re-anchor on the optimizer once per epoch (one variable read).
            step = self._read_iterations()
            if step is not None and step != run.step:
                run.step = step
                self._resolver.set_step(step)

    def on_train_batch_begin(self, batch, logs=None):
        if self._run is not None and self._run.mode == "train":
            self._before(batch)

    def on_train_batch_end(self, batch, logs=None):
        if self._run is not None and self._run.mode == "train":
            self._after(batch, logs or {})

    def on_test_begin(self, logs=None):
        if self._run is None:
            self._start("test")

    def on_test_end(self, logs=None):
        self._finish("test")

    def on_test_batch_begin(self, batch, logs=None):
        if self._run is not None and self._run.mode == "test":
            self._before(batch)

    def on_test_batch_end(self, batch, logs=None):
        if self._run is not None and self._run.mode == "test":
            self._after(batch, logs or {})

    def on_predict_begin(self, logs=None):
        if self._run is None:
            self._start("predict")

    def on_predict_end(self, logs=None):
        self._finish("predict")

    def on_predict_batch_begin(self, batch, logs=None):
        if self._run is not None and self._run.mode == "predict":
            self._before(batch)

    def on_predict_batch_end(self, batch, logs=None):
        if self._run is not None and self._run.mode == "predict":
            self._after(batch, logs or {})

    # ------------------------------------------------------------------------ lifecycle
    def _start(self, mode: str) -> None:
        if self._run is not None:  # left open by an exception in a Keras step
            self._abort()
        model = self.model
        if model is None:
            raise RuntimeError(
                "HookCallback has no model: pass it to model.fit/evaluate/predict(callbacks=...)."
            )
        run = _Run(mode)
        side = SideGraph(
            log_keys=self._infer_log_keys(model),
            weights=list(model.weights),
            initial_step=0,
            with_outputs=(mode == "predict"),
        )
        self._side = side
        self._resolver = resolver = Resolver(side, self._read_weights)
        self._batch_values = BatchValues(self._loss_count_reader(model) if mode != "predict" else None)
        run.step = self._read_iterations() or 0
        resolver.set_step(run.step)
        try:
            with side.graph.as_default():
                if self._hook_factory is not None:
                    self._hooks = _check_hooks(self._hook_factory(), "from the hooks callable")
                for hook in self._hooks:
                    hook.begin()
                scaffold = tf.compat.v1.train.Scaffold()
                scaffold.finalize()  # creates the default Saver (as MonitoredSession) and finalizes
                session = BridgeSession(resolver, config=self._session_config)
                run.session = session
                tf.compat.v1.Session.run(session, scaffold.init_op, scaffold.init_feed_dict)
                if scaffold.init_fn is not None:
                    scaffold.init_fn(scaffold, session)
                if scaffold.local_init_op is not None:
                    tf.compat.v1.Session.run(session, scaffold.local_init_op)
                side.step_in_graph = 0
                run.coord = tf.compat.v1.train.Coordinator()
                self._run = run
                for hook in self._hooks:
                    hook.after_create_session(session, run.coord)
        except BaseException:
            self._run = run
            self._abort()
            raise
        self._before_hooks = [h for h in self._hooks if _overrides(h, "before_run")]
        self._after_hooks = [h for h in self._hooks if _overrides(h, "after_run")]
        self._profiles = self._profile_dirs()

    def _before(self, batch: int) -> None:
        run = self._run
        run.begin_batch = batch
        run.pending = []
        run.feeds = {}
        run.options = None
        run.context = context = SessionRunContext(
            original_args=SessionRunArgs(None), session=run.session
        )
        if not self._before_hooks:
            return
        try:
            with self._side.graph.as_default():
                for hook in self._before_hooks:
                    request = hook.before_run(context)
                    if request is None:
                        continue
                    if not isinstance(request, SessionRunArgs):
                        raise TypeError(
                            f"{type(hook).__name__}.before_run returned {request!r} of type "
                            f"{type(request).__name__}; a SessionRunHook must return None or "
                            "tf.compat.v1.train.SessionRunArgs."
                        )
                    if request.fetches is not None:
                        run.pending.append((hook, self._resolver.plan(request.fetches)))
                    if request.feed_dict:
                        _merge.merge_feeds(run.feeds, request.feed_dict)
                    if request.options:
                        if run.options is None:
                            run.options = tf.compat.v1.RunOptions()
                        _merge.merge_run_options(run.options, request.options)
        except BaseException:
            self._abort()
            raise
        if run.options is not None and run.options.trace_level and self._profiles:
            run.profiling = self._start_profiler()

    def _after(self, batch: int, logs: dict) -> None:
        run = self._run
        resolver = self._resolver
        if run.profiling:
            self._stop_profiler()
            run.profiling = False
        steps = batch - run.begin_batch + 1
        if steps > 1 and run.mode == "train" and not getattr(self, "_warned_spe", False):
            self._warned_spe = True
            warnings.warn(
                f"HookCallback: Keras runs {steps} steps per execution (steps_per_execution); "
                "hooks run once per execution, the global step advances by that much, and a stop "
                "requested mid-execution takes effect at the end of the execution.",
                stacklevel=2,
            )
        if run.mode == "predict":
            outputs = logs.get("outputs")
            if outputs is not None:
                resolver.set_outputs(outputs)
        else:
            last = bool(self.params) and batch + 1 == self.params.get("steps")
            resolver.set_logs(self._batch_values.update(logs, steps, last), logs)
            self._check_keys(run, logs)
        try:
            with self._side.graph.as_default():
                results, options, run_metadata = self._merged_run(run)
                stale = run.step
                if run.mode == "train":
                    run.step = stale + steps
                    resolver.set_step(run.step)
                context = run.context
                for hook in self._after_hooks:
                    hook.after_run(
                        context,
                        SessionRunValues(
                            results=results.get(hook), options=options, run_metadata=run_metadata
                        ),
                    )
        except BaseException:
            self._abort()
            raise
        if run.context.stop_requested:
            run.stop_requested = True
            self._request_stop(run.mode)

    def _request_stop(self, mode: str) -> None:
        """Stops Keras after this step: ``stop_training`` in fit; in evaluate/predict Keras 3's
        ``stop_evaluating``/``stop_predicting`` (Keras 2 has no such flag: a warning says so)."""
        flag = {"train": "stop_training", "test": "stop_evaluating", "predict": "stop_predicting"}
        model = self.model
        if mode == "train" or hasattr(model, flag[mode]):
            setattr(model, flag[mode], True)
        elif not getattr(self, "_warned_stop", False):
            self._warned_stop = True
            warnings.warn(
                f"HookCallback: a hook requested a stop during {mode}, but this Keras version "
                "cannot stop evaluate/predict early (Keras 3 can); the run continues to its end.",
                stacklevel=4,
            )

    def _merged_run(self, run: _Run) -> tuple[dict, Any, Any]:
        options = run.options or tf.compat.v1.RunOptions()
        run_metadata = tf.compat.v1.RunMetadata()
        results: dict = {}
        if not run.pending:
            return results, options, run_metadata
        resolver = self._resolver
        feeds = run.feeds
        unknown: dict = {}
        per_hook = []
        for hook, plan in run.pending:
            values = [None] * len(plan.elements)
            for i, key in plan.known:
                values[i] = resolver.known_value(key, plan.elements[i], feeds)
            for i, element in plan.unknown:
                unknown.setdefault(element, None)
            per_hook.append((hook, plan, values))
        if unknown:
            elements = list(unknown)
            got = resolver.run_elements(
                elements, feeds, options if run.options else None, run_metadata, run.step
            )
            unknown = dict(zip(elements, got))
            for _, plan, values in per_hook:
                for i, element in plan.unknown:
                    values[i] = unknown[element]
        for hook, plan, values in per_hook:
            results[hook] = plan.mapper.build_results(values)
        return results, options, run_metadata

    def _finish(self, mode: str) -> None:
        run = self._run
        if run is None or run.mode != mode:
            return
        try:
            with self._side.graph.as_default():
                for hook in self._hooks:
                    hook.end(run.session)
        except BaseException:
            self._abort()
            raise
        self._close(run)

    def _abort(self) -> None:
        run = self._run
        if run is not None:
            if run.profiling:
                self._stop_profiler()
            self._close(run)

    def _close(self, run: _Run) -> None:
        self._run = None
        try:
            if run.coord is not None:
                run.coord.request_stop()
                run.coord.join(stop_grace_period_secs=30)
        finally:
            if run.session is not None:
                run.session.close()

    # ---------------------------------------------------------------------------- helpers
    def _infer_log_keys(self, model: Any) -> list[str]:
        keys = ["loss"]
        try:
            config = model.get_compile_config() or {}
        except Exception:  # not compiled, or a Keras without get_compile_config
            config = {}
        for group in ("metrics", "weighted_metrics"):
            for metric in _flatten(config.get(group)):
                name = _metric_name(metric)
                if name and name not in keys:
                    keys.append(name)
        try:
            names = list(model.metrics_names)  # tf_keras v1 (graph mode) models know them now
        except Exception:
            names = []
        for name in [*names, *self._log_names]:
            if name != "compile_metrics" and name not in keys:
                keys.append(name)
        return keys

    def _check_keys(self, run: _Run, logs: dict) -> None:
        if len(run.warned_keys) >= len(logs):
            return
        for key in logs:
            if key not in run.warned_keys:
                run.warned_keys.add(key)
                if key not in self._side.log_tensors and key not in ("batch", "size"):
                    warnings.warn(
                        f"HookCallback: Keras logs {key!r} but the bridge's graph has no tensor "
                        f"for it; pass log_names=[{key!r}] to HookCallback to get one.",
                        stacklevel=3,
                    )

    def _keras_context(self, variable: Any) -> Any:
        """Where Keras variables can be read: eagerly, or in Keras's graph (tf_keras graph mode)."""
        graph = getattr(variable, "graph", None)
        if graph is not None and not getattr(graph, "building_function", True) and (
            not tf.compat.v1.executing_eagerly_outside_functions()
        ):
            return graph.as_default()
        return _tfcompat.eager()

    def _read_iterations(self) -> int | None:
        optimizer = getattr(self.model, "optimizer", None)
        iterations = getattr(optimizer, "iterations", None)
        if iterations is None:
            return None
        with self._keras_context(iterations):
            return int(keras.backend.get_value(iterations))

    def _read_weights(self) -> list:
        weights = self.model.weights
        with self._keras_context(weights[0] if weights else None):
            return self.model.get_weights()

    def _loss_count_reader(self, model: Any) -> Callable[[], float | None]:
        """Reads the loss tracker's sample count (tf_keras builds it at the first step)."""
        found: list = []

        def read() -> float | None:
            if not found:
                for metric in getattr(model, "metrics", ()):
                    if getattr(metric, "name", None) == "loss" and hasattr(metric, "count"):
                        found.append(metric.count)
                        break
                else:
                    return None
            with self._keras_context(found[0]):
                return float(keras.backend.get_value(found[0]))

        return read

    def _profile_dirs(self) -> list[str]:
        if self._profile_dir:
            return [self._profile_dir]
        return [
            os.path.dirname(path)
            for path in (_tfcompat.profiler_hook_output_file(h) for h in self._hooks)
            if path
        ]

    def _start_profiler(self) -> bool:
        try:
            tf.profiler.experimental.start(self._profiles[0])
        except Exception as e:  # another profiler session is running
            warnings.warn(f"HookCallback: could not profile the Keras step: {e}", stacklevel=3)
            return False
        return True

    @staticmethod
    def _stop_profiler() -> None:
        try:
            tf.profiler.experimental.stop()
        except Exception:  # already stopped
            pass


def _flatten(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, dict) and "class_name" not in value:
        out = []
        for v in value.values():
            out.extend(_flatten(v))
        return out
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


def _metric_name(metric: Any) -> str | None:
    if isinstance(metric, str):
        return metric
    if isinstance(metric, dict):
        return (metric.get("config") or {}).get("name")
    return getattr(metric, "name", None)
