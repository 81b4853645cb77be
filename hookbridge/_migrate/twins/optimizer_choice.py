"""Which optimizer each part of a canned Estimator trains with, and its default learning rate.

What tensorflow-estimator 2.15 gives each part when the optimizer is a name (the canned
defaults): DNN ``"Adagrad"`` at 0.05 (V1) or the Keras default 0.001 (V2); linear ``"Ftrl"`` at
0.2, or ``min(0.2, 1/sqrt(n_columns))`` when ``optimizer=None``; in ``DNNLinearCombined*`` the
DNN part's at 0.001 and the linear part's at ``min(0.005, 1/sqrt(n_linear_columns))``.

The Keras optimizer computing the Estimator's update is
``twins.optimizers.estimator_optimizer`` (dense and sparse, every stack); where that module is
not there, :func:`_fallback` builds the one ``keras_twin`` built before it (dense updates:
``tf.keras.optimizers.legacy`` for V2, the Keras class computing the TF1 update for V1).
"""

from __future__ import annotations

import math
from typing import Any

_DNN_V1_LR, _LINEAR_LR = 0.05, 0.2
_COMBINED_DNN_LR, _COMBINED_LINEAR_LR = 0.001, 0.005
#: The TF1 optimizer a V1 canned Estimator makes of a name (``optimizers.get_optimizer_instance``).
_TF1_OPTIMIZERS = {
    "Adagrad": "AdagradOptimizer",
    "Adam": "AdamOptimizer",
    "Ftrl": "FtrlOptimizer",
    "RMSProp": "RMSPropOptimizer",
    "SGD": "GradientDescentOptimizer",
}


def default_learning_rate(spec: Any, v2: bool, part: str, n_columns: int) -> float | None:
    """The learning rate the Estimator gives the optimizer ``spec`` of ``part`` (``DNN``,
    ``Linear``, ``DNNCombined``, ``LinearCombined``) when ``spec`` is a name or ``None``;
    ``None``: the optimizer's own default (V2 DNN)."""
    if part == "LinearCombined":
        return min(_COMBINED_LINEAR_LR, 1.0 / math.sqrt(max(n_columns, 1)))
    if part == "DNNCombined":
        return _COMBINED_DNN_LR
    if part == "Linear":
        if spec is None:
            return min(_LINEAR_LR, 1.0 / math.sqrt(max(n_columns, 1)))
        return _LINEAR_LR
    return None if v2 else _DNN_V1_LR


def choose(spec: Any, v2: bool, part: str, n_columns: int) -> Any:
    """The Keras optimizer computing the update of the optimizer the Estimator makes of
    ``spec`` (a name, ``None``, a dict ``{"name": ..., <settings>}`` or an instance).

    Raises:
        ValueError: an optimizer the twin cannot copy, named.
    """
    default = {"Linear": "Ftrl", "LinearCombined": "Ftrl"}.get(part, "Adagrad")
    name = spec if isinstance(spec, str) else default if spec is None else None
    lr = default_learning_rate(spec, v2, part, n_columns)
    if isinstance(spec, dict) and "learning_rate" not in spec:
        spec = {**spec, "learning_rate": lr}
    try:
        from hookbridge._migrate.twins.optimizers import estimator_optimizer
    except ImportError:  # twins/optimizers.py (issue 33 item 2) not there yet
        return _fallback(name if name else spec, v2, lr)
    if name is not None:
        spec = {"name": name} if lr is None else {"name": name, "learning_rate": lr}
    return estimator_optimizer(spec, v2=v2)


