"""The graph state behind CallbackHook's model proxy: the session, variables, learning rate.

One :class:`GraphState` per hook, built in ``begin()`` (the graph is not final yet): the variables
``model.get_weights``/``set_weights``/``save_weights`` cover, their assign ops, the learning rate
(:mod:`rate`), the global step, the optimizer's variables (for ``model.summary``). Reads and
writes go through the hook's own session, never through ``MonitoredSession.run``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._callback_hook import weights as _weights
from hookbridge._callback_hook.directions import check_metric_directions, compiled_metric_direction
from hookbridge._callback_hook.rate import LearningRate
from hookbridge._callback_hook.variables import model_variables

_SCOPE = "hookbridge_callback_hook"


class GraphState:
    """Graph ops and the live session shared by every callback's model proxy."""

    def __init__(
        self,
        variables: Sequence[Any] | None,
        learning_rate: Any,
        metric_directions: Mapping[str, str] | None = None,
        optimizer: Any = None,
    ) -> None:
        if optimizer is not None and not isinstance(optimizer, tf.compat.v1.train.Optimizer):
            raise TypeError(
                "CallbackHook: optimizer must be the tf.compat.v1.train.Optimizer the graph's "
                f"train op was built with, received {optimizer!r} of type "
                f"{type(optimizer).__name__}."
            )
        self.optimizer = optimizer
        self.optimizer_variables: list = []
        self._variables_arg = variables
        self._learning_rate_arg = learning_rate
        self.metric_directions = check_metric_directions(metric_directions)
        self._directions: dict[str, str | None] = {}
        self.session: Any = None
        self.stop_training = False
        self.variables: list = []
        self.learning_rate: Any = None
        self.lr: LearningRate | None = None
        self.warned_lr_ignored = False
        self.warned_lr_lag = False
        self.trainable_ids: set[int] = set()
        self.global_step: Any = None
        self.log_names: list[str] = []
        self.graph: tf.Graph | None = None
        #: The global step at the latest write by a callback (weights, learning rate), if any.
        self.written_at: int | None = None

    def build(self, graph: tf.Graph, log_names: list[str]) -> None:
        """Called from ``begin()``: resolves variables, builds the assign ops (graph not final)."""
        self.log_names = log_names
        self.graph = graph
        self.stop_training = False
        self.written_at = None
        self.global_step = tf.compat.v1.train.get_global_step(graph)
        lr_arg = self._learning_rate_arg
        if lr_arg is None and self.optimizer is not None:  # the optimizer's own rate, if a tensor
            lr_arg = _tfcompat.tf1_optimizer_settings(self.optimizer).get("learning_rate")
            if getattr(lr_arg, "graph", None) is not graph:
                lr_arg = None
        self.lr = None if lr_arg is None else LearningRate(graph, lr_arg)
        self.learning_rate = None if self.lr is None else self.lr.tensor
        self.optimizer_variables = [self.global_step] if self.global_step is not None else []
        if self.lr is not None and self.lr.settable:
            self.optimizer_variables.append(self.lr.tensor)
        if self.optimizer is not None:
            with graph.as_default():
                self.optimizer_variables += list(self.optimizer.variables())
        if self._variables_arg is None:  # as Keras's model.weights: not the optimizer's
            self.variables = model_variables(graph, self.optimizer_variables)
        else:
            self.variables = [_resolve_variable(graph, v, "variables") for v in self._variables_arg]
        self.trainable_ids = {
            id(v) for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        }
        with graph.as_default(), tf.name_scope(_SCOPE):
            self._feeds = [
                tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape) for v in self.variables
            ]
            self._assigns = [
                tf.compat.v1.assign(v, p).op for v, p in zip(self.variables, self._feeds)
            ]

    def direction(self, package: Any, name: str) -> str | None:
        """``"up"``/``"down"`` for log ``name``: declared, else as Keras 3 compiles it (cached)."""
        if name in self.metric_directions:
            return self.metric_directions[name]
        if name not in self._directions:
            self._directions[name] = compiled_metric_direction(package, name)
        return self._directions[name]

    # -- reads/writes through the hook's session (never through MonitoredSession.run) --------
    def get_weights(self) -> list[np.ndarray]:
        return list(self.session.run(self.variables)) if self.variables else []

    def set_weights(self, values: Sequence[Any]) -> None:
        if len(values) != len(self.variables):
            raise ValueError(
                f"set_weights received {len(values)} arrays, the graph has "
                f"{len(self.variables)} variables under CallbackHook "
                f"({[v.op.name for v in self.variables]})."
            )
        self.session.run(self._assigns, dict(zip(self._feeds, values)))
        self._written()

    def load_weights(self, path: str, skip_mismatch: bool = False) -> list[str]:
        """Assigns the saved value of each of ``variables`` (matched by ``op.name``) from
        ``path`` (see :func:`~hookbridge._callback_hook.weights.read_weights`).

        Raises:
            ValueError: a variable missing from the file or saved with another shape (unless
                ``skip_mismatch``: those keep their values), as Keras's ``load_weights``
                refuses a file of another model.
        """
        values = _weights.read_weights(path)
        ops, feeds, loaded, wrong = [], {}, [], []
        for var, feed, assign in zip(self.variables, self._feeds, self._assigns):
            name = var.op.name
            value = values.get(name)
            if value is None or tuple(np.shape(value)) != tuple(var.shape.as_list()):
                wrong.append(name if value is None else f"{name} (saved {np.shape(value)})")
                continue
            ops.append(assign)
            feeds[feed] = value
            loaded.append(name)
        if wrong and not skip_mismatch:
            raise ValueError(
                f"CallbackHook: model.load_weights({path!r}) cannot load {len(wrong)} of the "
                f"model's {len(self.variables)} variables: {wrong[:10]} (missing or of "
                "another shape; the file holds "
                f"{sorted(values)[:10]}). Load a file written from the same graph, or pass "
                "skip_mismatch=True to load the others."
            )
        if ops:
            self.session.run(ops, feeds)
            self._written()
        return loaded

    def get_lr(self) -> float:
        return self.lr.read(self.session)

    def set_lr(self, value: Any) -> None:
        self.lr.write(self.session, value)
        self._written()

    def _written(self) -> None:
        """Remembers the global step of a write (a checkpoint of that step must see it)."""
        if self.global_step is not None:
            self.written_at = self.get_step()

    def get_step(self) -> int:
        return int(self.session.run(self.global_step))

    def save_weights(self, filepath: str) -> None:
        values = dict(zip((v.op.name for v in self.variables), self.get_weights()))
        _weights.write_weights(str(filepath), values)


def _resolve_variable(graph: tf.Graph, value: Any, arg: str) -> Any:
    if isinstance(value, str):
        name = value if ":" in value else value + ":0"
        matches = [
            v
            for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
            if v.name == name
        ]
        if not matches:
            raise ValueError(
                f"CallbackHook: {arg} names {value!r}, which is not a global variable of the "
                "session's graph. Pass the tf.Variable itself or one of: "
                f"{[v.op.name for v in graph.get_collection('variables')][:30]}."
            )
        return matches[0]
    if getattr(value, "graph", None) is not graph:
        raise ValueError(
            f"CallbackHook: {arg} received {value!r}, which is not a variable of the session's "
            "graph. Create it in the graph the MonitoredSession runs (or pass its name)."
        )
    return value
