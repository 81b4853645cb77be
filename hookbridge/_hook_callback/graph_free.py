"""Built-in hooks whose per-step methods need no default graph, so the bridge calls them as is.

Inside ``MonitoredSession`` a hook's ``before_run``/``after_run`` run while the session's graph
is the default graph, in graph mode, and a hook may rely on it (``get_global_step()``,
``tf.executing_eagerly()``, a ``Saver``). HookCallback gives every hook that world by entering
its graph around each phase (``_tfcompat.GraphScope``). Right after a Keras step an entry costs
about 10 µs, twice per step: most of the bridge's fixed cost per step.

The methods listed here were read (identical in TF 2.15 and 2.21): they touch only their own
state, numpy, logging, a ``FileWriter`` and ``run_context.session.run`` (which plans its fetches
in the bridge's graph by itself), so they behave the same with or without the graph entered, and
a phase whose hooks are all listed skips the entry. Everything else is called inside the graph:
a user's hook, a subclass, a method replaced on the instance, a hook holding user code (a
``LoggingTensorHook`` formatter, a writer that is not a ``FileWriter``, ``FeedFnHook``'s
function) and ``CheckpointSaverHook.after_run``, whose ``Saver.save`` takes its eager path
outside graph mode. ``CheckpointSaverHook.after_run`` is listed as graph-free *until it runs
the session*: it checks its timer, and only when a save is due reads the global step with
``run_context.session.run`` and then saves; the bridge's session enters the graph on that call,
for the rest of the phase (``session.EnterOnRun``), so the save, its ``Saver`` lookup and the
listeners run in graph mode as natively, and the other 499 steps of 500 switch nothing.
``tests/test_graph_free.py`` pins the listed methods' source, with the helpers they call, and
fails naming the method when a TensorFlow release changes one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from hookbridge import _tfcompat

_t = tf.compat.v1.train


def _no_user_code(hook: Any) -> bool:
    return True


def _file_writer(hook: Any) -> bool:
    writer = _tfcompat.hook_summary_writer(hook)
    return writer is None or type(writer) is tf.compat.v1.summary.FileWriter


def _no_formatter(hook: Any) -> bool:
    return _tfcompat.logging_hook_formatter(hook) is None


class GraphFree(NamedTuple):
    """Which per-step methods of one built-in class run without the graph, and when."""

    methods: frozenset
    helpers: tuple[str, ...]  # the class's own methods those call (pinned by the test too)
    when: Callable[[Any], bool]  # False when this instance holds user code
    until_run: frozenset = frozenset()  # graph-free until they call run_context.session.run


#: Exact classes only: a subclass may override anything.
GRAPH_FREE: dict[type, GraphFree] = {
    _t.StopAtStepHook: GraphFree(frozenset({"before_run", "after_run"}), (), _no_user_code),
    _t.NanTensorHook: GraphFree(frozenset({"before_run", "after_run"}), (), _no_user_code),
    _t.LoggingTensorHook: GraphFree(
        frozenset({"before_run", "after_run"}), ("_log_tensors",), _no_formatter
    ),
    _t.StepCounterHook: GraphFree(
        frozenset({"before_run", "after_run"}), ("_log_and_record",), _file_writer
    ),
    _t.SummarySaverHook: GraphFree(
        frozenset({"before_run", "after_run"}), ("_get_summary_op",), _file_writer
    ),
    _t.CheckpointSaverHook: GraphFree(
        frozenset({"before_run"}), (), _no_user_code, until_run=frozenset({"after_run"})
    ),
    _t.GlobalStepWaiterHook: GraphFree(frozenset({"before_run"}), (), _no_user_code),
}


#: What a per-step method needs from the bridge (``graph_need``).
NOTHING, ON_RUN, GRAPH = "nothing", "the graph once it runs the session", "the graph"


def graph_need(hook: Any, method: str) -> str:
    """``GRAPH`` if ``hook.<method>`` must be called with the bridge's graph entered, ``ON_RUN``
    if only from its first ``run_context.session.run`` on, ``NOTHING`` if it never looks (after
    ``begin()``: a hook's writer is known only then)."""
    entry = GRAPH_FREE.get(type(hook))
    if entry is None:
        return GRAPH
    free = method in entry.methods
    if not free and method not in entry.until_run:
        return GRAPH
    replaced = getattr(hook, "__dict__", {})
    if method in replaced or any(helper in replaced for helper in entry.helpers):
        return GRAPH
    if not entry.when(hook):
        return GRAPH
    return NOTHING if free else ON_RUN


def phase_need(hooks: list, method: str) -> str:
    """What one phase (every hook's ``method``, in turn) needs: the most any of them needs."""
    needs = {graph_need(hook, method) for hook in hooks}
    return GRAPH if GRAPH in needs else ON_RUN if ON_RUN in needs else NOTHING


def needs_graph(hook: Any, method: str) -> bool:
    """Whether ``hook.<method>`` may look at the graph at all (``graph_need`` is not NOTHING)."""
    return graph_need(hook, method) != NOTHING
