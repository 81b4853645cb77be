"""The ``"auto"`` assignment: which checkpoint layer fills which Keras layer, by order and shapes.

The checkpoint's side: its variables split into model variables and optimizer state
(:func:`split_checkpoint`), grouped into layers (the name up to its last ``/``; a linear model's
per-column weights stacked into one source, ``hookbridge/_migrate/linear.py``) in natural order
(``dense`` < ``dense_1`` < ``dense_2``, ``hiddenlayer_0`` < ``logits``). The Keras side: the
model's weights by label (:func:`weight_labels`), grouped into layers in ``model.weights`` order.
:func:`auto_pairs` gives each Keras layer the first unused checkpoint layer whose variables have
its weights' shapes (weights matched by their leaf name, ``kernel`` to ``kernel``, else by
position). The plan that uses it is in ``hookbridge/_migrate/assignment_plan.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hookbridge._migrate import linear as _linear

#: Leaf names TF1 optimizers give their slot and accumulator variables.
_SLOT_LEAVES = re.compile(
    r"^(Adam(_\d+)?|Momentum|Adagrad|AdagradDA(_\d+)?|RMSProp(_\d+)?|Ftrl(_\d+)?|Adadelta(_\d+)?|"
    r"ExponentialMovingAverage|accumulator|gradient_accumulator|linear|.*_power(_\d+)?)$"
)
#: Top-level scopes of optimizer state (tf_keras optimizers in canned Estimators, tf.contrib).
_OPTIMIZER_SCOPES = frozenset({"training", "OptimizeLoss"})
GLOBAL_STEP = "global_step"


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


def auto_pairs(
    free_weights: Sequence[int],
    free_variables: Sequence[str],
    labels: Sequence[str],
    weight_shapes: Sequence[tuple[int, ...]],
    ckpt_shapes: Mapping[str, tuple[int, ...]],
    columns: Sequence[str] = (),
) -> tuple[list[tuple[str, int]], dict[int, list[str]]]:
    """The pairs ``"auto"`` decides, and ``{Keras weight: candidate checkpoint names}`` for the
    weights it cannot decide (several checkpoint layers fit by shape and the names do not tell
    which: :func:`_decide`); those stay unpaired, never picked by order. ``columns``: the
    feature column names the model names its inputs after (the order of a linear model's column
    weights, ``linear.scope_order``)."""
    free = set(free_weights)
    keras_layers = [[i for i in g if i in free] for g in _keras_layers(labels)]
    layers = sorted(_linear.sources(free_variables, columns), key=lambda kv: _natural_key(kv[0]))
    used = [False] * len(layers)
    pairs: list[tuple[str, int]] = []
    undecided: dict[int, list[str]] = {}
    for layer in filter(None, keras_layers):
        fits = {}
        for k, (_, sources) in enumerate(layers):
            if not used[k]:
                matched = _match_layer(layer, sources, labels, weight_shapes, ckpt_shapes)
                if matched is not None:
                    fits[k] = matched
        chosen = _decide(labels[layer[0]].rpartition("/")[0], {k: layers[k][0] for k in fits})
        if chosen is not None:
            used[chosen] = True
            pairs.extend(fits[chosen])
            continue
        for k in fits:
            for name, i in fits[k]:
                undecided.setdefault(i, []).append(name)
    return pairs, undecided


def _family(layer: str) -> str:
    """A layer's name without its numbering (``dense_2`` and ``dense``: ``dense``;
    ``bert/encoder/layer_3/attention/self/query``: ``bert/encoder/layer/attention/self/query``)."""
    return "/".join(re.sub(r"_\d+$", "", part) for part in layer.split("/"))


def _tokens(name: str) -> set[str]:
    return {t for t in re.split(r"[^a-z]+", name.lower()) if t}


def _decide(keras_layer: str, candidates: Mapping[int, str]) -> int | None:
    """Which checkpoint layer (of ``candidates``, all fitting by shape, in natural order) fills
    ``keras_layer``, or ``None`` when nothing but an order would decide.

    One candidate: it. Candidates of one family (the same name but for its numbering:
    ``dense``, ``dense_1``; ``dnn/hiddenlayer_0``, ``dnn/hiddenlayer_1``): the lowest number,
    as TF1 and Keras both number a family's layers in the order they build them. Several
    families: the one whose own words (those no other candidate family has: ``query``,
    ``output dense``) are all in the Keras layer's name, when exactly one is.
    """
    if len(candidates) <= 1:
        return next(iter(candidates), None)
    families: dict[str, list[int]] = {}
    for k, name in candidates.items():
        families.setdefault(_family(name), []).append(k)
    if len(families) > 1:
        words = {f: _tokens(f) for f in families}
        have = _tokens(keras_layer)
        named = []
        for f, own in words.items():
            others = set().union(*(w for g, w in words.items() if g != f))
            unique = own - others
            if unique and unique <= have:
                named.append(f)
        if len(named) != 1:
            return None
        families = {named[0]: families[named[0]]}
    (members,) = families.values()
    return min(members)
