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

Here: restoring by a plan (:func:`restore_mapped`, the values and the step, then the optimizer
state) and :func:`propose_assignment`. The plan and its dry run are in
``hookbridge/_migrate/assignment_plan.py``, the ``"auto"`` matching in
``hookbridge/_migrate/assignment_match.py``; the names their users import from here
(``plan``, ``describe_checkpoint``, ``weight_labels``, ``GLOBAL_STEP``) are re-exported.
"""

from __future__ import annotations

import os
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

import numpy as np

from hookbridge._migrate import linear as _linear
from hookbridge._migrate.assignment_match import GLOBAL_STEP
from hookbridge._migrate.assignment_match import weight_labels as weight_labels
from hookbridge._migrate.assignment_plan import (
    Plan,
    WeightRef,
    format_shape,
    listing,
    plan,
    refuse_undecided,
)
from hookbridge._migrate.assignment_plan import describe_checkpoint as describe_checkpoint

#: model -> the pairs (checkpoint name, weight index) its last restore by an assignment map used:
#: the map the way back writes with (``estimator_hooks(model=...)``), whatever "auto" would say.
_RESTORED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def restored_pairs(model: Any) -> list[tuple[str, int]] | None:
    """The pairs of ``model``'s last restore by an assignment map (``None``: none recorded)."""
    try:
        pairs = _RESTORED.get(model)
    except TypeError:  # not weak-referenceable: nothing was recorded
        return None
    return list(pairs) if pairs is not None else None


def as_map(pairs: Sequence[tuple[str, int]]) -> dict[Any, int]:
    """Pairs as the explicit assignment map that gives them (stacked names as one tuple)."""
    by_weight: dict[int, list[str]] = {}
    for name, i in pairs:
        by_weight.setdefault(i, []).append(name)
    return {(n[0] if len(n) == 1 else tuple(n)): i for i, n in by_weight.items()}


class CheckpointValues:
    """A checkpoint reader whose ``get_tensor`` names the checkpoint and the variable when the
    data cannot be read (a truncated or partly copied ``.data`` file: TensorFlow's reader then
    raises a bare ``IndexError`` or ``DataLossError``, its index having opened fine), and keeps
    what :meth:`prefetch` read, so a restore reads every value before it sets any."""

    def __init__(self, reader: Any, prefix: str) -> None:
        self._reader, self._prefix = reader, prefix
        self._read: dict[str, Any] = {}

    def prefetch(self, names: Sequence[str]) -> None:
        """Reads ``names`` now (``get_tensor`` then serves them)."""
        for name in names:
            self._read[name] = self.get_tensor(name)

    def get_tensor(self, name: str) -> Any:
        if name in self._read:
            return self._read[name]
        try:
            return self._reader.get_tensor(name)
        except Exception as e:
            raise FileNotFoundError(
                f"restore_checkpoint: cannot read {name!r} from checkpoint {self._prefix!r} "
                f"(a truncated or partly copied data file?): {type(e).__name__}: {e}. The "
                "model and its optimizer are unchanged; restore from a complete copy."
            ) from e

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def restore_mapped(
    model: Any,
    reader: Any,
    prefix: str,
    assignment_map: str | Mapping[str, WeightRef],
    *,
    dry_run: bool | TextIO = False,
    apply: Callable[[Any, list[Any], int], None] | None = None,
    slot_map: Mapping[str, str] | None = None,
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
    refuse_undecided(the_plan, "restore_checkpoint")
    if apply is not None:
        from hookbridge._migrate.twins import guards

        guards.check_generation(model, prefix, the_plan.slots)
        guards.check_optimizers(model, prefix, the_plan.slots, set(the_plan.ckpt_shapes))
    if the_plan.unassigned:
        missing = [
            f"{the_plan.labels[i]} {format_shape(the_plan.weight_shapes[i])}"
            for i in the_plan.unassigned
        ]
        raise ValueError(
            f"restore_checkpoint: no checkpoint variable assigned to Keras weight(s) "
            f"{', '.join(missing)}. Unused in {prefix!r}: "
            f"{listing(the_plan.unused, the_plan.ckpt_shapes) or 'nothing'}. Add explicit "
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
    if isinstance(reader, CheckpointValues):  # the optimizer state too, before any value is set
        reader.prefetch(the_plan.slots)
    apply(model, values, step)
    try:
        _RESTORED[model] = list(the_plan.pairs)
    except TypeError:  # a model that cannot be weakly referenced keeps no record
        pass
    if the_plan.slots:
        from hookbridge._migrate import optimizer_state

        missed = optimizer_state.restore(
            model, reader, the_plan.slots, the_plan.pairs, step, the_plan.rows(), slot_map
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
    refuse_undecided(proposal, "propose_assignment")
    return {name: proposal.labels[i] for name, i in proposal.pairs}


def check_feature_order(model: Any, the_plan: Plan) -> None:
    """Checks each Keras weight filled by stacking a linear model's per-column weights against
    the order the model's graph concatenates those columns (``hookbridge/_migrate/linear.py``):
    an order ``"auto"`` chose must be proven there, an explicit tuple's must not be contradicted.
    """
    rows = the_plan.rows()
    by_weight: dict[int, list[str]] = {}
    for name, i in the_plan.pairs:
        if _linear.column(name) is not None and name in rows:
            by_weight.setdefault(i, []).append(name)
    weights = list(model.weights)
    for i, names in by_weight.items():
        _linear.check_feature_order(
            model, names, weights[i], the_plan.labels[i], auto=i in the_plan.auto_stacked
        )
