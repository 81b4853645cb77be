"""The graph's learning rate as CallbackHook's ``model.optimizer`` reads and writes it.

Three sources, decided in ``begin()`` from ``CallbackHook(..., learning_rate=...)``:

* a ``tf.Variable`` (or its name): read with the hook's session, assigned through a placeholder
  (ReduceLROnPlateau, LearningRateScheduler), as Keras's float learning rate;
* a tensor computed in the graph, e.g. ``tf.compat.v1.train.polynomial_decay(0.1, step, 10)``:
  read with the hook's session (its value at the current global step, as Keras evaluates a
  ``LearningRateSchedule`` at ``optimizer.iterations``); not settable, as a Keras schedule;
* a placeholder (``placeholder`` / ``placeholder_with_default``) fed with each run: its value is
  the one the latest run was fed (taken from that run's ``feed_dict``, no fetch); not settable.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

_PLACEHOLDERS = ("Placeholder", "PlaceholderWithDefault")


class LearningRate:
    """One learning-rate source of a graph (see the module docstring)."""

    def __init__(self, graph: tf.Graph, value: Any) -> None:
        self.tensor = _resolve(graph, value)
        self.dtype = self.tensor.dtype.base_dtype
        self.settable = isinstance(self.tensor, tf.Variable)
        self.fed = not self.settable and self.tensor.op.type in _PLACEHOLDERS
        self._fed_value: float | None = None
        if not self.settable and not self.fed:
            _check_no_placeholder(self.tensor)
        if self.settable:
            with graph.as_default(), tf.name_scope("hookbridge_callback_hook"):
                self._feed = tf.compat.v1.placeholder(self.dtype, self.tensor.shape)
                self._assign = tf.compat.v1.assign(self.tensor, self._feed).op

    def read(self, session: Any) -> float:
        """The current value (a fed placeholder: the value the latest run was fed)."""
        if self.fed:
            if self._fed_value is not None:
                return self._fed_value
            if self.tensor.op.type == "Placeholder":
                raise ValueError(
                    f"CallbackHook: learning_rate is the placeholder {self.tensor.name!r}, which "
                    "no run has fed yet: its value is read from each run's feed_dict."
                )
        return float(session.run(self.tensor))

    def write(self, session: Any, value: Any) -> None:
        """Assigns a variable learning rate (callers check ``settable`` first)."""
        value = np.asarray(value, dtype=self.dtype.as_numpy_dtype)
        session.run(self._assign, {self._feed: value})

    def take_feed(self, feed_dict: Any) -> None:
        """Remembers the value a run feeds to the placeholder (called before each run)."""
        if not feed_dict:
            return
        tensor = self.tensor
        value = feed_dict.get(tensor)
        if value is None:
            value = feed_dict.get(tensor.name, feed_dict.get(tensor.op.name))
        if value is not None:
            self._fed_value = float(np.asarray(value))


def _resolve(graph: tf.Graph, value: Any) -> Any:
    if isinstance(value, str):
        name = value if ":" in value else value + ":0"
        for var in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
            if var.name == name:
                return var
        try:
            return graph.as_graph_element(name, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError):
            raise ValueError(
                f"CallbackHook: learning_rate names {value!r}, which is neither a global variable "
                "nor a tensor of the session's graph. Pass the tf.Variable or tensor itself, or "
                f"one of: {[v.op.name for v in graph.get_collection('variables')][:30]}."
            ) from None
    if not isinstance(value, (tf.Variable, tf.Tensor)):
        raise TypeError(
            f"CallbackHook: learning_rate must be a tf.Variable, a tensor (e.g. "
            "tf.compat.v1.train.exponential_decay(...)) or the name of one, received "
            f"{value!r} of type {type(value).__name__}."
        )
    if getattr(value, "graph", None) is not graph:
        raise ValueError(
            f"CallbackHook: learning_rate received {value!r}, which is not in the session's "
            "graph. Create it in the graph the MonitoredSession runs (or pass its name)."
        )
    if value.shape.rank not in (0, None) and value.shape.num_elements() != 1:
        raise ValueError(
            f"CallbackHook: learning_rate {value.name!r} has shape {value.shape}; a learning "
            "rate is a scalar."
        )
    return value


def _check_no_placeholder(tensor: tf.Tensor, limit: int = 10_000) -> None:
    """A computed learning rate must not need a feed: CallbackHook reads it between runs."""
    seen, stack = set(), [tensor.op]
    while stack and len(seen) < limit:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if op.type == "Placeholder":
            raise ValueError(
                f"CallbackHook: learning_rate {tensor.name!r} is computed from the placeholder "
                f"{op.name!r}, so it has no value between runs, when callbacks read it. Pass "
                "the placeholder itself (CallbackHook takes its value from each run's "
                "feed_dict), or a tensor that needs no feed."
            )
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
