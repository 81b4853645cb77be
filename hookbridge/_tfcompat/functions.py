"""``tf.function`` and Keras train-function internals: a traced concrete function called with
its flat inputs (what ``tf.function`` does after its per-call dispatch), the flat inputs TF's
own binding gives for a call's arguments, and the ``tf.function`` inside Keras 3's
``train_function`` closure.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

from typing import Any

#: The closure variable of Keras 3's ``train_function`` (``TensorFlowTrainer._make_function``'s
#: ``function``) that holds the ``tf.function`` taking the iterator and returning an
#: ``Optional`` of the logs.
KERAS3_ITERATOR_FUNCTION = "multi_step_on_iterator"


def concrete_flat_inputs(concrete: Any, *args: Any) -> list[Any]:
    """The flat tensors TensorFlow's own call passes ``concrete`` for ``args``.

    ``tracing_compilation.call_function``'s binding, verbatim: ``function_type.bind`` then
    ``unpack_inputs`` (composites such as a ``tf.data`` iterator become their component tensors,
    aliases dropped). Raises TF's own ``TypeError`` when ``args`` do not fit the function.
    """
    bound = concrete.function_type.bind(*args)
    return concrete.function_type.unpack_inputs(bound)


def concrete_call_flat(concrete: Any, flat_inputs: list[Any], captured_inputs: list[Any]) -> Any:
    """Runs ``concrete`` on ``flat_inputs`` plus ``captured_inputs``: ``ConcreteFunction.
    _call_flat``, what ``tf.function`` calls once it has found the traced function (outputs
    packed in the traced structure; a tape, if one records, sees the call)."""
    return concrete._call_flat(flat_inputs, captured_inputs)


def keras3_iterator_function(train_function: Any) -> Any | None:
    """The ``tf.function`` Keras 3's ``train_function`` calls with a ``tf.data`` iterator, or
    None where ``train_function`` is not that closure (run eagerly: then it is a plain
    function; another Keras)."""
    code = getattr(train_function, "__code__", None)
    cells = getattr(train_function, "__closure__", None)
    if code is None or not cells or KERAS3_ITERATOR_FUNCTION not in code.co_freevars:
        return None
    try:
        inner = cells[code.co_freevars.index(KERAS3_ITERATOR_FUNCTION)].cell_contents
    except ValueError:  # an empty cell
        return None
    return inner if hasattr(inner, "get_concrete_function") else None
