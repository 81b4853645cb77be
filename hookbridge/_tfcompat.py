"""Every private TensorFlow / Keras API hookbridge touches, isolated in this one module.

``tests/test_tfcompat.py`` imports each of these and fails loudly (naming the symbol) when a
TensorFlow or Keras release moves it. Nothing else in hookbridge imports a private TF/Keras path.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from typing import Any

import tensorflow as tf
from tensorflow.python.client import session as _tf_session
from tensorflow.python.eager import context as _eager_context
from tensorflow.python.framework import ops as _ops
from tensorflow.python.framework import stack as _stack
from tensorflow.python.training import training_util as _training_util

#: Private symbols used, as (module, attribute), checked by tests/test_tfcompat.py.
PRIVATE_SYMBOLS = (
    (_tf_session, "_FetchMapper"),
    (_training_util, "_get_or_create_global_step_read"),
    (_eager_context, "eager_mode"),
    (_ops, "_default_graph_stack"),
    (_eager_context, "ContextSwitch"),
    (_eager_context, "_context"),
    (_stack, "default_session"),
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


def logging_hook_formatter(hook: Any) -> Any:
    """The ``formatter`` a ``tf.compat.v1.train.LoggingTensorHook`` was built with (private)."""
    return hook._formatter


def hook_summary_writer(hook: Any) -> Any:
    """The writer a ``StepCounterHook`` / ``SummarySaverHook`` writes to once begun (private)."""
    return hook._summary_writer


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


#: Keras's own callback methods that behave the same whether eager execution is on or not, by
#: (private module, class): CallbackHook calls them without switching to eager mode (about
#: 10 µs per step inside a MonitoredSession run). Read in Keras 3.15, tf_keras 2.21 and Keras
#: 2.15: they look at the logs' floats with numpy and set ``model.stop_training``.
#: ``on_train_batch_end`` is the base class's, which calls ``on_batch_end``.
#: tests/test_graph_free.py pins their source.
EAGER_FREE_CALLBACKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("keras.src.callbacks.terminate_on_nan", "TerminateOnNaN"): (  # Keras 3
        "on_train_batch_end",
        "on_batch_end",
    ),
    ("tf_keras.src.callbacks", "TerminateOnNaN"): ("on_train_batch_end", "on_batch_end"),
    ("keras.src.callbacks", "TerminateOnNaN"): ("on_train_batch_end", "on_batch_end"),  # Keras 2
}


# -- private Keras markers (attributes, not module symbols) -------------------------------------
def keras_is_default(method: Any) -> bool:
    """Whether Keras marked ``method`` as a no-op base method (``utils.is_default``'s marker)."""
    return bool(getattr(method, "_is_default", False))


def copy_keras_default_marker(original: Any, wrapper: Any) -> None:
    """Carries Keras's no-op marker from ``original`` over to a ``wrapper`` of it."""
    if hasattr(original, "_is_default"):
        wrapper._is_default = original._is_default


def implements_train_batch_hooks(callback: Any) -> bool | None:
    """tf_keras / Keras 2's own answer to "does this callback need batch calls?", or None."""
    ask = getattr(callback, "_implements_train_batch_hooks", None)
    return None if ask is None else bool(ask())


def implements_batch_hooks(callback: Any, kind: str) -> bool | None:
    """tf_keras / Keras 2's ``_implements_<kind>_batch_hooks()`` (``kind``: ``"train"``,
    ``"test"`` or ``"predict"``), or None where Keras does not ask (Keras 3)."""
    ask = getattr(callback, f"_implements_{kind}_batch_hooks", None)
    return None if ask is None else bool(ask())


def metric_direction(metric: Any) -> str | None:
    """A Keras 3 metric's ``"up"``/``"down"`` direction (EarlyStopping's ``mode="auto"``)."""
    return getattr(metric, "_direction", None)


#: TF1 optimizers keep each constructor argument ``x`` as the private attribute ``_x``, except
#: these (``AdamOptimizer`` keeps ``learning_rate`` as ``_lr``).
_TF1_OPTIMIZER_ALIASES = {"learning_rate": ("_learning_rate", "_lr")}


def tf1_optimizer_settings(optimizer: Any) -> dict[str, Any]:
    """The constructor arguments of a ``tf.compat.v1.train.Optimizer`` (private attributes).

    Returns name -> value for each argument of ``type(optimizer).__init__`` found on the
    instance (``learning_rate`` may be a tensor or variable); ``tests/test_tfcompat.py`` checks
    them on the built-in optimizers.
    """
    import inspect

    settings: dict[str, Any] = {}
    for name in list(inspect.signature(type(optimizer).__init__).parameters)[1:]:
        for attribute in _TF1_OPTIMIZER_ALIASES.get(name, ("_" + name,)):
            if hasattr(optimizer, attribute):
                settings[name] = getattr(optimizer, attribute)
                break
    return settings


def keras_optimizer_config(optimizer: Any) -> dict[str, Any] | list[str]:
    """``optimizer.get_config()`` of a Keras (legacy ``OptimizerV2``) optimizer whose
    hyperparameters became variables of a graph that is gone (a canned Estimator's, after
    ``train``): each is read as the constant it was created with (private ``_hyper``). Returns
    the names of those that cannot be read (not a constant) instead of a config.
    """
    hyper = getattr(optimizer, "_hyper", None)
    if not isinstance(hyper, dict):
        return optimizer.get_config()
    values: dict[str, Any] = {}
    unreadable = []
    for name, value in hyper.items():
        graph = getattr(value, "graph", None)
        if not isinstance(graph, tf.Graph):
            values[name] = value  # a number, a schedule, or an eager variable
            continue
        with graph.as_default():
            try:
                initial = tf.get_static_value(getattr(value, "initial_value", value))
            except (AttributeError, TypeError, ValueError, RuntimeError):
                initial = None
        if initial is None:
            unreadable.append(f"{name}={value!r}")
        else:  # a float32 constant as the number it was written as (0.01, not 0.0099999998)
            dtype = getattr(value, "dtype", None)
            values[name] = float(str(initial) if dtype == tf.float32 else initial)
    if unreadable:
        return unreadable
    clone = copy.copy(optimizer)
    clone._hyper = values  # get_config reads them from here
    return clone.get_config()


#: The op TF 2 leaves in a graph for a ``tf.summary.*`` call made while no default writer was
#: set (the call becomes a constant ``False``): ``<name>/write_summary/Const``. An op name, not an
#: API: tests/test_tfcompat.py pins it.
UNBOUND_SUMMARY_OP_SUFFIX = "write_summary/Const"


def unbound_summary_ops(graph: tf.Graph) -> list[str]:
    """Names of ``tf.summary.*`` calls in ``graph`` that were made without a default writer."""
    suffix = "/" + UNBOUND_SUMMARY_OP_SUFFIX
    return [
        op.name[: -len(suffix)]
        for op in graph.get_operations()
        if op.type == "Const" and op.name.endswith(suffix)
    ]


class _ContextObjects:
    """The eager context and two of its objects, looked up once per scope object (again only if
    TF replaces its context): its per-thread data (one object; per-thread inside) and its
    context-switch stack (a threading.local)."""

    __slots__ = ("_ctx", "_local", "_switches")

    def __init__(self) -> None:
        self._ctx: Any = None
        self._local: Any = None
        self._switches: Any = None

    def _look_up(self) -> None:
        ctx = self._ctx = _eager_context.context()  # creates the context on first use
        self._local, self._switches = ctx._thread_local_data, ctx.context_switches


class GraphScope(_ContextObjects):
    """A reusable ``graph_default`` for one graph, for the bridge's per-step hook calls.

    ``with scope:`` does what ``with graph.as_default():`` does, with the context-switch record
    built once (rebuilt only if this thread's device stack changes) and no object allocated per
    entry: the bridge enters its graph twice per Keras step, right after TF's step has evicted
    the CPU caches, where every attribute lookup counts. Nesting is allowed; use one scope from one
    thread at a time (the thread Keras calls callbacks on). ``tests/test_tfcompat.py`` checks it
    against ``Graph.as_default``.
    """

    __slots__ = ("_device_stack", "_saved", "_switch", "graph")

    def __init__(self, graph: tf.Graph) -> None:
        super().__init__()
        self.graph = graph
        self._saved: list = []
        self._switch: Any = None
        self._device_stack: Any = None

    def __enter__(self) -> tf.Graph:
        g = self.graph
        if _eager_context._context is not self._ctx or self._ctx is None:
            self._look_up()  # first use, or TF replaced its context
        device_stack = g._device_function_stack
        switch = self._switch
        if switch is None or self._device_stack is not device_stack:
            self._device_stack = device_stack
            switch = self._switch = _eager_context.ContextSwitch(
                g.building_function, g.as_default, device_stack
            )
        self._switches.stack.append(switch)
        _ops._default_graph_stack.stack.append(g)
        local = self._local
        self._saved.append(local.is_eager)
        local.is_eager = False
        return g

    def __exit__(self, *exc: object) -> None:
        self._local.is_eager = self._saved.pop()
        stack = _ops._default_graph_stack.stack
        if stack:
            if stack[-1] is not self.graph:
                raise AssertionError("Nesting violated for the default graph stack")
            stack.pop()
        self._switches.stack.pop()


class EagerScope(_ContextObjects):
    """A reusable ``eager()`` (nesting allowed; one thread at a time): CallbackHook enters eager
    mode for its callbacks on every step. Like ``GraphScope`` it looks the eager context's
    objects up once and allocates nothing per entry."""

    __slots__ = ("_saved",)

    _SWITCH = None  # one ContextSwitch record for every scope: it holds no state

    def __init__(self) -> None:
        super().__init__()
        self._saved: list = []

    def __enter__(self) -> None:
        if _eager_context._context is not self._ctx or self._ctx is None:
            self._look_up()  # first use, or TF replaced its context
        local = self._local
        self._saved.append(local.is_eager)
        local.is_eager = True
        switch = EagerScope._SWITCH
        if switch is None:
            switch = EagerScope._SWITCH = _eager_context.ContextSwitch(
                False, _eager_context.eager_mode, None
            )
        self._switches.stack.append(switch)

    def __exit__(self, *exc: object) -> None:
        self._local.is_eager = self._saved.pop()
        self._switches.stack.pop()


def graph_default(graph: tf.Graph) -> GraphScope:
    """``with graph_default(g):`` does what ``with g.as_default():`` does, about three times
    cheaper (``Graph.as_default`` nests three generator context managers)."""
    return GraphScope(graph)


#: ``with eager():`` turns eager execution on, even while a v1 graph is the default graph
#: (``tf.init_scope`` lifts out of function graphs, not out of a v1 graph): TF's own
#: ``context.eager_mode()`` without its generator.
eager = EagerScope


#: ``new_session_run_values((results, options, run_metadata))`` builds a
#: ``tf.compat.v1.train.SessionRunValues`` (a namedtuple) with ``tuple.__new__`` in C, as its
#: generated ``__new__`` builds it, without that Python frame per hook per step; the one-time
#: deprecation log line TF 2.15's estimator wraps around that ``__new__`` is not printed.
#: ``tests/test_tfcompat.py`` fails if TensorFlow gives the class a constructor of its own.
new_session_run_values = functools.partial(tuple.__new__, tf.compat.v1.train.SessionRunValues)


def hook_output_dir(hook: Any) -> str | None:
    """The directory a built-in file-writing hook writes to (private attributes), or None:
    ``CheckpointSaverHook``'s checkpoint dir, ``SummarySaverHook``'s / ``StepCounterHook``'s
    ``output_dir`` (or their writer's logdir), ``ProfilerHook``'s ``output_dir``. A
    ``StepCounterHook`` given neither writes nothing (None)."""
    train = tf.compat.v1.train
    if isinstance(hook, train.CheckpointSaverHook):
        return hook._checkpoint_dir
    if isinstance(hook, train.ProfilerHook):
        return os.path.dirname(hook._output_file)
    if isinstance(hook, (train.SummarySaverHook, train.StepCounterHook)):
        if hook._output_dir:
            return hook._output_dir
        writer = hook._summary_writer
        return writer.get_logdir() if writer is not None else None
    return None


#: A Keras optimizer's slot variables (state per model variable), by the canonical slot names
#: of ``tf.keras.optimizers.legacy`` (``get_slot``): the attribute of the lists Keras 2.11+ and
#: Keras 3 optimizers keep them in (``Adam._momentums[i]`` is ``m`` of the i-th variable).
KERAS_SLOT_LISTS = {
    "m": "_momentums",
    "v": "_velocities",
    "vhat": "_velocity_hats",
    "accumulator": "_accumulators",
    "linear": "_linears",
    "mg": "_average_gradients",
}
#: Slots whose list depends on the class: SGD keeps ``momentums`` (public), RMSprop keeps
#: ``rms`` in ``_velocities`` and ``momentum`` in ``_momentums``.
_KERAS_SLOT_LISTS_BY_CLASS = {
    ("SGD", "momentum"): "momentums",
    ("RMSprop", "rms"): "_velocities",
    ("RMSprop", "momentum"): "_momentums",
}


def build_keras_optimizer(optimizer: Any, variables: list) -> None:
    """Creates a Keras optimizer's slot variables for ``variables`` (as its first step does):
    ``build`` (Keras 2.11+ and Keras 3) or ``_create_all_weights`` (``optimizers.legacy``)."""
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "_create_all_weights"):
        optimizer._create_all_weights(variables)
    else:
        optimizer.build(variables)


