"""Linear parts of canned Estimators: one ``[d, units]`` weight per feature column, one bias.

``LinearClassifier``/``LinearRegressor`` and the linear half of ``DNNLinearCombined*`` keep
``linear/linear_model/<column>/weights`` (``[1, units]`` for a scalar numeric column) and
``linear/linear_model/bias_weights``; the logits are the columns' values times their weights,
summed, plus the bias. In Keras that is one ``Dense(units)`` over the columns concatenated, whose
kernel is the columns' weights stacked **in the Estimator's column order**: feature columns
sorted by name (``sorted(columns, key=lambda c: c.name)``, as ``linear_model`` and
``input_layer`` build them), whatever order they were declared in. The DNN half concatenates its
input in the same order.

The checkpoint does not hold the column names, only their variable scopes: the name with every
character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (``feature_column_v2.
_sanitize_column_name_for_variable_scope``), which sorts otherwise (``"temp max" < "temp2"``,
``"temp_max" > "temp2"``). :func:`estimator_order` is the Estimator's order of column names,
:func:`scope_order` that of a checkpoint's scopes, read through the column names the Keras model
names its inputs after; where those are not known and the ``_`` of a scope could decide the
order, it refuses rather than guess.

A Keras model fed the features in another order computes other logits without any error; where
the model names its inputs (``keras.Input(name=<column>)``) and concatenates them, the order it
concatenates is checked here against the Estimator's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_COLUMN_WEIGHTS = re.compile(r"^(?P<scope>(?:.*/)?linear_model)/(?P<column>[^/]+)/weights$")
#: What a variable scope cannot hold of a column name (feature_column_v2, tf 2.15).
_NOT_IN_SCOPE = re.compile(r"[^A-Za-z0-9_.\-]")
#: A source: the checkpoint names filling one Keras weight (rows stacked in this order), and the
#: leaf it stands for (``kernel``, ``bias``, or the single name's own leaf).
Source = tuple[tuple[str, ...], str]


def scope(column: str) -> str:
    """The variable scope the Estimator gives the column named ``column``."""
    return _NOT_IN_SCOPE.sub("_", column)


def estimator_order(columns: Iterable[str]) -> list[str]:
    """Column names in the Estimator's order: sorted by name, as they are, not as scopes."""
    return sorted(columns)


def scope_order(scopes: Iterable[str], columns: Sequence[str] = ()) -> list[str]:
    """A linear model's column scopes (as its checkpoint names them) in the Estimator's order.

    Args:
        scopes: the scopes (``temp_max``).
        columns: column names known (the model's input names, ``temp max``): a scope is
            ordered by the column name it stands for.

    Raises:
        ValueError: two known columns have one scope, or a scope whose column is not known
            holds a ``_`` (any character before sanitizing) where it could decide the order.
    """
    scopes = list(scopes)
    named: dict[str, list[str]] = {}
    for name in dict.fromkeys(columns):
        named.setdefault(scope(name), []).append(name)
    raw, unknown = {}, set()
    for s in scopes:
        names = named.get(s, [s])
        if len(names) > 1:
            raise ValueError(
                f"restore_checkpoint: the model's inputs {names} all stand for the Estimator's "
                f"column scope {s!r} (characters outside [A-Za-z0-9_.-] become '_'): name one "
                "input after the column, or stack the weights with a tuple entry "
                "{('<scope>/linear_model/<column>/weights', ...): '<kernel>'}."
            )
        raw[s] = names[0]
        if s not in named:
            unknown.add(s)
    ordered = sorted(scopes, key=raw.__getitem__)
    unsure = sorted(
        {s for a in scopes for b in scopes if a < b for s in _undecided(a, b, raw, unknown)}
    )
    if unsure:
        raise ValueError(
            f"restore_checkpoint: the Estimator orders its columns by their names, and the "
            f"checkpoint holds their scopes, where '_' stands for any character outside "
            f"[A-Za-z0-9_.-]: the order of {unsure} among {ordered} depends on the names "
            "they stand for, which the model does not give. Name the Keras inputs after the "
            "feature columns (keras.Input(name='temp max'), as keras_twin does), or stack the "
            "weights in your order with a tuple entry {('<scope>/linear_model/<column>/weights',"
            " ...): '<kernel>'}."
        )
    return ordered


def _undecided(a: str, b: str, raw: Mapping[str, str], unknown: set[str]) -> list[str]:
    """The scopes of ``a``, ``b`` whose unknown column name could order the two otherwise."""
    x, y = raw[a], raw[b]
    d = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    last = min(d + 1, len(x), len(y))
    return [s for s, name in ((a, x), (b, y)) if s in unknown and "_" in name[:last]]


