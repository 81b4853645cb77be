"""The ``model_fn``'s variables, made once as Keras weights and handed back by TF1 name.

Each call of the ``model_fn`` (each ``tf.function`` trace: ``fit``'s, ``predict``'s) runs under
``VariableStore.scope``: a fresh TF1 variable store and fresh collections (what the Estimator's
fresh ``tf.Graph`` gave each call) and a ``variable_creator_scope`` that answers every variable
the TF1 code creates (``tf.compat.v1.get_variable``, ``variable_scope``, an optimizer's slots
and ``beta1_power``, ``tf.Variable``) with the Keras weight of that name, made on the first
call. The global step is there before the ``model_fn`` runs, as the Estimator made it:
``get_global_step()`` and ``get_or_create_global_step()`` get the step variable the model counts
with (its Keras optimizer's ``iterations``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")

_GLOBAL_STEP = tf.compat.v1.GraphKeys.GLOBAL_STEP
_GLOBAL_VARIABLES = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES
_LOCAL_VARIABLES = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
_TRAINABLE_VARIABLES = tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES

#: make_weight(TF1 name, initial value tensor, trainable) -> (the Keras weight, its tf.Variable)
MakeWeight = Callable[[str, tf.Tensor, bool], "tuple[Any, tf.Variable]"]


class VariableStore:
    """The ``model_fn``'s variables by TF1 name (``dense/kernel``, ``dense/kernel/Adam``).

    Args:
        make_weight: makes the Keras weight of a new TF1 variable (named as TF1 names it) and
            returns it with the ``tf.Variable`` the TF1 code is given.
        owner: how errors name the model (``model_fn_model(my_model_fn)``).
    """

    def __init__(self, make_weight: MakeWeight, owner: str) -> None:
        self._make_weight = make_weight
        self._owner = owner
        self._weights: dict[str, tuple[Any, tf.Variable]] = {}
        #: LOCAL_VARIABLES (streaming metrics) by (mode, name): (variable, initial value).
        self._locals: dict[tuple[str, str], tuple[tf.Variable, tf.Tensor]] = {}
        self._local = threading.local()
        #: Why no variable may be created any more (set once the model is built), or None.
        self.frozen: str | None = None

    def names(self) -> dict[int, str]:
        """``{id(weight): TF1 name}`` of every weight made so far."""
        return {id(weight): name for name, (weight, _) in self._weights.items()}

    def tf_variables(self) -> list[tf.Variable]:
        """The ``tf.Variable`` of every weight and LOCAL variable made so far."""
        return [v for _, v in self._weights.values()] + [v for v, _ in self._locals.values()]

    def by_name(self) -> dict[str, tf.Variable]:
        """``{TF1 name: tf.Variable}`` of every weight made so far."""
        return {name: v for name, (_, v) in self._weights.items()}

    def weight(self, name: str) -> Any:
        """The Keras weight of the TF1 variable ``name``."""
        return self._weights[name][0]

    def __contains__(self, name: str) -> bool:
        return name in self._weights

    @contextlib.contextmanager
    def scope(self, step: Callable[[], tf.Variable], mode: str) -> Iterator[tf.Graph]:
        """Runs TF1 code in the current (function) graph with this store's variables.

        Args:
            step: returns the ``tf.Variable`` ``get_or_create_global_step()`` gets.
            mode: the ``ModeKeys`` value the ``model_fn`` runs in (for errors).
        """
        graph = tf.compat.v1.get_default_graph()
        if tf.executing_eagerly():
            raise RuntimeError(
                f"{self._owner}: the model_fn runs in a tf.function graph, not eagerly (a bug "
                "in hookbridge: please report it)."
            )

        def creator(next_creator: Callable[..., Any], **kwargs: Any) -> Any:
            if getattr(self._local, "making", False):  # our own weight's tf.Variable
                # Made eagerly from a value: the tracing tf.function has nothing to lift, and
                # would otherwise count it as created and trace the model_fn a second time.
                kwargs["experimental_enable_variable_lifting"] = False
                return next_creator(**kwargs)
            return self._variable(graph, step, mode, kwargs)

        with _tfcompat.fresh_tf1_graph_state(graph), tf.variable_creator_scope(creator):
            with graph.name_scope(None):  # the model_fn ran at the root of its graph
                # The Estimator makes the global step before it calls the model_fn, in every
                # mode (Estimator._create_and_assert_global_step): get_global_step() finds it.
                tf.compat.v1.train.get_or_create_global_step(graph)
                yield graph

    def _variable(
        self, graph: tf.Graph, step: Callable[[], tf.Variable], mode: str, kwargs: dict
    ) -> tf.Variable:
        collections = list(kwargs.get("collections") or [_GLOBAL_VARIABLES])
        trainable = kwargs.get("trainable")
        trainable = True if trainable is None else bool(trainable)
        if _GLOBAL_STEP in collections:  # get_or_create_global_step / create_global_step
            variable = step()
            graph.add_to_collections(collections, variable)
            return variable
        name = _tf1_name(graph, kwargs.get("name") or "Variable")
        if _LOCAL_VARIABLES in collections:
            variable = self._local_variable(name, kwargs, trainable, mode)
            graph.add_to_collections(collections, variable)
            return variable
        if name not in self._weights:
            self._make(name, kwargs, trainable, mode)
        _, variable = self._weights[name]
        shape = kwargs.get("shape")
        if shape is not None and not tf.TensorShape(shape).is_compatible_with(variable.shape):
            raise ValueError(
                f"{self._owner}: the model_fn asks for variable {name!r} with shape "
                f"{tf.TensorShape(shape)} in {mode} mode; it was made with {variable.shape}."
            )
        if trainable and _TRAINABLE_VARIABLES not in collections:
            collections.append(_TRAINABLE_VARIABLES)
        graph.add_to_collections(collections, variable)
        return variable

    def _local_variable(self, name: str, kwargs: dict, trainable: bool, mode: str) -> tf.Variable:
        """A LOCAL variable: one per mode (each mode had its own Estimator graph), never a
        weight (no checkpoint holds it), set to its initial value by :meth:`reset_locals`."""
        if (mode, name) not in self._locals:
            initial = kwargs.get("initial_value")
            if initial is None:
                raise ValueError(f"{self._owner}: local variable {name!r} has no initial value.")
            self._local.making = True
            try:
                with tf.init_scope():
                    value = initial() if callable(initial) else initial
                    value = tf.convert_to_tensor(value, dtype=kwargs.get("dtype"))
                    variable = tf_variable_named(name, value, trainable)
            finally:
                self._local.making = False
            self._locals[(mode, name)] = (variable, value)
        return self._locals[(mode, name)][0]

    def locals(self, mode: str) -> list[tf.Variable]:
        """The LOCAL variables the ``model_fn`` made in ``mode``."""
        return [v for (m, _), (v, _) in self._locals.items() if m == mode]

    def reset_locals(self, mode: str) -> None:
        """Sets ``mode``'s LOCAL variables to their initial values, as the Estimator's session
        ran ``local_init_op`` once at the start of each ``train``/``evaluate``/``predict``."""
        for (m, _), (variable, value) in self._locals.items():
            if m == mode:
                variable.assign(value)

    def _make(self, name: str, kwargs: dict, trainable: bool, mode: str) -> None:
        if self.frozen and mode == "eval":
            raise ValueError(
                f"{self._owner}: the model_fn creates variable {name!r} in eval mode only (its "
                "train and predict modes made no variable of that name). Estimator.evaluate "
                "restored every global variable of the eval graph from the checkpoint, which "
                f"the train graph wrote without {name!r}: it failed there too (NotFoundError), "
                "and initialised it only when evaluating with no checkpoint at all. Make it in "
                "the train mode too (it is then a weight, saved and restored), or a local "
                "variable (collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES]: set to its "
                "initial value at each evaluate, as the eval session's local_init_op did)."
            )
        if self.frozen:
            raise ValueError(
                f"{self._owner}: the model_fn created variable {name!r} in {mode} mode after the "
                f"model was built ({self.frozen}). An Estimator's checkpoint holds only the "
                "variables its train and predict graphs made: a variable made later has no "
                "value to restore and no Keras weight to train. Make it in the model_fn's "
                "predict or train mode graph."
            )
        initial = kwargs.get("initial_value")
        if initial is None:
            raise ValueError(
                f"{self._owner}: variable {name!r} is created without an initial value "
                "(a VariableDef or a variable restored from a graph), which a Keras weight "
                "cannot be made from."
            )
        self._local.making = True
        try:
            with tf.init_scope():
                value = initial() if callable(initial) else initial
                value = tf.convert_to_tensor(value, dtype=kwargs.get("dtype"))
                self._weights[name] = self._make_weight(name, value, trainable)
        finally:
            self._local.making = False


def _tf1_name(graph: tf.Graph, asked: str) -> str:
    """The name a TF1 graph gives a variable asked for as ``asked`` here.

    A ``ResourceVariable``'s constructor names it under ``init_scope``: the name scope where it
    is asked for (as a TF1 graph has it: ``_tfcompat.tf1_name_scope``) joined to ``asked``, made
    unique in the outermost graph, which ``graph`` (the ``model_fn``'s) stands for. So
    ``beta1_power`` asked for by ``apply_gradients`` in a ``tf.cond`` branch is ``beta1_power``,
    a second optimizer's ``beta1_power_1``; ``get_variable`` asks at the root with its full
    scoped name, a slot's ending in ``/`` (absolute, never made unique).
    """
    scope = _tfcompat.tf1_name_scope()
    with graph.name_scope(scope or None), graph.name_scope(asked) as scoped:
        return scoped.rstrip("/")


def tf_variable_named(name: str, value: tf.Tensor, trainable: bool) -> tf.Variable:
    """A ``tf.Variable`` named ``name`` exactly (``dense/kernel:0``), made eagerly."""
    prefix, _, leaf = name.rpartition("/")
    with tf.compat.v1.name_scope(prefix + "/" if prefix else ""):  # absolute, in eager mode
        return tf.Variable(value, name=leaf, trainable=trainable)


def keras_weight(model: Any, name: str, value: tf.Tensor, trainable: bool) -> tuple[Any, Any]:
    """``VariableStore``'s ``make_weight`` for ``model``: a weight of ``model`` named ``name``
    (TF1's name: Keras 3's path, tf_keras's ``tf.Variable`` name) and its ``tf.Variable``."""
    if KERAS3:
        prefix, _, leaf = name.rpartition("/")
        with tf.compat.v1.name_scope(prefix + "/" if prefix else ""):
            weight = keras.Variable(
                initializer=value, name=leaf, trainable=trainable, dtype=value.dtype.name
            )
        _tfcompat.keras3_track_weight(model, weight)
        return weight, _tfcompat.keras3_tf_variable(weight)
    variable = tf_variable_named(name, value, trainable)
    model.add_weight(
        name=name,
        shape=variable.shape,
        dtype=variable.dtype,
        trainable=trainable,
        getter=lambda *args, **kwargs: variable,
    )
    return variable, variable
