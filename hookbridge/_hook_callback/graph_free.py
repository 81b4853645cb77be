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
outside graph mode. ``tests/test_graph_free.py`` pins the listed methods' source, with the
helpers they call, and fails naming the method when a TensorFlow release changes one.
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
    _t.CheckpointSaverHook: GraphFree(frozenset({"before_run"}), (), _no_user_code),
    _t.GlobalStepWaiterHook: GraphFree(frozenset({"before_run"}), (), _no_user_code),
}


def needs_graph(hook: Any, method: str) -> bool:
    """Whether ``hook.<method>`` must be called with the bridge's graph entered (after
    ``begin()``: a hook's writer is known only then)."""
    entry = GRAPH_FREE.get(type(hook))
    if entry is None or method not in entry.methods:
        return True
    replaced = getattr(hook, "__dict__", {})
    if method in replaced or any(helper in replaced for helper in entry.helpers):
        return True
    return not entry.when(hook)
