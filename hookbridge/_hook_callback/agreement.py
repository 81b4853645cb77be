"""Stops agreed across the workers of a MultiWorkerMirroredStrategy ``fit``.

Under ``MultiWorkerMirroredStrategy`` every worker runs the same Keras step in lockstep: each step
ends in collectives (the gradients' all-reduce) that wait for every worker. A worker whose hooks
stop it alone (``request_stop()``, a coordinator stop, a hook that raised) would leave the others
waiting in their next collective for ever. So, after each training step's hooks, every worker
contributes what it wants to ONE small collective (a sum of a few floats per worker), and all of
them act on the same answer: if any worker wants to stop, every worker stops after that step.

That round costs a collective's latency per step, so it runs only where it is needed: at the
start of a ``fit`` (:meth:`StopAgreement.start`) the workers also exchange whether any of them
holds something that could stop it alone, and the fingerprints of their hooks that decide
alike on every worker (``deciders.py``). When nothing can, and every worker runs the same
deciders, every worker stops on its own at the step its hooks ask, and no step has a round.

Single-worker runs never build a ``StopAgreement``: no collective, no per-step cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

#: What a worker contributes after a step (one slot per worker; the sum gives each worker's).
CONTINUE, STOP, FAILED = 0, 1, 2
#: Floats each worker contributes to a round: its code, whether something could stop it alone,
#: and the fingerprint of its alike deciders (the last two at the start round only).
_VALUES = 3


def _task_names(resolver: Any) -> list[str]:
    """The cluster's training tasks in a fixed order (``chief`` first, then ``worker``s), as
    ``"job:index"``; every worker computes the same list from the same ``TF_CONFIG``."""
    spec = resolver.cluster_spec()
    return [
        f"{job}:{index}"
        for job in ("chief", "worker")
        if job in spec.jobs
        for index in range(spec.num_tasks(job))
    ]


class StopAgreement:
    """One collective per training step deciding, for every worker alike, whether to stop.

    Built once per ``fit`` (its ``tf.function`` is traced at the first ``agree``, at the start of
    the run, on every worker in the same order, so the workers' collectives match).

    Args:
        strategy: the ``tf.distribute.MultiWorkerMirroredStrategy`` the model was built under.
        tasks: every training task's name, in the same order on every worker.
        index: this worker's position in ``tasks``.
    """

    def __init__(self, strategy: Any, tasks: Sequence[str], index: int) -> None:
        self.tasks = list(tasks)
        self.index = index
        self.name = self.tasks[index]
        #: Whether every training step has a round (decided by :meth:`start`).
        self.every_step = True
        width = len(self.tasks) * _VALUES
        self._start = index * _VALUES  # this worker's slots

        @tf.function(input_signature=[tf.TensorSpec([width], tf.float32)], autograph=False)
        def reduce_sum(flags: tf.Tensor) -> tf.Tensor:
            # A value that is not per-replica is reduced once per worker, across workers.
            return strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)

        self._reduce = reduce_sum

    @classmethod
    def for_model(cls, model: Any) -> StopAgreement | None:
        """The agreement for ``model``'s strategy: only under an eager
        ``MultiWorkerMirroredStrategy`` with more than one worker, else None."""
        strategy = getattr(model, "distribute_strategy", None)
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            return None
        if not tf.executing_eagerly():
            return None
        resolver = strategy.cluster_resolver
        tasks = _task_names(resolver)
        if len(tasks) < 2:
            return None
        own = f"{resolver.task_type}:{int(resolver.task_id or 0)}"
        if own not in tasks:
            return None
        return cls(strategy, tasks, tasks.index(own))

    def _exchange(self, values: Sequence[float]) -> list[list[int]]:
        """Every worker's ``values`` (``_VALUES`` small integers), in ``tasks`` order: one
        collective, which blocks until every worker has contributed."""
        flags = [0.0] * (len(self.tasks) * _VALUES)
        flags[self._start : self._start + _VALUES] = values
        total = [round(v) for v in self._reduce(tf.constant(flags, tf.float32)).numpy().tolist()]
        return [total[i : i + _VALUES] for i in range(0, len(total), _VALUES)]

    def agree(self, code: int) -> list[int]:
        """Contributes this worker's ``code`` (CONTINUE, STOP or FAILED) and returns every
        worker's, in ``tasks`` order. Blocks until every worker has contributed."""
        return [values[0] for values in self._exchange([code, 0, 0])]

    def start(self, code: int, alone: bool = False, fingerprint: int = 0) -> list[int]:
        """The round at the start of a ``fit`` (also the one a worker whose hooks failed to
        start joins, with ``FAILED``): every worker's code, as :meth:`agree`. Sets
        :attr:`every_step`: whether some worker holds something that could stop it alone, or
        the workers' alike deciders differ (``deciders.stop_profile``)."""
        got = self._exchange([code, int(alone), fingerprint])
        self.every_step = any(a for _, a, _ in got) or len({f for _, _, f in got}) > 1
        return [c for c, _, _ in got]

    def others(self, codes: Sequence[int], code: int) -> list[str]:
        """The names of the other workers whose code is ``code``."""
        return [
            name
            for i, (name, c) in enumerate(zip(self.tasks, codes))
            if c == code and i != self.index
        ]
