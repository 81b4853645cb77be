"""Summaries written inside the model's graph, which Keras's TensorBoard callback cannot record.

In ``fit``, Keras's TensorBoard callback (``update_freq="batch"`` or a number) makes its
``train/`` writer the default writer around each step, so a layer's ``tf.summary.scalar`` lands
in ``train/`` (with ``update_freq="epoch"``, the default, nothing is set and nothing is written).
A TF1 graph binds its summary ops when it is built, before any callback runs: a ``tf.summary.*``
call made then without a default writer is a constant ``False`` (nothing can write it later),
and ``tf.compat.v1.summary.*`` ops are written only by a ``SummarySaverHook`` (or
``MonitoredTrainingSession(summary_dir=...)``). So CallbackHook cannot record them through
TensorBoard, and says so when a TensorBoard callback would have recorded them in ``fit``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat


def warn_unrecorded(graph: tf.Graph, callbacks: Sequence[Any]) -> None:
    """Warns once per session if a batch-level TensorBoard meets summaries built into the graph."""
    boards = [
        cb
        for cb in callbacks
        if any(k.__name__ == "TensorBoard" for k in type(cb).__mro__)
        and getattr(cb, "update_freq", "epoch") != "epoch"
    ]
    if not boards:
        return
    unbound = _tfcompat.unbound_summary_ops(graph)
    v1 = graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
    with graph.as_default():
        bound = tf.compat.v1.summary.all_v2_summary_ops()
    found = []
    if unbound:
        found.append(f"tf.summary calls built without a writer ({', '.join(unbound[:5])})")
    if v1:
        found.append(f"{len(v1)} tf.compat.v1.summary op(s) (written by a SummarySaverHook)")
    if bound:
        found.append(f"{len(bound)} tf.summary op(s) bound to the writer set when they were built")
    if found:
        warnings.warn(
            f"CallbackHook: TensorBoard(update_freq={boards[0].update_freq!r}) records the "
            "summaries a Keras model writes during fit, but this graph's were bound when it was "
            f"built and are not recorded in its train/ events: {'; '.join(found)}. To write "
            "them, run a tf.compat.v1.train.SummarySaverHook (tf.compat.v1.summary ops) or build "
            "the graph under tf.summary.create_file_writer(...).as_default() and run "
            "tf.compat.v1.summary.all_v2_summary_ops(). See docs/callbacks.md (TensorBoard).",
            UserWarning,
            stacklevel=4,
        )
