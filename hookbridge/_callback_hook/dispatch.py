"""The one place CallbackHook calls Keras callbacks: which methods run, in what order, in what
mode, and what happens when one raises (as Keras's ``CallbackList`` and pluggy's ``_multicall``).

* **Which**: a method runs only if the callback overrides it (Keras's ``is_default`` idea: Keras
  marks its no-op base methods with ``_is_default``). tf_keras / Keras 2's ``CallbackList``
  decides batch methods for the whole list: once any callback's
  ``_implements_{train,test,predict}_batch_hooks()`` is true, every callback's batch methods of
  that kind run (a TensorBoard with ``update_freq=1`` writes batch scalars only then), else
  none. Decided once, after ``set_params``/``set_model`` (tf_keras decides it there).
* **Order**: the order of the ``callbacks`` list, for every event.
* **Mode**: every call runs in eager mode (the session's graph is the default graph during hook
  calls), except batch-end calls to Keras methods known not to care
  (``_tfcompat.EAGER_FREE_CALLBACKS``).
* **Exceptions**: a callback's exception propagates at once; the callbacks after it are not
  called for that event, as in Keras's ``CallbackList``.
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
    "on_test_begin": ("on_test_begin",),
    "on_test_batch_begin": ("on_test_batch_begin",),
    "on_test_batch_end": ("on_test_batch_end",),
    "on_test_end": ("on_test_end",),
    "on_predict_begin": ("on_predict_begin",),
    "on_predict_batch_begin": ("on_predict_batch_begin",),
    "on_predict_batch_end": ("on_predict_batch_end",),
    "on_predict_end": ("on_predict_end",),
}
#: batch event -> the kind tf_keras / Keras 2 ask ``_implements_<kind>_batch_hooks()`` about.
_BATCH_KIND: Final = {
    f"on_{kind}_batch_{when}": kind
    for kind in ("train", "test", "predict")
    for when in ("begin", "end")
}


def callback_bases() -> tuple[type, ...]:
    """The Keras ``Callback`` base classes of the stacks importable here."""
    bases = [tf.keras.callbacks.Callback]
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        base = getattr(getattr(module, "callbacks", None), "Callback", None)
        if isinstance(base, type):
            bases.append(base)
    return tuple(dict.fromkeys(bases))


def overrides(callback: Any, event: str, batch_kinds: frozenset = frozenset()) -> bool:
    """Whether ``callback`` does something on ``event`` (so it must be dispatched).

    ``batch_kinds``: the batch kinds a tf_keras / Keras 2 ``CallbackList`` of these callbacks
    calls (:func:`listened_batch_kinds`)."""
    kind = _BATCH_KIND.get(event)
    if kind is not None:
        implements = _tfcompat.implements_batch_hooks(callback, kind)
        if implements is not None and (implements or kind not in batch_kinds):
            return implements
    return any(_overridden(callback, name) for name in EVENTS[event])


def listened_batch_kinds(callbacks: list) -> frozenset:
    """The batch kinds tf_keras / Keras 2's ``CallbackList`` calls for ``callbacks``: those some
    callback's ``_implements_<kind>_batch_hooks()`` says it implements."""
    return frozenset(
        kind
        for kind in ("train", "test", "predict")
        if any(_tfcompat.implements_batch_hooks(cb, kind) for cb in callbacks)
    )


def _overridden(callback: Any, name: str) -> bool:
    method = getattr(callback, name, None)
    if method is None or _tfcompat.keras_is_default(method):
        return False
    if name in vars(callback):  # e.g. LambdaCallback's functions
        return True
    # tf_keras / Keras 2 mark only batch methods as defaults: compare with the base class.
    own = getattr(type(callback), name, None)
    return all(own is not getattr(base, name, None) for base in callback_bases())


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


class Dispatcher:
    """Calls a list of Keras callbacks; every call to a callback goes through one of its methods.

    :meth:`configure` gives each callback its params and model and decides once which methods
    run; :meth:`call` runs one event's methods (any event of :data:`EVENTS`). The per-step pair
    :meth:`batch_begin` / :meth:`batch_end` does the same for the batch events chosen with
    :meth:`select_batch_events`, with the eager scope reused and no lookup per step.
    """

    __slots__ = (
        "_begin",
        "_eager",
        "_end",
        "_end_eager",
        "callbacks",
        "table",
    )

    def __init__(self, callbacks: list) -> None:
        self.callbacks = callbacks
        self.table: dict[str, list[Callable[..., Any]]] = {event: [] for event in EVENTS}
        self._eager = _tfcompat.EagerScope()  # reused by every call
        self._begin: list[Callable[..., Any]] = []
        self._end: list[Callable[..., Any]] = []
        self._end_eager = False

    def configure(self, params: dict, model_for: Callable[[Any], Any]) -> None:
        """``set_params(params)`` and ``set_model(model_for(callback))`` on each callback, then
        which methods run (asked once params and model are set, as Keras's ``CallbackList``)."""
        with self._eager:
            for cb in self.callbacks:
                if type(cb).__name__ == "ProgbarLogger" and hasattr(cb, "use_steps"):
                    cb.use_steps = True  # tf_keras/Keras 2: a graph has steps, not samples
                cb.set_params(dict(params))
                cb.set_model(model_for(cb))
            kinds = listened_batch_kinds(self.callbacks)
            self.table = {
                event: [getattr(cb, event) for cb in self.callbacks if overrides(cb, event, kinds)]
                for event in EVENTS
            }

    def listens(self, *events: str) -> bool:
        """Whether some callback overrides one of ``events``."""
        return any(self.table[event] for event in events)

    def select_batch_events(self, kind: str) -> None:
        """Makes :meth:`batch_begin`/:meth:`batch_end` call ``on_<kind>_batch_begin/end``."""
        self._begin = self.table[f"on_{kind}_batch_begin"]
        self._end = self.table[f"on_{kind}_batch_end"]
        self._end_eager = any(map(needs_eager, self._end))

    @property
    def batch_begin_listened(self) -> bool:
        return bool(self._begin)

    @property
    def batch_end_listened(self) -> bool:
        return bool(self._end)

    def call(self, event: str, *args: Any) -> None:
        """Calls ``event``'s methods in callback order, in eager mode; an exception propagates
        at once (the later callbacks are not called), as in Keras's ``CallbackList``."""
        methods = self.table[event]
        if methods:
            with self._eager:
                for method in methods:
                    method(*args)

    def batch_begin(self, batch: int) -> None:
        """The selected ``on_*_batch_begin(batch, {})`` (per step: call only if listened)."""
        with self._eager:
            for method in self._begin:
                method(batch, {})

    def batch_end(self, batch: int, logs: Any) -> None:
        """The selected ``on_*_batch_end(batch, logs)``; eager mode only if some method needs
        it (per step: call only if listened)."""
        if self._end_eager:
            with self._eager:
                for method in self._end:
                    method(batch, logs)
        else:
            for method in self._end:
                method(batch, logs)
