"""CallbackHook on one worker of a between-graph TF1 cluster (parameter servers + workers).

What changes when ``CallbackHook(is_chief=True/False)`` says the hook runs in a cluster:

* **Who runs which callbacks** (:func:`callbacks_here`): the callbacks that write files (or the
  console) run on the chief only, as ``MonitoredTrainingSession`` runs its
  ``CheckpointSaverHook`` / ``SummarySaverHook`` on the chief only; the others on every worker.
* **Epochs** follow the global step every worker shares (:class:`SharedRun`): epoch ``e`` covers
  global steps ``[e * steps_per_epoch, (e + 1) * steps_per_epoch)``. Each run fetches the global
  step; as TF1's ``StopAtStepHook``, ``fetched + 1`` estimates the step after the run (the read
  races the increment), and a ``session.run`` confirms it only when the estimate crosses the
  epoch's boundary (once per epoch).
* **A stop decided on the chief stops every worker**, as TF1 clusters did it: a shared boolean
  variable (``hookbridge/stop_training``, beside the global step, on its device) that the chief
  sets when its callbacks stop training, and that every worker fetches with each of its runs.
  It is in no collection: no ``Saver`` saves or restores it (a checkpoint written without it
  still restores) and no ``init_op`` / ``local_init_op`` resets it.

Lifecycle of the stop variable: built in ``begin()``; set to ``False`` by the chief when its
first session is created (a new training on servers that ran one before starts unstopped);
initialized to ``False`` by any other worker, and by the chief after a session recovery, only if
it is uninitialized (a parameter server that restarted lost it); set to ``True`` by the chief,
once, in the run after its callbacks set ``model.stop_training``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from typing import Any, Final

import tensorflow as tf

#: The Keras callbacks that write files (or print), run by the chief only unless told otherwise.
FILE_WRITERS: Final = ("ModelCheckpoint", "CSVLogger", "TensorBoard", "ProgbarLogger")
#: The stop variable's name, in the global step's name scope (``global_step`` → this name).
STOP_NAME: Final = "hookbridge/stop_training"

SessionRunArgs = tf.compat.v1.train.SessionRunArgs


def file_writer_classes() -> tuple[type, ...]:
    """The :data:`FILE_WRITERS` classes of every Keras importable here (Keras 3, tf_keras,
    Keras 2), matched with ``isinstance`` (subclasses count)."""
    modules = [tf.keras.callbacks]
    for name in ("keras", "tf_keras"):
        modules.append(getattr(sys.modules.get(name), "callbacks", None))
    classes = []
    for module in modules:
        for name in FILE_WRITERS:
            klass = getattr(module, name, None)
            if isinstance(klass, type):
                classes.append(klass)
    return tuple(dict.fromkeys(classes))


def check_cluster_args(is_chief: Any, chief_only_callbacks: Any) -> None:
    """Type checks of ``is_chief`` / ``chief_only_callbacks`` (done in ``__init__``)."""
    if is_chief is not None and not isinstance(is_chief, bool):
        raise TypeError(
            "CallbackHook: is_chief must be True, False or None (not in a cluster), received "
            f"{is_chief!r} of type {type(is_chief).__name__}. Pass the value given to "
            "MonitoredTrainingSession(is_chief=...) (Estimator: run_config.is_chief)."
        )
    if chief_only_callbacks is not None and is_chief is None:
        raise ValueError(
            "CallbackHook: chief_only_callbacks= was given without is_chief=: it only means "
            "something on a worker of a cluster. Pass is_chief=<this worker's "
            "MonitoredTrainingSession(is_chief=...)> as well."
        )


def callbacks_here(callbacks: list, is_chief: bool | None, chief_only_callbacks: Any) -> list:
    """The callbacks this worker runs, in their order.

    Args:
        callbacks: every callback given to the hook.
        is_chief: ``None`` (not a cluster: all of them), or whether this worker is the chief.
        chief_only_callbacks: ``None`` (the file writers among ``callbacks``, see
            :data:`FILE_WRITERS`), or a sequence of instances from ``callbacks`` (``[]``: none).

    Raises:
        TypeError: ``chief_only_callbacks`` is not a sequence.
        ValueError: an entry of ``chief_only_callbacks`` is not one of ``callbacks``.
    """
    if is_chief is None:
        return list(callbacks)
    if chief_only_callbacks is None:
        writers = file_writer_classes()
        chief_only = [cb for cb in callbacks if isinstance(cb, writers)]
    else:
        if isinstance(chief_only_callbacks, (str, bytes)) or not isinstance(
            chief_only_callbacks, Sequence
        ):
            raise TypeError(
                "CallbackHook: chief_only_callbacks must be a list of callbacks from "
                f"`callbacks` (or [] for none), received {chief_only_callbacks!r} of type "
                f"{type(chief_only_callbacks).__name__}."
            )
        ids = {id(cb) for cb in callbacks}
        for i, cb in enumerate(chief_only_callbacks):
            if id(cb) not in ids:
                raise ValueError(
                    f"CallbackHook: chief_only_callbacks[{i}] = {cb!r} is not one of "
                    "`callbacks`: pass the same instances (chief_only_callbacks only says which "
                    "of the callbacks run on the chief only)."
                )
        chief_only = list(chief_only_callbacks)
    if is_chief:
        return list(callbacks)
    excluded = {id(cb) for cb in chief_only}
    return [cb for cb in callbacks if id(cb) not in excluded]


def _stop_scope(global_step: Any) -> str:
    """The name scope of the stop variable: the global step's own scope plus ``hookbridge/``."""
    name = global_step.op.name
    prefix = name.rsplit("/", 1)[0] + "/" if "/" in name else ""
    return prefix + STOP_NAME.rsplit("/", 1)[0] + "/"


