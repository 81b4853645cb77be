"""Log tensors: resolving the ``logs`` argument, and the running means Keras reports.

Keras weights every batch's loss and metrics by the batch's sample count (a ragged last batch
counts less): ``Dataset.range(10).batch(4)`` with loss ``x**2`` reports 28.5, not 35.83, the mean
of the three batch means (Keras 3, tf_keras and Keras 2.15 alike). The sums below are weighted by
the batch size when CallbackHook knows it (``batch_size=``, :func:`resolve_batch_size`), and count
every step once otherwise.

A log need not be a running mean (``log_reductions=``, :func:`check_reductions`): ``"last"`` reports
the latest value (a stateful metric's tensor whose value is already the epoch's result, such as a
running total: Keras reports ``metric.result()``), ``"sum"`` the sum of the batch values (a count),
``"mean"`` (the default) the mean weighted by the batch size.

Key order is the order Keras's ``CallbackList`` gives callbacks: Keras 3 sorts the keys
(``pythonify_logs``); tf_keras / Keras 2 keep compile order (loss, the metrics, then ``val_*``),
which for CallbackHook is the order of ``logs=`` as given (:func:`resolve`).

Two ways to keep an epoch's sums. When some callback reads batch logs (TerminateOnNaN, a
per-batch ProgbarLogger...), each step fetches the log tensors and the sums are Python floats
(:class:`RunningMeans`); batch logs are ``sum / n`` within the epoch. When only epoch-level
callbacks listen (History, CSVLogger, EarlyStopping, ModelCheckpoint...), the sums live in the
graph (:class:`GraphSums`): each step runs one small ``assign_add`` op instead of fetching tensors
back to Python (a fetched tensor costs TF more than an op it only runs), and the sums are read once
per epoch. Both add float64 values in step order, so they give the same epoch means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import tensorflow as tf

#: How a log reduces over the epoch (``log_reductions=`` values).
REDUCTIONS: Final = ("mean", "last", "sum")


def check_reductions(value: Any, logs: Mapping[str, Any]) -> dict[str, str]:
    """Checks CallbackHook's ``log_reductions=``: log name -> one of :data:`REDUCTIONS`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            "CallbackHook: log_reductions must be a mapping of log name -> 'mean', 'last' or "
            f"'sum', received {value!r} of type {type(value).__name__}."
        )
    for name, how in value.items():
        if name not in logs:
            raise ValueError(
                f"CallbackHook: log_reductions names {name!r}, which is not in logs= "
                f"({sorted(logs)}). Name a log given in logs=."
            )
        if how not in REDUCTIONS:
            raise ValueError(
                f"CallbackHook: log_reductions[{name!r}] must be one of {list(REDUCTIONS)}, "
                f"received {how!r}. 'mean': the mean over the epoch weighted by batch size (as "
                "Keras averages a loss); 'last': the latest value (a metric tensor that is "
                "already the running result, e.g. a total); 'sum': the sum of the batch values."
            )
    return dict(value)


def resolve(
    graph: tf.Graph, logs: Mapping[str, Any], sort: bool = True
) -> tuple[list[str], list[tf.Tensor]]:
    """(names, tensors) of ``logs`` in ``graph``, names sorted (Keras 3) or as given (tf_keras /
    Keras 2: compile order); raises naming a missing entry."""
    names = sorted(logs) if sort else list(logs)
    return names, [_resolve_one(graph, f"logs[{name!r}]", logs[name]) for name in names]