def keras_optimizer_counter(optimizer: Any) -> tuple[Any, int]:
    """The variable counting a Keras optimizer's steps, and the batches per update.

    ``optimizer.iterations`` counts updates. Under Keras 3 ``gradient_accumulation_steps=k`` it
    is computed (``_iterations // k``, a tensor) from the private ``_iterations``, which counts
    batches: ``(optimizer._iterations, k)``; else ``(optimizer.iterations, 1)``. Give it the
    optimizer doing the updates (a ``LossScaleOptimizer``'s ``inner_optimizer``).
    """
    steps = getattr(optimizer, "gradient_accumulation_steps", None)
    if steps:
        return optimizer._iterations, int(steps)
    return optimizer.iterations, 1


def keras_gradient_accumulators(optimizer: Any) -> list:
    """The gradient sums a Keras 3 optimizer with ``gradient_accumulation_steps`` keeps between
    updates (private ``_accumulated_gradients``, one per variable once built; ``[]`` else)."""
    return [a for a in getattr(optimizer, "_accumulated_gradients", None) or [] if a is not None]


def keras_optimizer_owns(optimizer: Any, variable: Any) -> bool | None:
    """Whether a Keras optimizer was built on ``variable`` (keeps state for it); ``None`` when
    it is not built yet (or, ``optimizers.legacy``, keeps no slot at all so far).

    Keras 3: ``built`` and the private ``_get_variable_index``; Keras 2.11+ / tf_keras: the
    private ``_built`` and ``_index_dict``; ``optimizers.legacy``: ``get_slot`` (public).
    """
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "get_slot_names"):  # legacy
        names = optimizer.get_slot_names()
        if not names:
            return None
        try:
            optimizer.get_slot(variable, names[0])
        except KeyError:
            return False
        return True
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        if not optimizer.built:
            return None
        try:
            optimizer._get_variable_index(variable)
        except KeyError:
            return False
        return True
    if not getattr(optimizer, "_built", False):
        return None
    return optimizer._var_key(variable) in optimizer._index_dict


