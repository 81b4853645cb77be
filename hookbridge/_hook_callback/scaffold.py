"""The Scaffold of the hooks' session, finalized and run as ``MonitoredSession`` runs it.

``HookCallback(hooks, scaffold=...)`` takes a ``tf.compat.v1.train.Scaffold`` (or a zero-argument
callable building one in the bridge's graph). It is finalized after every hook's ``begin()`` and
run as ``ChiefSessionCreator`` / ``SessionManager.prepare_session`` run it: ``init_op`` with
``init_feed_dict``, ``init_fn(scaffold, session)``, ``local_init_op`` once
``ready_for_local_init_op`` is ready, then the ``ready_op`` check. The bridge's own variables
(global step, weight mirrors) are initialized from the Keras model by the default ``init_op``
(one run, as natively); before a Scaffold's own ``init_op``, by the bridge, so an ``init_op``
that does not cover them still leaves the model ready.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from hookbridge._hook_callback.graph import SideGraph
from hookbridge._hook_callback.other_graph import describe, in_other_graph

if TYPE_CHECKING:
    from hookbridge._hook_callback.resolver import Resolver
    from hookbridge._hook_callback.session import BridgeSession

Scaffold = tf.compat.v1.train.Scaffold
ScaffoldArg = Scaffold | Callable[[], Scaffold] | None

#: The fields of a finalized Scaffold that hold graph elements.
_GRAPH_FIELDS = ("init_op", "ready_op", "ready_for_local_init_op", "local_init_op", "summary_op")


def finalize_scaffold(scaffold: ScaffoldArg, side: SideGraph) -> Scaffold:
    """The run's Scaffold, finalized in the bridge's graph (which it finalizes).

    Must be called with the bridge's graph as the default graph, after every hook's begin().

    Raises:
        TypeError: ``scaffold`` is not a Scaffold, nor a callable returning one.
        ValueError: a field of the Scaffold belongs to another graph.
    """
    if scaffold is None:
        scaffold = Scaffold()
    elif not isinstance(scaffold, Scaffold):
        if not callable(scaffold):
            raise TypeError(
                f"HookCallback(scaffold=...) expected a tf.compat.v1.train.Scaffold or a "
                f"zero-argument callable returning one, received {scaffold!r} of type "
                f"{type(scaffold).__name__}."
            )
        made = scaffold()
        if not isinstance(made, Scaffold):
            raise TypeError(
                f"HookCallback(scaffold=...): the callable returned {made!r} of type "
                f"{type(made).__name__}, not a tf.compat.v1.train.Scaffold."
            )
        scaffold = made
    side.build_init_op()  # after begin(): an initializer replaced there is the one to run
    # Scaffold.finalize builds init_op only when none was given: global_variables_initializer
    side.init_by_scaffold = scaffold.init_op is None
    scaffold.finalize()
    _check_graph(scaffold, side.graph)
    return scaffold


def check_given(scaffold: ScaffoldArg, graph: tf.Graph) -> None:
    """Refuses, before any hook's ``begin()``, a Scaffold given with fields of another graph.

    Raises:
        ValueError: a field of the Scaffold belongs to another graph.
    """
    if isinstance(scaffold, Scaffold):
        _check_graph(scaffold, graph)


def _check_graph(scaffold: Scaffold, graph: tf.Graph) -> None:
    for field in (*_GRAPH_FIELDS, "saver"):
        value = getattr(scaffold, field)
        if value is not None and in_other_graph(value, graph):
            _raise_other_graph(f"{field} ({describe(value)})")


def _raise_other_graph(what: str) -> None:
    raise ValueError(
        f"HookCallback(scaffold=...): the Scaffold's {what} belongs to another graph than the "
        "bridge's. Its ops must live in the bridge's graph: leave them unset (finalization "
        "builds them there, as MonitoredSession does) or build them in a zero-argument callable "
        "passed as scaffold= (called while the bridge's graph is the default graph). A Scaffold "
        "is finalized once, in one graph: to use one in several fit/evaluate/predict calls, pass "
        "the callable."
    )


def prepare_session(scaffold: Scaffold, session: BridgeSession, resolver: Resolver) -> None:
    """Initializes a new session as ``SessionManager.prepare_session`` (no checkpoint restore).

    Raises:
        RuntimeError: TF's own messages when the model is not ready after initialization.
    """
    side = resolver.side
    weight_feeds = resolver.weight_feeds()
    real = resolver.session  # the real session: initializers are the bridge's own runs
    init_op = scaffold.init_op
    # The default init_op initializes every global variable, the bridge's too: it is the one
    # run of them, as natively. A Scaffold's own init_op runs after the bridge's initializers.
    covered = side.init_by_scaffold and _runs_all(init_op, side.init_op.control_inputs)
    if not covered:
        real.run(side.init_op, weight_feeds)
    if init_op is not None:
        feeds = dict(weight_feeds)
        feeds.update(scaffold.init_feed_dict or {})
        real.run(init_op, feeds)
    # The initializers left the mirrors equal to the model (or to what a replaced initializer
    # restored: pulled below) and the global step variable at its initial value: 0 (its
    # zeros initializer), unless a hook replaced that or a Scaffold's own init_op ran after it.
    resolver.weights_at = resolver.generation
    step_replaced, weights_replaced = side.initializers_replaced()
    resolver.step_in_graph = 0 if covered and not step_replaced else None
    if scaffold.init_fn is not None:
        scaffold.init_fn(session)  # TF wraps the user's init_fn(scaffold, session)
    ready, message = _ready(scaffold.ready_for_local_init_op, session)
    if not ready:
        raise RuntimeError(
            "Init operations did not make model ready for local_init.  Init op: "
            f"{_name(init_op)}, init fn: {scaffold.init_fn}, error: {message}"
        )
    if scaffold.local_init_op is not None:
        real.run(
            scaffold.local_init_op,
            getattr(scaffold, "local_init_feed_dict", None),
        )
    ready, message = _ready(scaffold.ready_op, session)
    if not ready:
        raise RuntimeError(
            f"Init operations did not make model ready.  Init op: {_name(init_op)}, init fn: "
            f"{scaffold.init_fn}, local_init_op: {_name(scaffold.local_init_op)}, error: {message}"
        )
    if step_replaced or weights_replaced:  # init_from_checkpoint in a hook's begin()
        resolver.pull(step_replaced, weights_replaced)


def _runs_all(op: Any, ops: Any) -> bool:
    """Whether running ``op`` runs each of ``ops``: ``op`` is one of them or a ``tf.group``
    (nested, as ``tf.group`` nests per device) whose control inputs hold them all, as the
    default ``init_op`` (``global_variables_initializer``) holds the initializer of every
    variable still in the ``GLOBAL_VARIABLES`` collection."""
    wanted, stack, seen = set(ops), [op], set()
    while stack and wanted:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        wanted.discard(op)
        if op.type == "NoOp":
            stack.extend(op.control_inputs)
    return not wanted


def _ready(op: Any, session: Any) -> tuple[bool, str | None]:
    """TF's ``session_manager._ready``: a ready op returns the names of what is not ready."""
    if op is None:
        return True, None
    try:
        value = session.run(op)
    except tf.errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            raise
        return False, str(e)
    if value is None or value.dtype == np.int32 or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") for v in value)
    return False, "Variables not initialized: " + names


def _name(op: Any) -> str | None:
    return op.name if op is not None else None