def _resolve_one(graph: tf.Graph, label: str, value: Any) -> tf.Tensor:
    """The tensor ``value`` (a tensor or tensor name of ``graph``) given as CallbackHook's
    ``label``; raises naming ``label`` and how to fix it."""
    if isinstance(value, str):
        key = value if ":" in value else value + ":0"
        try:
            tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError) as e:
            raise ValueError(
                f"CallbackHook: {label} = {value!r} is not a tensor of the session's "
                f"graph ({e}). Available scalar float tensors: {_available(graph)}. Give the "
                "tensor a name in the graph (e.g. tf.identity(loss, name='loss')) or pass the "
                "tensor itself."
            ) from None
    elif isinstance(value, (tf.Tensor, tf.Variable)) or hasattr(value, "graph"):
        tensor = value
        if getattr(tensor, "graph", None) is not graph:
            raise ValueError(
                f"CallbackHook: {label} = {value!r} does not belong to the graph the "
                "session runs. Build it in that graph (or pass its name)."
            )
    else:
        raise TypeError(
            f"CallbackHook: {label} must be a tensor or a tensor name, received "
            f"{value!r} of type {type(value).__name__}."
        )
    return tensor


def check_batch_size(value: Any) -> bool:
    """Checks CallbackHook's ``batch_size=`` argument; True if it is a tensor or tensor name."""
    if value is None:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"CallbackHook: batch_size must be positive, received {value!r}.")
        return False
    if isinstance(value, (str, tf.Tensor, tf.Variable)) or hasattr(value, "graph"):
        return True
    raise TypeError(
        "CallbackHook: batch_size must be an int, a tensor (the batch's sample count, or a tensor "
        "whose first dimension is the batch, e.g. the input batch) or a tensor name, received "
        f"{value!r} of type {type(value).__name__}."
    )


def resolve_batch_size(graph: tf.Graph, value: Any) -> tf.Tensor | None:
    """The tensor holding a step's sample count, from CallbackHook's ``batch_size=``.

    ``None`` or an int (every batch has that size: equal weights) need no tensor. A scalar
    tensor is the count itself; a tensor with a batch dimension (the batch's features, labels or
    sample weights) gives its first dimension. A string names a tensor of ``graph``.
    """
    if not check_batch_size(value):
        return None
    tensor = _resolve_one(graph, "batch_size", value)
    if tensor.shape.rank == 0:
        return tensor
    if graph.finalized:
        raise ValueError(
            f"CallbackHook: batch_size={value!r} is a batch tensor, whose first dimension needs "
            "an op added in begin(), but the graph is finalized already. Pass a scalar tensor "
            "holding the count (e.g. tf.shape(features)[0]) instead."
        )
    with graph.as_default(), tf.name_scope("hookbridge_callback_logs"):
        return tf.shape(tensor, out_type=tf.int64)[0]


def _available(graph: tf.Graph, limit: int = 30) -> str:
    found = []
    for op in graph.get_operations():
        for t in op.outputs:
            if t.dtype.is_floating and t.shape.rank == 0 and not op.name.startswith("save"):
                found.append(t.name)
    more = f" ... and {len(found) - limit} more" if len(found) > limit else ""
    return ", ".join(found[:limit]) + more if found else "(none)"


class RunningMeans:
    """Per-epoch sums of the log values, in Python floats.

    With ``reductions`` (log name -> ``"last"`` / ``"sum"``; others are means), ``sums`` holds
    the latest value of a ``"last"`` log and the unweighted sum of a ``"sum"`` log, and
    :meth:`add_reduced` adds a step (its values, then the batch size when ``weighted``)."""

    __slots__ = ("count", "kinds", "names", "sums", "weighted")

    def __init__(self, names: list[str], reductions: Mapping[str, str] | None = None) -> None:
        self.names = names
        self.sums = [0.0] * len(names)
        self.count = 0
        reductions = reductions or {}
        #: None when every log is a mean (the per-step fast paths), else each log's reduction.
        self.kinds = (
            tuple(reductions.get(name, "mean") for name in names)
            if any(how != "mean" for how in reductions.values())
            else None
        )
        self.weighted = False

    def reset(self) -> None:
        self.sums = [0.0] * len(self.names)
        self.count = 0

    def add(self, values: list) -> None:
        sums = self.sums
        for i, v in enumerate(values):
            sums[i] += _scalar(v)
        self.count += 1

    def add_weighted(self, values: list) -> None:
        """``values``: the log values, then the batch's sample count (their weight)."""
        n = float(values[-1])
        sums = self.sums
        for i in range(len(sums)):
            sums[i] += _scalar(values[i]) * n
        self.count += n

    def add_one(self, value: Any) -> None:
        """``add([value])`` for the one-log case, without the list."""
        try:
            self.sums[0] += float(value)
        except TypeError:
            self.sums[0] += float(np.mean(value))
        self.count += 1

    def add_reduced(self, values: Any) -> None:
        """A step's values (a list, or the lone value of one log), each by its reduction."""
        if not isinstance(values, list):
            values = [values]
        n = float(values[-1]) if self.weighted else 1.0
        sums = self.sums
        for i, kind in enumerate(self.kinds or ()):
            v = _scalar(values[i])
            if kind == "mean":
                sums[i] += v * n
            elif kind == "sum":
                sums[i] += v
            else:
                sums[i] = v
        self.count += n

    def means(self) -> dict[str, float]:
        n = self.count
        if not n:
            return {}
        if self.kinds is None:
            return {name: s / n for name, s in zip(self.names, self.sums)}
        return {
            name: s / n if kind == "mean" else s
            for name, s, kind in zip(self.names, self.sums, self.kinds)
        }


