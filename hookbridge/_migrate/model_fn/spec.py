"""The ``EstimatorSpec``'s hooks under ``model_fn_model``: what they name, as Keras logs.

A hook the ``model_fn`` returns (``training_hooks``) names tensors of the ``model_fn``'s graph,
by name (``LoggingTensorHook(["train_accuracy"])``) or as tensor objects
(``NanTensorHook(loss)``). Under ``fit`` that graph is a ``tf.function``'s, which no session can
run: each such tensor becomes a Keras log of the model's step (a scalar, the value of that
step, under the tensor's op name), which ``HookCallback``'s graph holds as a tensor of the same
name; a tensor object held by the hook is replaced by that name, which the hook's ``begin`` and
``before_run`` resolve in ``HookCallback``'s graph as they resolved names in the Estimator's.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

#: Log keys HookCallback's graph already holds (its own ``loss`` and global step).
_BRIDGE_KEYS = frozenset({"loss", "global_step"})

#: The Keras run of each mode (``ModeKeys`` values), for errors.
_RUNS = {"train": "fit", "eval": "evaluate", "infer": "predict"}

#: The ``EstimatorSpec`` fields of each mode's hooks (``ModeKeys`` values; TRAIN's chief-only
#: hooks first, as a chief ran them).
_HOOK_FIELDS = {
    "train": ("training_chief_hooks", "training_hooks"),
    "eval": ("evaluation_hooks",),
    "infer": ("prediction_hooks",),
}


def call_model_fn(
    model_fn: Callable[..., Any],
    features: Any,
    labels: Any,
    mode: str,
    params: Any,
    config: Any,
    host_calls: list | None = None,
) -> Any:
    """Calls ``model_fn`` with the arguments it names, as ``Estimator._call_model_fn`` does; a
    ``TPUEstimatorSpec``'s ``host_call`` is taken out into ``host_calls`` (``host_call.py``)."""
    names = inspect.signature(model_fn).parameters
    kwargs: dict[str, Any] = {}
    if "labels" in names:
        kwargs["labels"] = labels
    elif labels is not None and mode != "infer":
        raise ValueError("model_fn_model: the model_fn takes no labels, but labels were given.")
    if "mode" in names:
        kwargs["mode"] = mode
    if "params" in names:
        kwargs["params"] = params
    elif params:
        raise ValueError("model_fn_model: params were given, but the model_fn takes no params.")
    if "config" in names:
        kwargs["config"] = config
    # As the Estimator calls it: plain Python building a graph, never rewritten by autograph
    # (fit's train_step is a tf.function that would convert the model_fn's `if`s and loops).
    # In the graph semantics of the Estimator's tf.Graph: tensors and variables hashable, `==`
    # identity (tensorflow-estimator's EstimatorSpec builds set(LOCAL_VARIABLES)).
    with _tfcompat.tf1_graph_equality():
        spec = tf.autograph.experimental.do_not_convert(model_fn)(features=features, **kwargs)
        if hasattr(spec, "as_estimator_spec"):  # TPUEstimatorSpec, as TPUEstimator runs it on CPU
            if host_calls is not None and getattr(spec, "host_call", None) is not None:
                host_calls.append(spec.host_call)
                # anew: TF's keeps its host calls aside (_host_calls), which _replace copies
                spec = type(spec)(**{**spec._asdict(), "host_call": None})
            spec = spec.as_estimator_spec()  # (TF's makes an EstimatorSpec: set(LOCAL_VARIABLES))
    return spec


def refuse_host_call(owner: str, mode: str) -> None:
    """Raises for a ``host_call`` outside TRAIN mode (``TPUEstimator`` ran it as an evaluation
    and prediction hook too; ``model_fn_model`` runs it under ``fit`` only: ``host_call.py``)."""
    if mode != "train":
        raise NotImplementedError(
            f"{owner}: the model_fn's TPUEstimatorSpec has a host_call in {mode.upper()} mode; "
            f"model_fn_model runs host_call under fit (TRAIN mode) only, not under "
            f"{_RUNS[mode]}. Return it in TRAIN mode only, or run the TPUEstimator on TF 2.15."
        )


def spec_hooks(spec: Any, mode: str) -> tuple:
    """The spec's hooks of ``mode`` (a ``ModeKeys`` value)."""
    return tuple(hook for name in _HOOK_FIELDS[mode] for hook in getattr(spec, name, None) or ())