def groups(
    variables: Sequence[str], columns: Sequence[str] = ()
) -> dict[str, tuple[list[str], str | None]]:
    """``{scope: (column weights in the Estimator's order, bias name or None)}``, the column
    names given by ``columns`` (:func:`scope_order`)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name in variables:
        m = _COLUMN_WEIGHTS.match(name)
        if m:
            found.setdefault(m["scope"], []).append((m["column"], name))
    names = set(variables)
    out = {}
    for model_scope, found_columns in found.items():
        bias = f"{model_scope}/bias_weights"
        by_scope = dict(found_columns)
        order = scope_order(by_scope, columns)
        out[model_scope] = ([by_scope[s] for s in order], bias if bias in names else None)
    return out


def column(name: str) -> str | None:
    """The feature column a linear weight belongs to (``None``: not a column weight)."""
    m = _COLUMN_WEIGHTS.match(name)
    return m["column"] if m else None


def sources(
    variables: Sequence[str], columns: Sequence[str] = ()
) -> list[tuple[str, list[Source]]]:
    """The checkpoint's variables as layers of sources ``(layer name, sources)``: each linear
    model one layer (its columns' weights stacked as one kernel in the Estimator's order of
    ``columns``, ``bias_weights`` its bias), every other variable a source of its own, grouped by
    the name up to its last ``/``."""
    linear = groups(variables, columns)
    taken = {n for names, bias in linear.values() for n in [*names, *([bias] if bias else [])]}
    layers: dict[str, list[Source]] = {}
    for model_scope, (names, bias) in linear.items():
        layers[model_scope] = [(tuple(names), "kernel")] + ([((bias,), "bias")] if bias else [])
    for name in variables:
        if name not in taken:
            layer, _, leaf = name.rpartition("/")
            layers.setdefault(layer, []).append(((name,), leaf))
    return list(layers.items())


def source_shape(source: Source, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The shape of the sources stacked (rows added), or ``None`` if they cannot stack."""
    names = source[0]
    first = shapes[names[0]]
    if len(names) == 1:
        return first
    if any(len(shapes[n]) != len(first) or shapes[n][1:] != first[1:] for n in names):
        return None
    return (sum(shapes[n][0] for n in names), *first[1:])


def input_names(model: Any) -> list[str]:
    """The names of the model's inputs (``keras.Input(name=...)``), ``[]`` when it has none."""
    try:
        inputs = list(getattr(model, "inputs", None) or [])
    except (AttributeError, ValueError):
        return []
    return [str(getattr(t, "name", "")).split(":")[0] for t in inputs]


def check_feature_order(
    model: Any, names: Sequence[str], weight: Any, label: str, *, auto: bool
) -> None:
    """Checks the order of the columns a kernel's rows were filled in (``names``, the
    checkpoint's per-column weights, stacked in this order) against the order the model
    concatenates the columns feeding that kernel, read from the model's graph.

    From the input of the layer owning ``weight``, every concatenation on the last axis
    (``keras.layers.Concatenate``, nested; Keras 3's ``keras.ops.concatenate``; tf_keras's
    ``tf.concat``) is flattened to its ordered branches, each tied to a column by the names of
    the model inputs it is computed from (:func:`branch_column`): the input named after the
    column (``keras.Input(name="age")``), a ``StringLookup`` of ``education``: ``education``;
    a crossing of ``education`` and ``occupation``: ``education_X_occupation``; ``age``
    bucketized: ``age_bucketized`` when that is a column of the kernel.

    Args:
        model: the Keras model.
        names: the checkpoint's column weights (``.../linear_model/<column>/weights``), in the
            order their rows fill ``weight``.
        weight: the Keras weight (a ``Dense`` kernel).
        label: its label, for messages.
        auto: the stacking order is ``"auto"``'s (the Estimator's), not the user's: an order
            the graph does not prove is refused (an explicit tuple is refused only when the
            graph proves another order).

    Raises:
        ValueError: the graph proves another order (naming both), or, with ``auto``, it
            does not prove one (saying why, with the explicit map that restores it).
    """
    wanted = [column(n) or n for n in names]
    layer, got, why, shown_names = _concatenated_columns(model, weight, wanted)
    if got is None:
        if not auto:
            return
        entry = "(" + ", ".join(repr(n) for n in names) + ",)"
        raise ValueError(
            f"restore_checkpoint: assignment_map='auto' would stack the Estimator's weights of "
            f"the columns {wanted} into Keras weight {label} in the Estimator's order (its "
            "feature columns sorted by name), and the model's graph does not prove that "
            f"weight's rows receive the columns in that order: {why}. Concatenate the columns' "
            "branches with keras.layers.Concatenate (or keras.ops.concatenate / tf.concat on "
            "the last axis), each computed from inputs named after its column "
            "(keras.Input(name='age')), or give the order explicitly, the tuple in the order "
            f"the model concatenates the columns: assignment_map={{{entry}: {label!r}, "
            "'*': 'auto'}."
        )
    if got == wanted:
        return
    shown = dict(zip(got, shown_names))  # the input's name ("temp max"), else the scope
    raise ValueError(
        f"restore_checkpoint: the Keras layer {layer!r} concatenates the features "
        f"in the order {shown_names}, the checkpoint's column weights fill its kernel's rows in "
        f"the order {[shown[c] for c in wanted]} (the Estimator's order, its feature columns "
        "sorted by name, unless a tuple entry gave another): the weights would apply to the "
        f"wrong features. Concatenate the inputs in the order {[shown[c] for c in wanted]}, "
        "or stack the columns' weights in your order with a tuple entry: "
        f"{{('<scope>/linear_model/<column>/weights', ...): {label!r}}}."
    )


