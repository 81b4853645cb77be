"""``model_fn_model(...).export_saved_model``: the SavedModel ``Estimator.export_saved_model`` wrote.

``Estimator.export_saved_model(export_dir_base, serving_input_receiver_fn)`` built a graph from
the receiver's placeholders (``serving_input_receiver_fn()``), the ``model_fn`` in PREDICT mode
on the receiver's ``features``, and one signature per entry of the spec's ``export_outputs``
(``PredictOutput``, ``ClassificationOutput``, ``RegressionOutput``; the default serving key
added for ``predictions`` when there is none), kept only when TensorFlow Serving can serve it.
Here the same graph is made with ``tf.compat.v1.wrap_function`` (the receiver's placeholders are
its inputs, the model's variables its captures), the signatures are TensorFlow's own
``SignatureDef``s of it (``_tfcompat.signature_defs``), and each becomes a function of the
SavedModel pruned from that graph, with the SignatureDef's input and output keys. It is written
as the Estimator wrote it: into ``temp-<timestamp>`` beside, then renamed to ``<timestamp>``, so
the export directory is complete or absent.
"""

from __future__ import annotations

import collections
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

#: How many seconds to wait for a free timestamp, as the Estimator waited.
_ATTEMPTS = 10


def export_saved_model(
    run: Callable[[Any], Any],
    variables: list,
    export_dir_base: str,
    serving_input_receiver_fn: Callable[[], Any],
    owner: str,
) -> str:
    """Writes the SavedModel; returns its directory (``export_dir_base/<timestamp>``).

    Args:
        run: ``run(features) -> spec``: the ``model_fn`` called in PREDICT mode.
        variables: every ``tf.Variable`` the ``model_fn`` may read (the SavedModel's).
        export_dir_base: the directory the timestamped export is made in.
        serving_input_receiver_fn: returns a ``ServingInputReceiver`` (or
            ``TensorServingInputReceiver``): ``features``, ``receiver_tensors`` and
            ``receiver_tensors_alternatives``.
        owner: how errors name the model.

    Raises:
        ValueError: the spec has no ``export_outputs`` and no ``predictions``, or no signature
            can be served.
    """
    made: dict[str, Any] = {}

    def body() -> None:
        receiver = serving_input_receiver_fn()
        for field in ("features", "receiver_tensors"):
            if getattr(receiver, field, None) is None:
                raise ValueError(
                    f"{owner}.export_saved_model: serving_input_receiver_fn returned "
                    f"{type(receiver).__name__}, which has no {field}; return a "
                    "ServingInputReceiver (hookbridge.estimator_compat.export)."
                )
        spec = run(receiver.features)
        outputs = _tfcompat.default_export_outputs(
            getattr(spec, "export_outputs", None), spec.predictions
        )
        made["defs"], made["excluded"] = signature_defs(
            receiver.receiver_tensors,
            outputs,
            getattr(receiver, "receiver_tensors_alternatives", None),
        )

    wrapped = tf.compat.v1.wrap_function(body, [])
    defs = made["defs"]
    if not defs:
        raise ValueError(
            f"{owner}.export_saved_model: no signature of the spec's export_outputs can be "
            f"served, so the Estimator exported none: {made['excluded']}."
        )
    graph = wrapped.graph
    signatures = {key: _signature(wrapped, graph, sdef) for key, sdef in defs.items()}
    module = tf.Module()
    module.model_fn_variables = list(variables)
    return _write_atomically(export_dir_base, module, signatures)