def _fallback(optimizer: Any, v2: bool, lr: float | None) -> Any:
    """The Keras optimizer keras_twin built before ``twins/optimizers.py`` (dense updates)."""
    import tensorflow as tf

    from hookbridge import _tfcompat

    keras = tf.keras
    if isinstance(optimizer, dict):
        settings = {k: v for k, v in optimizer.items() if k != "name"}
        optimizer, lr = optimizer.get("name"), settings.pop("learning_rate", lr)
        if settings:
            raise ValueError(
                f"keras_twin: optimizer settings {sorted(settings)} need "
                "hookbridge/_migrate/twins/optimizers.py; give the name and learning_rate only."
            )
    if v2:
        legacy = None if _keras3(keras) else getattr(keras.optimizers, "legacy", None)
        if isinstance(optimizer, str) and legacy is not None:
            classes = {
                "Adagrad": "Adagrad",
                "Adam": "Adam",
                "Ftrl": "Ftrl",
                "RMSProp": "RMSprop",
                "SGD": "SGD",
            }
            if optimizer in classes:
                cls = getattr(legacy, classes[optimizer])
                return cls(learning_rate=lr) if lr else cls()
        elif isinstance(optimizer, str) and _keras3(keras):
            raise ValueError(
                f"keras_twin: a V2 canned Estimator's {optimizer!r} is a "
                "tf.keras.optimizers.legacy optimizer, which Keras 3 does not have; its "
                "update is hookbridge/_migrate/twins/optimizers.py's (not there yet)."
            )
        elif not isinstance(optimizer, str) and (
            isinstance(optimizer, keras.optimizers.Optimizer) or _is_legacy(legacy, optimizer)
        ):
            # The instance the Estimator trained with: its hyperparameters are variables of
            # the Estimator's graph by now, read as the values they were created with.
            config = _tfcompat.keras_optimizer_config(optimizer)
            if not isinstance(config, dict):
                raise ValueError(_unreadable(optimizer, config))
            return type(optimizer).from_config(config)
    else:
        if isinstance(optimizer, str) and optimizer in _TF1_OPTIMIZERS:
            optimizer = getattr(tf.compat.v1.train, _TF1_OPTIMIZERS[optimizer])(lr)
        if isinstance(optimizer, tf.compat.v1.train.Optimizer):
            return _from_tf1(keras, optimizer)
    raise ValueError(
        f"keras_twin: the Estimator's optimizer {optimizer!r} is not one the twin can copy "
        "(a name, a Keras optimizer for tf.estimator V2, a tf.compat.v1.train Adagrad, Adam, "
        "Ftrl, RMSProp or GradientDescent optimizer for V1); compile the twin yourself with the "
        "Keras optimizer computing its update (docs/limits.md)."
    )


def _keras3(keras: Any) -> bool:
    return str(getattr(keras, "__version__", "")).startswith("3.")


def _is_legacy(legacy: Any, optimizer: Any) -> bool:
    if legacy is None:
        return False
    try:
        return isinstance(optimizer, legacy.Optimizer)
    except (ImportError, TypeError):
        return False


def _from_tf1(keras: Any, optimizer: Any) -> Any:
    """The Keras optimizer computing a ``tf.compat.v1.train`` optimizer's update, with its
    settings (a V1 canned Estimator's, given by name or as an instance)."""
    from hookbridge import _tfcompat

    kind = type(optimizer).__name__
    settings = _tfcompat.tf1_optimizer_settings(optimizer)
    odd = {
        k: v
        for k, v in settings.items()
        if k not in ("name", "use_locking", "accum_name", "linear_name")
        and not isinstance(v, (bool, int, float, type(None)))
    }
    if odd:
        raise ValueError(_unreadable(optimizer, odd))
    s = settings
    legacy = keras.optimizers if _keras3(keras) else keras.optimizers.legacy
    # Keras 3 has no legacy classes: its own compute these dense updates.
    builders = {
        # Keras's Adagrad takes epsilon inside the root, 0 = TF1's.
        "AdagradOptimizer": lambda: keras.optimizers.Adagrad(
            s["learning_rate"],
            initial_accumulator_value=s["initial_accumulator_value"],
            epsilon=0.0,
        ),
        "AdamOptimizer": lambda: legacy.Adam(
            s["learning_rate"], beta_1=s["beta1"], beta_2=s["beta2"], epsilon=s["epsilon"]
        ),
        "FtrlOptimizer": lambda: legacy.Ftrl(
            s["learning_rate"],
            learning_rate_power=s["learning_rate_power"],
            initial_accumulator_value=s["initial_accumulator_value"],
            l1_regularization_strength=s["l1_regularization_strength"],
            l2_regularization_strength=s["l2_regularization_strength"],
            l2_shrinkage_regularization_strength=s["l2_shrinkage_regularization_strength"],
            beta=s.get("beta") or 0.0,
        ),
        "RMSPropOptimizer": lambda: legacy.RMSprop(
            s["learning_rate"],
            rho=s["decay"],
            momentum=s["momentum"],
            epsilon=s["epsilon"],
            centered=s["centered"],
        ),
        "GradientDescentOptimizer": lambda: legacy.SGD(s["learning_rate"]),
    }
    if kind not in builders:
        raise ValueError(
            f"keras_twin: the Estimator's optimizer {kind} is not one the twin can copy (TF1 "
            f"{', '.join(builders)}); compile the twin yourself with the Keras optimizer "
            "computing its update (docs/limits.md)."
        )
    return builders[kind]()


def _unreadable(optimizer: Any, what: Any) -> str:
    return (
        f"keras_twin: the Estimator's optimizer {type(optimizer).__name__} has settings that "
        f"are tensors of the Estimator's graph, not numbers it can read ({what}): a schedule "
        "or a tensor built in the model_fn's graph is gone with it. Build the twin's optimizer "
        "yourself (twin.compile(optimizer=..., loss=twin.loss)) with the values the Estimator "
        "used, or give the Estimator numbers (docs/limits.md)."
    )
