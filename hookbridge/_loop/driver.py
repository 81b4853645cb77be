"""``CallbackLoop``: ``fit``'s callback events around a custom training loop.

The loop is the user's; the events, their order and the logs are ``fit``'s. The callbacks are
called through Keras's own ``CallbackList`` (``keras.callbacks.CallbackList``), as ``fit`` calls
them, so what it decides (which batch methods run, ``History``, the progress bar, tf_keras's
slow-callback warning) is Keras's own. The lifecycle, as ``fit`` runs it::

    on_train_begin
    for epoch in range(initial_epoch, epochs):
        (metrics reset) on_epoch_begin(epoch)
        for each step:  on_train_batch_begin(step); the user's step; on_train_batch_end(step, logs)
                        stop after this step if model.stop_training
        validation:     on_test_begin; per batch on_test_batch_begin/end; on_test_end(val logs)
        on_epoch_end(epoch, logs + val_*);  stop if model.stop_training
    on_train_end(last epoch logs)            (not after an exception, as fit)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _exact
from hookbridge._loop import data as _data
from hookbridge._loop.data import KERAS3
from hookbridge._loop.keras2 import TEST, TRAIN, FitState
from hookbridge._loop.logs import EpochLogs
from hookbridge._loop.schedule import fit_start, validates, validation_freq_arg

keras = tf.keras



class CallbackLoop:
    """Runs Keras callbacks (and, through ``HookCallback``, TF1 hooks) around a custom loop.

    ``fit``'s events, in ``fit``'s order, with the logs ``fit`` would give: each key a step
    returns is reported as its running mean over the epoch, each batch weighted by its sample
    count (a ``keras.metrics.Metric`` returned as a value is reported by its ``result()``); the
    epoch's logs are those values at its end, with ``val_*`` from the validation. Stops after
    the step (or epoch) at which a callback sets ``model.stop_training``.

    Args:
        model: the Keras model the callbacks see as ``self.model`` (its ``stop_training``,
            weights, ``optimizer``; for ``HookCallback``, ``optimizer.iterations`` is the global
            step). Several optimizers: give the model the ``optimizer`` that counts the steps.
        callbacks: Keras callbacks, built-in, third-party or ``HookCallback``.
        data: the training data (an iterable of batches, e.g. a ``tf.data.Dataset``), which
            :meth:`steps` reads when called without any. Given here, its size (when it can be
            known without reading it) is the callbacks' ``params["steps"]``, as in ``fit``
            (the progress bar's target).
        epochs: index of the epoch to stop at, as ``fit(epochs=...)``.
        steps_per_epoch: steps per epoch; ``None`` runs each epoch to the end of the data.
        initial_epoch: the epoch to start at (a resumed run), as ``fit(initial_epoch=...)``. A
            ``BackupAndRestore`` among the callbacks that restores a backup sets it (and, on
            tf_keras / Keras 2 after a mid-epoch backup, the step to resume at) as in ``fit``.
        verbose: 0 silent, 1 progress bar, 2 a line per epoch (``fit``'s ``ProgbarLogger``).
        validation_data: data for the validation at each epoch's end (an iterable of batches).
        validation_step: function of a validation batch returning a dict of scalars (or
            metrics); required with ``validation_data``.
        validation_steps: at most this many validation batches.
        validation_freq: as ``fit``: an int validates every ``validation_freq`` epochs, a list
            (or other collection) of epochs (counted from 1) validates after those.
        metrics: ``keras.metrics.Metric`` objects the steps update (a ``tf.function`` cannot
            return one): reported by ``result()`` after the step's own keys, under their
            ``name``, reset when an epoch and when the validation begin, as ``fit`` does with
            the model's metrics (the validation reports them as ``val_<name>``).
        steps_per_execution: steps per call of the user's step function, as
            ``compile(steps_per_execution=...)``: :meth:`steps` gives a list of up to this many
            batches per call (fewer where the data ends), one batch begin and end per call.
            The running means then weigh the call's values once, by all its samples: for exact
            epoch values, update ``metrics=`` inside the step, as ``fit`` does.
        optimizer: the optimizer the callbacks see as ``model.optimizer`` while the loop runs
            (restored after): its ``iterations`` is ``HookCallback``'s global step and
            TensorBoard's step, its ``learning_rate`` what ``ReduceLROnPlateau`` and
            ``LearningRateScheduler`` set. Default: ``model.optimizer``. With several
            optimizers, the one that counts one step per step (a GAN's generator optimizer,
            as TF1's ``minimize(global_step=...)`` named one).

    Example:
        ```python
        loop = hookbridge.CallbackLoop(model, [EarlyStopping("loss"), CSVLogger("log.csv")],
                                       epochs=10)
        with loop:
            for epoch in loop.epochs():
                for batch in loop.steps(dataset):
                    loop.step_end(train_step(batch))  # {"loss": ..., "acc": ...}
        history = loop.history
        ```

    Not forwarded: ``fit``'s data handling (shuffling, ``class_weight``, ``sample_weight``):
    the loop is the user's. See ``docs/custom-loops.md``.
    """

    def __init__(
        self,
        model: Any,
        callbacks: Sequence[Any] | None = None,
        *,
        data: Iterable[Any] | None = None,
        epochs: int = 1,
        steps_per_epoch: int | None = None,
        initial_epoch: int = 0,
        verbose: int = 0,
        validation_data: Iterable[Any] | None = None,
        validation_step: Callable[[Any], Mapping[str, Any]] | None = None,
        validation_steps: int | None = None,
        validation_freq: int | Collection[int] = 1,
        metrics: Sequence[Any] = (),
        steps_per_execution: int = 1,
        optimizer: Any = None,
    ) -> None:
        if model is None or not hasattr(model, "get_weights"):
            raise TypeError(
                f"CallbackLoop(model=...) needs the Keras model the callbacks act on, got "
                f"{type(model).__name__}. Pass your keras.Model (it need not be compiled)."
            )
        if (validation_data is None) != (validation_step is None):
            raise ValueError(
                "CallbackLoop: validation_data= and validation_step= go together: the step "
                "function computes the validation logs of each validation batch."
            )
        for name, value in (("epochs", epochs), ("initial_epoch", initial_epoch)):
            if int(value) != value or value < 0:
                raise ValueError(f"CallbackLoop: {name}={value!r} must be an integer >= 0.")
        if steps_per_epoch is not None and (int(steps_per_epoch) != steps_per_epoch
                                            or steps_per_epoch < 1):
            raise ValueError(
                f"CallbackLoop: steps_per_epoch={steps_per_epoch!r} must be a positive integer "
                "or None (each epoch runs to the end of the data)."
            )
        self.model = model
        self.epochs_total = int(epochs)
        self.steps_per_epoch = steps_per_epoch
        self.initial_epoch = int(initial_epoch)
        self.validation_data = validation_data
        self.validation_step = validation_step
        self.validation_steps = validation_steps
        self.validation_freq = validation_freq_arg(validation_freq)
        if int(steps_per_execution) != steps_per_execution or steps_per_execution < 1:
            raise ValueError(
                f"CallbackLoop: steps_per_execution={steps_per_execution!r} must be an "
                "integer >= 1."
            )
        self.steps_per_execution = int(steps_per_execution)
        self._execution = 1  # steps in the execution steps() gave last
        if optimizer is not None and not hasattr(optimizer, "iterations"):
            raise TypeError(
                f"CallbackLoop(optimizer=...) takes a Keras optimizer, got "
                f"{type(optimizer).__name__}."
            )
        self._optimizer, self._saved_optimizer = optimizer, None
        self.callbacks = keras.callbacks.CallbackList(
            list(callbacks or ()), add_history=True, add_progbar=verbose != 0, model=model,
            verbose=verbose, epochs=self.epochs_total,
            steps=steps_per_epoch or (None if data is None else _data.known_batches(data, None)),
        )
        self._fit_state = FitState(model, self.callbacks.callbacks)  # tf_keras's counters
        self.data = data
        self._train_logs = EpochLogs(metrics)
        self._val_logs = EpochLogs(metrics)
        self._state = "new"  # new -> training -> ended
        self._epoch: int | None = None  # the open epoch
        self._step = 0  # the next step's index in the epoch
        self._awaiting_end = False  # a step began (on_train_batch_begin) and has not ended
        self._last_logs: dict[str, float] = {}
        self._training_logs: dict[str, float] | None = None
        self._batch_size: int | None = None
        self._feed = _data.Feed(steps_per_epoch)  # the epochs' iterator, when the data ends
        self._first_epoch, self._first_step = self.initial_epoch, 0  # once a backup is read
        self._epoch_limit: int | None = None  # the resumed epoch's size (tf_keras, mid-epoch)
        self._resumed_limit: int | None = None  # the size fit infers for it
        self._driving = contextlib.ExitStack()  # the run declared to HookCallback (_exact)

    # -- the training ------------------------------------------------------------------------
    def __enter__(self) -> CallbackLoop:
        if self._state != "new":
            raise RuntimeError("CallbackLoop: a loop runs once; make a new CallbackLoop.")
        self._state = "training"
        # HookCallback takes the validation's on_test_* as fit's (its training hooks go on) and
        # a predict from a callback as inside fit, as long as the loop runs, exception or not
        self._driving = contextlib.ExitStack()
        self._driving.enter_context(_exact.driving(self.model))
        if self._optimizer is not None:
            self._saved_optimizer = getattr(self.model, "optimizer", _data.END)
            self.model.optimizer = self._optimizer
        try:
            self.model.stop_training = False
            self._fit_state.reset(TRAIN)
            self.callbacks.on_train_begin()
            known = None if self.data is None else _data.known_batches(self.data, None)
            self._resumed_limit = self.steps_per_epoch or known  # tf_keras's inferred steps
            self._first_epoch, self._first_step = fit_start(
                self.model, self._resumed_limit, self.initial_epoch
            )
        except BaseException as error:  # no `with` block to leave: left as by an exception
            self.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._state != "training":
            return
        self._state = "ended"
        try:
            if exc_type is not None:  # as fit: the exception propagates, no on_train_end
                return
            if self._epoch is not None:  # the user left the epoch's body early (break)
                self._end_epoch()
            self.callbacks.on_train_end(logs=self._training_logs)
        finally:
            self._driving.close()
            if self._optimizer is not None:
                if self._saved_optimizer is _data.END:
                    del self.model.optimizer
                else:
                    self.model.optimizer = self._saved_optimizer

    @property
    def history(self) -> Any:
        """The ``History`` callback of the run (``fit``'s return value)."""
        return next(
            cb for cb in self.callbacks.callbacks if isinstance(cb, keras.callbacks.History)
        )

    def epochs(self) -> Iterator[int]:
        """The epochs to run, ``initial_epoch`` to ``epochs - 1``; stops when a callback asks."""
        self._require("epochs()", "training")
        for epoch in range(self._first_epoch, self.epochs_total):
            self._train_logs.reset()
            first = epoch == self._first_epoch  # a resumed epoch's steps go on from its backup
            self._epoch, self._step, self._last_logs = epoch, self._first_step if first else 0, {}
            self._epoch_limit = self._resumed_limit if first and self._first_step else None
            self.callbacks.on_epoch_begin(epoch)
            yield epoch
            if self._epoch is not None:
                self._end_epoch()
            if self.model.stop_training or self._feed.insufficient:
                return

    def steps(self, data: Iterable[Any] | None = None) -> Iterator[Any]:
        """The epoch's steps: each batch of ``data`` (default: the loop's ``data=``; the step
        index when there is none).

        ``on_train_batch_begin`` is called before each is given; :meth:`step_end` must follow.
        With ``steps_per_epoch`` the data's iterator carries over to the next epoch, as in ``fit``.
        """
        self._require("steps()", "training")
        if self._epoch is None:
            raise RuntimeError("CallbackLoop.steps() runs inside `for epoch in loop.epochs():`.")
        if data is None:
            data = self.data
        if data is None and self.steps_per_epoch is None:
            raise ValueError(
                "CallbackLoop.steps() without data needs steps_per_epoch= (how many steps an "
                "epoch has); or pass the dataset: CallbackLoop(data=...) or loop.steps(dataset)."
            )
        feed, left = self._feed, self.epochs_total - self._first_epoch  # left: tf_keras's message
        iterator = feed.epoch_iterator(data)
        known = None if data is None else _data.known_batches(data, feed.learned_batches)
        # Which comes first, on_train_batch_begin or reading the batch, is Keras's: Keras 3 stops
        # before the begin when it knows the data's size; tf_keras / Keras 2 read the batch in
        # the train function, after the begin, unless the size sets the epoch's steps.
        read_first = known is not None and (KERAS3 or self.steps_per_epoch is None)
        k = self.steps_per_execution
        limit = self.steps_per_epoch if self._epoch_limit is None else self._epoch_limit
        while limit is None or self._step < limit:
            wanted = k if limit is None else min(k, limit - self._step)
            batches: list[Any] = []
            if iterator is not None and read_first:
                batches = feed.take(iterator, wanted)
                if not batches:
                    return feed.ran_out(began=False, step=self._step, epochs=left)
            self.callbacks.on_train_batch_begin(self._step)
            if iterator is not None and not read_first:
                batches = feed.take(iterator, wanted)
                if not batches:
                    return feed.ran_out(began=True, step=self._step, epochs=left)
            if iterator is None:
                given: Any = self._step
                self._batch_size, self._execution = None, wanted
            else:
                given = batches if k > 1 else batches[0]
                sizes = [_data.batch_size(b) for b in batches]
                self._batch_size = None if None in sizes else sum(sizes)  # type: ignore[arg-type]
                self._execution = len(batches)
            self._awaiting_end = True
            yield given
            if self._awaiting_end:
                raise RuntimeError(
                    f"CallbackLoop: step {self._step} of epoch {self._epoch} ended without "
                    "loop.step_end(logs): call it once per step with the step's logs."
                )
            if self.model.stop_training:  # as fit: checked after each step's end only
                return

    def step_end(
        self, logs: Mapping[str, Any], *, batch_size: int | None = None, steps: int | None = None
    ) -> dict[str, float]:
        """Ends the step: ``on_train_batch_end`` with the logs ``fit`` would give.

        Args:
            logs: the step function's dict of scalars (tensors or numbers) or metrics.
            batch_size: the step's sample count (default: the first dimension of the batch
                :meth:`steps` gave; 1 without one), the weight of its values in the epoch means.
            steps: steps this call ran (default: the batches :meth:`steps` gave, or
                ``steps_per_execution`` without data); the batch index reported is the last
                one's as each stack's ``fit`` reports it (Keras 3: the execution's full width).

        Returns:
            The logs given to the callbacks.
        """
        self._require("step_end()", "training")
        if not self._awaiting_end:
            raise RuntimeError(
                "CallbackLoop.step_end() ends a step that loop.steps() began: call it once "
                "inside `for batch in loop.steps(data):`."
            )
        self._awaiting_end = False
        size = batch_size if batch_size is not None else self._batch_size
        self._last_logs = self._train_logs.add(logs, size)
        ran = self._execution if steps is None else int(steps)
        # Keras 3 reports an execution's last index as begin + steps_per_execution - 1 even
        # when the data ended inside it; tf_keras / Keras 2 report the last step run.
        end = self._step + (self.steps_per_execution if KERAS3 and ran > 0 else ran) - 1
        self._step += ran
        self._fit_state.count(TRAIN, ran)
        self._fit_state.running_means(self._last_logs)
        with _exact.publishing(self.model, self._train_logs.raw):  # HookCallback's loss:0
            self.callbacks.on_train_batch_end(end, dict(self._last_logs))
        return self._last_logs

    # -- inside -----------------------------------------------------------------------------
    def _require(self, what: str, state: str) -> None:
        if self._state != state:
            raise RuntimeError(
                f"CallbackLoop.{what} runs inside `with loop:` (on_train_begin ... "
                f"on_train_end); the loop is {self._state}."
            )

    def _end_epoch(self) -> None:
        epoch, self._epoch = self._epoch, None
        if self._awaiting_end:  # left mid-step (break): that step never ended
            self._awaiting_end = False
        logs = self._train_logs.result() if self._last_logs else {}
        if self.validation_data is not None and validates(self.validation_freq, epoch):
            logs.update({f"val_{k}": v for k, v in self._validate().items()})
        self.callbacks.on_epoch_end(epoch, logs)
        self._training_logs = logs

    def _validate(self) -> dict[str, float]:
        assert self.validation_step is not None and self.validation_data is not None
        self._val_logs.reset()
        self._fit_state.reset(TEST)
        self.callbacks.on_test_begin()
        logs: dict[str, float] = {}
        for step, batch in enumerate(self.validation_data):
            if self.validation_steps is not None and step >= self.validation_steps:
                break
            self.callbacks.on_test_batch_begin(step)
            logs = self._val_logs.add(self.validation_step(batch), _data.batch_size(batch))
            self._fit_state.count(TEST, 1)
            self.callbacks.on_test_batch_end(step, dict(logs))
        logs = self._val_logs.result() if logs else {}
        self.callbacks.on_test_end(dict(logs))
        return logs

