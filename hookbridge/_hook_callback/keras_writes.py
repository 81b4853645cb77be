"""What the bridge writes into (and how it reads the global step of) the Keras model.

Hooks may write the global step and the weight mirrors through the bridge's session (a restore,
an assign, ``init_from_checkpoint``); these helpers carry such writes into the Keras model, and
build the :class:`GlobalStep` of a run on ``optimizer.iterations``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _exact, _tfcompat
from hookbridge._hook_callback.global_step import GlobalStep

keras = tf.keras


def keras_context(variable: Any) -> Any:
    """Where a Keras variable can be read or written: eagerly, or (tf_keras graph mode) in its
    own graph."""
    try:
        graph = variable.graph
    except (AttributeError, RuntimeError, ValueError):  # eager, or a distributed variable
        graph = None  # (whose handle cannot be read from the bridge's graph)
    if (
        graph is not None
        and not getattr(graph, "building_function", True)
        and not tf.compat.v1.executing_eagerly_outside_functions()
    ):
        return graph.as_default()
    return _tfcompat.eager()


def weight_setter(model: Any) -> Callable[[list], None]:
    """``model.set_weights`` callable from anywhere (the bridge's graph may be the default)."""

    def set_weights(values: list) -> None:
        weights = model.weights
        with keras_context(weights[0] if weights else None):
            model.set_weights(values)

    return set_weights


_KERAS_PACKAGES = frozenset({"keras", "tf_keras"})


def _keras_own(cls: type, name: str) -> bool:
    """Whether the class defining ``cls.<name>`` (first in the MRO) is Keras's own."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return klass.__module__.split(".", 1)[0] in _KERAS_PACKAGES
    return False


def increment_unknown(model: Any, optimizer: Any) -> bool:
    """Whether a Keras step may advance ``iterations`` by other than one batch's one: the
    optimizer may skip a step (Keras 3 ``LossScaleOptimizer`` on non-finite gradients; gradient
    accumulation counts updates) or is not Keras's own class (its own ``apply`` may count
    otherwise), or the model's ``train_step`` is not Keras's own (a custom step applies the
    gradients when it chooses: every second batch, twice, never), nor is a custom loop's
    (``CallbackLoop``), which runs no ``train_step``."""
    if optimizer is None:
        return False
    if getattr(optimizer, "gradient_accumulation_steps", None):
        return True
    if any("LossScaleOptimizer" in c.__name__ for c in type(optimizer).__mro__):
        return True
    if type(optimizer).__module__.split(".", 1)[0] not in _KERAS_PACKAGES:
        return True
    if _exact.driven(model):  # a custom loop (CallbackLoop): the step is the user's
        return True
    return not _keras_own(type(model), "train_step")


def global_step_for(model: Any, read: Callable[[], int | None]) -> GlobalStep:
    """The run's :class:`GlobalStep` on ``model.optimizer.iterations``."""
    optimizer = getattr(model, "optimizer", None)
    variable = getattr(optimizer, "iterations", None)  # a tensor under gradient accumulation

    def write(value: int) -> None:
        assign = getattr(variable, "assign", None)
        if assign is None:
            raise RuntimeError(
                "HookCallback: a hook assigned the global step, but this model's "
                f"optimizer.iterations ({type(variable).__name__}) cannot be assigned (gradient "
                "accumulation computes it); assign the optimizer's own step counter instead."
            )
        with keras_context(variable):
            dtype = getattr(getattr(variable, "dtype", None), "name", None) or str(variable.dtype)
            assign(np.asarray(value, dtype=dtype))

    step = GlobalStep(variable, read, write, may_skip=increment_unknown(model, optimizer))
    if variable is None:
        step.dirty = False
    return step
