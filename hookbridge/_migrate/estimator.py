"""``estimator_hooks``: the hooks ``Estimator.train`` adds without being asked, for Keras ``fit``.

``Estimator.train`` (tensorflow_estimator 2.15, ``estimator.py`` ``_train_with_estimator_spec``)
adds to the caller's hooks a ``loss`` scalar summary, ``NanTensorHook(loss)`` and
``LoggingTensorHook({"loss": loss, "step": global_step}, every_n_iter=log_step_count_steps)``,
a ``Saver(sharded=True, max_to_keep=keep_checkpoint_max, save_relative_paths=True)`` and, on the
chief, ``CheckpointSaverHook(model_dir, save_secs/save_steps)``; its ``MonitoredTrainingSession``
then puts first ``StepCounterHook(every_n_steps=log_step_count_steps, output_dir=model_dir)`` and
``SummarySaverHook(save_steps=save_summary_steps, output_dir=model_dir)``, and its Saver takes over
the checkpoints already listed in ``model_dir`` (``recover_last_checkpoints``). It adds no
CheckpointSaverHook when one is among the caller's hooks, ``training_hooks`` or
``training_chief_hooks`` already. The hook order is ``MonitoredTrainingSession``'s: chief-only
hooks (its CheckpointSaver, then ``EstimatorSpec.training_chief_hooks``), StepCounter,
SummarySaver, the worker hooks (the caller's, NanTensor, LoggingTensor,
``EstimatorSpec.training_hooks``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from hookbridge._migrate import state_writer
from hookbridge._migrate.backup import keep_last_checkpoint
from hookbridge._migrate.model_fn.training_hooks import claim as claim_spec_hooks

#: Where ``estimator_hooks`` keeps the Estimator's last checkpoint, inside ``model_dir``.
BACKUP_DIR = "estimator-backup"
#: ``tf.estimator.RunConfig``'s defaults.
_DEFAULT_SAVE_SECS = 600
_DEFAULT_KEEP_HOURS = 10000


def estimator_hooks(
    model_dir: str | os.PathLike,
    *,
    hooks: Sequence[Any] = (),
    training_hooks: Sequence[Any] = (),
    training_chief_hooks: Sequence[Any] = (),
    save_checkpoints_steps: int | None = None,
    save_checkpoints_secs: int | None = None,
    save_summary_steps: int = 100,
    log_step_count_steps: int | None = 100,
    keep_checkpoint_max: int = 5,
    keep_checkpoint_every_n_hours: float = _DEFAULT_KEEP_HOURS,
    loss: str = "loss",
    model: Any = None,
    assignment_map: str | Mapping[str, Any] | None = None,
    backup: str | None = BACKUP_DIR,
    slot_map: Mapping[str, str] | None = None,
) -> list[Any]:
    """The hooks ``Estimator.train`` runs unasked, built on ``HookCallback``'s graph.

    Call it inside the hooks callable you give ``HookCallback`` (it builds on that graph's
    loss and global step, as ``Estimator`` built on ``model_fn``'s), with the ``RunConfig``
    values of the Estimator job; ``hooks`` are your own hooks, placed where
    ``Estimator.train(hooks=...)`` placed them. The result writes what the Estimator wrote into
    ``model_dir``: checkpoints ``model.ckpt-<step>`` (keeping ``keep_checkpoint_max``), a ``loss``
    scalar every ``save_summary_steps`` and ``global_step/sec`` every ``log_step_count_steps`` in
    its event files, and logs ``loss = ..., step = ...`` through ``tf.compat.v1.logging`` (INFO).

    Args:
        model_dir: the Estimator's ``model_dir``.
        hooks: ``Estimator.train``'s ``hooks=`` (run before NanTensor and LoggingTensor). Hooks
            of ``EstimatorSpec.training_hooks`` given here (as the docs said before) run there, which
            is not the Estimator's order: give them as ``training_hooks``.
        training_hooks: ``EstimatorSpec.training_hooks``: run after NanTensor and
            LoggingTensor, as the Estimator runs them.
        training_chief_hooks: ``EstimatorSpec.training_chief_hooks``: run after the
            CheckpointSaverHook, before StepCounter.
        save_checkpoints_steps: ``RunConfig.save_checkpoints_steps``.
        save_checkpoints_secs: ``RunConfig.save_checkpoints_secs``; when neither is given, 600,
            as ``RunConfig``. ``0`` for both: no CheckpointSaverHook. A CheckpointSaverHook
            among your hooks replaces it, as in ``Estimator.train``.
        save_summary_steps: ``RunConfig.save_summary_steps`` (``0``: no SummarySaverHook).
        log_step_count_steps: ``RunConfig.log_step_count_steps`` (``None``: no StepCounterHook
            and no LoggingTensorHook).
        keep_checkpoint_max: ``RunConfig.keep_checkpoint_max``.
        keep_checkpoint_every_n_hours: ``RunConfig.keep_checkpoint_every_n_hours``.
        loss: name of the loss tensor in the graph (``HookCallback`` names the batch loss
            ``loss``).
        model: the Keras model being trained. When given and ``model_dir`` holds a checkpoint,
            new checkpoints keep that checkpoint's variable names (``dnn/logits/kernel``,
            ``global_step``), mapped by ``assignment_map`` as ``restore_checkpoint`` maps them:
            the Estimator can restore what the Keras job wrote (a switch back), and tools reading
            the names keep working; the checkpoint's optimizer state (slots, Adam's beta powers,
            the V2 canned settings) is written from ``model.optimizer`` under its names, as
            the TF1 optimizer keeps it. Without it, checkpoints use HookCallback's names
            (``model/000/kernel``) and no optimizer state.
        assignment_map: with ``model``: ``None`` (the map ``restore_checkpoint`` restored the
            model with, else ``"auto"``), ``"auto"`` or ``{checkpoint name: Keras weight}``;
            one that pairs otherwise than the model's restore is an error.
        slot_map: with ``model``: ``{checkpoint slot: Keras slot}`` (as ``restore_checkpoint``
            takes it) for optimizer state hookbridge does not know; ``None``: the map the model
            was restored with, if any.
        backup: before anything is written into ``model_dir``, its latest checkpoint (the
            Estimator's, on the first switch) is copied into ``<model_dir>/<backup>/`` with a
            ``checkpoint`` file of its own, out of ``keep_checkpoint_max``'s reach: the switch
            can be undone (``docs/migration.md``, "Rolling back"). Done once: an existing
            complete backup is kept; one cut short is said and made again
            (``hookbridge/_migrate/backup.py``). ``None``: no copy.

    Returns:
        The hooks in ``MonitoredTrainingSession``'s order.

    Raises:
        RuntimeError: called outside a graph (eagerly) or in a graph without a global step;
            ``BackupError``: the backup is incomplete and its checkpoint gone from model_dir.
        ValueError: the graph has no tensor named ``loss``.

    Example:
        >>> model.fit(ds, epochs=..., callbacks=[hookbridge.HookCallback(
        ...     lambda: hookbridge.estimator_hooks(model_dir, save_checkpoints_steps=100,
        ...                                        hooks=[MyHook()]))])
    """
    import tensorflow as tf

    v1 = tf.compat.v1
    graph, global_step, loss_tensor = _graph_parts(tf, loss)
    model_dir = os.fspath(model_dir)
    if backup:
        keep_last_checkpoint(tf, model_dir, backup)
    if model is None:
        _warn_without_model(tf, graph, model_dir)
    _add_loss_summary(tf, graph, loss_tensor)
    if not graph.get_collection(v1.GraphKeys.SAVERS):
        var_list, writer = _checkpoint_names(
            tf, graph, global_step, model, model_dir, assignment_map, slot_map
        )
        saver_class = v1.train.Saver
        if writer is not None:
            saver_class = state_writer.saver_class(tf)
        saver = saver_class(
            var_list=var_list,
            sharded=True,
            max_to_keep=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            defer_build=var_list is None,  # a var_list Saver is built at once (TF's rule)
            save_relative_paths=True,
        )
        if writer is not None:
            saver.writer = writer
        graph.add_to_collection(v1.GraphKeys.SAVERS, saver)
    _recover_last_checkpoints(tf, graph.get_collection(v1.GraphKeys.SAVERS), model_dir)
    # Under a model_fn_model's fit, the spec's hooks join here and its summaries are written
    # beside the SummarySaverHook's (model_fn/training_hooks.py, model_fn/summaries.py).
    spec_chief, spec_hooks = claim_spec_hooks(model_dir, save_summary_steps)
    training_hooks = [*training_hooks, *spec_hooks]
    training_chief_hooks = [*training_chief_hooks, *spec_chief]
    if save_checkpoints_steps is None and save_checkpoints_secs is None:
        save_checkpoints_secs = _DEFAULT_SAVE_SECS
    chief: list[Any] = []
    theirs = [*hooks, *training_hooks, *training_chief_hooks]
    saving = any(isinstance(h, v1.train.CheckpointSaverHook) for h in theirs)
    if (save_checkpoints_secs or save_checkpoints_steps) and not saving:
        chief.append(
            v1.train.CheckpointSaverHook(
                model_dir, save_secs=save_checkpoints_secs, save_steps=save_checkpoints_steps
            )
        )
    chief.extend(training_chief_hooks)
    session: list[Any] = []
    if log_step_count_steps and log_step_count_steps > 0:
        session.append(
            v1.train.StepCounterHook(every_n_steps=log_step_count_steps, output_dir=model_dir)
        )
    if save_summary_steps and save_summary_steps > 0:
        session.append(
            v1.train.SummarySaverHook(
                save_steps=save_summary_steps,
                output_dir=model_dir,
                summary_op=v1.summary.merge_all(),
            )
        )
    worker: list[Any] = [*hooks, v1.train.NanTensorHook(loss_tensor)]
    if log_step_count_steps is not None:
        worker.append(
            v1.train.LoggingTensorHook(
                {"loss": loss_tensor, "step": global_step}, every_n_iter=log_step_count_steps
            )
        )
    worker.extend(training_hooks)
    return chief + session + worker


def _add_loss_summary(tf: Any, graph: Any, loss_tensor: Any) -> None:
    """Estimator's ``summary.scalar('loss', loss)``, with the tag ``loss`` exactly.

    ``summary.scalar`` tags a summary with its op's name, and in HookCallback's graph ``loss``
    names the loss tensor itself, so it would write ``loss_1``: the op is built with its tag.
    """
    summaries = graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
    if any(s.op.name in ("loss", "loss_summary") for s in summaries):
        return  # Estimator, too, adds none when the model already has one
    summary = tf.raw_ops.ScalarSummary(tags="loss", values=loss_tensor, name="loss_summary")
    graph.add_to_collection(tf.compat.v1.GraphKeys.SUMMARIES, summary)


def _checkpoint_names(
    tf: Any,
    graph: Any,
    global_step: Any,
    model: Any,
    model_dir: str,
    assignment_map: str | Mapping[str, Any] | None,
    slot_map: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any] | None, state_writer.Writer | None]:
    """The Saver's ``var_list`` keeping the names of ``model_dir``'s checkpoint (or ``None``),
    and the writer of its optimizer state (or ``None``)."""
    prefix = tf.train.latest_checkpoint(model_dir) if model is not None else None
    if prefix is None:
        return None, None
    from hookbridge._hook_callback.graph import WEIGHT_MIRRORS
    from hookbridge._migrate import assignment as _assignment

    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    plan = _write_plan(_assignment, model, prefix, shapes, assignment_map)
    if plan.unassigned:
        raise ValueError(
            "estimator_hooks: cannot keep the names of "
            f"{prefix!r}: no checkpoint variable for Keras weight(s) "
            f"{', '.join(plan.labels[i] for i in plan.unassigned)}; pass assignment_map= "
            "(as restore_checkpoint takes it), or no model to write HookCallback's names."
        )
    # The weight mirrors, in model.weights order (named model/NNN/..., or already by a TF1
    # name a restore_checkpoint(..., assignment_map) gave them).
    mirrors = dict(enumerate(graph.get_collection(WEIGHT_MIRRORS)))
    rows = plan.rows()  # variables stacked into one Keras weight are written as its rows
    _name_mirrors(model, mirrors, plan.pairs)
    var_list = {name: mirrors[i] for name, i in plan.pairs if name not in rows}
    var_list[_assignment.GLOBAL_STEP] = global_step
    writer = None
    if plan.slots or plan.unused or rows:
        # Every name the Estimator's Saver will look for: its optimizer state from Keras, and
        # its variables no Keras weight holds as they were (else NotFoundError on the way back).
        if slot_map is None:
            from hookbridge._migrate.slot_map import remembered

            slot_map = remembered(model)
        writer = state_writer.Writer(
            tf, model, reader, plan.slots, plan.pairs, plan.unused, rows, slot_map
        )
        var_list.update(writer.var_list)
    if plan.unused:
        warnings.warn(
            f"estimator_hooks: {prefix!r} holds variables no Keras weight was mapped to "
            f"({', '.join(plan.unused[:8])}{', ...' if len(plan.unused) > 8 else ''}): the "
            "checkpoints written from Keras carry them unchanged, so the Estimator can restore "
            "them, but they do not train. Map them (assignment_map=) if the Keras model has "
            "them.",
            stacklevel=3,
        )
    return var_list, writer


def _write_plan(
    assignment: Any,
    model: Any,
    prefix: str,
    shapes: Mapping[str, Any],
    assignment_map: str | Mapping[str, Any] | None,
) -> Any:
    """The plan the checkpoints are written by: the pairs of the model's restore
    (``restore_checkpoint(model, ..., assignment_map)``) when it had one, else
    ``assignment_map`` (default ``"auto"``); a map pairing otherwise than the restore is refused.
    """
    restored = assignment.restored_pairs(model)
    if restored is None and assignment_map is None:
        # A model whose every weight answers to a name of the checkpoint (model_fn_model: the
        # model_fn's own variables, slots included) is written under those names.
        from hookbridge._hook_callback.graph import tf1_names

        named = tf1_names(model)
        if len(named) == len(model.weights) and all(n in shapes for n in named.values()):
            restored = [(n, i) for i, n in sorted(named.items())]
    if restored is None:
        plan = assignment.plan(model, prefix, shapes, assignment_map or "auto")
        assignment.refuse_undecided(plan, "estimator_hooks")
        return plan
    if assignment_map is not None:
        theirs = assignment.plan(model, prefix, shapes, assignment_map)
        differ = sorted(set(theirs.pairs) ^ set(restored), key=lambda p: p[1])
        if differ or theirs.undecided:
            labels = theirs.labels
            shown = [
                f"{labels[i]} <- {name!r} ({'restored' if (name, i) in restored else 'yours'})"
                for name, i in differ[:8]
            ] or [f"{labels[i]} undecided" for i in list(theirs.undecided)[:8]]
            raise ValueError(
                f"estimator_hooks: assignment_map={assignment_map!r} pairs the checkpoint's "
                "variables with the model's weights otherwise than restore_checkpoint restored "
                f"the model ({'; '.join(shown)}): the checkpoints would write weights under "
                "other variables' names. Drop assignment_map= to write with the restore's map, "
                "or restore with the map you mean."
            )
    try:
        return assignment.plan(model, prefix, shapes, assignment.as_map(restored))
    except ValueError as e:
        raise ValueError(
            f"estimator_hooks: the map restore_checkpoint restored the model with does not fit "
            f"{prefix!r}: {e}"
        ) from e


def _warn_without_model(tf: Any, graph: Any, model_dir: str) -> None:
    """Without ``model``, checkpoints hold the graph's variables as they are named (the weight
    mirrors: ``model/000/kernel``, or the names a ``restore_checkpoint(..., assignment_map)``
    gave them) and no optimizer state: before the first write, name what an Estimator restoring
    them will not find (its ``NotFoundError`` names the first missing key in sorted order, as
    ``Saver`` sorts the names it restores)."""
    prefix = tf.train.latest_checkpoint(model_dir)
    if prefix is None:
        return
    names = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    v1 = tf.compat.v1
    written = {
        v.op.name
        for key in (v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.SAVEABLE_OBJECTS)
        for v in graph.get_collection(key)
        if hasattr(v, "op")
    }
    missing = sorted(n for n in names if n not in written)
    if missing:
        warnings.warn(
            f"estimator_hooks: {model_dir!r} holds a checkpoint whose variables the checkpoints "
            f"written from Keras will not hold: {', '.join(missing[:4])}"
            f"{f', ... ({len(missing)} in all)' if len(missing) > 4 else ''}. Without model=, "
            "they hold the model's weights under the names the bridge's graph gives them "
            "(model/000/kernel, ..., or the checkpoint's own after restore_checkpoint with an "
            "assignment_map) and no optimizer state, and an Estimator restoring them fails "
            f"(NotFoundError: Key {missing[0]} not found). Pass model=<the Keras model> to keep "
            "the Estimator's names and optimizer state.",
            stacklevel=3,
        )


def _name_mirrors(
    model: Any, mirrors: Mapping[int, Any], pairs: Sequence[tuple[str, int]]
) -> None:
    """The weight mirrors answer to the checkpoint's names from now on (``set_tf1_names``). Those
    of this run were named before the hooks were built: when they do not carry the names yet
    (no ``restore_checkpoint(model, model_dir, ...)`` before ``fit``), a warning says so."""
    from hookbridge._hook_callback.checkpoint import single_names
    from hookbridge._hook_callback.graph import set_tf1_names

    names = single_names(pairs)
    set_tf1_names(model, names)
    unnamed = [n for i, n in names.items() if i in mirrors and mirrors[i].op.name != n]
    if unnamed:
        warnings.warn(
            f"estimator_hooks: the model's weights answer to the checkpoint's names "
            f"({', '.join(unnamed[:4])}{', ...' if len(unnamed) > 4 else ''}) from the next "
            "run on: in this run the bridge's graph named them before the hooks were built "
            "(model/NNN/...), so a hook finding variables by those names (InMemoryEvaluatorHook, "
            "init_from_checkpoint, get_tensor_by_name) does not find them. Call "
            "hookbridge.restore_checkpoint(model, model_dir, assignment_map) before fit: it loads "
            "the checkpoint and names them at once.",
            stacklevel=4,
        )


def _recover_last_checkpoints(tf: Any, savers: Sequence[Any], model_dir: str) -> None:
    """As ``MonitoredTrainingSession(checkpoint_dir=model_dir)`` on restoring: the Saver takes
    over the checkpoints listed in ``model_dir``, so ``max_to_keep`` deletes the oldest of them."""
    state = tf.train.get_checkpoint_state(model_dir)
    if state is None or len(savers) != 1:
        return
    savers[0].recover_last_checkpoints(list(state.all_model_checkpoint_paths))


def _graph_parts(tf: Any, loss: str) -> tuple[Any, Any, Any]:
    if tf.executing_eagerly():
        raise RuntimeError(
            "estimator_hooks builds on HookCallback's graph: call it inside the hooks callable, "
            "HookCallback(lambda: hookbridge.estimator_hooks(model_dir, ...)), not eagerly."
        )
    graph = tf.compat.v1.get_default_graph()
    global_step = tf.compat.v1.train.get_global_step(graph)
    if global_step is None:
        raise RuntimeError(
            "estimator_hooks: the default graph has no global step; call it inside the hooks "
            "callable given to hookbridge.HookCallback (its graph has one)."
        )
    try:
        loss_tensor = graph.get_tensor_by_name(loss if ":" in loss else f"{loss}:0")
    except (KeyError, ValueError) as e:
        raise ValueError(
            f"estimator_hooks: the graph has no tensor {loss!r}; HookCallback names the batch "
            "loss 'loss' (pass loss= the name of another log key)."
        ) from e
    return graph, global_step, loss_tensor