def _owner(model: Any, weight: Any) -> Any | None:
    """The layer of ``model`` (or of a model nested in it) whose ``kernel`` is ``weight``."""
    todo = list(getattr(model, "layers", []))
    while todo:
        layer = todo.pop(0)
        if getattr(layer, "kernel", None) is weight:
            return layer
        todo.extend(getattr(layer, "layers", []))
    return None


def _concatenated_columns(
    model: Any, weight: Any, wanted: Sequence[str]
) -> tuple[str, list[str] | None, str, list[str]]:
    """``(name of the outer concatenation, the column scopes the layer owning weight receives
    in order, "", their names as shown)``, or ``(.., None, why the graph does not prove an
    order, ..)``."""
    from hookbridge import _tfcompat

    owner = _owner(model, weight)
    if owner is None:
        return "", None, "it is not the kernel of a layer of the model", []
    try:
        top = owner.input
    except (AttributeError, ValueError, RuntimeError):
        top = None
    if top is None or isinstance(top, (list, tuple, dict)):
        return "", None, (
            f"the layer {owner.name!r} has no single input in a functional graph (a subclassed "
            "model's layer, or a layer called more than once)"
        ), []
    branches, todo = [], [top]
    while todo:
        tensor = todo.pop(0)
        parts = _tfcompat.keras_concatenated(tensor)
        if parts is None:
            branches.append(tensor)
        else:
            todo[:0] = parts
    got = [branch_column(t, wanted) for t in branches]
    for t, c in zip(branches, got):
        if c is None:
            maker = _tfcompat.keras_tensor_layer(t)
            what = f"{type(maker).__name__} {getattr(maker, 'name', '?')!r}" if maker else "?"
            inputs = sorted(_tfcompat.keras_tensor_inputs(t) or [])
            return "", None, (
                f"{owner.name!r} receives a branch made by {what} (computed from the inputs "
                f"{inputs}) that is not a concatenation hookbridge reads and that the names of "
                "its inputs tie to none of these columns"
            ), []
    if sorted(got) != sorted(wanted):
        return "", None, (
            f"the branches {owner.name!r} receives stand for the columns {got}, not for "
            f"{sorted(wanted)} one to one"
        ), []
    maker = _tfcompat.keras_tensor_layer(top)
    shown = [_input_name(t) or c for t, c in zip(branches, got)]
    return str(getattr(maker, "name", owner.name)), got, "", shown


def _input_name(tensor: Any) -> str | None:
    """The name of a model input (``keras.Input(name=...)``) the tensor is, else ``None``."""
    from hookbridge import _tfcompat

    name = str(getattr(tensor, "name", "")).split(":")[0]
    traced = _tfcompat.keras_tensor_inputs(tensor)
    return name if traced is None or traced == {name} else None


#: What a feature column's name adds to its input's (bucketized: ``age_bucketized``).
_DERIVED = ("", "_bucketized")


def branch_column(tensor: Any, columns: Sequence[str]) -> str | None:
    """The column scope of ``columns`` a tensor of a functional model stands for, by the
    names of the model inputs it is computed from (``None``: the names do not tell one)."""
    from hookbridge import _tfcompat

    own = _input_name(tensor)
    if own is not None and scope(own) in columns:  # an input named after the column
        return scope(own)
    sources = _tfcompat.keras_tensor_inputs(tensor)
    if not sources:
        return None
    key = "_X_".join(sorted(sources))  # a crossed column's name: its keys sorted, _X_
    found = [scope(key + end) for end in _DERIVED if scope(key + end) in columns]
    return found[0] if len(found) == 1 else None
