"""Objects of another graph than the bridge's: the one rule that decides it, and the Savers refused.

A hook's session runs on the bridge's graph. TensorFlow runs a ``Saver`` by the tensor names of
its ``saver_def`` in the session's graph, so a Saver built on another graph (the user's model
graph, an earlier run's graph) does not save its own variables there: natively
``MonitoredSession`` fails with a ``TypeError`` (the names are not in its graph) or, when its
graph has a Saver under the same names (the Scaffold's default one), silently writes that
graph's variables into ``model.ckpt-N_temp/`` folders (measured, TF 2.21 and 2.15). The bridge
refuses such a Saver before any hook's ``begin()``, so nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

Saver = tf.compat.v1.train.Saver


def in_other_graph(obj: Any, graph: tf.Graph) -> bool:
    """Whether ``obj`` (an op, tensor, variable or ``Saver``) belongs to another graph.

    A Saver belongs to another graph when one of the variables it saves does, or when its save
    or filename tensor is not an element of ``graph`` (a Saver built from a ``saver_def``).
    """
    if not isinstance(obj, Saver):
        return getattr(obj, "graph", graph) is not graph
    if any(g is not graph for g in _graphs(_tfcompat.saver_var_list(obj))):
        return True
    saver_def = obj.saver_def
    if saver_def is None:  # not built: TF raises its own error when it saves
        return False
    for name in (saver_def.save_tensor_name, saver_def.filename_tensor_name):
        try:
            graph.as_graph_element(name)
        except (KeyError, ValueError):
            return True
    return False


def describe(obj: Any) -> str:
    """A name for ``obj`` in an error: an element's name, a Saver's tensor and variables."""
    if not isinstance(obj, Saver):
        return repr(getattr(obj, "name", obj))
    names = [getattr(v, "name", None) for v in _leaves(_tfcompat.saver_var_list(obj))]
    names = [n for n in names if n]
    saved = f", saving {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}" if names else ""
    tensor = obj.saver_def.save_tensor_name if obj.saver_def is not None else None
    return f"tf.compat.v1.train.Saver ({tensor!r}{saved})"


def check_savers(hooks: Sequence[Any], graph: tf.Graph) -> None:
    """Refuses a ``CheckpointSaverHook`` holding a Saver of another graph, and a Saver of
    another graph in ``graph``'s ``SAVERS`` collection (where a hook without one takes it).

    Raises:
        ValueError: naming the hook (or collection), the Saver and how to build it instead.
    """
    for saver in graph.get_collection(tf.compat.v1.GraphKeys.SAVERS):
        if in_other_graph(saver, graph):
            raise ValueError(
                f"HookCallback: the SAVERS collection of the bridge's graph holds "
                f"{describe(saver)}, a Saver built on another graph. {_WHY} Build the Saver "
                "on the bridge's graph (in the hooks callable), or leave the collection alone "
                "(the Scaffold's default Saver saves the global step and the model's weights)."
            )
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.CheckpointSaverHook):
            continue
        saver, given = _tfcompat.checkpoint_saver_hook_saver(hook)
        if saver is not None and in_other_graph(saver, graph):
            where = _tfcompat.hook_output_dir(hook)
            raise ValueError(
                f"HookCallback: CheckpointSaverHook({where!r}) was given ({given}) "
                f"{describe(saver)}, a Saver built on another graph than the bridge's. {_WHY} "
                "Build the Saver inside the hooks callable, on the bridge's graph: "
                f"HookCallback(lambda: [tf.compat.v1.train.CheckpointSaverHook({where!r}, "
                "saver=tf.compat.v1.train.Saver())]), or leave saver= out (the default Saver "
                "saves the global step and the model's weights)."
            )


_WHY = (
    "TensorFlow runs a Saver by its tensor names in the session's graph, which under "
    "HookCallback is the bridge's (global step, weight mirrors): it would not save that "
    "Saver's variables (natively MonitoredSession fails with a TypeError, or silently writes "
    "its own graph's variables into model.ckpt-N_temp/ folders). Nothing was saved."
)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield value


def _graphs(var_list: Any) -> Iterator[tf.Graph]:
    for leaf in _leaves(var_list):
        owner = getattr(leaf, "op", leaf)  # a SaveableObject holds what it saves in .op
        graph = getattr(owner, "graph", None)
        if graph is not None:
            yield graph
