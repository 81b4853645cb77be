"""What the bridge reads from (and sets on) the Keras model, for every Keras flavour."""

from __future__ import annotations

import inspect
import math
import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _exact, _tfcompat
from hookbridge._hook_callback.batch_values import MEAN, OTHER, RAW, MetricKinds
from hookbridge._hook_callback.keras_writes import keras_context

keras = tf.keras

_STOP_FLAGS = {"train": "stop_training", "test": "stop_evaluating", "predict": "stop_predicting"}


def require_tensorflow_backend(backend: str | None = None) -> None:
    """Refuses a Keras running on another backend than TensorFlow (Keras 3's
    ``KERAS_BACKEND=jax`` / ``torch`` / ``numpy``).

    Args:
        backend: the backend's name; default: this process's Keras backend.

    Raises:
        RuntimeError: naming the backend, why, and how to fix it.
    """
    if backend is None:
        backend = keras.backend.backend()
    if backend == "tensorflow":
        return
    raise RuntimeError(
        f"HookCallback needs Keras's TensorFlow backend; this Keras runs on {backend!r} "
        f"(KERAS_BACKEND={os.environ.get('KERAS_BACKEND')!r}). TF1 SessionRunHooks run on "
        "TensorFlow graphs and a tf.compat.v1.Session, and the bridge reads the model's "
        "weights and optimizer.iterations as TensorFlow variables, which a model on "
        f"{backend!r} does not have. Set KERAS_BACKEND=tensorflow before Keras is imported, or "
        "run the hooks natively (MonitoredSession / Estimator)."
    )


class KerasAccess:
    """Reads Keras variables where they can be read, and infers the log keys of a model.

    Keras variables are read eagerly, even while the bridge's v1 graph is the default graph
    (``tf.init_scope`` does not lift out of a v1 graph); under tf_keras graph mode
    (``disable_eager_execution``) they are read in Keras's own graph and session.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self._warned_stop = False

    def iterations(self) -> int | None:
        """``model.optimizer.iterations`` (one variable read), or None without an optimizer.

        Under Keras 3 gradient accumulation ``iterations`` is computed (the optimizer's step
        counter floor-divided by ``gradient_accumulation_steps``): it is evaluated eagerly, as
        the bridge's finalized graph may be the default graph here."""
        optimizer = getattr(self.model, "optimizer", None)
        if getattr(optimizer, "gradient_accumulation_steps", None):
            with _tfcompat.eager():
                return int(keras.ops.convert_to_numpy(optimizer.iterations))
        iterations = getattr(optimizer, "iterations", None)
        if iterations is None:
            return None
        with keras_context(iterations):
            return int(keras.backend.get_value(iterations))

    def weights(self) -> list:
        """``model.get_weights()``, read from anywhere; a distributed weight as this worker
        holds it (:func:`local_value`: never a collective, even when one worker reads alone)."""
        weights = self.model.weights
        if any(isinstance(w, tf.distribute.DistributedValues) for w in weights):
            with _tfcompat.eager():
                strategy = self.model.distribute_strategy
                return [local_value(w, strategy) for w in weights]
        with keras_context(weights[0] if weights else None):
            return self.model.get_weights()

    def metric_kinds(self) -> MetricKinds:
        """Per log key, how its batch value is found (``batch_values.py``): the metric Keras
        logs under that key and a reader of its ``count``. Looked up at the key's first fetch,
        once Keras has built its metrics (tf_keras builds them at the first step)."""
        return _MetricKinds(self.model)

    def log_keys(self, extra: list[str]) -> list[str]:
        """The keys Keras will log, plus ``extra``: the tensors the graph gets.

        Keras builds its metrics at the first step, after ``on_train_begin``, so the names come
        from the compile config, named as Keras names them: ``<output>_loss`` and
        ``<output>_<metric>`` for a model of several outputs (``mae`` alone is then never
        logged, so no ``mae:0`` is made), ``weighted_<metric>`` for a weighted metric of the same
        name as an unweighted one; then ``metrics_names`` (tf_keras graph mode, custom metrics).
        """
        keys = ["loss"]
        try:
            config = self.model.get_compile_config() or {}
        except Exception:  # noqa: BLE001 - not compiled, or a Keras without get_compile_config
            config = {}
        outputs = _output_names(self.model)
        if len(outputs) > 1:
            with_loss = _per_output(config.get("loss"), outputs, one_each=True)
            if sum(1 for losses in with_loss.values() if losses) > 1:
                keys += [f"{out}_loss" for out in outputs if with_loss.get(out)]
            groups = {g: _per_output(config.get(g), outputs) for g in _GROUPS}
        else:
            groups = {g: {"": _flatten(config.get(g))} for g in _GROUPS}
        for group, per_output in groups.items():
            for out, metrics in per_output.items():
                prefix = f"{out}_" if out else ""
                for metric in metrics:
                    name = _metric_name(metric)
                    if not name:
                        continue
                    key = prefix + name
                    if key in keys and group == "weighted_metrics":
                        key = f"{prefix}weighted_{name}"
                    if key not in keys:
                        keys.append(key)
        try:
            names = list(self.model.metrics_names)
        except Exception:  # noqa: BLE001 - a model that is not compiled
            names = []
        for name in [*names, *extra]:
            if name != "compile_metrics" and name not in keys:
                keys.append(name)
        return keys

    def request_stop(self, mode: str) -> None:
        """Stops Keras after this step: ``stop_training`` in fit; in evaluate/predict Keras 3's
        ``stop_evaluating``/``stop_predicting`` (Keras 2 has no such flag: a warning says so)."""
        flag = _STOP_FLAGS[mode]
        if mode == "train" or hasattr(self.model, flag):
            setattr(self.model, flag, True)
        elif not self._warned_stop:
            self._warned_stop = True
            warnings.warn(
                f"HookCallback: a hook requested a stop during {mode}, but this Keras version "
                "cannot stop evaluate/predict early (Keras 3 can); the run continues to its end.",
                stacklevel=5,
            )


