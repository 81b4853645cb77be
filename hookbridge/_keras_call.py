"""A Keras model's ``train_function`` without ``tf.function``'s per-call dispatch.

Plain ``fit`` calls ``model.train_function(iterator)`` once a step. Keras's ``train_function``
is a ``tf.function`` (Keras 2.15 and tf_keras; Keras 3 wraps one, which returns an
``Optional`` of the logs, in a closure), and each call of it finds the traced graph again:
it binds the iterator, hashes its spec and the spec of every captured variable and table to
look the traced function up, then runs it. On a model with many captures and a many-featured
batch that is milliseconds a step (census's twin: 2.5 ms of a 6.2 ms step on TF 2.15;
``benchmarks/twin_step.md``), where the graph itself runs in less.

:func:`install` wraps ``model.train_function`` in :class:`FlatTrainFunction`, which runs the
same traced graph, found once per iterator, then called flat:

* The first call with an iterator goes through Keras's own ``train_function`` (tracing or
  retracing it as Keras would, creating variables on a first call). The second call with the
  same iterator object asks Keras's ``tf.function`` for the concrete function it dispatches
  that iterator to (``get_concrete_function``: TensorFlow's own lookup, by the iterator's spec
  and the call's context) and binds the iterator with TensorFlow's own binding, once. An
  iterator's spec cannot change, so this and every later call with that iterator (Keras passes
  one per epoch) runs that concrete function on the stored flat inputs and the function's
  captured inputs, read at each call as ``tf.function`` reads them
  (``_tfcompat.concrete_call_flat``: what ``tf.function`` itself calls after its lookup). An
  iterator used once (Keras 2's ``train_on_batch``) costs nothing more than Keras's call.
* Keras 3: the flat call returns the traced ``Optional``; as Keras 3's closure does, an empty one
  raises ``StopIteration`` (the end of the data) and a full one gives the logs.
* Anything else goes to Keras's own function: another iterator (it becomes the new one), a
  Python iterator of batches, a call under a distribution strategy other than the default one
  (not tested there) or inside a graph, ``tf.config.run_functions_eagerly(True)``, a
  ``run_eagerly`` model, a cluster coordinator's ``train_function``.

Off switches, read at each new iterator: ``HOOKBRIDGE_FLAT_CALL=0`` in the environment, or the
model's attribute ``flat_train_function = False`` (the twin's class sets it True).
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

#: The environment variable that turns the flat call off (``0``/``false``/``no``/``off``).
ENVIRONMENT = "HOOKBRIDGE_FLAT_CALL"
#: The model attribute that turns it off for one model (False).
ATTRIBUTE = "flat_train_function"


def enabled_by_environment() -> bool:
    """False when :data:`ENVIRONMENT` says off."""
    value = os.environ.get(ENVIRONMENT, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


class FlatTrainFunction:
    """``model.train_function`` as Keras made it, its traced graph called flat per iterator.

    Attributes:
        keras_function: Keras's own ``train_function`` (called for every call not run flat).
        flat_calls: calls run flat so far; ``keras_calls``: calls given to Keras's function.
    """

    def __init__(self, model: Any, keras_function: Any, traced: Any, optional: bool) -> None:
        self.keras_function = keras_function
        self._traced, self._optional = traced, optional
        self._model = weakref.ref(model)
        self._iterator: Any = None  # a weak reference to the iterator the stored call is for
        self._concrete: Any = None
        self._flat: list[Any] = []
        self.flat_calls = self.keras_calls = 0

    def __call__(self, iterator: Any) -> Any:
        current = self._iterator is not None and self._iterator() is iterator
        if current and self._concrete is None:  # its second call: adopt it, if it may be
            self._adopt(iterator)
        if current and self._concrete is not None and not tf.config.functions_run_eagerly():
            self.flat_calls += 1
            concrete = self._concrete
            outputs = _tfcompat.concrete_call_flat(concrete, self._flat, concrete.captured_inputs)
            if not self._optional:
                return outputs
            if not outputs.has_value():  # Keras 3's closure, as it unwraps its Optional
                raise StopIteration
            return outputs.get_value()
        self.keras_calls += 1
        if not current:
            self._forget()
            if isinstance(iterator, tf.data.Iterator):
                self._iterator = weakref.ref(iterator, self._forget)
        return self.keras_function(iterator)

    def _forget(self, reference: Any = None) -> None:
        """Drops the stored call (``reference``: the weak reference of a collected iterator;
        only the current iterator's collection drops it)."""
        if reference is None or reference is self._iterator:
            self._iterator, self._concrete, self._flat = None, None, []

    def _adopt(self, iterator: Any) -> None:
        """Stores the concrete function Keras's ``tf.function`` runs for ``iterator`` and its
        flat inputs, where the call may be run flat."""
        model = self._model()
        if (
            model is None
            or not getattr(model, ATTRIBUTE, True)
            or not enabled_by_environment()
            or not tf.executing_eagerly()
            or tf.config.functions_run_eagerly()
            or tf.distribute.has_strategy()
            or model.distribute_strategy is not tf.distribute.get_strategy()
        ):
            return
        concrete = self._traced.get_concrete_function(iterator)
        self._flat = _tfcompat.concrete_flat_inputs(concrete, iterator)
        self._concrete = concrete


def traced_train_function(model: Any) -> tuple[Any, bool] | None:
    """``(the tf.function taking the iterator, whether it returns an Optional)`` behind
    ``model.train_function``, or None where there is none to call flat."""
    function = model.train_function
    if getattr(model, "run_eagerly", False) or function is None:
        return None
    if hasattr(function, "get_concrete_function"):  # Keras 2.15, tf_keras
        return function, False
    inner = _tfcompat.keras3_iterator_function(function)
    return (inner, True) if inner is not None else None


def install(model: Any) -> None:
    """Replaces ``model.train_function`` (as ``make_train_function`` left it) by a
    :class:`FlatTrainFunction` over it; nothing where it is already one or where there is no
    ``tf.function`` behind it (see :func:`traced_train_function`). Call it right after Keras's
    ``make_train_function``; a model's own ``make_train_function`` override can::

        def make_train_function(self, force=False):
            made = super().make_train_function(force)  # Keras 3 returns None
            _keras_call.install(self)
            return None if made is None else self.train_function
    """
    if isinstance(model.train_function, FlatTrainFunction):
        return
    traced = traced_train_function(model)
    if traced is None:
        return
    model.train_function = FlatTrainFunction(model, model.train_function, *traced)
