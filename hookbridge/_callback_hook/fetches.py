"""What CallbackHook asks of each run, and what ``after_run`` does with the answer.

Planned once per session, in ``begin``, from the callbacks that listen and the log tensors:

* **predict** (``mode="predict"``): the log tensors as they are (one tensor, or a dict of them by
  name), kept for ``on_predict_batch_end(batch, {"outputs": ...})``; nothing when no callback
  reads batch logs.
* **train / evaluate**: nothing when nobody can see logs (each run only counts); the epoch sums
  kept in the graph when nobody reads batch logs (one op per run instead of a fetch,
  :class:`~hookbridge._callback_hook.logs.GraphSums`); else the log tensors fetched (weighted by
  the batch size when there is one) and added to
  :class:`~hookbridge._callback_hook.logs.RunningMeans`.
* **cluster** (``is_chief=``): the shared global step and stop variable fetched beside those
  (:mod:`.cluster`).

:class:`Fetches` is a part of :class:`~hookbridge._callback_hook.hook.CallbackHook` (a mixin): it
sets ``_args`` (the ``SessionRunArgs`` ``before_run`` returns, ``None``: no fetch), ``_add`` (what
``after_run`` does with the results; ``None``: count the run), ``_sums`` and, in predict mode,
``_batch_logs``; it reads ``_means``, ``_batch_end``, ``_batch_size``, ``_training``, ``is_chief``
and ``_calls`` (set in ``begin``).
"""

from __future__ import annotations

import warnings
from typing import Any

import tensorflow as tf

from hookbridge._callback_hook.logs import GraphSums, resolve_batch_size

SessionRunArgs = tf.compat.v1.train.SessionRunArgs


def _outputs(names: list[str], tensors: list) -> Any:
    """What predict mode fetches: the lone log tensor, or a dict of them by name."""
    return tensors[0] if len(tensors) == 1 else dict(zip(names, tensors))


class Fetches:
    """The fetch plan of CallbackHook (see the module docstring for the state it uses)."""

    _calls: Any
    _means: Any
    is_chief: bool | None

    def _plan_fetches(self, graph: tf.Graph, kind: str, names: list[str], tensors: list) -> None:
        """The plan for this session (``kind``: the Keras events the mode drives)."""
        if kind == "predict":  # batch logs are {"outputs": the fetched values}, as Keras's
            fetch = bool(self._batch_end and tensors)
            self._args = SessionRunArgs(_outputs(names, tensors)) if fetch else None
            self._add = self._keep_outputs if fetch else None
            self._sums, self._batch_logs, self._last_outputs = None, self._outputs, None
            return
        ends = ("on_epoch_end", "on_train_end") if self._training else ("on_test_end",)
        needs_values = self._batch_end or self._calls.listens(*ends)
        self._plan_values(graph, tensors if needs_values else [])
        if self.is_chief is not None:
            self._share_with_cluster(graph)

    def _plan_values(self, graph: tf.Graph, tensors: list) -> None:
        """How each step's log values reach the sums: ``_args`` (what ``before_run`` asks
        for), ``_add`` (what ``after_run`` does with the results; ``None``: count the step).

        No tensors (nobody can see logs): nothing fetched. Nobody reads batch logs: the epoch
        sums are kept in the graph (an op per step instead of a fetch, see logs.py). Otherwise
        the tensors are fetched, one log (the usual loss) as a lone tensor, the cheapest fetch
        TF maps. With a batch-size tensor, every value is weighted by it, as Keras does.
        """
        weight = resolve_batch_size(graph, self._batch_size) if tensors else None
        if tensors and weight is None and self._batch_size is None:
            warnings.warn(
                "CallbackHook: batch_size= is not given, so every step counts once in the "
                "epoch means; Keras weights each batch by its sample count, so a smaller (e.g. "
                "last) batch makes the logs differ from fit's. Pass batch_size=<the input batch "
                "tensor, or a scalar count tensor>, or batch_size=<int> if every batch has that "
                "size.",
                stacklevel=4,  # the caller of CallbackHook.begin
            )
        means = self._means
        self._sums = None
        # Not in a cluster: there sessions are recovered (a parameter server restarts), and the
        # sums of the runs before a recovery would be lost with the session that held them.
        if tensors and not self._batch_end and self.is_chief is None:
            self._sums = GraphSums.build(graph, tensors, weight, means.kinds)
        if not tensors:
            self._args, self._add = None, None
        elif self._sums is not None:
            self._args, self._add = SessionRunArgs(self._sums.update_op), None
        elif means.kinds is not None:  # some log is not a mean (log_reductions=)
            means.weighted = weight is not None
            fetches = [*tensors, weight] if weight is not None else list(tensors)
            self._args, self._add = SessionRunArgs(fetches), means.add_reduced
        elif weight is not None:
            self._args, self._add = SessionRunArgs([*tensors, weight]), means.add_weighted
        elif len(tensors) == 1:
            self._args, self._add = SessionRunArgs(tensors[0]), means.add_one
        else:
            self._args, self._add = SessionRunArgs(tensors), means.add

    # -- predict ------------------------------------------------------------------------------
    def _keep_outputs(self, results: Any) -> None:
        self._last_outputs = results

    def _outputs(self) -> dict:
        return {"outputs": self._last_outputs}