class SharedRun:
    """What one worker's hook shares with the cluster: the global step and the stop variable.

    Built in ``begin()`` (:meth:`build`), initialized in each ``after_create_session``
    (:meth:`initialize`); each run fetches :attr:`fetch` (``[global step, stop]``: the
    variables themselves, so a graph that orders its increment after the global step's read
    gives the step before the run, without a race), whose values :meth:`take` keeps.
    """

    __slots__ = (
        "_init",
        "_initialized",
        "_publish",
        "_reset",
        "fetch",
        "global_step",
        "is_chief",
        "published",
        "step",
        "steps_per_epoch",
        "stop",
        "stop_variable",
    )

    def __init__(self, is_chief: bool, steps_per_epoch: int) -> None:
        self.is_chief = is_chief
        self.steps_per_epoch = steps_per_epoch
        self.step = 0  # the latest global step known (fetched, or confirmed)
        self.stop = False  # the latest value of the stop variable
        self.published = False

    def build(self, graph: tf.Graph, global_step: Any) -> None:
        """Creates the stop variable beside ``global_step`` (same device, same name scope), in
        no collection, and the ops that initialize, reset and set it.

        Raises:
            ValueError: the graph has no global step.
        """
        if global_step is None:
            raise ValueError(
                "CallbackHook(is_chief=...) numbers epochs from the global step the workers "
                "share, and the graph has none. Create it before the train op "
                "(tf.compat.v1.train.get_or_create_global_step(), under the "
                "replica_device_setter so it lives on a parameter server) and increment it "
                "(optimizer.minimize(loss, global_step=...))."
            )
        self.global_step = global_step
        with (
            graph.as_default(),
            graph.device(None),
            graph.device(global_step.device),
            graph.name_scope(_stop_scope(global_step)),
        ):
            var = tf.compat.v1.Variable(
                False,
                trainable=False,
                collections=[],
                name=STOP_NAME.rsplit("/", 1)[1],
                dtype=tf.bool,
            )
            # (an identity: the check is not run on the chief's first session, and TF logs an
            # error for an unused is_variable_initialized result)
            self._initialized = tf.identity(tf.compat.v1.is_variable_initialized(var))
            self._init = var.initializer
            self._reset = tf.compat.v1.assign(var, False).op
            self._publish = tf.compat.v1.assign(var, True).op
        self.fetch = [global_step, var]
        self.stop_variable = var
        self.published = False
        self.stop = False

    def initialize(self, session: Any, first: bool) -> None:
        """Gives the stop variable a value in a new session.

        The chief's first session resets it to ``False`` (a training on servers that ran one
        before starts unstopped); otherwise it is initialized only if uninitialized, so a worker
        that joins (or a recovered session) keeps a stop the chief decided. The check and the
        initialization are two runs: two workers racing there both write ``False`` (the same
        value); only a stop the chief sets between another worker's check and its write, in
        that worker's session creation, would be overwritten.
        """
        if first and self.is_chief:
            session.run(self._reset)
            self.published = False
        elif not session.run(self._initialized):
            session.run(self._init)
            self.published = False  # a restarted ps lost a stop the chief published: again
        self.stop = False

    def take(self, values: Any) -> None:
        """Keeps the values a run fetched: ``[global step, stop]`` (the global step read in the
        run races its increment: it is the step before or, sometimes, after the run)."""
        self.step = int(values[0])
        self.stop = bool(values[1])

    def epoch_closed(self, session: Any, epoch: int) -> int | None:
        """Whether the shared step passed the end of ``epoch`` with this worker's latest run.

        Returns:
            The confirmed global step if it is at or past ``(epoch + 1) * steps_per_epoch``,
            else ``None``. The read is made only when ``fetched + 1`` (the step after the run,
            estimated as TF1's ``StopAtStepHook`` does) reaches that boundary.
        """
        boundary = (epoch + 1) * self.steps_per_epoch
        if self.step + 1 < boundary:
            return None
        self.take(session.run(self.fetch))
        return self.step if self.step >= boundary else None

    def publish_stop(self, session: Any) -> None:
        """Sets the shared stop variable (the chief, once, when its callbacks stop training)."""
        if not self.published:
            session.run(self._publish)
            self.published = True  # after the write: a run that failed publishes it again


