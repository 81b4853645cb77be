"""The Keras optimizer computing a canned Estimator's updates, on every stack.

A V1 canned Estimator (``tf.compat.v1.estimator.*``) trains with ``tf.compat.v1.train``
optimizers, a V2 one (``tf.estimator.*``) with ``tf.keras.optimizers.legacy`` optimizers
(``tensorflow_estimator/.../canned/optimizers.py``). ``estimator_optimizer`` returns, for what the
Estimator was given:

* Adagrad, Ftrl (the canned defaults) and SGD: an optimizer of
  ``twins/optimizer_kernels.py`` running the Estimator's own training kernels (values and slots
  bit-equal to the TF1 optimizer, dense and sparse with duplicate ids), on Keras 3, tf_keras and
  Keras 2.15; for V2 on Keras 2.15 / tf_keras the ``optimizers.legacy`` class itself (it is what
  the Estimator runs), and for SGD on those stacks ``optimizers.legacy.SGD`` (its kernels are
  TF1's: ``ResourceApplyGradientDescent``, and a scatter-add of ``-lr * g`` per row).
* Adam and RMSProp: ``optimizers.legacy`` where it exists (V2: exact; V1: TF1's update up to
  float rounding of the beta powers); on Keras 3 its own class, with a warning that its update
  differs in float (``docs/limits.md``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from hookbridge._migrate.twins import optimizer_kernels

#: The names a canned Estimator takes (``optimizers.get_optimizer_instance``), and aliases.
_NAMES = {
    "Adagrad": "Adagrad",
    "Ftrl": "Ftrl",
    "SGD": "SGD",
    "GradientDescent": "SGD",
    "Adam": "Adam",
    "RMSProp": "RMSProp",
    "RMSprop": "RMSProp",
}
#: TF1 optimizer class -> name.
_TF1_CLASSES = {
    "AdagradOptimizer": "Adagrad",
    "FtrlOptimizer": "Ftrl",
    "GradientDescentOptimizer": "SGD",
    "AdamOptimizer": "Adam",
    "RMSPropOptimizer": "RMSProp",
}
#: TF1 settings that do not change the update (``accum_name``/``linear_name`` rename slots:
#: refused when set, the checkpoint would not hold the names hookbridge maps).
_TF1_IGNORED = ("name", "use_locking")
#: Legacy Keras settings that change nothing when at these values.
_KERAS_NEUTRAL = {
    "name": None,
    "decay": 0.0,
    "clipnorm": None,
    "clipvalue": None,
    "global_clipnorm": None,
    "is_legacy_optimizer": True,
}


def estimator_optimizer(
    spec: Any, *, v2: bool, default_name: str = "Adagrad", default_lr: float | None = None
) -> Any:
    """The Keras optimizer computing the updates of the optimizer a canned Estimator builds.

    Args:
        spec: what the Estimator was given: ``None`` (its default), a name (``"Adagrad"``,
            ``"Ftrl"``, ``"SGD"``, ``"Adam"``, ``"RMSProp"``), a ``tf.compat.v1.train``
            optimizer (V1, TF 2.15), a ``tf.keras.optimizers.legacy`` optimizer (V2, TF 2.15),
            or a dict ``{"name": "Ftrl", "learning_rate": 0.1, ...}`` of the constructor
            arguments of that optimizer (V1: ``tf.compat.v1.train.FtrlOptimizer``'s; V2:
            ``tf.keras.optimizers.legacy.Ftrl``'s), the way to say it where neither exists.
        v2: the Estimator is a ``tf.estimator.*`` (V2) class, not ``tf.compat.v1.estimator``.
        default_name: the optimizer the canned class builds for ``None``.
        default_lr: the learning rate the canned class gives a name (V1 DNN 0.05, linear 0.2;
            ``DNNLinearCombined*`` 0.001 and ``min(0.005, 1/sqrt(n))``; V2 DNN ``None``: the
            Keras class's default). For ``spec=None`` pass the rate of the default optimizer
            (``LinearClassifier``: ``min(0.2, 1/sqrt(n_columns))``).

    Returns:
        A Keras optimizer of the running Keras (Keras 3, tf_keras or Keras 2.15).

    Raises:
        ValueError: a name, class or setting it cannot copy (a schedule or tensor of the
            Estimator's graph, ``accum_name``, a legacy ``decay``): the message names it.
    """
    import tensorflow as tf

    keras = tf.keras
    spec = default_name if spec is None else spec
    if isinstance(spec, str):
        name, settings = _name(spec), {}
        if default_lr is not None:
            settings["learning_rate"] = default_lr
    elif isinstance(spec, Mapping):
        settings = dict(spec)
        name = _name(settings.pop("name", None))
        if "learning_rate" not in settings and default_lr is not None:
            settings["learning_rate"] = default_lr
    else:
        name, settings = _read_instance(spec, v2)
    flavor = "keras" if v2 else "tf1"
    legacy = getattr(keras.optimizers, "legacy", None)
    keras3 = str(getattr(keras, "__version__", "2")).startswith("3")
    has_legacy = legacy is not None and not keras3
    if name in ("Adagrad", "Ftrl") or (name == "SGD" and keras3):
        if not v2 and "learning_rate" not in settings:
            raise ValueError(
                f"estimator_optimizer: the TF1 {name} optimizer has no default learning rate; "
                "give it (default_lr, or 'learning_rate' in the dict)."
            )
        if v2 and has_legacy:
            return _legacy(legacy, name, settings)
        if name == "SGD":
            _refuse(settings, ("momentum", "nesterov"), name)
        settings = _without_neutral(settings, name) if v2 else _tf1_only(settings, name)
        return optimizer_kernels.classes(keras)[name](flavor=flavor, **settings)
    if name == "SGD":
        settings = _without_neutral(settings, name) if v2 else _tf1_only(settings, name)
        return legacy.SGD(**settings)
    # Adam / RMSProp
    if not v2:
        settings = _tf1_to_keras(name, _tf1_only(settings, name))
    if has_legacy:
        return _legacy(legacy, name, settings)
    warnings.warn(
        f"estimator_optimizer: Keras 3 has no legacy {name}; the twin trains with Keras 3's "
        f"{name}, whose update differs from the Estimator's in float (docs/limits.md).",
        stacklevel=2,
    )
    cls = keras.optimizers.Adam if name == "Adam" else keras.optimizers.RMSprop
    return cls(**_without_neutral(settings, name))


def canned_default_lr(base: str, part: str, spec: Any, v2: bool, n_columns: int) -> float | None:
    """The learning rate a canned Estimator gives a named (or default) optimizer.

    Args:
        base: the canned class without ``V2`` (``DNNClassifier``, ``LinearRegressor``,
            ``DNNLinearCombinedClassifier``, ...).
        part: ``"dnn"`` or ``"linear"``.
        spec: the optimizer argument (``None`` for a ``LinearClassifier``'s default picks
            ``min(0.2, 1/sqrt(n_columns))``).
        v2: a ``tf.estimator`` class.
        n_columns: the number of linear feature columns.
    """
    import math

    if base.startswith("DNNLinearCombined"):
        return 0.001 if part == "dnn" else min(0.005, 1.0 / math.sqrt(n_columns))
    if part == "dnn":
        return None if v2 else 0.05
    return min(0.2, 1.0 / math.sqrt(n_columns)) if spec is None else 0.2


def _name(name: Any) -> str:
    if name not in _NAMES:
        raise ValueError(
            f"estimator_optimizer: {name!r} is not an optimizer a canned Estimator takes by "
            f"name: one of {', '.join(sorted(set(_NAMES)))}."
        )
    return _NAMES[name]


def _read_instance(optimizer: Any, v2: bool) -> tuple[str, dict[str, Any]]:
    """(name, settings) of the optimizer instance a canned Estimator was given."""
    from hookbridge import _tfcompat

    kind = type(optimizer).__name__
    if kind in _TF1_CLASSES and not v2:
        settings = dict(_tfcompat.tf1_optimizer_settings(optimizer))
        odd = {
            k: v
            for k, v in settings.items()
            if k not in (*_TF1_IGNORED, "accum_name", "linear_name")
            and not isinstance(v, (bool, int, float, type(None)))
        }
        if odd:
            raise ValueError(_unreadable(optimizer, odd))
        return _TF1_CLASSES[kind], _tf1_only(settings, _TF1_CLASSES[kind])
    if (
        v2
        and kind in ("Adagrad", "Ftrl", "SGD", "Adam", "RMSprop")
        and hasattr(optimizer, "get_slot")
    ):
        config = _tfcompat.keras_optimizer_config(optimizer)
        if not isinstance(config, dict):
            raise ValueError(_unreadable(optimizer, config))
        return _name(kind), dict(config)
    raise ValueError(
        f"estimator_optimizer: the Estimator's optimizer {kind} is not one the twin can copy: "
        "a name, a tf.keras.optimizers.legacy Adagrad, Ftrl, SGD, Adam or RMSprop (tf.estimator "
        "V2), a tf.compat.v1.train Adagrad, Ftrl, GradientDescent, Adam or RMSProp optimizer "
        "(V1), or a dict {'name': ..., **settings}. Compile the twin yourself with the Keras "
        "optimizer computing its update (docs/limits.md)."
    )


def _legacy(legacy: Any, name: str, settings: dict[str, Any]) -> Any:
    cls = {
        "Adagrad": legacy.Adagrad,
        "Ftrl": legacy.Ftrl,
        "SGD": legacy.SGD,
        "Adam": legacy.Adam,
        "RMSProp": legacy.RMSprop,
    }[name]
    return cls.from_config(settings) if "name" in settings else cls(**settings)


def _tf1_only(settings: dict[str, Any], name: str) -> dict[str, Any]:
    """The TF1 optimizer's settings that change the update."""
    if settings.get("accum_name") or settings.get("linear_name"):
        raise ValueError(
            f"estimator_optimizer: the TF1 {name} optimizer has accum_name/linear_name set: its "
            "slots are saved under names hookbridge does not map; build it without them."
        )
    return {
        k: v for k, v in settings.items() if k not in (*_TF1_IGNORED, "accum_name", "linear_name")
    }


def _tf1_to_keras(name: str, s: dict[str, Any]) -> dict[str, Any]:
    """A TF1 Adam / RMSProp's settings as the legacy Keras class's arguments."""
    if name == "Adam":
        return {
            "learning_rate": s.get("learning_rate", 0.001),
            "beta_1": s.get("beta1", 0.9),
            "beta_2": s.get("beta2", 0.999),
            "epsilon": s.get("epsilon", 1e-8),
        }
    return {
        "learning_rate": s["learning_rate"],
        "rho": s.get("decay", 0.9),
        "momentum": s.get("momentum", 0.0),
        "epsilon": s.get("epsilon", 1e-10),
        "centered": s.get("centered", False),
    }


def _refuse(settings: Mapping[str, Any], keys: tuple[str, ...], name: str) -> None:
    bad = {k: settings[k] for k in keys if settings.get(k) not in (None, 0.0, False)}
    if bad:
        raise ValueError(
            f"estimator_optimizer: {name} with {bad} is not built on Keras 3 (no Keras 3 "
            "optimizer keeps legacy Keras's momentum slot); compile the twin yourself "
            "(docs/limits.md)."
        )


def _without_neutral(settings: dict[str, Any], name: str) -> dict[str, Any]:
    """Legacy Keras settings without those that change nothing here; refuses the others."""
    neutral = dict(
        _KERAS_NEUTRAL, **({"momentum": 0.0, "nesterov": False} if name == "SGD" else {})
    )
    out = {}
    for key, value in settings.items():
        if key not in neutral:
            out[key] = value
        elif key not in ("name", "is_legacy_optimizer") and value not in (neutral[key], None):
            raise ValueError(
                f"estimator_optimizer: the legacy Keras {name} has {key}={value!r}, which the "
                "twin's optimizer does not apply; compile the twin yourself (docs/limits.md)."
            )
    return out


def _unreadable(optimizer: Any, what: Any) -> str:
    return (
        f"estimator_optimizer: the Estimator's optimizer {type(optimizer).__name__} has "
        f"settings that are tensors of the Estimator's graph, not numbers it can read ({what}):"
        " a schedule or a tensor built in the model_fn's graph is gone with it. Give the "
        "values the Estimator used as a dict {'name': ..., 'learning_rate': ...}, or compile "
        "the twin yourself (docs/limits.md)."
    )
