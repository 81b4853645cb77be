"""``model.save(path)`` without an extension on tf_keras / Keras 2: a SavedModel of the graph.

Natively that writes a SavedModel directory (``ModelCheckpoint(save_weights_only=False)``). A
running ``MonitoredSession``'s graph is finalized, and ``SavedModelBuilder`` adds a Saver to the
graph it saves, so the graph is copied: its meta graph (ops and the variable collections) is
imported into a new graph, each global variable there is given the live session's value
(through its initializer, as ``Variable.load`` does), and that graph is saved under the
``serve`` tag with no signature: the hook is not told which tensors are the model's inputs and
outputs. ``tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)`` gives the graph and
every variable back. A path written before is replaced, as Keras's ``save`` overwrites.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import tensorflow as tf

_KEYS = tf.compat.v1.GraphKeys
#: The collections the copy keeps (what restoring and running the graph needs), not the others
#: (hooks, summaries, queue runners...), which may hold Python objects that do not serialize.
_COLLECTIONS = (
    _KEYS.GLOBAL_VARIABLES,
    _KEYS.TRAINABLE_VARIABLES,
    _KEYS.LOCAL_VARIABLES,
    _KEYS.MODEL_VARIABLES,
    _KEYS.GLOBAL_STEP,
    _KEYS.UPDATE_OPS,
    _KEYS.TABLE_INITIALIZERS,
    _KEYS.LOSSES,
)


class SavedModelError(ValueError):
    """The graph could not be copied into a SavedModel (the reason is chained)."""


def write_saved_model(session: Any, graph: tf.Graph, path: str) -> None:
    """Writes the graph and the live values of its global variables as a SavedModel at ``path``.

    Raises:
        SavedModelError: the graph could not be exported, imported or saved.
    """
    variables = graph.get_collection(_KEYS.GLOBAL_VARIABLES)
    values = dict(zip((v.op.name for v in variables), session.run(variables)))
    tmp = path.rstrip("/\\") + ".hookbridge-tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    try:
        with graph.as_default():  # graph mode: callbacks run in an eager context
            meta = tf.compat.v1.train.export_meta_graph(
                graph=graph,  # clear_devices=True would write a collection: graph finalized
                clear_devices=False,
                collection_list=[k for k in _COLLECTIONS if graph.get_collection(k)],
            )
        copy = tf.Graph()
        with copy.as_default():
            tf.compat.v1.train.import_meta_graph(meta)
            config = tf.compat.v1.ConfigProto(allow_soft_placement=True)  # a cluster's devices
            with tf.compat.v1.Session(graph=copy, config=config) as copy_session:
                for var in copy.get_collection(_KEYS.GLOBAL_VARIABLES):
                    init = var.initializer
                    copy_session.run(init, {init.inputs[1]: values[var.op.name]})
                builder = tf.compat.v1.saved_model.Builder(tmp)
                builder.add_meta_graph_and_variables(
                    copy_session, [tf.compat.v1.saved_model.tag_constants.SERVING]
                )
                builder.save()
    except Exception as e:  # any failure of the copy is reported the same way
        shutil.rmtree(tmp, ignore_errors=True)
        raise SavedModelError(f"{type(e).__name__}: {e}") from e
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    os.replace(tmp, path)