def keras_optimizer_slot(optimizer: Any, variable: Any, slot: str) -> Any:
    """The slot ``slot`` (``m``, ``v``, ``momentum``, ``accumulator``, ``linear``, ``rms``,
    ``mg``) of ``variable`` in a built Keras optimizer, or ``None`` when it keeps none."""
    if hasattr(optimizer, "get_slot") and hasattr(optimizer, "get_slot_names"):  # legacy
        if slot not in optimizer.get_slot_names():
            return None
        try:
            return optimizer.get_slot(variable, slot)
        except KeyError:  # no slots for this variable: one optimizer of several
            return None
    attribute = _KERAS_SLOT_LISTS_BY_CLASS.get((type(optimizer).__name__, slot))
    attribute = attribute or KERAS_SLOT_LISTS.get(slot)
    slots = getattr(optimizer, attribute, None) if attribute else None
    if not slots:
        return None
    if keras_optimizer_owns(optimizer, variable) is False:
        return None  # built on other variables (one optimizer of several)
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        index = optimizer._get_variable_index(variable)
    else:  # Keras 2.11+
        index = optimizer._index_dict[optimizer._var_key(variable)]
    return slots[index]


def compile_metrics_by_key(metric: Any) -> dict[str, Any] | None:
    """The metric objects of Keras 3's ``CompileMetrics`` container by the key Keras logs them
    under (``out_a_mae`` for a metric ``mae`` of output ``out_a``, ``weighted_mae`` for a
    weighted metric named as an unweighted one, ``mae_1`` for a second ``mae``), named as its
    ``result()`` names them from the private ``_flat_metrics`` / ``_flat_weighted_metrics``
    lists; None for any other metric (tf_keras names its metrics after their log keys)."""
    flat = getattr(metric, "_flat_metrics", None)
    weighted = getattr(metric, "_flat_weighted_metrics", None)
    if flat is None or weighted is None or not getattr(metric, "built", False):
        return None
    keys: dict[str, Any] = {}
    counters: dict[str, int] = {}
    for is_weighted, lists in ((False, flat), (True, weighted)):
        for mls in lists:
            if not mls:
                continue
            prefix = f"{mls.output_name}_" if mls.output_name else ""
            for m in mls.metrics:
                name = prefix + m.name
                if name in counters:
                    if is_weighted:
                        name = f"{prefix}weighted_{m.name}"
                    if name in counters:
                        counters[name] += 1
                        name = f"{name}_{counters[name] - 1}"
                    else:
                        counters[name] = 1
                else:
                    counters[name] = 1
                keys[name] = m
    return keys


