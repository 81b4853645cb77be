"""The plan of a restore by assignment map: which checkpoint variable fills which Keras weight.

An assignment map is ``"auto"`` (the proposal of ``hookbridge/_migrate/assignment_match.py``; a
checkpoint HookCallback wrote for this model is read by its own names), or explicit entries
``{checkpoint name: Keras weight}`` (a tuple of names stacks their rows into one weight), which
may hold ``"*": "auto"`` to have the rest proposed. :func:`plan` turns it into a :class:`Plan`,
checking every explicit entry (names the checkpoint holds, Keras weights the model has, shapes
that fit), and :meth:`Plan.format` is the dry run's text. Nothing is read but the checkpoint's
shapes; restoring the values is ``hookbridge/_migrate/assignment.py``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from hookbridge._migrate import linear as _linear
from hookbridge._migrate.assignment_match import (
    GLOBAL_STEP,
    auto_pairs,
    split_checkpoint,
    weight_labels,
)

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
    #: ``{Keras weight index: candidate checkpoint names}`` that ``"auto"`` cannot decide.
    undecided: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    #: Keras weights ``"auto"`` filled by stacking several checkpoint variables (its order).
    auto_stacked: set[int] = dataclasses.field(default_factory=set)

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
                f"  {name:<{width}} {format_shape(self.ckpt_shapes[name]):<12} -> "
                f"{self.labels[i]} {format_shape(self.weight_shapes[i])}{part}"
            )
        if self.step is not None:
            lines.append(
                f"  {GLOBAL_STEP:<{width}} {'[]':<12} -> optimizer.iterations = {self.step}"
            )
        for i, names in self.undecided.items():
            lines.append(
                f"  UNDECIDED Keras weight {self.labels[i]} {format_shape(self.weight_shapes[i])}: "
                f"candidates {', '.join(names)}"
            )
        for i in self.unassigned:
            if i in self.undecided:
                continue
            lines.append(
                f"  UNASSIGNED Keras weight {self.labels[i]} {format_shape(self.weight_shapes[i])}: "
                "add an entry for it"
            )
        if self.unused:
            lines.append(
                "  not loaded (no Keras weight): " + listing(self.unused, self.ckpt_shapes)
            )
        if self.slots:
            lines.append(
                "  optimizer state (into model.optimizer, converted to its slots): "
                + listing(self.slots, self.ckpt_shapes)
            )
        return "\n".join(lines)


def format_shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def listing(names: Sequence[str], shapes: Mapping[str, Sequence[int]], limit: int = 40) -> str:
    shown = [f"{n} {format_shape(shapes[n])}" for n in names[:limit]]
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(shown) + more


def describe_checkpoint(shapes: Mapping[str, Sequence[int]], limit: int = 40) -> str:
    """``name [shape], ...`` of a checkpoint's variables, for error messages."""
    return listing(sorted(shapes), shapes, limit) if shapes else "no variables"


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
        if auto:  # the checkpoint names the model declares for its weights (keras_twin's)
            explicit = _declared_names(model, prefix, shapes, weight_shapes, labels)
    else:
        explicit = {k: v for k, v in assignment_map.items() if k != "*"}
        auto = assignment_map.get("*") == "auto"
    pairs = _explicit_pairs(explicit, model, labels, shapes, weight_shapes, prefix)
    undecided: dict[int, list[str]] = {}
    auto_stacked: set[int] = set()
    if auto:
        taken_w = {i for _, i in pairs}
        taken_v = {v for v, _ in pairs}
        proposed, undecided = auto_pairs(
            [i for i in range(len(labels)) if i not in taken_w],
            [v for v in variables if v not in taken_v],
            labels,
            weight_shapes,
            shapes,
            _linear.input_names(model),
        )
        pairs += proposed
        filled = [i for _, i in proposed]
        auto_stacked = {i for i in filled if filled.count(i) > 1}
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
        undecided=undecided,
        auto_stacked=auto_stacked,
    )


