"""The single-worker half of :class:`~hookbridge._hook_callback.callback.HookCallback`: one
:class:`~hookbridge._hook_callback.run.BridgeRun` per Keras ``fit`` / ``evaluate`` / ``predict``.

A run starts at the Keras mode's begin (hooks built, every ``begin()`` and
``after_create_session``; under a multi-worker stop agreement, the start round of
:class:`~hookbridge._hook_callback.workers.AgreedSteps`), runs each step's ``before_run`` /
``after_run`` around the Keras step, stops Keras after a step whose hooks asked to stop, and
ends (every ``end()``) at the mode's end. A hook raising end of input ends the hooks at once: Keras
stops after that step, and an error an ``end()`` raised is raised at the mode's end, as
``MonitoredSession.close()`` raises it.
"""

from __future__ import annotations

from hookbridge._exact import CURRENT as EXACT_VALUES
from hookbridge._exact import current as exact_values
from hookbridge._hook_callback.agreement import FAILED, StopAgreement
from hookbridge._hook_callback.keras_access import KerasAccess
from hookbridge._hook_callback.run import BridgeRun
from hookbridge._hook_callback.step import warn_steps_per_execution
from hookbridge._hook_callback.workers import (
    hooks_for,
    is_chief,
    warn_file_writers,
    warn_multi_worker,
    worker_name,
)


class RunLifecycle:
    """Mixed into :class:`~hookbridge._hook_callback.callback.HookCallback`, whose state
    (``_run``, ``_deferred``, ``_agreement``, ``_step_error``, ``_keras``, the arguments) and
    ``close`` it uses; its Keras entry points call these inside the exception boundary."""

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
        warn_multi_worker(model, mode, agreement is not None)
        try:
            # held from its creation, so that an error from here on closes it (_abandon)
            self._keras = access = KerasAccess(model)
            steps = (self.params or {}).get("steps")
            self._run = run = BridgeRun.for_model(mode, model, access, self._log_names, steps)
            hooks = hooks_for(model, self._make_chief_hooks, self._make_hooks)
            run.start(hooks, self._session_config, self._profile_dir, self._scaffold)
        except BaseException:
            if agreement is not None:  # tell the others, so that none starts its first step
                agreement.start(FAILED)
            raise
        if agreement is not None:
            self._agree_start(agreement, run)
        self._stop_rounds = agreement is not None and agreement.every_step
        self._hooks = run.hooks
        # Without a round per step, every worker stops on its own (deciders.py): the plain steps.
        self._agreement = agreement if self._stop_rounds else None
        if not self._warned_writers and not is_chief(model):
            self._warned_writers = warn_file_writers(run.hooks, worker_name(model))

    def _before(self, batch: int) -> None:
        run = self._run
        if run.before(batch):  # a hook raised end of input: the hooks have ended
            self._ended(run)

    def _after(self, batch: int, logs: dict | None) -> None:
        run = self._run
        if batch > run.begin_batch and not self._warned_spe and run.mode == "train":
            self._warned_spe = True
            warn_steps_per_execution(batch - run.begin_batch + 1)
        exact = exact_values(self.model) if EXACT_VALUES else None  # a custom loop's step
        stop = run.after(batch, logs or {}, exact)
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
