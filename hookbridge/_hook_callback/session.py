"""The session hooks get under HookCallback: a narrow proxy of a real ``tf.compat.v1.Session``.

What hooks use of a session (TF's built-in hooks, ``Saver``, ``FileWriter``, queue runners,
tensorflow-estimator's and third-party hooks) is exact: ``run`` and ``make_callable`` answer
through the bridge's one fetch path (``resolver.py``), so they see the values Keras holds (the
global step, the batch's loss) and carry writes back into the model; ``graph``, ``graph_def``,
``sess_str``, ``list_devices`` and ``as_default`` are the real session's. What the bridge cannot
make exact, or what would break the run it owns (``partial_run``, ``close`` from a hook, ``with
session:``, which closes it), raises :class:`UnsupportedSessionMethodError` naming the method.

The proxy is a ``tf.compat.v1.Session`` (``isinstance`` holds, as natively: ``Saver.save`` and
``start_queue_runners`` check ``SessionInterface``, third-party hooks check ``Session``), built
without a session of its own: every method is defined here, nothing of the base class runs.
It is thread-safe as a TF1 session is: a hook's own thread may call ``run`` while ``fit`` trains
(``Resolver.lock`` serializes what the bridge holds; see there). Python's locks are not fair: a
thread calling ``run`` in a tight loop re-took the lock before ``fit``'s thread, woken by its
release, could, and held training back for minutes (a 3 s test took 200-300 s on an idle
machine). So a call from any thread but the one that made the session yields briefly after it
(:data:`_YIELD_S`): ``fit`` takes the lock at its next turn, as a native session would not have
made it wait at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.resolver import Resolver

#: How long a call of ``run`` from a hook's own thread sleeps after releasing the bridge's lock,
#: so that ``fit``'s thread, waiting for it, gets it (longer than a thread's wake-up, short
#: beside a real ``Session.run``).
_YIELD_S = 1e-4


class UnsupportedSessionMethodError(RuntimeError, AttributeError):
    """A hook used a method or attribute of the bridge's session that the bridge does not
    provide. Also an ``AttributeError``, so that ``hasattr(session, name)`` and
    ``getattr(session, name, default)`` answer as for a missing attribute."""


def _refuse(name: str, why: str) -> NoReturn:
    raise UnsupportedSessionMethodError(
        f"HookCallback: the bridge's session does not support {name}: {why} "
        "(docs/limits.md, 'The bridge's session')."
    )


class BridgeSession(tf.compat.v1.Session):
    """The ``tf.compat.v1.Session`` hooks receive (see the module docstring).

    Args:
        resolver: answers every fetch (and holds the lock of the run's state).
        config: the ``ConfigProto`` of the real session on the bridge's graph.
    """

    def __init__(self, resolver: Resolver, config: Any = None) -> None:
        # No Session.__init__: the real session is a separate object, owned by the bridge.
        self._real = tf.compat.v1.Session(graph=resolver.side.graph, config=config)
        self._resolver = resolver
        self._open = True
        self._owner = threading.get_ident()  # fit's thread: the bridge makes the session there
        resolver.session_created(self._real)

    # -- what hooks use: exact ----------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """``Session.run``, answered by the bridge (see the module docstring)."""
        if not self._open:
            raise RuntimeError("Attempted to use a closed Session.")
        with self._resolver.lock:
            result = self._resolver.resolve(fetches, feed_dict, options, run_metadata)
        if threading.get_ident() != self._owner:  # a hook's own thread: fit's turn (above)
            time.sleep(_YIELD_S)
        return result

    def make_callable(
        self, fetches: Any, feed_list: Any = None, accept_options: bool = False
    ) -> Callable:
        """``Session.make_callable``: each call is a ``run`` of ``fetches`` (so it sees the
        current values, as natively), with ``feed_list``'s keys fed from its arguments."""
        if feed_list is not None and not isinstance(feed_list, (list, tuple)):
            raise TypeError(
                f"Argument `feed_list` must be a list or tuple. Received: feed_list={feed_list}"
            )
        with self._resolver.lock:
            self._resolver.plan(fetches)  # refuses what Session.run would refuse, now
        keys = list(feed_list or ())
        proxy = self

        def run(*args: Any, **kwargs: Any) -> Any:
            if not proxy._open:  # as a closed session's callables
                raise tf.errors.CancelledError(None, None, "Session has been closed.")
            return proxy.run(*args, **kwargs)

        if accept_options:

            def call(*feed_args: Any, options: Any = None, run_metadata: Any = None) -> Any:
                feeds = dict(zip(keys, feed_args)) if keys else None
                return run(fetches, feeds, options=options, run_metadata=run_metadata)

        else:

            def call(*feed_args: Any) -> Any:
                return run(fetches, dict(zip(keys, feed_args)) if keys else None)

        return call

    @property
    def graph(self) -> tf.Graph:
        return self._real.graph

    @property
    def graph_def(self) -> Any:
        return self._real.graph_def

    @property
    def sess_str(self) -> str:
        return self._real.sess_str

    def list_devices(self) -> list:
        return self._real.list_devices()

    def as_default(self) -> Any:
        """Makes this session the default one (``Tensor.eval()``, ``Operation.run()`` then
        come here, as natively)."""
        return _tfcompat.default_session(self)

    # -- what the bridge cannot give: a clear error -------------------------------------------
    def close(self) -> NoReturn:
        _refuse(
            "close()",
            "the session belongs to HookCallback, which closes it when Keras ends the run "
            "(after every end()); to end the run from a hook, call run_context.request_stop()",
        )

    def __enter__(self) -> NoReturn:
        _refuse(
            "`with session:` (its exit closes the session)",
            "use `with session.as_default():` to make it the default session",
        )

    def __exit__(self, *exc: object) -> None:  # pragma: no cover - __enter__ refuses
        pass

    def partial_run_setup(self, fetches: Any, feeds: Any = None) -> NoReturn:
        _refuse("partial_run_setup()", "partial runs are not part of a MonitoredSession step")

    def partial_run(self, handle: Any, fetches: Any, feed_dict: Any = None) -> NoReturn:
        _refuse("partial_run()", "partial runs are not part of a MonitoredSession step")

    def __getattr__(self, name: str) -> NoReturn:
        # Only reached for what is not defined above (the base class's private machinery):
        # nothing of a second, half-built session may run.
        if name.startswith("__") or name in ("_real", "_resolver", "_open"):
            raise AttributeError(name)
        _refuse(
            f"{name!r}",
            "it is not part of the public tf.compat.v1.Session API the bridge provides (run, "
            "make_callable, graph, graph_def, sess_str, list_devices, as_default)",
        )

    def __del__(self) -> None:
        pass  # the bridge closes the real session

    def __repr__(self) -> str:
        return f"<hookbridge session on {self._real.graph!r}>"

    # -- the bridge's own -----------------------------------------------------------------------
    @property
    def _closed(self) -> bool:
        """Whether the bridge has closed the session (TF's own attribute name, read by code
        that checks a session it was given)."""
        return not self._open

    def _close_real(self) -> None:
        """Closes the real session (the bridge's, when the run ends); later runs raise, as a
        closed session's do."""
        self._open = False
        self._real.close()
