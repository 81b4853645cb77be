"""``model.optimizer`` under CallbackHook: the graph's learning rate and global step as Keras's.

A subclass of the stack's Keras ``Optimizer`` (TensorBoard logs the learning rate of those only)
whose every attribute is answered from the graph: ``learning_rate``/``lr`` (read and assigned
through :class:`~hookbridge._callback_hook.rate.LearningRate`), ``iterations`` (the global step),
``name``/``get_config()``; anything else raises :class:`UnsupportedModelAttributeError`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._callback_hook.directions import is_keras3
from hookbridge._callback_hook.errors import UnsupportedModelAttributeError, accessing_callback
from hookbridge._callback_hook.state import GraphState

#: Keras 3's own message (``BaseOptimizer.learning_rate``'s setter) for a schedule's rate.
KERAS3_SCHEDULE_NOT_SETTABLE = (
    "This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
    "constructor argument, hence its learning rate is not settable. If you need the learning "
    "rate to be settable, you should instantiate the optimizer with a float `learning_rate` "
    "argument."
)


class _ValueMixin:
    """A learning-rate value as Keras callbacks read it (``float()``, ``.numpy()``, ``.dtype``,
    ``.shape == ()``) and write it (``.assign``, which ``backend.set_value`` calls).

    A NumPy scalar of the variable's dtype (its ``dtype`` and ``shape`` NumPy's: NumPy's C code
    reads them), as tf_keras's ``backend.get_value`` gives natively:
    ``ReduceLROnPlateau``'s ``old_lr * factor`` then rounds as natively (float32 arithmetic
    under NumPy 2)."""

    _state: GraphState

    def assign(self, value: Any) -> None:
        _write_lr(self._state, value, keras3=False)

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


_VALUE_CLASSES: dict = {}


def _lr_value(state: GraphState) -> Any:
    """The learning rate's value now, as a :class:`_ValueMixin` NumPy scalar of its dtype."""
    scalar = state.lr.dtype.as_numpy_dtype
    klass = _VALUE_CLASSES.get(scalar)
    if klass is None:
        # NumPy's scalar first in the bases: with a Python class before it, NumPy 2.4's
        # ``.item()`` crashes the interpreter (tf_keras's ModelCheckpoint calls it on logs).
        klass = _VALUE_CLASSES[scalar] = type("LearningRateValue", (scalar, _ValueMixin), {})
    value = klass(state.get_lr())
    value._state = state
    return value


def _write_lr(state: GraphState, value: Any, *, keras3: bool) -> None:
    """Assigns the learning rate; a tensor's (a schedule's) cannot be, as in Keras.

    Keras 3 raises its TypeError. tf_keras / Keras 2 accept the assignment to the variable their
    optimizer copies the schedule's value into, and overwrite it before the next step: natively
    it has no effect, here neither, and a warning says so.
    """
    if state.lr.settable:
        state.set_lr(value)
    elif keras3:
        raise TypeError(
            KERAS3_SCHEDULE_NOT_SETTABLE + " (CallbackHook: learning_rate= is a tensor, not a "
            "tf.Variable; pass a variable to make it settable.)"
        )
    elif not state.warned_lr_ignored:
        state.warned_lr_ignored = True
        warnings.warn(
            f"CallbackHook: a callback assigned the learning rate {float(value)!r}, but "
            f"learning_rate= is the tensor {state.lr.tensor.name!r} (a schedule), which cannot "
            "be assigned: the assignment is ignored, as tf_keras / Keras 2 overwrite it with the "
            "schedule's value before the next step. Pass a tf.Variable to make it settable.",
            UserWarning,
            stacklevel=3,
        )


class _Step(int):
    """The global step as Keras reads ``optimizer.iterations`` (``.numpy()``, ``.read_value()``)."""

    def numpy(self) -> np.ndarray:
        return np.int64(self)

    def read_value(self) -> np.ndarray:
        return np.int64(self)


_OPTIMIZER_CLASSES: dict = {}


def optimizer_class(package: Any) -> type:
    """A subclass of the stack's Keras ``Optimizer`` (TensorBoard logs the learning rate of those
    only), whose every attribute is answered by :class:`_OptimizerMixin`."""
    key = package.__name__
    if key not in _OPTIMIZER_CLASSES:
        base = package.optimizers.Optimizer
        schedule_base = package.optimizers.schedules.LearningRateSchedule
        schedule = type("GraphLearningRate", (_ScheduleMixin, schedule_base), {})
        _OPTIMIZER_CLASSES[key] = type(
            "GraphOptimizer",
            (_OptimizerMixin, base),
            {"_schedule_class": schedule, "_hb_keras3": is_keras3(package)},
        )
    return _OPTIMIZER_CLASSES[key]