def hook_callback(
    fresh_hooks: Callable[[], tuple[list, list]], log_names: Sequence[str], callbacks: Any
) -> list:
    """``callbacks`` and, after them, a ``HookCallback`` of the spec's hooks (as the Estimator
    ran the caller's ``hooks=`` first, then the spec's), or ``callbacks`` if there are none.

    Args:
        fresh_hooks: returns the spec's hooks of a new ``model_fn`` call (as each
            ``Estimator.train``/``evaluate`` call made them): (chief-only hooks, hooks).
        log_names: the log keys of the tensors the hooks name (``hook_fetches``).
        callbacks: the caller's callbacks (or None).
    """
    chief, hooks = fresh_hooks()
    if not chief and not hooks:
        return callbacks
    from hookbridge._hook_callback.callback import HookCallback

    bridge = HookCallback(hooks, chief_only_hooks=chief, log_names=list(log_names))
    return [*(callbacks or []), bridge]


@contextlib.contextmanager
def quiet_batch_logs(keys: Sequence[str]) -> Iterator[None]:
    """No ``HookCallback`` warning that ``keys`` are logged by no metric: the step returns the
    hooks' tensors as the batch's own values, which is what the warning asks for."""
    with warnings.catch_warnings():
        for key in keys:
            warnings.filterwarnings(
                "ignore", message=f"HookCallback: Keras logs {re.escape(repr(key))} but no"
            )
        yield


def op_names(graph: tf.Graph, first: int) -> list[tuple[str, str]]:
    """(name, type) of each op the ``model_fn`` made in ``graph`` (those from index ``first``),
    without placeholders: a ``tf.function`` graph adds one where the ``model_fn`` first reads a
    tensor from outside, which an earlier trace may have captured before the ``model_fn`` ran."""
    return [(op.name, op.type) for op in _made(graph.get_operations()[first:])]


def _made(ops: Sequence[Any]) -> list[Any]:
    return [op for op in ops if op.type != "Placeholder"]


def hook_fetches(
    owner: str,
    mode: str,
    hooks: Sequence[Any],
    graph: tf.Graph,
    made: tuple[int, list[tuple[str, str]]] | None = None,
) -> dict[str, Any]:
    """The tensors of ``graph`` that ``hooks`` name, by log key; tensor objects in the hooks'
    attributes are replaced by their names.

    Each trace of the ``model_fn`` (the step's, the hooks' own) builds its ops in another
    ``tf.function`` graph, where an automatic name (``tf.identity(x)``: ``Identity_1``) depends
    on the ops made before the ``model_fn`` ran. A tensor is therefore keyed by the name the
    op at its position among the ``model_fn``'s ops has in the trace the keys come from
    (``made``), never by its name in this graph.

    Args:
        owner: how errors name the model.
        mode: the ``ModeKeys`` value the hooks come from (for errors).
        hooks: the spec's hooks of that mode.
        graph: the ``model_fn``'s graph.
        made: ``(first, op_names)``: the index of the ``model_fn``'s first op in ``graph`` and
            the (name, type) of the ops it made in the trace whose names are the log keys.

    Returns:
        ``{log key: tensor}`` (the key is the tensor's op name in that trace): a scalar as
        float32; in PREDICT mode a non-scalar tensor as it is.

    Raises:
        ValueError: a hook names a tensor that is not an op's first output, or outside PREDICT
            mode one that is not a scalar; or the ``model_fn`` built another graph in this
            trace, or a hook names by string an op whose automatic name is another op's there.
    """
    found: dict[str, Any] = {}
    changed = [False]
    first, names = made if made is not None else (len(graph.get_operations()), [])
    ours = _made(graph.get_operations()[first:])
    position = {op: i for i, op in enumerate(ours)}

    def key_of(hook: Any, op: Any, said: str | None = None) -> str:
        if op not in position:
            return op.name  # not the model_fn's op (or no other trace): its own name
        index = position[op]
        if len(ours) != len(names) or names[index][1] != op.type:
            raise ValueError(
                f"{owner}: the {mode} hook {type(hook).__name__} names {op.name!r}, but the "
                "model_fn built other ops in another trace of the same mode, so which tensor "
                "it is there is unknown. Build the same graph on every call, or name the "
                "tensor (tf.identity(x, name=...))."
            )
        if said is not None and names[index][0] != op.name:
            raise ValueError(
                f"{owner}: the {mode} hook {type(hook).__name__} names {said!r}, an automatic "
                f"name that the op made at the same place has as {names[index][0]!r} in the "
                "step's graph (automatic names depend on the ops made before). Name the "
                "tensor in the model_fn (tf.identity(x, name=...)) and hook that name."
            )
        return names[index][0]

    def visit(hook: Any, value: Any) -> Any:
        if isinstance(value, str):
            tensor = _tensor_named(graph, value)
            if tensor is not None:
                _add(owner, mode, hook, tensor, found, key_of(hook, tensor.op, value))
            return value
        if isinstance(value, (tf.Tensor, tf.Operation)) and value.graph is graph:
            changed[0] = True
            if isinstance(value, tf.Operation):
                return key_of(hook, value)
            return _add(owner, mode, hook, value, found, key_of(hook, value.op))
        return value

    for hook in hooks:
        for attribute, value in list(vars(hook).items()):
            changed[0] = False
            if isinstance(value, dict):
                new: Any = {k: visit(hook, v) for k, v in value.items()}
            elif isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
                new = type(value)(visit(hook, v) for v in value)
            else:
                new = visit(hook, value)
            if changed[0]:
                setattr(hook, attribute, new)
    return found


