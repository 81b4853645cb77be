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
  called for that event, as in Keras's ``CallbackList``. One kind is not the end of training:
  a session error ``MonitoredSession`` recovers from (:data:`RECOVERED`, e.g. a callback's read
  of ``model.optimizer.iterations`` on a parameter server that just died), after which it
  creates a new session and retries the run. An event the hook has already committed (the
  epoch it closes is closed) is then finished in the new session (:meth:`Dispatcher.deliver`,
  :meth:`Dispatcher.finish_interrupted`), never started again: each callback hears it once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Final

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._callback_hook import directions

#: The errors ``MonitoredSession`` recovers from (a new session, every ``after_create_session``
#: again, the failed run retried), as ``hookbridge._hook_callback.run.PREEMPTION_ERRORS``.
RECOVERED: Final = (tf.errors.AbortedError, tf.errors.UnavailableError)

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


def keras_of(callbacks: list) -> Any:
    """The Keras package the callbacks belong to (``tf.keras``'s when there are none)."""
    if callbacks:
        return directions.keras_package(callbacks[0])
    return directions.default_package()


def sorts_logs(callbacks: list) -> bool:
    """Whether Keras's ``CallbackList`` gives these callbacks sorted log keys: Keras 3 does
    (``pythonify_logs``); tf_keras / Keras 2 keep compile order."""
    return directions.is_keras3(keras_of(callbacks))


def with_progbar(callbacks: list, verbose: Any) -> list:
    """``callbacks`` plus the ``ProgbarLogger`` ``fit`` adds itself when ``verbose`` is not 0
    and the list holds none (last in the list, as ``CallbackList(add_progbar=...)``)."""
    if not verbose:
        return callbacks
    package = keras_of(callbacks)
    progbar = package.callbacks.ProgbarLogger
    if any(isinstance(cb, progbar) for cb in callbacks):
        return callbacks
    # tf_keras / Keras 2 add ProgbarLogger(count_mode="steps"); Keras 3 has no count_mode.
    added = progbar() if directions.is_keras3(package) else progbar(count_mode="steps")
    return [*callbacks, added]


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
    ``batch_begin(batch)`` / ``batch_end(batch, logs)`` does the same for the batch events chosen
    with :meth:`select_batch_events`, with the eager scope reused and no lookup per step; the
    caller calls them when ``begin_on`` / ``end_on`` say so. Every callback gets the same logs
    dict for one event (one ``{}`` per ``on_*_batch_begin``), so a callback sees what an earlier
    one wrote into it, as Keras's ``CallbackList`` passes it.

    On tf_keras / Keras 2, a list holding a callback that is not one of Keras's own times its
    batch methods against the batch for the first batches (:class:`SlowCheck`) and warns as
    tf_keras's ``CallbackList`` does; then the plain per-step methods take over.
    """

    __slots__ = (
        "_begin",
        "_eager",
        "_end",
        "_end_eager",
        "_slow",
        "batch_begin",
        "batch_end",
        "begin_on",
        "callbacks",
        "end_on",
        "interrupted",
        "table",
    )

    def __init__(self, callbacks: list) -> None:
        self.callbacks = callbacks
        self.table: dict[str, list[Callable[..., Any]]] = {event: [] for event in EVENTS}
        self._eager = _tfcompat.EagerScope()  # reused by every call
        self._begin: list[Callable[..., Any]] = []
        self._end: list[Callable[..., Any]] = []
        self._end_eager = False
        self._slow: SlowCheck | None = None
        self.batch_begin: Callable[[int], None] = self._plain_begin
        self.batch_end: Callable[[int, Any], None] = self._plain_end
        self.begin_on = self.end_on = False
        #: A delivered event a recoverable error interrupted: (its methods, the index of the
        #: one that raised, its arguments); finished by :meth:`finish_interrupted`.
        self.interrupted: tuple[list[Callable[..., Any]], int, tuple] | None = None

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
        """Makes ``batch_begin``/``batch_end`` call ``on_<kind>_batch_begin/end``, timed for
        tf_keras's slow-callback check when it applies (:func:`times_batches`)."""
        self._begin = self.table[f"on_{kind}_batch_begin"]
        self._end = self.table[f"on_{kind}_batch_end"]
        self._end_eager = any(map(needs_eager, self._end))
        if (self._begin or self._end) and times_batches(self.callbacks):
            self._slow = SlowCheck(kind)
            self.batch_begin, self.batch_end = self._timed_begin, self._timed_end
            self.begin_on = self.end_on = True
        else:
            self._plain()

    def _plain(self) -> None:
        self._slow = None
        self.batch_begin, self.batch_end = self._plain_begin, self._plain_end
        self.begin_on, self.end_on = bool(self._begin), bool(self._end)

    @property
    def batch_begin_listened(self) -> bool:
        return bool(self._begin)

    @property
    def batch_end_listened(self) -> bool:
        return bool(self._end)

    def call(self, event: str, *args: Any) -> None:
        """Calls ``event``'s methods in callback order, in eager mode, each with the same
        arguments; an exception propagates at once (the later callbacks are not called), as in
        Keras's ``CallbackList``."""
        methods = self.table[event]
        if methods:
            with self._eager:
                for method in methods:
                    method(*args)

    def deliver(self, event: str, *args: Any) -> None:
        """:meth:`call` for an event the hook has committed (its state says it happened): if a
        callback raises an error ``MonitoredSession`` recovers from (:data:`RECOVERED`), the
        event is kept with that callback's place before the error propagates, and
        :meth:`finish_interrupted` calls that callback again and the ones after it, with the
        same arguments, once the session is recreated. So the event reaches every callback
        once whatever the moment of the error, and is never started again: the retried run
        finds it done (a callback interrupted by the error is called again, as the failed run
        is retried)."""
        methods = self.table[event]
        if methods:
            self._deliver_from(methods, 0, args)

    def _deliver_from(self, methods: list[Callable[..., Any]], start: int, args: tuple) -> None:
        with self._eager:
            for i in range(start, len(methods)):
                try:
                    methods[i](*args)
                except RECOVERED:
                    self.interrupted = (methods, i, args)
                    raise

    def finish_interrupted(self) -> None:
        """Finishes the event a recoverable error interrupted (see :meth:`deliver`), if any:
        called in the new session, before anything else happens there."""
        interrupted, self.interrupted = self.interrupted, None
        if interrupted is not None:
            self._deliver_from(*interrupted)

    def _plain_begin(self, batch: int) -> None:
        """The selected ``on_*_batch_begin(batch, logs)``, one ``logs = {}`` for all."""
        logs: dict = {}
        with self._eager:
            for method in self._begin:
                method(batch, logs)

    def _plain_end(self, batch: int, logs: Any) -> None:
        """The selected ``on_*_batch_end(batch, logs)``; eager mode only if some method needs
        it."""
        if self._end_eager:
            with self._eager:
                for method in self._end:
                    method(batch, logs)
        else:
            for method in self._end:
                method(batch, logs)

    def _timed_begin(self, batch: int) -> None:
        slow = self._slow
        assert slow is not None
        start = time.time()
        self._plain_begin(batch)
        slow.began(start)

    def _timed_end(self, batch: int, logs: Any) -> None:
        slow = self._slow
        assert slow is not None
        start = slow.ending(batch)
        self._plain_end(batch, logs)
        if slow.ended(start):
            self._plain()