# -- private attributes tf_keras's TensorBoard reads on a model (CallbackHook's proxy) ----------
#: tf_keras / Keras 2 ``TensorBoard._collect_learning_rate`` reads ``model.optimizer.<this>`` and
#: logs ``epoch_learning_rate`` only when it is a ``LearningRateSchedule``.
KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE = "_learning_rate"
#: tf_keras / Keras 2 ``TensorBoard`` takes ``model.<this>`` (a counter variable its train / test
#: function increments) as the step of its batch-level summaries.
KERAS_TRAIN_COUNTER_ATTRIBUTE = "_train_counter"
KERAS_TEST_COUNTER_ATTRIBUTE = "_test_counter"


def keras_fit_start(
    model: Any, steps_per_epoch: int | None, initial_epoch: int
) -> tuple[int, int]:
    """The epoch ``fit`` starts at and the step index it starts that epoch at, as ``fit`` reads
    them right after ``on_train_begin``, where ``BackupAndRestore`` restored its backup.

    Keras 3: ``model._initial_epoch or initial_epoch`` (its ``BackupAndRestore`` sets the private
    attribute; step 0). tf_keras / Keras 2: ``model._maybe_load_initial_counters_from_ckpt(
    steps_per_epoch, initial_epoch)`` (their ``BackupAndRestore``'s backup state; a step after
    0 when it backed up mid-epoch). ``(initial_epoch, 0)`` for an object no ``fit`` runs (not a
    ``keras.Model``).
    """
    if not isinstance(model, tf.keras.Model):
        return initial_epoch, 0
    if hasattr(model, "_maybe_load_initial_counters_from_ckpt"):  # tf_keras / Keras 2
        epoch, step = model._maybe_load_initial_counters_from_ckpt(steps_per_epoch, initial_epoch)
        return int(epoch), int(step)
    return int(model._initial_epoch or initial_epoch), 0  # Keras 3