def _scalar(value: Any) -> float:
    try:
        return float(value)
    except TypeError:  # a non-scalar log: Keras would report its mean
        return float(np.mean(value))


class GraphSums:
    """Per-epoch sums of the log tensors (and the step or sample count) in a float64 graph
    variable; with a ``weight`` tensor (the batch size), each value counts ``weight`` times.

    The variable is in no collection: no Saver saves it, no Scaffold initializes it, and the
    hook initializes it in every session it is given (a recovered session starts the epoch's sums
    again). Built in ``begin``; ``None`` from :meth:`build` when the graph is finalized already or a
    log tensor is not a number, and the caller fetches the tensors instead.
    """

    def __init__(
        self,
        tensors: list[tf.Tensor],
        weight: tf.Tensor | None = None,
        kinds: tuple[str, ...] | None = None,
    ) -> None:
        values = [
            tf.cast(t if t.shape.rank == 0 else tf.reduce_mean(t), tf.float64) for t in tensors
        ]
        w = tf.constant(1.0, tf.float64) if weight is None else tf.cast(weight, tf.float64)
        zeros = tf.zeros([len(values) + 1], tf.float64)
        self.variable = tf.compat.v1.Variable(
            zeros, trainable=False, collections=[], name="sums", use_resource=True
        )
        if kinds is None:
            # the sample count (or the step count) last
            increments = (values if weight is None else [v * w for v in values]) + [w]
        else:  # "sum": unweighted; "last": what makes the sum the value
            before = self.variable.read_value()
            increments = [
                v * w if kind == "mean" else v if kind == "sum" else v - before[i]
                for i, (v, kind) in enumerate(zip(values, kinds))
            ] + [w]
        self.update_op = self.variable.assign_add(tf.stack(increments)).op
        current = self.variable.read_value()
        with tf.control_dependencies([current]):
            reset = self.variable.assign(zeros).op
        self._read_and_reset = (current, reset)

    @classmethod
    def build(
        cls,
        graph: tf.Graph,
        tensors: list[tf.Tensor],
        weight: tf.Tensor | None = None,
        kinds: tuple[str, ...] | None = None,
    ) -> GraphSums | None:
        if graph.finalized or not all(
            t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool for t in tensors
        ):
            return None
        with graph.as_default(), tf.name_scope("hookbridge_callback_logs"):
            return cls(tensors, weight, kinds)

    def initialize(self, session: Any) -> None:
        session.run(self.variable.initializer)

    def take(self, session: Any, means: RunningMeans) -> None:
        """Moves the sums into ``means`` and zeroes them for the next epoch (one run)."""
        values, _ = session.run(self._read_and_reset)
        means.sums = [float(v) for v in values[:-1]]
        means.count = float(values[-1])