class _ScheduleMixin:
    """``optimizer._learning_rate`` as a schedule: tf_keras's TensorBoard logs schedules only."""

    def __init__(self, state: GraphState) -> None:
        self._state = state

    def __call__(self, step: Any) -> float:
        return self._state.get_lr()

    def get_config(self) -> dict:
        return {}


class _OptimizerMixin:
    __setattr__ = object.__setattr__

    def __init__(self, state: GraphState, callbacks: list) -> None:  # no Keras __init__: no vars
        object.__setattr__(self, "_hb_state", state)
        object.__setattr__(self, "_hb_callbacks", callbacks)

    @property
    def _hb_callback(self) -> str:
        return accessing_callback(self._hb_callbacks)

    def _hb_lr_state(self, attribute: str) -> GraphState:
        state = self._hb_state
        if state.learning_rate is None:
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model.optimizer",
                attribute,
                "Pass CallbackHook(..., learning_rate=<the graph's learning-rate tf.Variable, "
                "or a tensor such as tf.compat.v1.train.exponential_decay(...)>), the rate the "
                "TF1 optimizer was built with.",
            )
        return state

    @property
    def learning_rate(self) -> Any:
        """As Keras's: a variable's value (readable and assignable); a tensor's (a schedule's)
        value is Keras 3's scalar tensor, or tf_keras's assignable value."""
        state = self._hb_lr_state("learning_rate")
        if self._hb_keras3 and not state.lr.settable:
            with _tfcompat.eager():
                return tf.constant(state.get_lr(), state.lr.dtype)
        if not state.lr.settable and not state.lr.fed and not state.warned_lr_lag:
            state.warned_lr_lag = True
            warnings.warn(
                "CallbackHook: model.optimizer.learning_rate of a schedule tensor is its value "
                "at the current global step (Keras 3's value, and what tf_keras's TensorBoard "
                "logs); a native tf_keras / Keras 2 optimizer returns the rate its last step "
                "used, one step behind. See docs/limits.md.",
                UserWarning,
                stacklevel=2,
            )
        return _lr_value(state)

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        _write_lr(self._hb_lr_state("learning_rate"), value, keras3=self._hb_keras3)

    lr = learning_rate

    def _hb_schedule_or_value(self) -> Any:
        """``optimizer._learning_rate`` (``_tfcompat.KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE``): a
        ``LearningRateSchedule`` for a computed tensor (tf_keras's TensorBoard logs it as
        ``epoch_learning_rate``), the value for a variable or a fed placeholder (an assigned
        float rate, which tf_keras's TensorBoard does not log)."""
        state = self._hb_lr_state(_tfcompat.KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE)
        if state.lr.settable or state.lr.fed:
            return _lr_value(state)
        return self._schedule_class(state)

    @property
    def iterations(self) -> _Step:
        state = self._hb_state
        if state.global_step is None:
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model.optimizer",
                "iterations",
                "The graph has no global step: create it with "
                "tf.compat.v1.train.get_or_create_global_step() before the session.",
            )
        return _Step(state.get_step())

    @property
    def name(self) -> str:
        optimizer = self._hb_state.optimizer
        return "graph_optimizer" if optimizer is None else optimizer.get_name()

    def get_config(self) -> dict:
        """``name``, the current ``learning_rate`` (when known) and, with
        ``CallbackHook(optimizer=...)``, the TF1 optimizer's other constructor arguments."""
        state = self._hb_state
        config: dict[str, Any] = {"name": self.name}
        if state.lr is not None and state.session is not None:
            config["learning_rate"] = state.get_lr()
        if state.optimizer is not None:
            for key, value in _tfcompat.tf1_optimizer_settings(state.optimizer).items():
                if isinstance(value, (bool, int, float, str)) and key not in config:
                    config[key] = value
        return config

    def __getattr__(self, attribute: str) -> Any:
        # Also reached when a property above raised (Python retries here): re-raise its error.
        if attribute.startswith("_hb_"):
            raise AttributeError(attribute)
        if attribute in ("learning_rate", "lr", _tfcompat.KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE):
            self._hb_lr_state(attribute)
        if attribute == "iterations":
            return type(self).iterations.fget(self)
        raise UnsupportedModelAttributeError(self._hb_callback, "model.optimizer", attribute)

    def __repr__(self) -> str:
        return f"<hookbridge GraphOptimizer {self.name!r}>"


setattr(
    _OptimizerMixin,
    _tfcompat.KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE,
    property(_OptimizerMixin._hb_schedule_or_value),
)
