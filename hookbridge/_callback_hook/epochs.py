"""The epochs CallbackHook synthesizes, as ``fit`` has them: ``fit``'s ``params``, where training
resumes, how an epoch closes (its means, ``fit``'s validation, ``on_epoch_end``), and the epochs
it must not close.

:class:`Epochs` is a part of :class:`~hookbridge._callback_hook.hook.CallbackHook` (a mixin): it
owns the hook's epoch state, reset in ``begin`` (:meth:`Epochs._reset_epochs`): ``_epoch`` (the
open or next epoch), ``_epoch_open``, ``_batch`` / ``_epoch_first_batch`` / ``_resume_batch``,
``_epoch_logs`` (the last closed epoch's); it reads ``_last_epoch`` (``epochs`` when training
ends after it, from :func:`fit_params`), and calls the callbacks through ``_calls`` (the one
dispatcher).

An epoch is begun or closed once, whatever the moment a session error comes: the state says
so before the callbacks are told (``on_epoch_begin`` / ``on_epoch_end`` are delivered with
``Dispatcher.deliver``, finished in the recovered session if an error interrupts them).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from hookbridge._callback_hook.args import to_float


def fit_params(
    epochs: int | None, steps_per_epoch: int | None, verbose: int
) -> tuple[int | None, dict[str, Any]]:
    """``fit``'s ``params`` from CallbackHook's arguments, and the epoch after which training
    ends (``None``: no end). As ``fit``: with ``steps_per_epoch`` and ``epochs`` both given,
    training ends after ``epochs``."""
    last_epoch = epochs if steps_per_epoch is not None and epochs else None
    if epochs is None:
        epochs = 1 if steps_per_epoch is None else 0
    return last_epoch, {"epochs": epochs, "steps": steps_per_epoch, "verbose": verbose}


class Epochs:
    """Epoch bookkeeping of CallbackHook (see the module docstring for the state it uses)."""

    _calls: Any
    _state: Any
    _sort_logs: bool

    def _reset_epochs(self) -> None:
        """The epoch state of a new session (``begin``): evaluate / predict have no epochs
        (their one run of batches is open from the start)."""
        self._epoch = 0
        self._batch = 0
        self._resume_batch = 0
        self._epoch_open = not self._training  # evaluate / predict: no epochs
        self._epoch_first_batch = 0
        self._epoch_logs: dict = {}

    def _resume_from(self, session: Any) -> None:
        """Continues the epoch count of a restored run: epoch = global step // steps_per_epoch.

        A MonitoredTrainingSession with ``checkpoint_dir`` restores the global step, so epochs
        (ModelCheckpoint's ``{epoch}``, CSVLogger rows) continue instead of restarting at 0; a
        run restored mid-epoch finishes that epoch at its usual boundary.
        """
        if self._global_step is None or self._steps_per_epoch is None:
            return
        step = int(session.run(self._global_step))
        self._epoch, self._resume_batch = divmod(step, self._steps_per_epoch)
        if self._shared is not None:  # in a cluster, batches count this worker's own runs
            self._resume_batch = 0
            self._shared.step = step

    def _validate(self) -> dict[str, float]:
        """``validation_fn`` as ``fit``'s validation: one test batch between ``on_test_begin``
        and ``on_test_end`` (its logs without the ``val_`` prefix, as Keras's)."""
        calls = self._calls
        calls.call("on_test_begin", {})
        calls.call("on_test_batch_begin", 0, {})
        results = self._validation_fn(self._state.session)
        if not isinstance(results, Mapping):
            raise TypeError(
                "CallbackHook: validation_fn must return a dict of name -> value, received "
                f"{results!r} of type {type(results).__name__}."
            )
        items = sorted(results.items()) if self._sort_logs else results.items()
        logs = {name: to_float(name, value) for name, value in items}
        calls.call("on_test_batch_end", 0, dict(logs))
        calls.call("on_test_end", dict(logs))
        return logs

    def _drop_empty_epoch(self) -> None:
        """The input ended (or a stop came) before the first step of the epoch just begun.

        ``fit`` would not have begun it: it is not closed (no validation, no ``on_epoch_end``,
        no History entry or CSV row) and ``on_train_end`` gets the last closed epoch's logs.
        ``on_epoch_begin`` (and the batch's ``on_train_batch_begin``) ran already, since a hook
        cannot know before a run that its input is exhausted: say so when someone listened.
        """
        self._epoch_open = False
        if self._epoch > 0 and self._calls.listens("on_epoch_begin", "on_train_batch_begin"):
            warnings.warn(
                f"CallbackHook: the input ended before the first step of epoch {self._epoch}, "
                f"after on_epoch_begin({self._epoch}) had been called (a hook cannot know "
                "before a run that the input is exhausted). The epoch is not closed, as fit "
                "would not have begun it. Pass epochs= (with steps_per_epoch=) to end "
                "training after the last epoch, as fit does.",
                stacklevel=2,
            )

    def _close_last_epoch(self) -> None:
        """At the end of training: the open epoch closes if it had a step, else it is
        dropped (:meth:`_drop_empty_epoch`)."""
        if self._epoch_open:
            if self._batch > self._epoch_first_batch:
                self._end_epoch()
            else:
                self._drop_empty_epoch()

    def _end_epoch(self) -> None:
        if self._sums is not None:
            self._sums.take(self._state.session, self._means)
        logs = self._means.means()
        if self._validation_fn is not None:
            for name, value in self._validate().items():
                logs[f"val_{name}"] = value
            if self._sort_logs:  # Keras 3; tf_keras / Keras 2: compile order, val_* after
                logs = dict(sorted(logs.items()))
        # The epoch is closed before the callbacks hear of it: a session error MonitoredSession
        # recovers from, raised by a callback (its read of the model on a lost parameter
        # server), must not leave it open to be closed again by the retried run; the callbacks
        # the error kept from on_epoch_end get it in the new session (Dispatcher.deliver).
        epoch = self._epoch
        self._epoch_logs = logs
        self._epoch_open = False
        self._epoch += 1
        # Callbacks get a copy (as Keras's CallbackList), so one adding e.g. "lr" to it does not
        # change the logs on_train_end receives.
        self._calls.deliver("on_epoch_end", epoch, dict(logs))

    def _finished(self) -> bool:
        """Whether the epoch count reached ``epochs`` (with ``steps_per_epoch``)."""
        return self._last_epoch is not None and self._epoch >= self._last_epoch

    def _warn_sums_lost(self) -> None:
        """A session recovery with the epoch's sums kept in the graph: they were lost with the
        failed session. Said, not silent: the epoch's logs will average the later runs only."""
        warnings.warn(
            f"CallbackHook: the session was recovered (AbortedError / UnavailableError) in the "
            f"middle of epoch {self._epoch}; its logs were summed in the graph (no callback "
            "reads batch logs) and those sums were lost with the failed session, so the "
            "epoch's logs average only the runs after the recovery. Pass is_chief= on the "
            "workers of a cluster (the values are then fetched with each run), or add a "
            "callback with on_train_batch_end to keep every run's values.",
            stacklevel=3,
        )
