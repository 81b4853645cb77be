"""CallbackHook: real Keras callbacks inside TF1 ``MonitoredSession`` / ``Estimator``.

The ``SessionRunHook`` lifecycle is here (``begin`` sets up the session's state, ``before_run`` /
``after_run`` drive the batch events, ``end`` closes); what each run fetches and how the results
become logs is in :mod:`.fetches`, the synthesized epochs in :mod:`.epochs`, cluster mode in
:mod:`.cluster`, argument checks in :mod:`.args`, and every call to a callback goes through the
one dispatcher of :mod:`.dispatch`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from hookbridge._callback_hook import args as checks
from hookbridge._callback_hook import cluster, dispatch, persist
from hookbridge._callback_hook.args import EVENT_KIND
from hookbridge._callback_hook.epochs import Epochs, fit_params
from hookbridge._callback_hook.fetches import Fetches
from hookbridge._callback_hook.logs import RunningMeans, check_batch_size, check_reductions, resolve
from hookbridge._callback_hook.model import GraphState, ModelProxy

SessionRunHook = tf.compat.v1.train.SessionRunHook


class CallbackHook(Fetches, Epochs, cluster.ClusterEpochs, SessionRunHook):
    """A ``SessionRunHook`` that runs Keras callbacks as Keras ``fit`` would call them.

    Each ``MonitoredSession`` (or ``Estimator.train``) is one Keras ``fit``: ``on_train_begin``
    when the first session is created, epochs synthesized from ``steps_per_epoch``
    (``on_epoch_begin`` before an epoch's first step, ``on_epoch_end`` after its last), one
    ``on_train_batch_begin``/``on_train_batch_end`` pair per ``MonitoredSession.run`` (the batch
    index restarts every epoch), and ``on_train_end`` when the session ends. With ``epochs`` and
    ``steps_per_epoch`` both given, the hook requests a stop after the last epoch, as ``fit``
    ends. A stop (from a callback, another hook, or the end of input) mid-epoch still closes that
    epoch, then ``on_train_end`` runs with the last epoch's logs, as Keras does after
    ``stop_training``; an input that ends before an epoch's first step leaves that epoch
    unclosed (no ``on_epoch_end``; a warning says ``on_epoch_begin`` ran). After any other error
    neither runs, as in Keras. Session recovery (``AbortedError``, ``UnavailableError``) does not
    restart training, nor begin or close an epoch again, even when a callback's read of the
    model raised the error: the event it interrupted is finished in the new session.

    On a worker of a between-graph TF1 cluster (parameter servers + workers,
    ``MonitoredTrainingSession(master=..., is_chief=...)``), pass ``is_chief``. Then the callbacks
    that write files (``ModelCheckpoint``, ``CSVLogger``, ``TensorBoard``, ``ProgbarLogger``, or
    ``chief_only_callbacks``) run on the chief only, the others on every worker; epochs follow the
    global step the workers share (epoch ``e`` covers global steps ``[e * steps_per_epoch,
    (e + 1) * steps_per_epoch)``: a worker closes its epoch, with the means of its own batches,
    once the shared step passed the end, and opens the next with the number the step says; the
    batch index counts this worker's own runs); and a stop decided by the chief's callbacks
    (``EarlyStopping``, ``TerminateOnNaN``, ``model.stop_training``) stops every worker at its
    next run, through a shared variable (``hookbridge/stop_training``, beside the global step)
    each worker fetches with its runs, as TF1 clusters shared a stop. A stop decided on another
    worker stops that worker only, as a TF1 hook's ``request_stop()`` does. Boundaries race the
    asynchronous increments: a worker's run in flight when another worker crosses an epoch's end
    counts in the epoch it began in (docs/limits.md).

    Under an evaluation session (``Estimator.evaluate``, found by ``mode="auto"``, or
    ``mode="evaluate"``) the hook is Keras's ``evaluate``: ``on_test_begin``,
    ``on_test_batch_begin``/``on_test_batch_end`` per run, ``on_test_end(logs)``. With
    ``mode="predict"`` (``Estimator.predict``) it is Keras's ``predict``: ``on_predict_begin``,
    ``on_predict_batch_end(batch, {"outputs": <the fetched logs>})``, ``on_predict_end``.

    Logs are what Keras reports: Python floats, in the key order Keras's ``CallbackList`` gives
    (Keras 3 sorts the keys; tf_keras / Keras 2 keep compile order, here the order of ``logs=``
    as given, then the ``val_*`` keys in the order ``validation_fn`` returns them); one logs
    dict per event, shared by the callbacks in list order (a callback sees what an earlier one
    wrote into it, as in Keras). Batch logs are running means of
    the fetched tensors within the epoch, weighted by each batch's sample count as Keras weights
    them (``batch_size``), or reduced as ``log_reductions`` says; epoch logs the epoch's value
    plus ``val_<name>`` from ``validation_fn``,
    which runs between ``on_test_begin`` and ``on_test_end`` as ``fit``'s validation.
    With ``verbose`` not 0, a ``ProgbarLogger`` is added last, as ``fit`` adds it, unless the
    list holds one. On tf_keras / Keras 2, tf_keras's warning for a batch method slower than
    the batch ("Callback method `on_train_batch_end` is slow compared to the batch time") is
    logged as tf_keras logs it.
    ``params`` is ``{"epochs", "steps", "verbose"}``.

    The callbacks' ``model`` is one proxy over the graph, shared by every callback and every
    session of the hook as Keras shares its model (``History`` sets ``model.history``):
    ``stop_training`` (setting it requests a stop), ``get_weights``/``set_weights``/``weights``
    (``variables``), ``summary``/``count_params``/``get_config``,
    ``optimizer.learning_rate`` (``learning_rate``), ``optimizer.get_config()``,
    ``optimizer.iterations`` (the
    global step), ``save_weights``/``save`` (an ``.h5`` file or a TF checkpoint of ``variables``,
    loaded back by ``load_weights`` or :func:`hookbridge.load_weights`), ``metrics`` (metric
    directions for ``mode="auto"``), ``layers`` (the variables by scope). What callbacks write at
    the final step reaches the session's final checkpoint. Anything else raises
    :class:`hookbridge.UnsupportedModelAttributeError` naming the callback and attribute.

    Args:
        callbacks: Keras callback instances (Keras 3, or tf_keras / Keras 2 on those stacks), or
            one callback.
        logs: log name -> tensor, or tensor name (``"loss"`` or ``"loss:0"``) of the session's
            graph, fetched with each step's run. In an Estimator, name tensors in ``model_fn``
            (``tf.identity(loss, name="loss")``) and pass names.
        steps_per_epoch: steps per synthesized epoch; ``None``: the whole run is one epoch.
        validation_fn: ``validation_fn(session) -> dict`` called at each epoch end (``session``
            is the raw ``tf.compat.v1.Session``: running it triggers no hook), as one test batch
            between ``on_test_begin`` and ``on_test_end``; its values are added to the epoch
            logs as ``val_<name>``.
        learning_rate: the graph's learning rate (or its name), read by
            ``model.optimizer.learning_rate`` (TensorBoard's ``epoch_learning_rate``): a
            ``tf.Variable`` (also assigned: ReduceLROnPlateau, LearningRateScheduler), a tensor
            such as ``tf.compat.v1.train.polynomial_decay(...)`` (its value at the current
            global step; not assignable, as a Keras ``LearningRateSchedule``: Keras 3 callbacks
            that assign it raise Keras's TypeError), or a placeholder fed with each run (the
            value the latest run was fed).
        variables: what ``get_weights``/``set_weights``/``save_weights``/``load_weights``
            cover (variables or names); default: the graph's model variables, trainable and
            not (BatchNorm's moving statistics), not the optimizer's, as ``model.weights``.
        epochs: ``params["epochs"]``; with ``steps_per_epoch``, training also ends after that
            many epochs, as in ``fit``. Default: 1 when ``steps_per_epoch`` is ``None``, else 0
            (unknown: no stop).
        verbose: ``params["verbose"]``, default 1: as in ``fit``, 1 or 2 add a
            ``ProgbarLogger`` (of the callbacks' Keras) after the callbacks when none is given
            (printing a progress bar or a line per epoch; on the chief only in a cluster); 0
            prints nothing.
        metric_directions: log name -> ``"max"`` or ``"min"``: the direction ``mode="auto"``
            monitor callbacks (EarlyStopping, ModelCheckpoint, ReduceLROnPlateau) use for a
            name Keras 3 cannot infer (``{"my_score": "max"}``; ``val_my_score`` follows). Other
            names get the direction Keras 3 gives them when compiled as metrics (``acc``,
            ``auc``, ``precision``: maximize; ``mae``: minimize). tf_keras / Keras 2 callbacks
            decide from the name alone, natively too: a declaration they contradict warns.
        optimizer: the ``tf.compat.v1.train.Optimizer`` the train op was built with: its name
            and settings for ``model.optimizer.name`` / ``get_config()``, its variables for
            ``model.summary()``, and its learning rate when ``learning_rate`` is not given
            (if that rate is a tensor or variable).
        batch_size: each step's sample count, the weight of its values in the means: a tensor
            (or tensor name) with the batch as first dimension (the input batch, labels or
            sample weights), a scalar tensor holding the count, or an int when every batch has
            that size. ``None``: every step counts once, with a warning (Keras weights by
            sample count, so a smaller last batch would give other means).
        mode: ``"auto"`` (default: ``"evaluate"`` if the graph has an eval step, as
            ``Estimator.evaluate``'s, else ``"train"``), ``"train"``, ``"evaluate"`` or
            ``"predict"``. Evaluate and predict take no ``steps_per_epoch``, ``validation_fn``
            or ``epochs``.
        is_chief: ``None`` (default): not a cluster. ``True``/``False``: this hook runs on one
            worker of a between-graph cluster, the chief or not; pass the value given to
            ``MonitoredTrainingSession(is_chief=...)`` (Estimator: ``run_config.is_chief``).
            Needs ``steps_per_epoch`` and a global step in the graph (the one the workers
            share); costs the global step and the stop variable fetched in each run, plus one
            read per epoch and one write when the chief stops.
        chief_only_callbacks: with ``is_chief``, the callbacks (instances from ``callbacks``)
            that run on the chief only: never ``set_model``, ``set_params`` or any other call
            on another worker. ``None`` (default): the instances of Keras's ``ModelCheckpoint``,
            ``CSVLogger``, ``TensorBoard`` and ``ProgbarLogger`` (subclasses too), so workers
            do not write the same files; ``[]``: every callback on every worker.
        log_reductions: log name -> how it reduces over the epoch: ``"mean"`` (default: the
            mean weighted by ``batch_size``, as Keras averages its loss), ``"last"`` (the latest
            value: a tensor that is already the epoch's result, e.g. a stateful metric's running
            total, which Keras reports as ``metric.result()``), ``"sum"`` (the sum of the
            batch values, e.g. a per-batch count). Batch logs are the running value.

    Raises:
        TypeError: ``callbacks`` holds a non-callback (named), ``logs`` a non-tensor,
            ``optimizer`` is not a TF1 optimizer, ``metric_directions`` is not a mapping, or
            ``batch_size`` something else than an int, tensor or name, ``is_chief`` not a
            bool, ``chief_only_callbacks`` not a list, ``log_reductions`` not a mapping.
        ValueError: an unsupported callback (BackupAndRestore: named, with the reason), a
            ``metric_directions`` value other than ``"max"``/``"min"``, an unknown ``mode`` or
            epoch arguments in evaluate/predict mode, ``is_chief`` without
            ``steps_per_epoch`` or with evaluate/predict, ``chief_only_callbacks`` without
            ``is_chief`` or naming a callback not in ``callbacks``, a ``log_reductions``
            entry naming no log or with another value, or (in ``begin``) a log
            name missing from the graph (listing what is available), a ``learning_rate`` that
            is not a scalar of the graph or is computed from a placeholder, ``is_chief``
            without a global step in the graph.

    Not forwarded:
        * ``model.stop_evaluating`` / ``stop_predicting``, and ``stop_training`` outside
          training: an evaluation or prediction session runs to its own end.
        * Per-batch values: logs are running means (or ``log_reductions``), as Keras reports
          them; the batch value is the graph's business.
        * The run that finds the input exhausted got ``on_*_batch_begin`` (a hook cannot know
          before the run), as Keras does on an input of unknown length.
        * The Keras model itself: ``layers`` are the variables grouped by scope (TensorBoard
          weight histograms and images; graphs and embeddings are empty), no ``.keras``
          archive from ``save`` (tf_keras / Keras 2: a SavedModel of the graph without
          signatures); tf_keras TensorBoard batch-level scalars (written by tf_keras's own
          train function) are not written.
        * Sample counts: a tf_keras / Keras 2 ``ProgbarLogger`` counts steps, whatever its
          ``count_mode``.
        * ``steps_per_execution`` and asynchronous dispatch: callbacks run synchronously, in
          eager mode, inside the hook calls.

    Example:
        >>> hook = hookbridge.CallbackHook(                     # doctest: +SKIP
        ...     [keras.callbacks.CSVLogger("log.csv"), keras.callbacks.EarlyStopping("loss")],
        ...     logs={"loss": loss}, steps_per_epoch=100, epochs=10, learning_rate=lr,
        ...     batch_size=features)
        >>> with tf.compat.v1.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        ...     while not sess.should_stop():
        ...         sess.run(train_op)
    """

    def __init__(
        self,
        callbacks: Any,
        *,
        logs: Mapping[str, Any],
        steps_per_epoch: int | None = None,
        validation_fn: Callable[[Any], Mapping[str, Any]] | None = None,
        learning_rate: Any = None,
        variables: Sequence[Any] | None = None,
        epochs: int | None = None,
        verbose: int = 1,
        metric_directions: Mapping[str, str] | None = None,
        optimizer: Any = None,
        batch_size: Any = None,
        mode: str = "auto",
        is_chief: bool | None = None,
        chief_only_callbacks: Sequence[Any] | None = None,
        log_reductions: Mapping[str, str] | None = None,
    ) -> None:
        self.callbacks = checks.check_callbacks(callbacks)
        cluster.check_cluster_args(is_chief, chief_only_callbacks)
        #: The callbacks this worker runs (all of them outside a cluster).
        self.active_callbacks = cluster.callbacks_here(
            self.callbacks, is_chief, chief_only_callbacks
        )
        if is_chief is not False:  # fit's own progress bar; a file writer: the chief's
            self.active_callbacks = dispatch.with_progbar(self.active_callbacks, verbose)
        self.is_chief = is_chief
        checks.check_args(logs, steps_per_epoch, validation_fn)
        self._logs = dict(logs)
        self._reductions = check_reductions(log_reductions, self._logs)
        check_batch_size(batch_size)
        checks.check_mode(mode, steps_per_epoch, validation_fn, epochs, is_chief)
        self._mode_arg = mode
        self._batch_size = batch_size
        self._steps_per_epoch = steps_per_epoch
        self._validation_fn = validation_fn
        self._state = GraphState(variables, learning_rate, metric_directions, optimizer)
        # one model for every callback that runs here
        self._model = ModelProxy(self._state, self.active_callbacks)
        checks.check_epochs(epochs)
        self._last_epoch, self.params = fit_params(epochs, steps_per_epoch, verbose)
        self._fit_params = dict(self.params)
        self._started = False
        self._shared: cluster.SharedRun | None = None

    # -- SessionRunHook ---------------------------------------------------------------------
    def begin(self) -> None:
        graph = tf.compat.v1.get_default_graph()
        self._sort_logs = dispatch.sorts_logs(self.active_callbacks)
        names, tensors = resolve(graph, self._logs, self._sort_logs)
        self._state.build(graph, names)
        lr = self._state.lr  # a fed placeholder: its value is taken from each run's feed_dict
        self._lr_fed = lr if lr is not None and lr.fed else None
        self._means = RunningMeans(names, self._reductions)
        self.mode = checks.resolve_mode(
            self._mode_arg, graph, self._steps_per_epoch, self._validation_fn
        )
        kind = EVENT_KIND[self.mode]
        self._training = kind == "train"
        self._global_step = tf.compat.v1.train.get_global_step(graph)
        self._reset_epochs()  # epochs.py
        self._started = False
        self._session_model = self._model.for_session()
        calls = self._calls = dispatch.Dispatcher(self.active_callbacks)
        self.params = dict(self._fit_params)
        if not self._training:  # as Keras's evaluate / predict
            self.params.update(epochs=1, steps=None)
        calls.configure(self.params, self._model_for)
        calls.select_batch_events(kind)
        self._batch_end = calls.batch_end_listened
        self._batch_logs = self._means.means
        self._plan_fetches(graph, kind, names, tensors)  # fetches.py

    def _model_for(self, callback: Any) -> Any:
        """The ``model`` a callback is given (``set_model``): one model for every callback, as
        Keras gives them (``History``'s ``model.history`` is seen by the others)."""
        return self._session_model

    def after_create_session(self, session: Any, coord: Any) -> None:
        self._state.session = session
        if self._sums is not None:
            if self._started and self._epoch_open and self._batch > self._epoch_first_batch:
                self._warn_sums_lost()
            self._sums.initialize(session)
        if self._shared is not None:
            self._shared.initialize(session, first=not self._started)
        if not self._started:  # the first session (a failure before _started: all again)
            if self._training:
                self._resume_from(session)  # epochs.py: epochs resume from the global step
            self._started = True  # a recovery does not begin training again
            self._calls.deliver(f"on_{EVENT_KIND[self.mode]}_begin", {})
        else:  # a recovered session: first what the error interrupted, then the shared step
            self._calls.finish_interrupted()
            if self._shared is not None and self._training:
                self._catch_up_after_recovery(session)  # cluster.py
        if self._training and self._finished():
            # resumed (or joined, or recovered) after the last epoch: nothing to train, as
            # fit(initial_epoch=epochs, epochs=epochs) trains no step
            coord.request_stop()

    def before_run(self, run_context: Any) -> Any:
        if self._lr_fed is not None:
            self._lr_fed.take_feed(run_context.original_args.feed_dict)
        if not self._epoch_open:
            self._epoch_open = True
            self._batch, self._resume_batch = self._resume_batch, 0
            self._epoch_first_batch = self._batch
            self._means.reset()
            self._calls.deliver("on_epoch_begin", self._epoch, {})
        calls = self._calls
        if calls.begin_on:
            calls.batch_begin(self._batch)
        return self._args

    def after_run(self, run_context: Any, run_values: Any) -> None:
        means = self._means
        results = run_values.results
        if self._shared is not None:
            if self._own:
                results, shared_values = results
            else:
                results, shared_values = None, results
            self._shared.take(shared_values)
        if self._add is None:
            means.count += 1
        else:
            self._add(results)
        if self._session_model._hb_counters is not None:  # read by a tf_keras TensorBoard
            self._session_model._hb_count_run(self.mode)
        calls = self._calls
        if calls.end_on:
            calls.batch_end(self._batch, self._batch_logs())
        self._batch += 1
        if self._shared is not None:
            self._after_shared_run(run_context)
            return
        if self._steps_per_epoch is not None and self._batch >= self._steps_per_epoch:
            self._end_epoch()
            if self._last_epoch is not None and self._epoch >= self._last_epoch:
                run_context.request_stop()  # as fit: `epochs` epochs, then the end
        if self._state.stop_training and self._training:
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self._state.session = session
        if not self._training:
            self._end_evaluate_or_predict(session)
            return
        self._close_last_epoch()  # epochs.py
        self._calls.call("on_train_end", self._epoch_logs)
        # What callbacks wrote at the final step reaches that step's checkpoint (persist.py).
        persist.resave_final_checkpoint(self._state, session)

    # -- evaluate / predict -----------------------------------------------------------------------
    def _end_evaluate_or_predict(self, session: Any) -> None:
        if self.mode == "predict":
            self._calls.call("on_predict_end", {})
            return
        if self._sums is not None:
            self._sums.take(session, self._means)
        self._calls.call("on_test_end", self._means.means())
