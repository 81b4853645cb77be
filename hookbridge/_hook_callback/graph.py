"""The side graph a hook sees under HookCallback: global step, log tensors, weight mirrors."""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.outputs import build as build_outputs

#: Prefix of the tensors holding Keras's own running means (what Keras logs carry).
RUNNING_MEAN_SCOPE = "running_mean"
#: Scope of the variables mirroring the Keras model's weights (what a Saver writes).
WEIGHTS_SCOPE = "model"

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")
#: The graph collection holding the weight mirrors, in ``model.weights`` order (whatever their
#: names: ``model/NNN/...`` or the TF1 names of an assignment map).
WEIGHT_MIRRORS = "hookbridge_weight_mirrors"

#: model -> {weight index: TF1 name}: the names an assignment map gave the model's weights
#: (``restore_checkpoint(..., assignment_map=...)``, ``estimator_hooks(model=...)``), which the
#: weight mirrors of the model's next runs take.
_TF1_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_tf1_names(model: Any, names: Mapping[int, str] | None) -> None:
    """Records (``None``: forgets) the TF1 names ``model``'s weights answer to in its runs."""
    if names:
        _TF1_NAMES[model] = dict(names)
    else:
        _TF1_NAMES.pop(model, None)


def tf1_names(model: Any) -> dict[int, str]:
    """The TF1 names recorded for ``model``'s weights (weight index -> name), maybe empty."""
    try:
        return dict(_TF1_NAMES.get(model, {}))
    except TypeError:  # not weak-referenceable or hashable: nothing was recorded
        return {}


def mirror_name(index: int, variable: Any) -> str:
    """Stable checkpoint name of the model's ``index``-th weight (``model/000/kernel``).

    Keras variable paths (``sequential_9/dense_18/kernel``) change between model instances, so
    the bridge names weights by their position in ``model.weights``, which is stable for one
    architecture; a fresh model of the same architecture restores from it.
    """
    try:
        leaf = getattr(variable, "path", None) or variable.name
    except (RuntimeError, ValueError):  # a SyncOnRead variable's lookup, in the bridge's graph
        leaf = variable.name
    leaf = leaf.split("/")[-1].split(":")[0]
    return f"{WEIGHTS_SCOPE}/{index:03d}/{_INVALID_NAME_CHARS.sub('_', leaf)}"


def _mirror_names(
    weights: Sequence[Any], tf1: Mapping[int, str], graph: tf.Graph
) -> list[str]:
    """Each weight mirror's name: the TF1 name an assignment map gave the weight (so a hook
    finding variables by the checkpoint's names, ``dense/kernel``, finds them), else
    ``model/NNN/<leaf>``. A TF1 name the graph already uses (a log tensor's, ``global_step``)
    or gives twice keeps the ``model/NNN`` name."""
    names, taken = [], set()
    for i, w in enumerate(weights):
        name = tf1.get(i)
        if not name or name in taken or _name_in_use(graph, name):
            name = mirror_name(i, w)
        taken.add(name)
        names.append(name)
    return names


def _name_in_use(graph: tf.Graph, name: str) -> bool:
    try:
        graph.as_graph_element(name, allow_tensor=False, allow_operation=True)
    except (KeyError, ValueError):
        return name.split("/")[0] in (RUNNING_MEAN_SCOPE, "hookbridge")
    return True


#: Ops that take a variable's handle without changing the variable.
_READ_ONLY_OPS = frozenset(
    {
        "ReadVariableOp",
        "VarIsInitializedOp",
        "VariableShape",
        "ResourceGather",
        "ResourceGatherNd",
        "Identity",
    }
)


class Dependencies(NamedTuple):
    """What one set of fetches reads and writes among the variables the bridge keeps in sync."""

    reads_step: bool
    reads_weights: bool
    writes_step: bool
    writes_weights: bool