def signature_defs(receiver_tensors: Any, export_outputs: dict, alternatives: Any) -> tuple:
    """The serving ``SignatureDef``s ``Estimator.export_saved_model`` wrote, by key, and the
    left-out ones with the reason (as TensorFlow's ``build_all_signature_defs``: one signature
    an entry of ``export_outputs``, ``"<alternative>:<key>"`` for each receiver alternative,
    kept when its ``as_signature_def`` succeeds, its outputs need no other placeholder than
    its inputs, and TensorFlow Serving can serve it). The model's variables, captured by the
    graph as resource placeholders, are not inputs a signature lacks."""
    receivers = {"": _receiver_dict(receiver_tensors, "input")}
    for name, tensors in (alternatives or {}).items():
        receivers[f"{name or 'None'}:"] = _receiver_dict(tensors, "input")
    kept: dict[str, Any] = {}
    excluded: dict[str, str] = {}
    for prefix, tensors in receivers.items():
        for key, output in export_outputs.items():
            name = f"{prefix}{key or 'None'}"
            try:
                sdef = output.as_signature_def(tensors)
            except ValueError as error:
                excluded[name] = str(error)
                continue
            missing = _unfed_placeholder(list(tensors.values()), sdef)
            if missing:
                excluded[name] = f"its outputs need placeholder {missing!r}, not an input"
            elif tf.compat.v1.saved_model.is_valid_signature(sdef):
                kept[name] = sdef
            else:
                excluded[name] = "TensorFlow Serving cannot serve it"
    return kept, excluded


def _unfed_placeholder(inputs: list, sdef: Any) -> str | None:
    """The name of a placeholder the signature's outputs depend on that is not an input."""
    graph = inputs[0].graph
    fed = {t.name for t in inputs}
    todo = [graph.get_tensor_by_name(info.name).op for info in sdef.outputs.values()]
    seen: set[str] = set()
    while todo:
        op = todo.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "Placeholder" and op.outputs[0].dtype != tf.resource:  # not a variable
            return op.name
        todo += [t.op for t in op.inputs if t.name not in fed]
        todo += list(op.control_inputs)
    return None


def _signature(wrapped: Any, graph: tf.Graph, sdef: Any) -> Any:
    """The SavedModel function of one ``SignatureDef`` (its input and output keys)."""
    keys = sorted(sdef.inputs)
    feeds = [graph.get_tensor_by_name(sdef.inputs[key].name) for key in keys]
    fetches = {key: graph.get_tensor_by_name(info.name) for key, info in sdef.outputs.items()}
    pruned = wrapped.prune(feeds=feeds, fetches=fetches)
    specs = [tf.TensorSpec(t.shape, t.dtype, name=key) for key, t in zip(keys, feeds)]
    return tf.function(lambda *args: pruned(*args), input_signature=specs).get_concrete_function()


def _write_atomically(base: str, module: Any, signatures: dict) -> str:
    os.makedirs(base, exist_ok=True)
    for _ in range(_ATTEMPTS):
        final = os.path.join(base, str(int(time.time())))
        if not os.path.exists(final):
            break
        time.sleep(1)  # as the Estimator: another export took this second
    else:
        raise RuntimeError(f"export_saved_model: no free timestamped directory in {base}.")
    temp = os.path.join(base, "temp-" + os.path.basename(final))
    try:
        tf.saved_model.save(module, temp, signatures=signatures)
        os.rename(temp, final)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return final


def _receiver_dict(tensors: Any, default: str) -> dict:
    return tensors if isinstance(tensors, dict) else {default: tensors}


class ServingInputReceiver(
    collections.namedtuple(
        "ServingInputReceiver", ["features", "receiver_tensors", "receiver_tensors_alternatives"]
    )
):
    """``tf.estimator.export.ServingInputReceiver`` where tensorflow-estimator is gone: a single
    tensor is wrapped as ``{"feature": t}`` / ``{"input": t}``, as TensorFlow's."""

    def __new__(cls, features: Any, receiver_tensors: Any, receiver_tensors_alternatives=None):
        alternatives = receiver_tensors_alternatives
        if alternatives is not None:
            alternatives = {k: _receiver_dict(v, "input") for k, v in alternatives.items()}
        return super().__new__(
            cls,
            _receiver_dict(features, "feature"),
            _receiver_dict(receiver_tensors, "input"),
            alternatives,
        )


class TensorServingInputReceiver(
    collections.namedtuple(
        "TensorServingInputReceiver",
        ["features", "receiver_tensors", "receiver_tensors_alternatives"],
    )
):
    """``tf.estimator.export.TensorServingInputReceiver``: ``features`` a single tensor, passed
    to the ``model_fn`` as it is."""

    def __new__(cls, features: Any, receiver_tensors: Any, receiver_tensors_alternatives=None):
        base = ServingInputReceiver(features, receiver_tensors, receiver_tensors_alternatives)
        return super().__new__(
            cls, features, base.receiver_tensors, base.receiver_tensors_alternatives
        )
