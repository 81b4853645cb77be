"""Stops agreed across the workers of a MultiWorkerMirroredStrategy ``fit``.

Under ``MultiWorkerMirroredStrategy`` every worker runs the same Keras step in lockstep: each step
ends in collectives (the gradients' all-reduce) that wait for every worker. A worker whose hooks
stop it alone (``request_stop()``, a coordinator stop, a hook that raised) would leave the others
waiting in their next collective for ever. So, after each training step's hooks, every worker
contributes what it wants to ONE small collective (a sum of one float per worker), and all of
them act on the same answer: if any worker wants to stop, every worker stops after that step.

Single-worker runs never build a ``StopAgreement``: no collective, no per-step cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

#: What a worker contributes after a step (one slot per worker; the sum gives each worker's).
CONTINUE, STOP, FAILED = 0, 1, 2


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
        width = len(self.tasks)
        self._slots = [[float(i == j) for j in range(width)] for i in range(width)]

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

    def agree(self, code: int) -> list[int]:
        """Contributes this worker's ``code`` (CONTINUE, STOP or FAILED) and returns every
        worker's, in ``tasks`` order. Blocks until every worker has contributed."""
        flags = tf.constant([code * s for s in self._slots[self.index]], tf.float32)
        total = self._reduce(flags)
        return [round(v) for v in total.numpy().tolist()]

    def others(self, codes: Sequence[int], code: int) -> list[str]:
        """The names of the other workers whose code is ``code``."""
        return [
            name
            for i, (name, c) in enumerate(zip(self.tasks, codes))
            if c == code and i != self.index
        ]
