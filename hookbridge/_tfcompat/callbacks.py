"""Keras callback internals: ``is_default`` markers, tf_keras's batch-hook questions and
built-in names, metric directions and Keras 3's ``MetricsList`` / ``CompileMetrics``,
the attributes tf_keras's TensorBoard reads, where ``fit`` starts after
``BackupAndRestore``, and the callback methods that need no eager mode.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

from hookbridge._tfcompat.graph import eager


def keras3_metrics_list(entries: list) -> Any:
    """A Keras 3 ``MetricsList`` holding ``entries`` (objects with ``name`` and ``_direction``).

    Keras 3's monitor callbacks (``mode="auto"``) look for a metric's direction only inside
    ``model.metrics`` entries of this private class, reading the private ``_direction``.
    """
    from keras.src.trainers import compile_utils

    with eager():
        holder = compile_utils.MetricsList([], name="hookbridge_graph_metrics")
    holder.metrics = entries
    return holder


#: Private symbols used by CallbackHook (direction 2), as (module path, attribute): module paths
#: are strings because Keras 3 is absent on the TF 2.15 stack (nothing there imports them).
#: CallbackHook also reads Keras 3's ``Metric._direction`` (an instance attribute) the same way.
PRIVATE_SYMBOLS_CALLBACK_HOOK = (("keras.src.trainers.compile_utils", "MetricsList"),)


#: Keras's own callback methods that behave the same whether eager execution is on or not, by
#: (private module, class): CallbackHook calls them without switching to eager mode (about
#: 10 µs per step inside a MonitoredSession run). Read in Keras 3.15, tf_keras 2.21 and Keras
#: 2.15: they look at the logs' floats with numpy and set ``model.stop_training``.
#: ``on_train_batch_end`` is the base class's, which calls ``on_batch_end``.
#: tests/test_graph_free.py pins their source.
EAGER_FREE_CALLBACKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("keras.src.callbacks.terminate_on_nan", "TerminateOnNaN"): (  # Keras 3
        "on_train_batch_end",
        "on_batch_end",
    ),
    ("tf_keras.src.callbacks", "TerminateOnNaN"): ("on_train_batch_end", "on_batch_end"),
    ("keras.src.callbacks", "TerminateOnNaN"): ("on_train_batch_end", "on_batch_end"),  # Keras 2
}


def keras_is_default(method: Any) -> bool:
    """Whether Keras marked ``method`` as a no-op base method (``utils.is_default``'s marker)."""
    return bool(getattr(method, "_is_default", False))


def copy_keras_default_marker(original: Any, wrapper: Any) -> None:
    """Carries Keras's no-op marker from ``original`` over to a ``wrapper`` of it."""
    if hasattr(original, "_is_default"):
        wrapper._is_default = original._is_default


def implements_train_batch_hooks(callback: Any) -> bool | None:
    """tf_keras / Keras 2's own answer to "does this callback need batch calls?", or None."""
    ask = getattr(callback, "_implements_train_batch_hooks", None)
    return None if ask is None else bool(ask())


def implements_batch_hooks(callback: Any, kind: str) -> bool | None:
    """tf_keras / Keras 2's ``_implements_<kind>_batch_hooks()`` (``kind``: ``"train"``,
    ``"test"`` or ``"predict"``), or None where Keras does not ask (Keras 3)."""
    ask = getattr(callback, f"_implements_{kind}_batch_hooks", None)
    return None if ask is None else bool(ask())


def metric_direction(metric: Any) -> str | None:
    """A Keras 3 metric's ``"up"``/``"down"`` direction (EarlyStopping's ``mode="auto"``)."""
    return getattr(metric, "_direction", None)


def compile_metrics_by_key(metric: Any) -> dict[str, Any] | None:
    """The metric objects of Keras 3's ``CompileMetrics`` container by the key Keras logs them
    under (``out_a_mae`` for a metric ``mae`` of output ``out_a``, ``weighted_mae`` for a
    weighted metric named as an unweighted one, ``mae_1`` for a second ``mae``), named as its
    ``result()`` names them from the private ``_flat_metrics`` / ``_flat_weighted_metrics``
    lists; None for any other metric (tf_keras names its metrics after their log keys)."""
    flat = getattr(metric, "_flat_metrics", None)
    weighted = getattr(metric, "_flat_weighted_metrics", None)
    if flat is None or weighted is None or not getattr(metric, "built", False):
        return None
    keys: dict[str, Any] = {}
    counters: dict[str, int] = {}
    for is_weighted, lists in ((False, flat), (True, weighted)):
        for mls in lists:
            if not mls:
                continue
            prefix = f"{mls.output_name}_" if mls.output_name else ""
            for m in mls.metrics:
                name = prefix + m.name
                if name in counters:
                    if is_weighted:
                        name = f"{prefix}weighted_{m.name}"
                    if name in counters:
                        counters[name] += 1
                        name = f"{name}_{counters[name] - 1}"
                    else:
                        counters[name] = 1
                else:
                    counters[name] = 1
                keys[name] = m
    return keys


#: tf_keras / Keras 2 ``TensorBoard._collect_learning_rate`` reads ``model.optimizer.<this>`` and
#: logs ``epoch_learning_rate`` only when it is a ``LearningRateSchedule``.
KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE = "_learning_rate"


#: tf_keras / Keras 2 ``TensorBoard`` takes ``model.<this>`` (a counter variable its train / test
#: function increments) as the step of its batch-level summaries.
KERAS_TRAIN_COUNTER_ATTRIBUTE = "_train_counter"


KERAS_TEST_COUNTER_ATTRIBUTE = "_test_counter"


def keras_fit_start(model: Any, steps_per_epoch: int | None, initial_epoch: int) -> tuple[int, int]:
    """The epoch ``fit`` starts at and the step index it starts that epoch at, as ``fit`` reads
    them right after ``on_train_begin``, where ``BackupAndRestore`` restored its backup.

    Keras 3: ``model._initial_epoch or initial_epoch`` (its ``BackupAndRestore`` sets the private
    attribute; step 0). tf_keras / Keras 2: ``model._maybe_load_initial_counters_from_ckpt(
    steps_per_epoch, initial_epoch)`` (their ``BackupAndRestore``'s backup state; a step after
    0 when it backed up mid-epoch). ``(initial_epoch, 0)`` for an object no ``fit`` runs (not a
    ``keras.Model``).
    """
    if not isinstance(model, tf.keras.Model):
        return initial_epoch, 0
    if hasattr(model, "_maybe_load_initial_counters_from_ckpt"):  # tf_keras / Keras 2
        epoch, step = model._maybe_load_initial_counters_from_ckpt(steps_per_epoch, initial_epoch)
        return int(epoch), int(step)
    return int(model._initial_epoch or initial_epoch), 0  # Keras 3


def keras2_builtin_callback_names(callback: Any) -> frozenset[str] | None:
    """The names tf_keras / Keras 2's ``CallbackList`` treats as its own callbacks: a list holding
    a callback whose class name is not among them times its batch methods (the slow-callback
    warning; ``cbk.__class__.__name__ not in globals()`` of the module that defines
    ``CallbackList``). None for a Keras 3 callback (no such check)."""
    if implements_batch_hooks(callback, "train") is None:
        return None
    for klass in type(callback).__mro__:
        root = klass.__module__.split(".")[0]
        if root in ("keras", "tf_keras"):
            package = sys.modules.get(root)
            callback_list = getattr(getattr(package, "callbacks", None), "CallbackList", None)
            module = sys.modules.get(getattr(callback_list, "__module__", ""))
            return frozenset(vars(module)) if module is not None else frozenset()
    return frozenset()