def _tensor_named(graph: tf.Graph, name: str) -> Any:
    try:
        element = graph.as_graph_element(name, allow_tensor=True, allow_operation=True)
    except (KeyError, ValueError, TypeError):
        return None
    if isinstance(element, tf.Operation):
        return element.outputs[0] if element.outputs else None
    return element


def _add(owner: str, mode: str, hook: Any, tensor: Any, found: dict[str, Any], key: str) -> str:
    if key in _BRIDGE_KEYS:
        return f"{key}:0"
    scalar = tensor.shape.is_compatible_with([])
    # predict hands a hook the batch's whole tensor (model_fn/prediction.py); fit and evaluate
    # read them as Keras logs, which are scalars.
    if tensor.value_index != 0 or not (scalar or mode == "infer"):
        raise ValueError(
            f"{owner}: the {mode} hook {type(hook).__name__} names tensor {tensor.name!r} "
            f"(shape {tensor.shape}); under {_RUNS[mode]} a hook reads the model_fn's tensors "
            "as Keras logs, which are scalars of an op's first output. Name a scalar "
            "(tf.identity(x, name=...)) or reduce it (tf.reduce_mean) in the model_fn."
        )
    if tensor.dtype in (tf.string, tf.variant, tf.resource):
        raise ValueError(
            f"{owner}: the {mode} hook {type(hook).__name__} names tensor {tensor.name!r} of "
            f"dtype {tensor.dtype.name}, which a Keras log cannot hold."
        )
    found[key] = tf.cast(tensor, tf.float32) if scalar else tensor
    return f"{key}:0"


#: The ``Scaffold`` fields a ``model_fn`` can set, read through its public properties.
_SCAFFOLD_FIELDS = (
    "init_fn",
    "init_op",
    "init_feed_dict",
    "ready_op",
    "ready_for_local_init_op",
    "local_init_op",
    "local_init_feed_dict",
    "summary_op",
    "saver",
)


def refuse_scaffold(owner: str, mode: str, scaffold: Any) -> None:
    """Raises when the spec's ``scaffold`` sets a field (anything but the default Scaffold).

    The Estimator ran them on its session over the ``model_fn``'s graph (``init_fn(scaffold,
    session)`` after the restore or init, its ``saver`` for checkpoints, its ``ready_op`` /
    ``init_op`` at session creation); under ``fit`` that graph is a ``tf.function``'s, which no
    session runs, and the model's weights are restored and saved by name instead.

    Raises:
        ValueError: naming the fields and what to do instead.
    """
    if scaffold is None:
        return
    fields = [f for f in _SCAFFOLD_FIELDS if getattr(scaffold, f, None) is not None]
    if fields:
        raise ValueError(
            f"{owner}: the model_fn's {mode} EstimatorSpec has a Scaffold with "
            f"{', '.join(fields)}. The Estimator ran these on a Session over the model_fn's "
            "graph, which under fit is a tf.function graph no session runs, so they cannot be "
            "honoured as the Estimator ran them. A warm start (init_fn restoring a checkpoint) "
            "is hookbridge.restore_checkpoint(model, path) after model_fn_model; a Saver's checkpoints are a CheckpointSaverHook under HookCallback "
            "(hookbridge.estimator_hooks); TF1 session-level ops go to HookCallback(scaffold=...) "
            "built on its graph. Return the spec without them."
        )