def local_value(variable: Any, strategy: Any) -> np.ndarray:
    """A distributed variable's value on THIS worker, read without any collective.

    Reading a ``SyncOnRead`` variable (a metric's ``total``/``count``; tf_keras's
    BatchNormalization moving statistics) outside a replica context reduces it across every
    replica, and under ``MultiWorkerMirroredStrategy`` that is an all-reduce across workers: a
    read that one worker makes alone (a chief-only hook's fetch) enters a collective the others
    never join, and the next collective of every worker fails (``Shape mismatch in the
    collective instance``). So the bridge reduces over this worker's own replicas only, as the
    variable's aggregation says (``SUM``: their sum, ``MEAN``: their mean, else the first), as
    ``strategy`` (the model's) lists them. With
    one worker (``MirroredStrategy``) that is the value Keras reads; across workers, a
    ``SyncOnRead`` variable is this worker's share (docs/distributed.md). Must run eagerly.
    """
    if not isinstance(variable, tf.distribute.DistributedValues):
        return np.asarray(variable.numpy())
    parts = [np.asarray(v.numpy()) for v in strategy.experimental_local_results(variable)]
    aggregation = getattr(variable, "aggregation", None)
    if aggregation == tf.VariableAggregation.SUM:
        return np.sum(parts, axis=0, dtype=parts[0].dtype)
    if aggregation == tf.VariableAggregation.MEAN:
        return np.mean(parts, axis=0, dtype=parts[0].dtype)
    return parts[0]


class _MetricKinds:
    """:class:`MetricKinds` of a Keras model: its metrics found by the key Keras logs them under."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._readers: dict[str, Callable[[], float]] = {}

    def _metric(self, key: str) -> Any:
        return _metrics_by_key(self._model).get(key)

    def kind(self, key: str, logged: float) -> str:
        """``RAW`` without a metric logged as ``key``; ``MEAN`` for a metric whose logged value
        is its ``total / count`` (checked once against ``logged``, the value Keras logged last:
        ``RootMeanSquaredError`` has both but logs a square root); else ``OTHER``."""
        metric = self._metric(key)
        if metric is None:
            return RAW
        if not (hasattr(metric, "count") and hasattr(metric, "total")):
            return OTHER
        if _is_distributed(metric.count):  # this worker's share: not the logged ratio
            return MEAN
        count = self.count_reader(key)()
        total = _count_reader(metric.total, self._model)()
        if count > 0 and math.isfinite(logged) and math.isfinite(total):
            if abs(total / count - logged) > 1e-5 * max(1.0, abs(logged)):
                return OTHER
        return MEAN

    def count_reader(self, key: str) -> Callable[[], float]:
        """Reads the ``count`` of the metric logged as ``key``: one raw ``ReadVariableOp`` in
        eager mode (about 20 µs, a quarter of ``keras.backend.get_value``); a distributed count
        (a ``SyncOnRead`` variable) as this worker holds it (:func:`local_value`, never a
        collective); tf_keras graph mode takes Keras's way."""
        read = self._readers.get(key)
        if read is None:
            read = self._readers[key] = _count_reader(self._metric(key).count, self._model)
        return read


