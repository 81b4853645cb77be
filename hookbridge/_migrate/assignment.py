"""Loading a TF1 / Estimator checkpoint into a Keras model whose variable names differ.

A TF1 ``model_fn`` names its variables after its layers (``dense/kernel``, ``dense_1/bias``,
``dnn/hiddenlayer_0/kernel``, ``dnn/logits/bias``) and saves beside them the optimizer's slots
(``dense/kernel/Adam``, ``beta1_power``) and ``global_step``. A Keras model of the same
architecture names its weights differently (``sequential/dense_3/kernel``). An *assignment map*
says which checkpoint variable fills which Keras weight, as ``tf.compat.v1.train.
init_from_checkpoint`` takes it: ``{checkpoint name: Keras weight}``.

:func:`propose_assignment` proposes one by layer order and shapes: the checkpoint's layers (the
name up to its last ``/``) in natural order (``dense`` < ``dense_1`` < ``dense_2``,
``hiddenlayer_0`` < ``logits``), matched to the Keras model's layers in ``model.weights`` order,
each Keras layer taking the first unused checkpoint layer whose variables have its weights'
shapes (weights matched by their leaf name, ``kernel`` to ``kernel``, else by position). TF1 does
not record the order in which ``model_fn`` created its layers, so read the proposal (``dry_run``)
before trusting it; explicit entries override it.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from hookbridge._migrate import linear as _linear

#: Leaf names TF1 optimizers give their slot and accumulator variables.
_SLOT_LEAVES = re.compile(
    r"^(Adam(_\d+)?|Momentum|Adagrad|AdagradDA(_\d+)?|RMSProp(_\d+)?|Ftrl(_\d+)?|Adadelta(_\d+)?|"
    r"ExponentialMovingAverage|accumulator|gradient_accumulator|linear|.*_power)$"
)
#: Top-level scopes of optimizer state (tf_keras optimizers in canned Estimators, tf.contrib).
_OPTIMIZER_SCOPES = frozenset({"training", "OptimizeLoss"})
GLOBAL_STEP = "global_step"

#: A Keras weight in an explicit entry: its label (``dense_3/kernel``), full path, index in
#: ``model.weights``, or the variable itself.
WeightRef = Any


@dataclasses.dataclass
class Plan:
    """What a restore would do: ``pairs`` (checkpoint name, Keras weight index), and the rest."""

    prefix: str
    pairs: list[tuple[str, int]]
    labels: list[str]
    ckpt_shapes: dict[str, tuple[int, ...]]
    weight_shapes: list[tuple[int, ...]]
    step: int | None
    unassigned: list[int]
    unused: list[str]
    slots: list[str]

    def rows(self) -> dict[str, tuple[int, int, int]]:
        """``{name: (weight index, first row, end row)}`` for names stacked into one weight."""
        by_weight: dict[int, list[str]] = {}
        for name, i in self.pairs:
            by_weight.setdefault(i, []).append(name)
        out = {}
        for i, names in by_weight.items():
            if len(names) > 1:
                start = 0
                for name in names:
                    rows = self.ckpt_shapes[name][0]
                    out[name] = (i, start, start + rows)
                    start += rows
        return out

    def format(self) -> str:
        """The plan as the dry run prints it: ``checkpoint name [shape] -> Keras weight``."""
        width = max([len(c) for c, _ in self.pairs] + [len(GLOBAL_STEP), 10])
        lines = [f"restore_checkpoint dry run: {self.prefix}"]
        rows = self.rows()
        for name, i in self.pairs:
            part = f" rows {rows[name][1]}:{rows[name][2]}" if name in rows else ""
            lines.append(
                f"  {name:<{width}} {_shape(self.ckpt_shapes[name]):<12} -> "
                f"{self.labels[i]} {_shape(self.weight_shapes[i])}{part}"
            )
        if self.step is not None:
            lines.append(
                f"  {GLOBAL_STEP:<{width}} {'[]':<12} -> optimizer.iterations = {self.step}"
            )
        for i in self.unassigned:
            lines.append(
                f"  UNASSIGNED Keras weight {self.labels[i]} {_shape(self.weight_shapes[i])}: "
                "add an entry for it"
            )
        if self.unused:
            lines.append(
                "  not loaded (no Keras weight): " + _listing(self.unused, self.ckpt_shapes)
            )
        if self.slots:
            lines.append(
                "  optimizer state (into model.optimizer, converted to its slots): "
                + _listing(self.slots, self.ckpt_shapes)
            )
        return "\n".join(lines)


def _shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _listing(names: Sequence[str], shapes: Mapping[str, Sequence[int]], limit: int = 40) -> str:
    shown = [f"{n} {_shape(shapes[n])}" for n in names[:limit]]
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(shown) + more


def describe_checkpoint(shapes: Mapping[str, Sequence[int]], limit: int = 40) -> str:
    """``name [shape], ...`` of a checkpoint's variables, for error messages."""
    return _listing(sorted(shapes), shapes, limit) if shapes else "no variables"


