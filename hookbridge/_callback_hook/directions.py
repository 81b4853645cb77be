"""Metric directions for ``mode="auto"`` monitor callbacks, and which Keras a callback is.

Keras 3 decides a monitor's direction from the model's compiled metrics (``model.metrics``):
the proxy answers with the direction each log name would get compiled as a metric, or the one
declared in ``CallbackHook(metric_directions=...)``. tf_keras / Keras 2 decide from the name
alone: a declaration they contradict warns.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

_DIRECTIONS = {"max": "up", "min": "down"}


def check_metric_directions(value: Mapping[str, str] | None) -> dict[str, str]:
    """``metric_directions`` (log name -> ``"max"``/``"min"``) as Keras 3 directions."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            "CallbackHook: metric_directions must be a mapping of log name -> 'max' or 'min' "
            f"(e.g. {{'my_score': 'max'}}), received {value!r} of type {type(value).__name__}."
        )
    out = {}
    for name, mode in value.items():
        if not isinstance(name, str) or mode not in _DIRECTIONS:
            raise ValueError(
                f"CallbackHook: metric_directions[{name!r}] = {mode!r}: expected a log name "
                "(str) mapped to 'max' (greater is better) or 'min' (lower is better)."
            )
        out[name.removeprefix("val_")] = _DIRECTIONS[mode]
    return out


def compiled_metric_direction(package: Any, name: str) -> str | None:
    """The direction Keras 3 gives metric ``name`` in a model compiled with ``metrics=[name]``.

    As Keras 3's ``compile`` builds it (``compile_utils.get_metric``): ``"acc"``/``"accuracy"``
    become one of the accuracy metrics (all ``"up"``); any other name is looked up with
    ``keras.metrics.get`` and a plain function is wrapped in ``MeanMetricWrapper`` (which gives
    Keras's loss functions ``"down"``). ``None`` when Keras would not know the name either.
    """
    if name.lower() in ("acc", "accuracy"):
        metric: Any = package.metrics.BinaryAccuracy(name=name)
    else:
        try:
            metric = package.metrics.get(name)
        except (ValueError, TypeError):
            return None
        if not isinstance(metric, package.metrics.Metric):
            metric = package.metrics.MeanMetricWrapper(metric, name=name)
    return _tfcompat.metric_direction(metric)


def warn_name_based_directions(callbacks: Sequence[Any], directions: Mapping[str, str]) -> None:
    """Warns when a tf_keras / Keras 2 monitor callback ignores a declared direction.

    Those callbacks decide ``mode="auto"`` from the monitor's name alone (``"acc"`` in it:
    maximize), never asking the model, natively as here; a declared ``metric_directions``
    entry they contradict would be silently unused.
    """
    for cb in callbacks:
        name = str(getattr(cb, "monitor", "")).removeprefix("val_")
        op = getattr(cb, "monitor_op", None)
        # (tf_keras keeps ``mode`` only on ReduceLROnPlateau: the others are checked whatever it was)
        if name not in directions or getattr(cb, "mode", "auto") != "auto" or op is None:
            continue
        if is_keras3(keras_package(cb)):
            continue  # Keras 3 decides from model.metrics, which holds the declaration
        decided = "up" if bool(op(1.0, 0.0)) else "down"
        if decided != directions[name]:
            mode = "max" if directions[name] == "up" else "min"
            warnings.warn(
                f"CallbackHook: {type(cb).__name__}(monitor={cb.monitor!r}) will "
                f"{'maximize' if decided == 'up' else 'minimize'} it: tf_keras / Keras 2 "
                "callbacks choose the direction from the name alone (or their mode) and ignore "
                f"metric_directions[{name!r}]. Pass mode={mode!r} to the callback.",
                UserWarning,
                stacklevel=3,
            )


def is_keras3(package: Any) -> bool:
    """Whether ``package`` (a callback's Keras package) is Keras 3."""
    return package.__name__ == "keras" and hasattr(package, "ops")


def keras_package(callback: Any) -> Any:
    """The Keras package ``callback`` belongs to: that of its first Keras base class (a user's
    subclass of ``tf.keras.callbacks.Callback`` on tf_keras is a tf_keras callback)."""
    for klass in type(callback).__mro__:
        root = klass.__module__.split(".")[0]
        if root in ("keras", "tf_keras"):
            return importlib.import_module(root)
    return default_package()


def default_package() -> Any:
    """The package ``tf.keras`` is (tf_keras under ``TF_USE_LEGACY_KERAS=1``)."""
    return importlib.import_module(tf.keras.__name__.split(".")[0])
