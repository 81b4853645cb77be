"""HookCallback under a multi-worker strategy: which hooks a worker runs, and agreed stops.

Under ``MultiWorkerMirroredStrategy`` every step waits for every worker, so a worker whose hooks
stop (or raise) alone would leave the others waiting in their next collective. The workers agree:
after each training step's hooks, one small collective (``agreement.py``) tells every worker
whether any of them wants to stop, and every worker stops after that same step.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from hookbridge import _tfcompat
from hookbridge._hook_callback.agreement import CONTINUE, FAILED, STOP, StopAgreement
from hookbridge._hook_callback.deciders import callbacks_before, stop_profile
from hookbridge._hook_callback.run import BridgeRun


def is_chief(model: Any) -> bool:
    """Whether this process is the chief of the model's distribution strategy (the one that
    checkpoints, as ``MonitoredTrainingSession(is_chief=...)``); True without a strategy."""
    strategy = getattr(model, "distribute_strategy", None)
    extended = getattr(strategy, "extended", None)
    return bool(getattr(extended, "should_checkpoint", True))


def hooks_for(model: Any, make_chief: Callable[[], list], make: Callable[[], list]) -> Callable:
    """As ``MonitoredTrainingSession``: on the chief, the chief-only hooks first, then the
    others; on any other worker, the others only."""
    if not is_chief(model):
        return make
    return lambda: [*make_chief(), *make()]


def worker_name(model: Any) -> str:
    """This worker's ``"job:index"`` in the model's multi-worker strategy."""
    resolver = model.distribute_strategy.cluster_resolver
    return f"{resolver.task_type}:{int(resolver.task_id or 0)}"


def warn_file_writers(hooks: Sequence[Any], worker: str) -> bool:
    """Warns once about the file-writing hooks (``CheckpointSaverHook``, ``SummarySaverHook``,
    ``StepCounterHook`` with an ``output_dir``, ``ProfilerHook``) among ``hooks``, which run on
    ``worker``, a worker that is not the chief: every worker writes the same files. Returns
    whether it warned (the caller warns once per HookCallback)."""
    writers = [(h, d) for h in hooks if (d := _tfcompat.hook_output_dir(h))]
    if not writers:
        return False
    named = ", ".join(f"{type(h).__name__} (writing to {d!r})" for h, d in writers)
    warnings.warn(
        f"HookCallback: {named} in hooks= run on {worker}, which is not the chief of this "
        "multi-worker strategy: every worker writes the same files there. Pass file-writing "
        "hooks as chief_only_hooks= (HookCallback(hooks, chief_only_hooks=[...])), as "
        "MonitoredTrainingSession runs them on the chief only (docs/distributed.md).",
        stacklevel=4,
    )
    return True


def _worker_count(model: Any) -> int:
    """How many workers (chief included) the model's distribution strategy trains on: 1 unless
    it is a multi-worker strategy with a cluster."""
    resolver = getattr(getattr(model, "distribute_strategy", None), "cluster_resolver", None)
    if resolver is None:
        return 1
    spec = resolver.cluster_spec()
    return max(1, sum(spec.num_tasks(job) for job in ("chief", "worker") if job in spec.jobs))


def warn_multi_worker(model: Any, mode: str, agreed: bool) -> None:
    workers = _worker_count(model)
    if workers <= 1:
        return
    if agreed:
        stops = (
            "Stops are agreed: after each training step the workers share, in one collective, "
            "whether any wants to stop (a hook's request_stop(), a coordinator stop, a hook "
            "that raised), and every worker stops after that same step (no step has that "
            "collective when every worker's hooks decide alike, e.g. StopAtStepHook)"
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


class AgreedSteps:
    """The multi-worker half of HookCallback: its training steps under a stop agreement.

    Mixed into :class:`~hookbridge._hook_callback.callback.HookCallback`, whose state
    (``_run``, ``_agreement``, ``_step_error``, ``_deferred``, ``_keras``) and single-worker
    steps (``_before`` / ``_after``, in :mod:`~hookbridge._hook_callback.lifecycle`) it uses.
    """

    def _agree_start(self, agreement: StopAgreement, run: BridgeRun) -> None:
        """Whether every worker's hooks started: if one worker's ``begin`` or
        ``after_create_session`` raised, every worker's ``fit`` raises before its first step
        (a step would wait in its collectives for the failed worker for ever). The same round
        decides whether the steps need rounds at all (``deciders.py``)."""
        callbacks = callbacks_before(self.model, self)
        side = run.side  # its log tensors hold values reduced across workers: alike on each
        logged = [t.name for t in (*side.log_tensors.values(), *side.mean_tensors.values())]
        alone, fingerprint = stop_profile(run.hooks, callbacks, logged)
        codes = agreement.start(CONTINUE, alone, fingerprint)
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
            run.close()  # as the boundary would; kept, so that fit's validation starts no run
            self._step_error = error
            self._run = run

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
                run.close()  # as the boundary would; kept, so that fit's validation starts none
                error = e
                self._run = run
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
