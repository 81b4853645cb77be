"""Optimizer internals: a TF1 optimizer's constructor arguments, a Keras optimizer's
hyperparameters, step counter, gradient accumulators, slot variables (reading, building,
creating) and learning rate.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

import copy
from typing import Any

import tensorflow as tf

#: TF1 optimizers keep each constructor argument ``x`` as the private attribute ``_x``, except
#: these (``AdamOptimizer`` keeps ``learning_rate`` as ``_lr``).
_TF1_OPTIMIZER_ALIASES = {"learning_rate": ("_learning_rate", "_lr")}


def tf1_optimizer_settings(optimizer: Any) -> dict[str, Any]:
    """The constructor arguments of a ``tf.compat.v1.train.Optimizer`` (private attributes).

    Returns name -> value for each argument of ``type(optimizer).__init__`` found on the
    instance (``learning_rate`` may be a tensor or variable); ``tests/test_tfcompat.py`` checks
    them on the built-in optimizers.
    """
    import inspect

    settings: dict[str, Any] = {}
    for name in list(inspect.signature(type(optimizer).__init__).parameters)[1:]:
        for attribute in _TF1_OPTIMIZER_ALIASES.get(name, ("_" + name,)):
            if hasattr(optimizer, attribute):
                settings[name] = getattr(optimizer, attribute)
                break
    return settings


def keras_optimizer_config(optimizer: Any) -> dict[str, Any] | list[str]:
    """``optimizer.get_config()`` of a Keras (legacy ``OptimizerV2``) optimizer whose
    hyperparameters became variables of a graph that is gone (a canned Estimator's, after
    ``train``): each is read as the constant it was created with (private ``_hyper``). Returns
    the names of those that cannot be read (not a constant) instead of a config.
    """
    hyper = getattr(optimizer, "_hyper", None)
    if not isinstance(hyper, dict):
        return optimizer.get_config()
    values: dict[str, Any] = {}
    unreadable = []
    for name, value in hyper.items():
        graph = getattr(value, "graph", None)
        if not isinstance(graph, tf.Graph):
            values[name] = value  # a number, a schedule, or an eager variable
            continue
        with graph.as_default():
            try:
                initial = tf.get_static_value(getattr(value, "initial_value", value))
            except (AttributeError, TypeError, ValueError, RuntimeError):
                initial = None
        if initial is None:
            unreadable.append(f"{name}={value!r}")
        else:  # a float32 constant as the number it was written as (0.01, not 0.0099999998)
            dtype = getattr(value, "dtype", None)
            values[name] = float(str(initial) if dtype == tf.float32 else initial)
    if unreadable:
        return unreadable
    clone = copy.copy(optimizer)
    clone._hyper = values  # get_config reads them from here
    return clone.get_config()


#: A Keras optimizer's slot variables (state per model variable), by the canonical slot names
#: of ``tf.keras.optimizers.legacy`` (``get_slot``): the attribute of the lists Keras 2.11+ and
#: Keras 3 optimizers keep them in (``Adam._momentums[i]`` is ``m`` of the i-th variable).
KERAS_SLOT_LISTS = {
    "m": "_momentums",
    "v": "_velocities",
    "vhat": "_velocity_hats",
    "accumulator": "_accumulators",
    "linear": "_linears",
    "mg": "_average_gradients",
}


#: Slots whose list depends on the class: SGD keeps ``momentums`` (public), RMSprop keeps
#: ``rms`` in ``_velocities`` and ``momentum`` in ``_momentums``.
_KERAS_SLOT_LISTS_BY_CLASS = {
    ("SGD", "momentum"): "momentums",
    ("RMSprop", "rms"): "_velocities",
    ("RMSprop", "momentum"): "_momentums",
}


def build_keras_optimizer(optimizer: Any, variables: list) -> None:
    """Creates a Keras optimizer's slot variables for ``variables`` (as its first step does):
    ``build`` (Keras 2.11+ and Keras 3) or ``_create_all_weights`` (``optimizers.legacy``)."""
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "_create_all_weights"):
        optimizer._create_all_weights(variables)
    else:
        optimizer.build(variables)


def keras_optimizer_counter(optimizer: Any) -> tuple[Any, int]:
    """The variable counting a Keras optimizer's steps, and the batches per update.

    ``optimizer.iterations`` counts updates. Under Keras 3 ``gradient_accumulation_steps=k`` it
    is computed (``_iterations // k``, a tensor) from the private ``_iterations``, which counts
    batches: ``(optimizer._iterations, k)``; else ``(optimizer.iterations, 1)``. Give it the
    optimizer doing the updates (a ``LossScaleOptimizer``'s ``inner_optimizer``).
    """
    steps = getattr(optimizer, "gradient_accumulation_steps", None)
    if steps:
        return optimizer._iterations, int(steps)
    return optimizer.iterations, 1


def keras_gradient_accumulators(optimizer: Any) -> list:
    """The gradient sums a Keras 3 optimizer with ``gradient_accumulation_steps`` keeps between
    updates (private ``_accumulated_gradients``, one per variable once built; ``[]`` else)."""
    return [a for a in getattr(optimizer, "_accumulated_gradients", None) or [] if a is not None]


def keras_optimizer_owns(optimizer: Any, variable: Any) -> bool | None:
    """Whether a Keras optimizer was built on ``variable`` (keeps state for it); ``None`` when
    it is not built yet (or, ``optimizers.legacy``, keeps no slot at all so far).

    Keras 3: ``built`` and the private ``_get_variable_index``; Keras 2.11+ / tf_keras: the
    private ``_built`` and ``_index_dict``; ``optimizers.legacy``: ``get_slot`` (public).
    """
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "get_slot_names"):  # legacy
        names = optimizer.get_slot_names()
        if not names:
            return None
        try:
            optimizer.get_slot(variable, names[0])
        except KeyError:
            return False
        return True
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        if not optimizer.built:
            return None
        try:
            optimizer._get_variable_index(variable)
        except KeyError:
            return False
        return True
    if not getattr(optimizer, "_built", False):
        return None
    return optimizer._var_key(variable) in optimizer._index_dict


def keras_optimizer_slot(optimizer: Any, variable: Any, slot: str) -> Any:
    """The slot ``slot`` (``m``, ``v``, ``momentum``, ``accumulator``, ``linear``, ``rms``,
    ``mg``) of ``variable`` in a built Keras optimizer, or ``None`` when it keeps none."""
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "get_slot_names"):  # legacy
        if slot not in optimizer.get_slot_names():
            return None
        try:
            return optimizer.get_slot(variable, slot)
        except KeyError:  # no slots for this variable: one optimizer of several
            return None
    attribute = _KERAS_SLOT_LISTS_BY_CLASS.get((type(optimizer).__name__, slot))
    attribute = attribute or KERAS_SLOT_LISTS.get(slot)
    slots = getattr(optimizer, attribute, None) if attribute else None
    if not slots:
        return None
    if keras_optimizer_owns(optimizer, variable) is False:
        return None  # built on other variables (one optimizer of several)
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        index = optimizer._get_variable_index(variable)
    else:  # Keras 2.11+
        index = optimizer._index_dict[optimizer._var_key(variable)]
    return slots[index]


def keras_optimizer_variable_index(optimizer: Any, variable: Any) -> int:
    """The index of ``variable`` in a built Keras 3 / Keras 2.11+ optimizer's slot lists:
    Keras 3's private ``_get_variable_index``, Keras 2.11+'s private ``_index_dict`` keyed by
    ``_var_key`` (a ``tf.Variable`` or a Keras 3 variable)."""
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        return optimizer._get_variable_index(variable)
    return optimizer._index_dict[optimizer._var_key(variable)]


def keras_optimizer_slot_variable(optimizer: Any, variable: Any, slot: str, value: float) -> Any:
    """A new slot variable of a Keras 3 / Keras 2.11+ optimizer shaped like ``variable``, filled
    with ``value`` (``add_variable_from_reference``, whose arguments differ between the two)."""
    import inspect

    params = inspect.signature(optimizer.add_variable_from_reference).parameters
    if "initializer" in params:  # Keras 3
        import keras

        return optimizer.add_variable_from_reference(
            variable, slot, initializer=keras.initializers.Constant(value)
        )
    return optimizer.add_variable_from_reference(  # Keras 2.11+
        variable, slot, initial_value=tf.fill(variable.shape, tf.cast(value, variable.dtype))
    )


def keras2_optimizer_set_learning_rate(optimizer: Any, learning_rate: Any) -> None:
    """Sets a Keras 2.11+ optimizer subclass's learning rate as its own subclasses do in
    ``__init__`` (private ``_build_learning_rate``: a variable, or the schedule kept)."""
    optimizer._learning_rate = optimizer._build_learning_rate(learning_rate)


def mark_keras_optimizer_built(optimizer: Any) -> None:
    """Marks a Keras optimizer subclass built at the end of its ``build``, as Keras's own do:
    Keras 2.11+'s private ``_built`` (Keras 3's base ``build`` sets the public ``built``)."""
    if not hasattr(optimizer, "_get_variable_index"):  # Keras 2.11+
        optimizer._built = True