class ClusterEpochs:
    """Cluster mode's part of CallbackHook (a mixin): the stop variable and shared step fetched
    with each run, epochs closed by the shared global step, a stop published by the chief, and a
    recovered session catching up. Uses the hook's epoch state (see ``epochs.Epochs``) and
    ``_shared`` (the :class:`SharedRun`, ``None`` outside a cluster)."""

    _calls: Any
    _shared: SharedRun | None

    def _share_with_cluster(self, graph: tf.Graph) -> None:
        """Cluster mode: the stop variable, and the global step and stop fetched in each run
        beside the hook's own fetches (``_args``; ``_own`` says whether there are some)."""
        assert self._steps_per_epoch is not None and self.is_chief is not None
        self._shared = shared = SharedRun(self.is_chief, self._steps_per_epoch)
        shared.build(graph, self._global_step)
        self._own = self._args is not None
        self._args = SessionRunArgs(
            shared.fetch if self._args is None else [self._args.fetches, shared.fetch]
        )

    def _after_shared_run(self, run_context: Any) -> None:
        """Cluster mode, after each run: close the epoch when the shared global step passed
        its end (open the next with the number the step says), end after ``epochs``, and stop
        when the chief's callbacks stopped training (the chief publishes it first)."""
        shared = self._shared
        assert shared is not None
        session = run_context.session
        step = shared.epoch_closed(session, self._epoch)
        if step is not None:
            self._end_epoch()
            self._epoch = max(self._epoch, step // shared.steps_per_epoch)
            if self._finished():
                run_context.request_stop()  # every worker sees the last step itself
        if self._state.stop_training:
            if shared.is_chief:
                shared.publish_stop(session)  # the other workers stop at their next run
            run_context.request_stop()
        elif shared.stop:
            run_context.request_stop()  # the chief's callbacks stopped training

    def _catch_up_after_recovery(self, session: Any) -> None:
        """Cluster mode, a recovered session: the shared step may have passed the end of the
        epoch this worker has open while it waited (the other workers trained on), so close it
        now, as its next run would have, rather than count that run in the old epoch; an epoch
        not open yet is numbered by the shared step, as after a close in ``after_run``. (The
        step may also have gone back, to a restored checkpoint: epochs never do.)"""
        shared = self._shared
        assert shared is not None
        step = int(session.run(self._global_step))
        shared.step = step
        passed = step // shared.steps_per_epoch
        if self._epoch_open and passed > self._epoch:
            if self._batch > self._epoch_first_batch:
                self._end_epoch()
            else:
                self._drop_epoch_passed_while_down(passed)
        if not self._epoch_open:
            self._epoch = max(self._epoch, passed)

    def _drop_epoch_passed_while_down(self, next_epoch: int) -> None:
        """The open epoch was begun for a run that failed (the session was lost), and the shared
        step passed its end while this worker waited: no run of this worker counts in it. As
        for an input that ends before an epoch's first step (:meth:`_drop_empty_epoch`), it is
        not closed (Keras never ends an epoch without a step); said when someone listened."""
        self._epoch_open = False
        if self._calls.listens("on_epoch_begin", "on_train_batch_begin"):
            warnings.warn(
                f"CallbackHook: epoch {self._epoch} was begun for a run that failed (the "
                "session was recovered), and the shared global step passed its end while this "
                "worker waited, so no run of this worker counts in it: it gets no on_epoch_end "
                f"(Keras never ends an epoch without a step); the next epoch is {next_epoch}.",
                stacklevel=2,
            )