# --------------------------------------------------------------------------- Keras side
def weight_labels(model: Any) -> list[str]:
    """Each weight's label: its path without the model's name (``dense_3/kernel``)."""
    labels = []
    for w in model.weights:
        path = (getattr(w, "path", None) or w.name).split(":")[0]
        head, _, rest = path.partition("/")
        labels.append(rest if rest and head == getattr(model, "name", None) else path)
    return labels


def _keras_layers(labels: Sequence[str]) -> list[list[int]]:
    """Consecutive weight indices grouped by layer (the label up to its last ``/``)."""
    groups: list[list[int]] = []
    previous = None
    for i, label in enumerate(labels):
        layer = label.rpartition("/")[0]
        if not groups or layer != previous:
            groups.append([])
        groups[-1].append(i)
        previous = layer
    return groups


def _weight_index(ref: WeightRef, model: Any, labels: Sequence[str]) -> int:
    weights = list(model.weights)
    if isinstance(ref, int) and not isinstance(ref, bool):
        if 0 <= ref < len(weights):
            return ref
    elif isinstance(ref, str):
        name = ref.split(":")[0]
        for i, w in enumerate(weights):
            path = (getattr(w, "path", None) or w.name).split(":")[0]
            if name in (labels[i], path):
                return i
    else:
        for i, w in enumerate(weights):
            if w is ref:
                return i
    raise ValueError(
        f"restore_checkpoint: assignment_map names Keras weight {ref!r}, which the model does "
        f"not have; its weights are {labels} (a label, a path, an index into model.weights, "
        "or the variable itself)."
    )