def stop_at_step_last_step(hook: Any) -> int | None:
    """The last step of a ``StopAtStepHook`` (private; set from ``num_steps`` in
    ``after_create_session``, before that None)."""
    return hook._last_step


def nan_tensor_hook_settings(hook: Any) -> tuple[Any, bool]:
    """The tensor a ``NanTensorHook`` checks and its ``fail_on_nan_loss`` (private)."""
    return hook._loss_tensor, bool(hook._fail_on_nan_loss)


def checkpoint_saver_listeners(hook: Any) -> list:
    """The ``CheckpointSaverListener``s of a ``CheckpointSaverHook`` (private): a listener's
    ``after_save`` returning True asks for a stop."""
    return list(hook._listeners)


def checkpoint_saver_hook_saver(hook: Any) -> tuple[Any, str]:
    """The Saver a ``CheckpointSaverHook`` holds (private ``_saver`` / ``_scaffold``) and how it
    got it (``"saver="``, ``"scaffold="``), or ``(None, "")``: it takes the one Saver of the
    default graph's ``SAVERS`` collection at its first save (``_get_saver``), and keeps it."""
    if hook._saver is not None:
        return hook._saver, "saver="
    scaffold = hook._scaffold
    if scaffold is not None and scaffold.saver is not None:
        return scaffold.saver, "scaffold="
    return None, ""


def forget_checkpoint_saver_hook_saver(hook: Any) -> None:
    """Drops the Saver a ``CheckpointSaverHook`` cached from a graph's ``SAVERS`` collection
    (private ``_saver``), so that its next session takes the one of its own graph."""
    hook._saver = None


def saver_var_list(saver: Any) -> Any:
    """What a built ``tf.compat.v1.train.Saver`` saves (private ``_var_list``: a list or dict of
    variables, tensors or saveables, nested for partitioned ones), or None before it is built
    or when it was built from a ``saver_def``."""
    return saver._var_list


def keras2_builtin_callback_names(callback: Any) -> frozenset[str] | None:
    """The names tf_keras / Keras 2's ``CallbackList`` treats as its own callbacks: a list holding
    a callback whose class name is not among them times its batch methods (the slow-callback
    warning; ``cbk.__class__.__name__ not in globals()`` of the module that defines
    ``CallbackList``). None for a Keras 3 callback (no such check)."""
    if implements_batch_hooks(callback, "train") is None:
        return None
    for klass in type(callback).__mro__:
        root = klass.__module__.split(".")[0]
        if root in ("keras", "tf_keras"):
            package = sys.modules.get(root)
            callback_list = getattr(getattr(package, "callbacks", None), "CallbackList", None)
            module = sys.modules.get(getattr(callback_list, "__module__", ""))
            return frozenset(vars(module)) if module is not None else frozenset()
    return frozenset()


def canned_estimator_arguments(estimator: Any) -> dict[str, Any]:
    """The constructor arguments of a canned ``tf.estimator`` Estimator (``DNNClassifier``,
    ``LinearRegressor``, ...): the variables its private ``_model_fn`` closes over
    (``hidden_units``, ``feature_columns``, ``head``, ``optimizer``, ``activation_fn``,
    ``dropout``, ``batch_norm``, ...), as tensorflow-estimator 2.15 builds them."""
    import inspect

    return dict(inspect.getclosurevars(estimator._model_fn).nonlocals)


#: Private attributes of tensorflow-estimator heads read by ``canned_head_settings``.
_HEAD_ATTRIBUTES = ("_loss_reduction", "_n_classes", "_weight_column", "_label_vocabulary")


def canned_head_settings(head: Any) -> dict[str, Any]:
    """A canned Estimator head's ``logits_dimension`` (public) and its private settings
    (``loss_reduction``, ``n_classes``, ``weight_column``, ``label_vocabulary``) when it has
    them."""
    settings = {"logits_dimension": head.logits_dimension}
    for attribute in _HEAD_ATTRIBUTES:
        if hasattr(head, attribute):
            settings[attribute[1:]] = getattr(head, attribute)
    return settings


