"""Which callback methods run, and the one function that calls them (in list order, eagerly).

A method runs only if the callback overrides it (Keras's ``is_default`` idea: Keras marks its
no-op base methods with ``_is_default``); tf_keras / Keras 2 callbacks that declare
``_implements_train_batch_hooks()`` are asked, as their own ``CallbackList`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Final

import tensorflow as tf

from hookbridge import _tfcompat

#: event -> the method names that implement it (the second is Keras's backwards-compatible alias).
EVENTS: Final = {
    "on_train_begin": ("on_train_begin",),
    "on_epoch_begin": ("on_epoch_begin",),
    "on_train_batch_begin": ("on_train_batch_begin", "on_batch_begin"),
    "on_train_batch_end": ("on_train_batch_end", "on_batch_end"),
    "on_epoch_end": ("on_epoch_end",),
    "on_train_end": ("on_train_end",),
}
_BATCH_EVENTS: Final = ("on_train_batch_begin", "on_train_batch_end")


def callback_bases() -> tuple[type, ...]:
    """The Keras ``Callback`` base classes of the stacks importable here."""
    bases = [tf.keras.callbacks.Callback]
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        base = getattr(getattr(module, "callbacks", None), "Callback", None)
        if isinstance(base, type):
            bases.append(base)
    return tuple(dict.fromkeys(bases))


def overrides(callback: Any, event: str) -> bool:
    """Whether ``callback`` does something on ``event`` (so it must be dispatched)."""
    if event in _BATCH_EVENTS:
        implements = _tfcompat.implements_train_batch_hooks(callback)
        if implements is not None:
            return implements
    return any(_overridden(callback, name) for name in EVENTS[event])


def _overridden(callback: Any, name: str) -> bool:
    method = getattr(callback, name, None)
    if method is None or _tfcompat.keras_is_default(method):
        return False
    if name in vars(callback):  # e.g. LambdaCallback's functions
        return True
    # tf_keras / Keras 2 mark only batch methods as defaults: compare with the base class.
    own = getattr(type(callback), name, None)
    return all(own is not getattr(base, name, None) for base in callback_bases())


def build_table(callbacks: list) -> dict[str, list[Callable[..., Any]]]:
    """event -> bound methods to call, in callback order; events nobody overrides map to []."""
    return {
        event: [getattr(cb, event) for cb in callbacks if overrides(cb, event)] for event in EVENTS
    }


def needs_eager(method: Callable[..., Any]) -> bool:
    """Whether a bound callback method must run in eager mode: anything not listed in
    ``_tfcompat.EAGER_FREE_CALLBACKS``, including a subclass and a method replaced on the
    instance."""
    callback = getattr(method, "__self__", None)
    kind = type(callback)
    names = _tfcompat.EAGER_FREE_CALLBACKS.get((kind.__module__, kind.__qualname__))
    if names is None or method.__name__ not in names:
        return True
    replaced = getattr(callback, "__dict__", {})
    return any(name in replaced for name in names)


def eager_context() -> Any:
    """The eager context every callback call runs in."""
    return _tfcompat.eager()


def call(methods: list[Callable[..., Any]], *args: Any) -> None:
    """Calls each method in order, in eager mode (the session's graph is the default graph
    during hook calls). An exception propagates at once, as in Keras's ``CallbackList``."""
    if methods:
        with _tfcompat.eager():
            for method in methods:
                method(*args)