# ---------------------------------------------------------------------- checkpoint side
def _natural_key(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def split_checkpoint(shapes: Mapping[str, Sequence[int]]) -> tuple[list[str], list[str]]:
    """(model variables, optimizer state) of a checkpoint, ``global_step`` left out.

    Optimizer state: a variable named after another one (``dense/kernel/Adam``,
    ``training/Adam/dnn/logits/kernel/m``), one with an optimizer's leaf name (``beta1_power``,
    ``.../Momentum``), or one under ``training/`` (the Keras optimizers of canned Estimators).
    """
    names = sorted((n for n in shapes if n != GLOBAL_STEP), key=_natural_key)
    as_set = set(names)
    model, slots = [], []
    for name in names:
        (slots if _is_optimizer_state(name, as_set) else model).append(name)
    return model, slots


def _is_optimizer_state(name: str, names: set[str]) -> bool:
    parts = name.split("/")
    if parts[0] in _OPTIMIZER_SCOPES or _SLOT_LEAVES.match(parts[-1]):
        return True
    return any(
        "/".join(parts[i:j]) in names
        for i in range(len(parts))
        for j in range(i + 1, len(parts) + 1)
        if (i, j) != (0, len(parts))
    )


def _match_layer(
    weights: Sequence[int],
    sources: Sequence[_linear.Source],
    labels: Sequence[str],
    weight_shapes: Sequence[tuple[int, ...]],
    ckpt_shapes: Mapping[str, tuple[int, ...]],
) -> list[tuple[str, int]] | None:
    """Pairs for one Keras layer and one checkpoint layer, or ``None`` if they do not fit."""
    if len(weights) != len(sources):
        return None
    by_leaf = {leaf: source for source, leaf in zip(sources, (s[1] for s in sources))}
    leaves = [labels[i].rpartition("/")[2] for i in weights]
    if set(leaves) == set(by_leaf) and len(by_leaf) == len(sources):
        matched = [(by_leaf[leaf], i) for leaf, i in zip(leaves, weights)]
    else:
        matched = list(zip(sources, weights))
    if all(_linear.source_shape(src, ckpt_shapes) == weight_shapes[i] for src, i in matched):
        return [(name, i) for src, i in matched for name in src[0]]
    return None


def _auto_pairs(
    free_weights: Sequence[int],
    free_variables: Sequence[str],
    labels: Sequence[str],
    weight_shapes: Sequence[tuple[int, ...]],
    ckpt_shapes: Mapping[str, tuple[int, ...]],
) -> list[tuple[str, int]]:
    free = set(free_weights)
    keras_layers = [[i for i in g if i in free] for g in _keras_layers(labels)]
    layers = _linear.sources(free_variables)
    ckpt_layers = [srcs for _, srcs in sorted(layers, key=lambda kv: _natural_key(kv[0]))]
    used = [False] * len(ckpt_layers)
    pairs: list[tuple[str, int]] = []
    for layer in filter(None, keras_layers):
        for k, sources in enumerate(ckpt_layers):
            if used[k]:
                continue
            matched = _match_layer(layer, sources, labels, weight_shapes, ckpt_shapes)
            if matched is not None:
                used[k] = True
                pairs.extend(matched)
                break
    return pairs


# ------------------------------------------------------------------------------- plans
def plan(
    model: Any,
    prefix: str,
    ckpt_shapes: Mapping[str, Sequence[int]],
    assignment_map: str | Mapping[str, WeightRef],
) -> Plan:
    """The plan for ``assignment_map`` (``"auto"``, or explicit entries, which may hold
    ``"*": "auto"`` to have the rest proposed)."""
    shapes = {k: tuple(int(d) for d in v) for k, v in ckpt_shapes.items()}
    labels = weight_labels(model)
    weight_shapes = [tuple(int(d) for d in w.shape) for w in model.weights]
    variables, slots = split_checkpoint(shapes)
    if isinstance(assignment_map, str):
        if assignment_map != "auto":
            raise ValueError(
                f"restore_checkpoint: assignment_map={assignment_map!r}; pass 'auto' or a dict "
                "{checkpoint name: Keras weight}."
            )
        explicit = _hookbridge_names(model, shapes, weight_shapes)
        auto = not explicit
    else:
        explicit = {k: v for k, v in assignment_map.items() if k != "*"}
        auto = assignment_map.get("*") == "auto"
    pairs = _explicit_pairs(explicit, model, labels, shapes, weight_shapes, prefix)
    if auto:
        taken_w = {i for _, i in pairs}
        taken_v = {v for v, _ in pairs}
        pairs += _auto_pairs(
            [i for i in range(len(labels)) if i not in taken_w],
            [v for v in variables if v not in taken_v],
            labels,
            weight_shapes,
            shapes,
        )
    assigned = {i for _, i in pairs}
    loaded = {v for v, _ in pairs}
    return Plan(
        prefix=prefix,
        pairs=sorted(pairs, key=lambda p: p[1]),
        labels=labels,
        ckpt_shapes=shapes,
        weight_shapes=weight_shapes,
        step=None if GLOBAL_STEP not in shapes else -1,
        unassigned=[i for i in range(len(labels)) if i not in assigned],
        unused=[v for v in variables if v not in loaded],
        slots=[s for s in slots if s not in loaded],
    )


def _hookbridge_names(
    model: Any, shapes: Mapping[str, tuple[int, ...]], weight_shapes: Sequence[tuple[int, ...]]
) -> dict[str, WeightRef]:
    """``{model/000/kernel: 0, ...}`` when the checkpoint is HookCallback's for this model."""
    from hookbridge._hook_callback.graph import mirror_name

    names = {mirror_name(i, w): i for i, w in enumerate(model.weights)}
    fits = all(shapes.get(n) == weight_shapes[i] for n, i in names.items())
    return names if names and fits else {}


def _explicit_pairs(
    explicit: Mapping[str | tuple[str, ...], WeightRef],
    model: Any,
    labels: Sequence[str],
    shapes: Mapping[str, tuple[int, ...]],
    weight_shapes: Sequence[tuple[int, ...]],
    prefix: str,
) -> list[tuple[str, int]]:
    """Pairs of explicit entries; a tuple of names fills one Keras weight, their rows stacked in
    the tuple's order (per-column ``[1, units]`` weights into one ``Dense`` kernel)."""
    pairs: list[tuple[str, int]] = []
    owner: dict[int, str] = {}
    for key, ref in explicit.items():
        names = tuple(key) if isinstance(key, (tuple, list)) else (key,)
        for name in names:
            if name not in shapes:
                raise ValueError(
                    f"restore_checkpoint: assignment_map names checkpoint variable {name!r}, "
                    f"which {prefix!r} does not hold; it holds {describe_checkpoint(shapes)}."
                )
        i = _weight_index(ref, model, labels)
        shown = names[0] if len(names) == 1 else names
        if i in owner:
            raise ValueError(
                f"restore_checkpoint: assignment_map assigns both {owner[i]!r} and {shown!r} to "
                f"Keras weight {labels[i]}; keep one (a tuple of names stacks several)."
            )
        shape = _linear.source_shape((names, ""), shapes)
        if shape != weight_shapes[i]:
            got = " + ".join(_shape(shapes[n]) for n in names)
            raise ValueError(
                f"restore_checkpoint: assignment_map assigns {shown!r} {got} to Keras weight "
                f"{labels[i]} of shape {_shape(weight_shapes[i])}"
                + (" (stacked by rows)." if len(names) > 1 else ".")
            )
        owner[i] = shown  # type: ignore[assignment]
        pairs.extend((name, i) for name in names)
    return pairs


def restore_mapped(
    model: Any,
    reader: Any,
    prefix: str,
    assignment_map: str | Mapping[str, WeightRef],
    *,
    dry_run: bool | TextIO = False,
    apply: Callable[[Any, list[Any], int], None] | None = None,
) -> tuple[list[Any] | None, int]:
    """The values to set (``None`` on a dry run) and the global step, by ``assignment_map``.

    With ``apply`` (``apply(model, values, step)`` sets the weights and the step), the
    checkpoint's optimizer state is then loaded into ``model.optimizer``
    (``hookbridge/_migrate/optimizer_state.py``); a warning names what could not be.

    Raises:
        ValueError: a Keras weight is left without a value, or an entry is wrong.
    """
    the_plan = plan(model, prefix, reader.get_variable_to_shape_map(), assignment_map)
    step = int(reader.get_tensor(GLOBAL_STEP)) if the_plan.step is not None else 0
    if the_plan.step is not None:
        the_plan.step = step
    if dry_run:
        import sys

        out = dry_run if hasattr(dry_run, "write") else sys.stdout
        out.write(the_plan.format() + "\n")  # type: ignore[union-attr]
        return None, step
    if the_plan.unassigned:
        missing = [
            f"{the_plan.labels[i]} {_shape(the_plan.weight_shapes[i])}" for i in the_plan.unassigned
        ]
        raise ValueError(
            f"restore_checkpoint: no checkpoint variable assigned to Keras weight(s) "
            f"{', '.join(missing)}. Unused in {prefix!r}: "
            f"{_listing(the_plan.unused, the_plan.ckpt_shapes) or 'nothing'}. Add explicit "
            "entries {checkpoint name: Keras weight} (with '*': 'auto' for the rest); "
            "dry_run=True prints the proposal."
        )
    check_feature_order(model, the_plan)
    parts: dict[int, list[Any]] = {}
    for name, i in the_plan.pairs:
        parts.setdefault(i, []).append(reader.get_tensor(name))
    values: list[Any] = [None] * len(the_plan.labels)
    for i, arrays in parts.items():
        values[i] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=0)
    if apply is None:
        return values, step
    apply(model, values, step)
    if the_plan.slots:
        from hookbridge._migrate import optimizer_state

        missed = optimizer_state.restore(
            model, reader, the_plan.slots, the_plan.pairs, step, the_plan.rows()
        )
        if missed:
            warnings.warn(
                f"restore_checkpoint: {prefix!r} holds optimizer state that was not loaded into "
                f"{type(getattr(model, 'optimizer', None)).__name__}: "
                f"{optimizer_state.describe(missed)}. The steps after the switch differ from "
                "the Estimator's until the Keras optimizer has rebuilt that state.",
                stacklevel=3,
            )
    return values, step