def default_session(session: Any) -> Any:
    """``with default_session(s):`` makes ``s`` the default session, as ``Session.as_default()``
    does for a session (``Tensor.eval()`` and ``Operation.run()`` then use it): for the bridge's
    session proxy, which has no session machinery of its own."""
    return _stack.default_session(session)


def tf_upgrader() -> tuple[Any, Any]:
    """TensorFlow's own TF1 -> TF2 upgrader (``tf_upgrade_v2``, shipped in every TF 2 wheel but
    not part of the ``tf`` API): its ``tf_upgrade_v2`` module (``TFAPIChangeSpec``, the rename
    tables) and its ``ast_edits`` engine (``ASTCodeUpgrader.update_string_pasta``, ``ERROR``)."""
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2

    return tf_upgrade_v2, ast_edits


# ---- model_fn: mfnsubjects ----
def default_export_outputs(export_outputs: Any, predictions: Any) -> dict[str, Any]:
    """A PREDICT ``EstimatorSpec``'s ``export_outputs`` as tensorflow-estimator validates them
    (TensorFlow's private ``saved_model.model_utils.export_utils.get_export_outputs``): a dict of
    ``ExportOutput``s, with the default serving ``PredictOutput`` of ``predictions`` added."""
    from tensorflow.python.saved_model.model_utils import export_utils

    return export_utils.get_export_outputs(export_outputs, predictions)


# ---- twins: twinopt ----
def keras_optimizer_variable_index(optimizer: Any, variable: Any) -> int:
    """The index of ``variable`` in a built Keras 3 / Keras 2.11+ optimizer's slot lists:
    Keras 3's private ``_get_variable_index``, Keras 2.11+'s private ``_index_dict`` keyed by
    ``_var_key`` (a ``tf.Variable`` or a Keras 3 variable)."""
    if hasattr(optimizer, "_get_variable_index"):  # Keras 3
        return optimizer._get_variable_index(variable)
    return optimizer._index_dict[optimizer._var_key(variable)]


def keras_optimizer_slot_variable(optimizer: Any, variable: Any, slot: str, value: float) -> Any:
    """A new slot variable of a Keras 3 / Keras 2.11+ optimizer shaped like ``variable``, filled
    with ``value`` (``add_variable_from_reference``, whose arguments differ between the two)."""
    import inspect

    params = inspect.signature(optimizer.add_variable_from_reference).parameters
    if "initializer" in params:  # Keras 3
        import keras

        return optimizer.add_variable_from_reference(
            variable, slot, initializer=keras.initializers.Constant(value)
        )
    return optimizer.add_variable_from_reference(  # Keras 2.11+
        variable, slot, initial_value=tf.fill(variable.shape, tf.cast(value, variable.dtype))
    )


def keras2_optimizer_set_learning_rate(optimizer: Any, learning_rate: Any) -> None:
    """Sets a Keras 2.11+ optimizer subclass's learning rate as its own subclasses do in
    ``__init__`` (private ``_build_learning_rate``: a variable, or the schedule kept)."""
    optimizer._learning_rate = optimizer._build_learning_rate(learning_rate)


def mark_keras_optimizer_built(optimizer: Any) -> None:
    """Marks a Keras optimizer subclass built at the end of its ``build``, as Keras's own do:
    Keras 2.11+'s private ``_built`` (Keras 3's base ``build`` sets the public ``built``)."""
    if not hasattr(optimizer, "_get_variable_index"):  # Keras 2.11+
        optimizer._built = True


# ---- twins: fclayers ----


def feature_column_internals() -> Any:
    """TensorFlow's own feature-column code, as canned Estimators run it (TF 2.15 to 2.21).

    A namespace of: ``cache`` (``FeatureTransformationCache``), ``state_manager``
    (``StateManager``, the base the twin's column layers subclass), ``weighted_sum``
    (``_create_weighted_sum``: a column's term of ``linear_model``), ``scope_name``
    (``_sanitize_column_name_for_variable_scope``), ``verify_batch``
    (``_verify_static_batch_size_equality``), the column classes ``feature_column`` (v2
    base), ``categorical``, ``dense``, ``embedding``, ``shared_v2``, ``shared_v1`` (the
    ``tf.compat.v1.feature_column.shared_embedding_columns`` one), ``sequence`` (a tuple) and
    ``lookup_sparse`` / ``lookup_sparse_unsafe`` (the embedding lookups fc calls).
    """
    from types import SimpleNamespace

    from tensorflow.python.feature_column import feature_column as fc_old
    from tensorflow.python.feature_column import feature_column_v2 as fc_v2
    from tensorflow.python.feature_column import feature_column_v2_types as fc_types
    from tensorflow.python.feature_column import sequence_feature_column as fc_seq
    from tensorflow.python.ops import embedding_ops

    return SimpleNamespace(
        cache=fc_v2.FeatureTransformationCache,
        state_manager=fc_v2.StateManager,
        weighted_sum=fc_v2._create_weighted_sum,
        scope_name=fc_v2._sanitize_column_name_for_variable_scope,
        verify_batch=fc_v2._verify_static_batch_size_equality,
        feature_column=fc_types.FeatureColumn,
        categorical=fc_v2.CategoricalColumn,
        dense=fc_v2.DenseColumn,
        embedding=fc_v2.EmbeddingColumn,
        shared_v2=fc_v2.SharedEmbeddingColumn,
        shared_v1=fc_old._SharedEmbeddingColumn,
        sequence=(fc_v2.SequenceCategoricalColumn, fc_seq.SequenceNumericColumn),
        lookup_sparse=embedding_ops.safe_embedding_lookup_sparse,
        lookup_sparse_unsafe=embedding_ops.embedding_lookup_sparse_v2,
    )