def _is_distributed(count: Any) -> bool:
    variable = getattr(count, "value", None)  # Keras 3: the backend variable
    variable = variable if isinstance(variable, tf.Variable) else count
    return isinstance(variable, tf.distribute.DistributedValues)


def _count_reader(count: Any, model: Any) -> Callable[[], float]:
    variable = getattr(count, "value", None)  # Keras 3: the backend variable
    if not isinstance(variable, tf.Variable):
        variable = count
    scope = _tfcompat.eager()
    if isinstance(variable, tf.distribute.DistributedValues):
        # A distributed variable's handle raises outside a replica context, and reading it
        # reduces across workers: read this worker's replicas (local_value).

        def read_local() -> float:
            with scope:
                return float(local_value(variable, model.distribute_strategy))

        return read_local
    handle = getattr(variable, "handle", None)
    if not (
        isinstance(variable, tf.Variable)
        and handle is not None
        and not hasattr(handle, "graph")  # an eager handle (no graph mode)
    ):

        def read_keras() -> float:
            with keras_context(count):
                return float(keras.backend.get_value(count))

        return read_keras
    dtype = variable.dtype

    def read() -> float:
        with scope:
            return float(tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype))

    return read


def _metrics_by_key(model: Any) -> dict[str, Any]:
    """The model's metric objects by the key Keras logs them under: their name, or the name
    Keras 3's ``CompileMetrics`` container gives them (output prefixes, ``weighted_``)."""
    found: dict[str, Any] = {}
    for metric in getattr(model, "metrics", ()):
        by_key = _tfcompat.compile_metrics_by_key(metric)
        if by_key is None:
            inner = getattr(metric, "metrics", None)
            inner = inner if isinstance(inner, (list, tuple)) and inner else [metric]
            by_key = {getattr(m, "name", None): m for m in inner}
        for key, m in by_key.items():
            found.setdefault(key, m)
    return found


_GROUPS = ("metrics", "weighted_metrics")


def _output_names(model: Any) -> list[str]:
    """The names Keras gives the model's outputs in its log keys: a dict output's keys, else
    ``output_names`` (empty when unknown, e.g. a subclassed model)."""
    output = None
    try:
        output = model.output
    except Exception:  # noqa: BLE001, S110 - not built / no single output graph (subclassed)
        pass
    if isinstance(output, dict):
        return list(output)
    try:
        return list(getattr(model, "output_names", None) or [])
    except Exception:  # noqa: BLE001
        return []


def _per_output(value: Any, outputs: list[str], one_each: bool = False) -> dict[str, list]:
    """A compile argument (loss, metrics) of a model of several outputs, per output name: a
    dict by name, a list with one entry per output (a list of lists; any list as long as the
    outputs when ``one_each``: losses), or one value for every output."""
    if value is None:
        return {}
    if isinstance(value, dict) and "class_name" not in value:
        return {out: _flatten(value.get(out)) for out in outputs}
    if (
        isinstance(value, (list, tuple))
        and len(value) == len(outputs)
        and (one_each or any(isinstance(v, (list, tuple)) for v in value))
    ):
        return {out: _flatten(v) for out, v in zip(outputs, value)}
    return {out: _flatten(value) for out in outputs}


def _flatten(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, dict) and "class_name" not in value:
        return [m for v in value.values() for m in _flatten(v)]
    if isinstance(value, (list, tuple)):
        return [m for v in value for m in _flatten(v)]
    return [value]


def _metric_name(metric: Any) -> str | None:
    if isinstance(metric, str):
        return metric
    if isinstance(metric, dict):
        return (metric.get("config") or {}).get("name")
    return getattr(metric, "name", None)


def fit_is_running(model: Any) -> bool:
    """Whether ``model.fit`` is on this thread's call stack, so that test events are fit's
    validation. (A flag set in ``on_train_begin`` would outlive a ``fit`` that raised: Keras
    calls no ``on_train_end`` then, and a later ``evaluate`` would run no hooks.) Walks the
    frames once per ``evaluate``/``predict``, reading the locals only of frames named ``fit``.
    A custom loop driving the model's training (``CallbackLoop``, ``hookbridge/_exact.py``)
    counts as its ``fit``."""
    if _exact.driven(model):
        return True
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_locals.get("self") is model:
            return True
        frame = frame.f_back
    return False
