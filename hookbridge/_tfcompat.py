"""Every private TensorFlow / Keras API hookbridge touches, isolated in this one module.

``tests/test_tfcompat.py`` imports each of these and fails loudly (naming the symbol) when a
TensorFlow or Keras release moves it. Nothing else in hookbridge imports a private TF/Keras path.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.client import session as _tf_session
from tensorflow.python.eager import context as _eager_context
from tensorflow.python.training import training_util as _training_util

#: Private symbols used, as (module, attribute), checked by tests/test_tfcompat.py.
PRIVATE_SYMBOLS = (
    (_tf_session, "_FetchMapper"),
    (_training_util, "_get_or_create_global_step_read"),
    (_eager_context, "eager_mode"),
)


def fetch_mapper(fetches: Any) -> Any:
    """TF's own mapper from a nested fetch structure to unique graph elements and back.

    Must be called with the graph the fetches belong to as the default graph. Returns an object
    with ``unique_fetches()`` and ``build_results(values)``; raises TF's own TypeError/ValueError.
    """
    return _tf_session._FetchMapper.for_fetch(fetches)


def global_step_read_tensor(graph: tf.Graph) -> tf.Tensor:
    """The cached ``global_step + 0`` read tensor that built-in hooks fetch (created on demand)."""
    return _training_util._get_or_create_global_step_read(graph)


def profiler_hook_output_file(hook: Any) -> str | None:
    """The timeline path pattern of a ``tf.compat.v1.train.ProfilerHook`` (a private attribute)."""
    if isinstance(hook, tf.compat.v1.train.ProfilerHook):
        return hook._output_file
    return None


def eager():
    """A context where eager execution is on, even while a v1 graph is the default graph.

    ``tf.init_scope`` is not enough: it lifts out of function graphs, not out of a v1 graph.
    """
    return _eager_context.eager_mode()


def keras3_metrics_list(entries: list) -> Any:
    """A Keras 3 ``MetricsList`` holding ``entries`` (objects with ``name`` and ``_direction``).

    Keras 3's monitor callbacks (``mode="auto"``) look for a metric's direction only inside
    ``model.metrics`` entries of this private class, reading the private ``_direction``.
    """
    from keras.src.trainers import compile_utils

    with eager():
        holder = compile_utils.MetricsList([], name="hookbridge_graph_metrics")
    holder.metrics = entries
    return holder


#: Private symbols used by CallbackHook (direction 2), as (module path, attribute): module paths
#: are strings because Keras 3 is absent on the TF 2.15 stack (nothing there imports them).
#: CallbackHook also reads Keras 3's ``Metric._direction`` (an instance attribute) the same way.
PRIVATE_SYMBOLS_CALLBACK_HOOK = (("keras.src.trainers.compile_utils", "MetricsList"),)