def keras_weight_variable(weight: Any) -> Any:
    """The ``tf.Variable`` holding a Keras weight: the weight itself on Keras 2 / tf_keras, the
    Keras 3 ``KerasVariable``'s ``_value`` (``.value`` may be an autocast copy)."""
    import tensorflow as tf

    if isinstance(weight, tf.Variable):
        return weight
    return weight._value


# ---- model_fn: mfncore ----
def _variable_scope_module() -> Any:
    from tensorflow.python.ops import variable_scope

    return variable_scope


@functools.lru_cache(maxsize=1)
def _model_fn_symbols_checked() -> bool:
    vs = _variable_scope_module()
    for attribute in ("_VARSTORE_KEY", "_VariableStore", "with_variable_store"):
        if not hasattr(vs, attribute):
            raise ImportError(
                f"TF {tf.__version__} moved tensorflow.python.ops.variable_scope.{attribute}: "
                "update hookbridge._tfcompat.fresh_tf1_graph_state"
            )
    return True


class fresh_tf1_graph_state:
    """``with fresh_tf1_graph_state(graph):`` gives ``graph`` (a ``tf.function``'s FuncGraph) a
    variable store and collections of its own for the time of one ``model_fn`` call, as the
    fresh ``tf.Graph`` of each Estimator call had: a FuncGraph shares the variable store
    (``variable_scope._VARSTORE_KEY``, copied from the outer graph) and the global/trainable
    variable collections (by reference) with the eager graph, so TF1 code in two traces (or in
    two models) would otherwise see each other's variables. Private: ``Graph._collections``,
    ``variable_scope._VariableStore`` / ``with_variable_store``."""

    def __init__(self, graph: tf.Graph) -> None:
        _model_fn_symbols_checked()
        self._graph = graph
        self._saved: Any = None
        self._store_scope: Any = None

    def __enter__(self) -> tf.Graph:
        vs = _variable_scope_module()
        self._saved = self._graph._collections
        self._graph._collections = {}
        self._store_scope = vs.with_variable_store(vs._VariableStore())
        self._store_scope.__enter__()
        return self._graph

    def __exit__(self, *exc: Any) -> None:
        try:
            self._store_scope.__exit__(*exc)
        finally:
            self._graph._collections = self._saved


def keras3_track_weight(layer: Any, variable: Any) -> None:
    """Keras 3: makes ``variable`` (a ``keras.Variable`` made outside ``add_weight``, which
    would scope its TensorFlow name under the layer's) one of ``layer``'s weights: the private
    ``Layer._track_variable`` ``add_weight`` ends with."""
    layer._track_variable(variable)


def keras3_tf_variable(variable: Any) -> Any:
    """Keras 3: the ``tf.Variable`` a ``keras.Variable`` holds (its private ``_value``; the
    public ``.value`` is a cast tensor under autocast), for TF1 code that assigns to it."""
    value = getattr(variable, "_value", None)
    if value is None or not isinstance(value, tf.Variable):
        raise TypeError(
            f"Keras {getattr(tf.keras, '__version__', '?')}: {variable!r} holds no tf.Variable "
            "in _value: update hookbridge._tfcompat.keras3_tf_variable"
        )
    return value

# ---- twins: twinbuild ----
def keras3_track_loss(model: Any, loss: Any, x: Any) -> None:
    """In a custom ``train_step`` of a Keras 3 model, counts the batch loss into the ``loss``
    Keras logs, as Keras 3's own ``train_step`` does (private ``_loss_tracker``, weighted by the
    batch size). Keras 2 / tf_keras count it in ``compute_loss``: nothing to do there."""
    roots = (c.__module__.partition(".")[0] for c in type(model).__mro__)
    package = sys.modules.get(next((r for r in roots if r in ("keras", "tf_keras")), ""))
    if not str(getattr(package, "__version__", "")).startswith("3."):
        return
    tracker = getattr(model, "_loss_tracker", None)
    if tracker is None:
        raise AttributeError(
            "Keras 3 Model has no _loss_tracker: update hookbridge._tfcompat.keras3_track_loss"
        )
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    tracker.update_state(loss, sample_weight=tf.shape(first)[0])