class SideGraph:
    """A TF1 graph standing in for the Keras training step, as a ``model_fn`` graph would.

    Holds the global step (with TF's cached ``global_step`` read tensor), one scalar tensor per
    Keras log key named after it (the batch value), ``running_mean/<key>`` (Keras's running mean),
    ``loss`` in the ``LOSSES`` collection, and one variable per model weight under ``model/``.
    """

    def __init__(
        self,
        *,
        log_keys: Sequence[str],
        weights: Sequence[Any],
        outputs: list[tuple[str, tf.DType]] | None = None,
        weight_names: Mapping[int, str] | None = None,
    ) -> None:
        self.graph = tf.Graph()
        self.log_tensors: dict[str, tf.Tensor] = {}
        self.mean_tensors: dict[str, tf.Tensor] = {}
        # predict: the batch's predictions, one tensor per output (outputs.py)
        self.output_tensors: dict[str, tf.Tensor] = {}
        with self.graph.as_default():
            self.global_step = tf.compat.v1.train.get_or_create_global_step()
            self.global_step_read = _tfcompat.global_step_read_tensor(self.graph)
            for key in log_keys:
                if key in self.log_tensors or key == "global_step":
                    continue
                # The default is never used: a run reading a log tensor that has no value (a
                # tensor derived from loss:0 in predict) raises as loss:0 does (resolver.py
                # feeds). A default lets a hook fetch the op itself ("loss"), as TF1 allows.
                self.log_tensors[key] = tf.compat.v1.placeholder_with_default(
                    np.float32(0.0), shape=[], name=key
                )
                self.mean_tensors[key] = tf.compat.v1.placeholder_with_default(
                    np.float32(0.0), shape=[], name=f"{RUNNING_MEAN_SCOPE}/{key}"
                )
            if "loss" in self.log_tensors:
                tf.compat.v1.add_to_collection(
                    tf.compat.v1.GraphKeys.LOSSES, self.log_tensors["loss"]
                )
            if outputs:
                self.output_tensors = build_outputs(outputs)
            self.mirrors: list[tf.Variable] = []
            names = _mirror_names(weights, weight_names or {}, self.graph)
            mirror_values: list[tf.Tensor] = []
            assigns = []
            for i, w in enumerate(weights):
                dtype = tf.as_dtype(getattr(w, "dtype", "float32"))
                shape = tuple(w.shape)
                with tf.name_scope("hookbridge/"):
                    value = tf.compat.v1.placeholder(dtype, shape=shape)
                # Initialized from the Keras weights (fed at session creation), so a hook that
                # replaces the initializer (init_from_checkpoint) or writes the variable is the
                # only way the graph's weights can differ from the model's.
                # get_variable, as TF1 layers made them: init_from_checkpoint finds it by name.
                mirror = tf.compat.v1.get_variable(
                    names[i],
                    initializer=value,
                    trainable=bool(getattr(w, "trainable", True)),
                    use_resource=True,
                )
                self.mirrors.append(mirror)
                tf.compat.v1.add_to_collection(WEIGHT_MIRRORS, mirror)
                mirror_values.append(value)
                assigns.append(mirror.assign(value, read_value=False))
            self.mirror_initializers = [m.initializer for m in self.mirrors]
            self.step_initializer = self.global_step.initializer
            with tf.name_scope("hookbridge/"):
                self.global_step_value = tf.compat.v1.placeholder(tf.int64, shape=[])
                self.sync_step_op = self.global_step.assign(
                    self.global_step_value, read_value=False
                )
                self.sync_weights_op = tf.group(*assigns) if assigns else tf.no_op()
            self.mirror_values = mirror_values
        # Elements the bridge answers from Python, never through a session.
        self.step_elements = {
            self.graph.as_graph_element(self.global_step),
            self.global_step_read,
        }
        self._bridge_var_ops = {v.op for v in self.mirrors}
        self._step_var_op = self.global_step.op
        self._deps_cache: dict[frozenset, Dependencies] = {}
        self.init_by_scaffold = False  # whether the Scaffold's init_op is its default one

    def initializers_replaced(self) -> tuple[bool, bool]:
        """Whether a hook replaced the global step's / a mirror's initializer (as
        ``init_from_checkpoint`` does in ``begin``): then they start from other values."""
        weights = any(
            m.initializer is not i for m, i in zip(self.mirrors, self.mirror_initializers)
        )
        return self.global_step.initializer is not self.step_initializer, weights

    def build_init_op(self) -> None:
        """The op initializing the bridge's own variables (built after every hook's begin)."""
        with self.graph.as_default(), tf.name_scope("hookbridge/"):
            self.init_op = tf.group(
                self.global_step.initializer, *(m.initializer for m in self.mirrors)
            )

    def dependencies(self, elements: Sequence[Any]) -> Dependencies:
        """What a run of ``elements`` reads and writes of the global step and weight mirrors."""
        key = frozenset(e.name for e in elements)
        hit = self._deps_cache.get(key)
        if hit is not None:
            return hit
        seen: set = set()
        stack = [e.op if isinstance(e, tf.Tensor) else e for e in elements]
        step_op, mirror_ops = self._step_var_op, self._bridge_var_ops
        reads_step = reads_weights = writes_step = writes_weights = False
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            if op is step_op:
                reads_step = True
            elif op in mirror_ops:
                reads_weights = True
            elif op.type not in _READ_ONLY_OPS:
                for t in op.inputs:
                    if t.op is step_op:
                        writes_step = True
                    elif t.op in mirror_ops:
                        writes_weights = True
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
        deps = Dependencies(reads_step, reads_weights, writes_step, writes_weights)
        self._deps_cache[key] = deps
        return deps

    def available_names(self) -> list[str]:
        """Tensor names a hook can fetch from the bridge's graph, for error messages."""
        names = [self.graph.as_graph_element(self.global_step).name, self.global_step_read.name]
        names += [t.name for t in self.log_tensors.values()]
        names += [t.name for t in self.mean_tensors.values()]
        names += [t.name for t in self.output_tensors.values()]
        return names