def propose_assignment(model: Any, path: str | os.PathLike) -> dict[str, str]:
    """The assignment ``restore_checkpoint(..., assignment_map="auto")`` would use.

    Matches the checkpoint's layers (in natural name order) to the model's layers (in
    ``model.weights`` order) by their variables' shapes; optimizer slots and ``global_step``
    are left out. Edit the result and pass it back as ``assignment_map``.

    Args:
        model: a built Keras model.
        path: a checkpoint prefix or a directory (its latest checkpoint).

    Returns:
        ``{checkpoint name: Keras weight label}`` for every weight it could match.

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint.
    """
    import tensorflow as tf

    path = os.fspath(path)
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if not prefix:
        raise FileNotFoundError(f"propose_assignment: no checkpoint found in {path!r}.")
    shapes = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    proposal = plan(model, prefix, shapes, "auto")
    return {name: proposal.labels[i] for name, i in proposal.pairs}


def check_feature_order(model: Any, the_plan: Plan) -> None:
    """Raises when the model concatenates inputs named after a linear model's columns in
    another order than the rows its kernel was filled in (``hookbridge/_migrate/linear.py``)."""
    rows = the_plan.rows()
    by_weight: dict[int, list[str]] = {}
    for name, i in the_plan.pairs:
        column = _linear.column(name)
        if column is not None and (name in rows or the_plan.ckpt_shapes[name][0] == 1):
            by_weight.setdefault(i, []).append(column)
    for columns in by_weight.values():
        _linear.check_feature_order(model, columns)