def keras_tensor_inputs(tensor: Any) -> set[str] | None:
    """The names of the functional model's ``Input`` layers a symbolic Keras tensor is computed
    from (through every layer between: private ``_keras_history`` and ``_inbound_nodes``, Keras
    2 and 3 alike); ``None`` when it cannot be traced (not a functional model's tensor)."""
    found: set[str] = set()
    todo, seen = [tensor], set()
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        history = getattr(current, "_keras_history", None)
        if history is None:
            return None
        layer, node_index = history[0], history[1]
        nodes = getattr(layer, "_inbound_nodes", None) or []
        inputs = tf.nest.flatten(nodes[node_index].input_tensors) if node_index < len(nodes) else []
        if type(layer).__name__ == "InputLayer" or not inputs:
            found.add(str(layer.name))
            continue
        todo.extend(inputs)
    return found


# ---- model_fn: mfngan ----
def tf1_name_scope() -> str:
    """The name scope (``""`` or ``"a/b/"``) a variable made here takes in a TF1 graph.

    Under ``init_scope`` (an optimizer's ``beta1_power``; every ``ResourceVariable``) TF names a
    variable by the name scope of the graph it was asked for in, then makes it in the outermost
    graph. TF1 and TF2 agree on that scope except inside control flow: a ``tf.cond`` /
    ``tf.while_loop`` branch graph starts at the root scope in a TF1 graph, while one made under
    eager execution (a ``tf.function``) starts at the scope its op was made in (private
    ``ControlFlowFuncGraph.is_control_flow_graph`` and ``outer_graph``; the branch graph is still
    the default graph under ``init_scope``). That inherited start, which is the outer graph's
    current scope while the branch is built, is dropped here.
    """
    scope = tf.get_current_name_scope()
    graph = tf.compat.v1.get_default_graph()
    if getattr(graph, "is_control_flow_graph", False) and (
        tf.compat.v1.executing_eagerly_outside_functions()
    ):
        outer = graph.outer_graph
        if outer is None:
            raise AttributeError(
                "control-flow FuncGraph has no outer_graph: update "
                "hookbridge._tfcompat.tf1_name_scope"
            )
        start = outer.get_name_scope()
        if start and (scope == start or scope.startswith(start + "/")):
            scope = scope[len(start) :].lstrip("/")
    return scope + "/" if scope else ""


# ---- mfnspec ----
def _tensor_class() -> Any:
    try:
        from tensorflow.python.framework import tensor as tensor_module  # TF >= 2.14

        return tensor_module.Tensor
    except ImportError:  # pragma: no cover - older TF
        return _ops.Tensor


class tf1_graph_equality:
    """``with tf1_graph_equality():`` gives tensors and variables made or used inside the TF1
    graph semantics of equality the Estimator's ``tf.Graph`` had: hashable, ``==`` is identity.

    In a ``tf.function`` graph TF 2 makes them unhashable (``Variable is unhashable``) and
    ``==`` elementwise, so TF1 code run there (tensorflow-estimator's own ``EstimatorSpec``
    builds ``set(LOCAL_VARIABLES)``) fails where it ran in the Estimator's graph. Private:
    ``Tensor._USE_EQUALITY``, the flag ``tf.compat.v1.disable_v2_tensorequality`` sets, set for
    the time of the block only (a ``model_fn`` call, traced on one thread)."""

    def __enter__(self) -> None:
        tensor = _tensor_class()
        if not hasattr(tensor, "_USE_EQUALITY"):
            raise AttributeError(
                f"TF {tf.__version__} moved Tensor._USE_EQUALITY: update "
                "hookbridge._tfcompat.tf1_graph_equality"
            )
        self._saved = tensor._USE_EQUALITY
        tensor._USE_EQUALITY = False

    def __exit__(self, *exc: Any) -> None:
        _tensor_class()._USE_EQUALITY = self._saved


def captured_handles(graph: Any, variables: Any) -> set[int]:
    """The ids of the tensors through which a ``tf.function`` graph reads ``variables`` (the
    placeholders its ops take for their captured handles). Private: ``FuncGraph.captures``."""
    captures = getattr(graph, "captures", None)
    if captures is None:
        raise AttributeError(
            f"TF {tf.__version__}: FuncGraph has no captures: update "
            "hookbridge._tfcompat.captured_handles"
        )
    handles = {id(v.handle) for v in variables}
    return {id(internal) for external, internal in captures if id(external) in handles}