def refuse_undecided(the_plan: Plan, caller: str) -> None:
    """Raises when ``"auto"`` left weights undecided: for each, its candidates, and a map that
    decides (the explicit entries to check, ``"*": "auto"`` for the rest).

    Raises:
        ValueError: listing the undecided Keras weights and their candidate checkpoint names.
    """
    if not the_plan.undecided:
        return
    labels = the_plan.labels
    lines = [
        f"  {labels[i]} {format_shape(the_plan.weight_shapes[i])}: {_some(names)}"
        for i, names in the_plan.undecided.items()
    ]
    entries, taken = [], set()
    for i, names in the_plan.undecided.items():
        free = [n for n in names if n not in taken] or names
        taken.add(free[0])
        others = [n for n in names if n != free[0]]
        entries.append(f"      {free[0]!r}: {labels[i]!r},  # or: {_some(others)}")
    raise ValueError(
        f"{caller}: assignment_map='auto' cannot decide which checkpoint variable fills "
        f"{len(lines)} Keras weight(s) of {the_plan.prefix!r}: several checkpoint variables "
        "have the shape and the names do not tell which ('auto' never pairs by order where "
        "names do not decide; the candidates, in the checkpoint's order):\n"
        + "\n".join(lines)
        + "\nPass an explicit map; this one is valid, but each entry marked '# or:' is a "
        "placeholder to check against the code that built the checkpoint (its layer names):\n"
        "  assignment_map={\n" + "\n".join(entries) + "\n      '*': 'auto',\n  }"
    )


def _some(names: Sequence[str], limit: int = 6) -> str:
    """``a, b, c, ... (n more)``: a BERT's 12 layers make 48 candidates of one ``[H, H]``."""
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _hookbridge_names(
    model: Any, shapes: Mapping[str, tuple[int, ...]], weight_shapes: Sequence[tuple[int, ...]]
) -> dict[str, WeightRef]:
    """``{model/000/kernel: 0, ...}`` when the checkpoint is HookCallback's for this model."""
    from hookbridge._hook_callback.graph import mirror_name

    names = {mirror_name(i, w): i for i, w in enumerate(model.weights)}
    fits = all(shapes.get(n) == weight_shapes[i] for n, i in names.items())
    return names if names and fits else {}


def _declared_names(
    model: Any,
    prefix: str,
    shapes: Mapping[str, tuple[int, ...]],
    weight_shapes: Sequence[tuple[int, ...]],
    labels: Sequence[str],
) -> dict[str, WeightRef]:
    """``{checkpoint name: weight index}`` of the names a model declares for its weights: its
    ``checkpoint_names()`` (``(weight, checkpoint name)`` pairs; a ``keras_twin`` gives the
    Estimator's), ``{}`` for a model without that method.

    Raises:
        ValueError: naming every declared name the checkpoint lacks or holds with another
            shape: ``"auto"`` never falls back to shapes and order for a weight that has a name.
    """
    declare = getattr(model, "checkpoint_names", None)
    if not callable(declare):
        return {}
    index = {id(w): i for i, w in enumerate(model.weights)}
    declared = {index[id(w)]: name for w, name in declare() if id(w) in index}
    wrong = [
        f"{name} (Keras weight {labels[i]} {format_shape(weight_shapes[i])}: "
        + ("not in the checkpoint)" if name not in shapes else
           f"the checkpoint's is {format_shape(shapes[name])})")
        for i, name in sorted(declared.items())
        if i < len(weight_shapes) and shapes.get(name) != weight_shapes[i]
    ]
    if wrong:
        raise ValueError(
            f"restore_checkpoint: {getattr(model, 'name', 'the model')!r} declares the "
            f"checkpoint names of its weights (keras_twin: the Estimator's), and "
            f"{prefix!r} does not hold {len(wrong)} of them as the model has them: "
            + "; ".join(wrong)
            + ". Is it the checkpoint of this model's Estimator (the same columns, hidden "
            "units, classes)? To map it otherwise, pass an explicit assignment_map "
            "{checkpoint name: Keras weight} ('*': 'auto' for the rest); the checkpoint holds "
            f"{describe_checkpoint(shapes, 12)}."
        )
    return {name: i for i, name in declared.items() if i < len(weight_shapes)}


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
            got = " + ".join(format_shape(shapes[n]) for n in names)
            raise ValueError(
                f"restore_checkpoint: assignment_map assigns {shown!r} {got} to Keras weight "
                f"{labels[i]} of shape {format_shape(weight_shapes[i])}"
                + (" (stacked by rows)." if len(names) > 1 else ".")
            )
        owner[i] = shown  # type: ignore[assignment]
        pairs.extend((name, i) for name in names)
    return pairs