def times_batches(callbacks: list) -> bool:
    """Whether tf_keras / Keras 2's ``CallbackList`` would time these callbacks' batch methods:
    one of them is not a class of Keras's callbacks module (never on Keras 3)."""
    for cb in callbacks:
        names = _tfcompat.keras2_builtin_callback_names(cb)
        if names is not None and type(cb).__name__ not in names:
            return True
    return False


class SlowCheck:
    """tf_keras's slow-callback check (``CallbackList._call_batch_end_hook``), for one run.

    The batch time runs from the end of the ``on_*_batch_begin`` calls to the start of the
    ``on_*_batch_end`` calls (here: the session's run and the other hooks), measured from each
    epoch's second batch on (``batch >= 1``); after 5 of them, each batch method whose average
    time exceeds the average batch time gets tf_keras's warning, logged on TensorFlow's logger
    as tf_keras logs it, and the check ends for the run.
    """

    __slots__ = ("batch_start", "batch_times", "begin_times", "end_times", "kind")

    #: tf_keras's ``_num_batches_for_timing_check``.
    BATCHES: Final = 5

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.batch_start: float | None = None
        self.batch_times: list[float] = []
        self.begin_times: list[float] = []
        self.end_times: list[float] = []

    def began(self, start: float) -> None:
        now = time.time()
        self.begin_times.append(now - start)
        self.batch_start = now

    def ending(self, batch: int) -> float:
        now = time.time()
        if batch >= 1 and self.batch_start is not None:
            self.batch_times.append(now - self.batch_start)
        return now

    def ended(self, start: float) -> bool:
        """Records the end methods' time; True when the check is over (warned if slow)."""
        self.end_times.append(time.time() - start)
        if len(self.batch_times) < self.BATCHES:
            return False
        batch_time = sum(self.batch_times) / len(self.batch_times)
        for when, times in (("begin", self.begin_times), ("end", self.end_times)):
            hook_time = sum(times) / len(times) if times else 0.0
            if hook_time > batch_time:
                hook = f"on_{self.kind}_batch_{when}"
                tf.get_logger().warning(
                    f"Callback method `{hook}` is slow compared to the batch time (batch "
                    f"time: {batch_time:.4f}s vs `{hook}` time: {hook_time:.4f}s). Check "
                    "your callbacks."
                )
        return True
