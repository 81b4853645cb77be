"""Loading a CheckpointSaverHook checkpoint written under HookCallback back into a Keras model
(or, with an assignment map, a TF1 / Estimator checkpoint: see ``_migrate/assignment.py``).

A restore through an assignment map also records the TF1 names it gave the model's weights
(``graph.set_tf1_names``): the weight mirrors of the model's later HookCallback runs take them,
so hooks finding variables by the checkpoint's names find the Keras weights."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.graph import (
    WEIGHTS_SCOPE,
    mirror_name,
    set_tf1_names,
    tf1_names,
)
from hookbridge._migrate import assignment as _assignment


def restore_checkpoint(
    model: Any,
    path: str | os.PathLike,
    assignment_map: str | Mapping[str, Any] | None = None,
    *,
    dry_run: bool | TextIO = False,
    slot_map: Mapping[str, str] | None = None,
) -> int:
    """Restores a checkpoint written by ``CheckpointSaverHook`` under ``HookCallback``, or by TF1.

    Sets the model's weights and ``model.optimizer.iterations`` (when the model has an optimizer)
    from the checkpoint, and returns its global step.

    Without ``assignment_map`` the checkpoint must be one ``HookCallback`` wrote (its weights are
    named ``model/000/kernel``, ...). A checkpoint written by a TF1 graph or an Estimator names
    its variables after the ``model_fn``'s layers (``dense/kernel``, ``dnn/logits/bias``): say
    which fills which Keras weight with ``assignment_map``, as ``init_from_checkpoint`` takes it:
    ``"auto"`` proposes it by layer order and shapes (:func:`propose_assignment`; a checkpoint
    HookCallback wrote for this architecture is recognized, so ``"auto"`` serves every restart of
    a migrated job), a dict
    ``{checkpoint name: Keras weight}`` gives entries explicitly (a Keras weight is its label
    ``dense_3/kernel``, its path, its index in ``model.weights`` or the variable), and the entry
    ``"*": "auto"`` has the rest proposed. ``global_step`` goes to ``optimizer.iterations``.

    With ``assignment_map``, the checkpoint's optimizer state (TF1 slots ``.../Adam``,
    ``beta1_power``, ``.../Momentum``, ``.../Adagrad``, ``.../RMSProp``, ``.../Ftrl``; the V2
    canned Estimators' ``training/<Optimizer>/...`` slots and settings) is loaded into
    ``model.optimizer``, converted to its slots; a warning names what could not be. The slots
    of an optimizer of your own (BERT's ``AdamWeightDecayOptimizer``: ``<var>/adam_m``,
    ``<var>/adam_v``) are loaded by ``slot_map``. A model with several optimizers lists the
    others in ``model.extra_optimizers``, each built on the variables it trains: each variable's
    state goes to its optimizer. Under a ``LossScaleOptimizer`` it goes to the inner one.

    After a restore through ``assignment_map``, the model's weights answer to the checkpoint's
    names in ``HookCallback``'s graph (``dense/kernel``, not ``model/000/kernel``), as the
    ``model_fn``'s variables did: hooks that find variables by name (``InMemoryEvaluatorHook``,
    ``init_from_checkpoint``, a hook reading ``dense/kernel``) find the Keras weights, and
    ``CheckpointSaverHook`` writes them under those names, which ``restore_checkpoint`` without
    a map reads back into the same model (a fresh model: ``"auto"``).

    Args:
        model: a built Keras model of the same architecture as the one trained.
        path: a checkpoint prefix (``.../model.ckpt-100``) or a directory (its latest checkpoint).
        assignment_map: ``None`` (a HookCallback checkpoint), ``"auto"``, or a dict.
        dry_run: print the mapping (checkpoint name, shape -> Keras weight) and change nothing;
            ``True`` prints to stdout, or pass a text stream. Needs ``assignment_map``.
        slot_map: ``{checkpoint slot: Keras slot}`` for optimizer state hookbridge does not
            know, e.g. ``{"adam_m": "m", "adam_v": "v"}`` (a key is the slot's suffix after its
            variable's name, or its whole name with ``{var}``: ``"{var}/adam_m"``; a value is
            ``m``, ``v``, ``vhat``, ``momentum``, ``accumulator``, ``linear``, ``rms`` or
            ``mg``). Values are copied as they are. Needs ``assignment_map``;
            ``estimator_hooks(model=...)`` writes them back under the same names.

    Returns:
        The checkpoint's global step.

    Raises:
        FileNotFoundError: ``path`` holds no checkpoint, or one whose files cannot be read
            (truncated; the model is left unchanged).
        ValueError: the model is not built, or its weights do not match the checkpoint (the
            message lists what the checkpoint holds).

    Example:
        >>> step = hookbridge.restore_checkpoint(model, "ckpts/")
        >>> model.fit(x, y, initial_epoch=...)   # resumes at `step`
        >>> hookbridge.restore_checkpoint(model, estimator_dir, "auto", dry_run=True)
        restore_checkpoint dry run: estimator_dir/model.ckpt-200
          dense/kernel    [3, 16]      -> dense/kernel [3, 16]
          ...
    """
    if slot_map is not None and assignment_map is None:
        raise ValueError(
            "restore_checkpoint: slot_map needs an assignment_map ('auto' or a dict): a "
            "checkpoint HookCallback wrote holds no optimizer slots."
        )
    if dry_run and assignment_map is None:
        raise ValueError(
            "restore_checkpoint: dry_run needs an assignment_map ('auto' or a dict): without one "
            "the checkpoint's names are fixed (model/000/kernel, ...)."
        )
    path = os.fspath(path)
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if not prefix:
        raise FileNotFoundError(f"restore_checkpoint: no checkpoint found in {path!r}.")
    try:
        reader = _assignment.CheckpointValues(tf.train.load_checkpoint(prefix), prefix)
    except Exception as e:  # NotFoundError / DataLossError from the reader
        raise FileNotFoundError(
            f"restore_checkpoint: cannot read checkpoint {prefix!r}: {e}"
        ) from e
    weights = list(model.weights)
    if not weights:
        raise ValueError(
            f"restore_checkpoint: {type(model).__name__} has no weights yet; build it first "
            "(call it on a batch or give it an Input) with the architecture that was trained."
        )
    if assignment_map is not None:
        # h28: the mapped restore sets the weights and step (apply=_set), then the optimizer state.
        _, step = _assignment.restore_mapped(
            model, reader, prefix, assignment_map, dry_run=dry_run, apply=_set, slot_map=slot_map
        )
        if not dry_run:  # estimator_hooks(model=...) writes them back by the same map
            from hookbridge._migrate import slot_map as _slot_map

            _slot_map.remember(model, slot_map)
        if not dry_run:  # the weights now answer to the checkpoint's names in HookCallback
            set_tf1_names(model, single_names(_assignment.restored_pairs(model) or []))
        return step
    shapes = reader.get_variable_to_shape_map()
    values = []
    known = tf1_names(model)  # a checkpoint written after a mapped restore keeps those names
    for i, w in enumerate(weights):
        name = known.get(i) if known.get(i) in shapes else mirror_name(i, w)
        if name not in shapes:
            raise ValueError(
                f"restore_checkpoint: the model's weight #{i} ({w.name}) has no entry {name!r} in "
                f"{prefix!r}; the checkpoint holds {_assignment.describe_checkpoint(shapes)}. "
                + (
                    "Was it written under HookCallback for a model of the same architecture?"
                    if any(k.startswith("model/") for k in shapes)
                    else "It was not written under HookCallback (a TF1 or Estimator checkpoint?): "
                    "pass assignment_map='auto' to map its variables to the model's weights by "
                    "layer order and shapes (with dry_run=True to print the mapping first)."
                )
            )
        if tuple(shapes[name]) != tuple(w.shape):
            raise ValueError(
                f"restore_checkpoint: weight #{i} ({w.name}) has shape {tuple(w.shape)}, the "
                f"checkpoint's {name!r} has {tuple(shapes[name])}."
            )
        values.append(reader.get_tensor(name))
    step = int(reader.get_tensor("global_step")) if "global_step" in shapes else 0
    _set(model, values, step)
    set_tf1_names(model, {i: n for i, n in known.items() if n in shapes})
    return step


def single_names(pairs: Sequence[tuple[str, int]]) -> dict[int, str]:
    """``{weight index: TF1 name}`` of an assignment plan's pairs, for the weights filled by ONE
    checkpoint variable that is not HookCallback's own (``model/000/kernel``); a weight stacked
    from several variables keeps its ``model/NNN`` mirror name."""
    by_weight: dict[int, list[str]] = {}
    for name, i in pairs:
        by_weight.setdefault(i, []).append(name)
    return {
        i: names[0]
        for i, names in by_weight.items()
        if len(names) == 1 and not names[0].startswith(f"{WEIGHTS_SCOPE}/")
    }


def _set(model: Any, values: list[Any], step: int) -> None:
    with _tfcompat.eager():
        model.set_weights(values)
        optimizer = getattr(model, "optimizer", None)
        if getattr(optimizer, "iterations", None) is not None:
            from hookbridge._migrate.optimizer_state import set_step

            set_step(optimizer, step)  # a LossScaleOptimizer's inner one; gradient accumulation
