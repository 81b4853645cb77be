"""The Estimator's checkpoint kept before the first write into its ``model_dir``: complete or absent.

``estimator_hooks`` copies ``model_dir``'s latest checkpoint into ``<model_dir>/estimator-backup/``
(with a ``checkpoint`` file of its own), out of ``keep_checkpoint_max``'s reach, so the switch can
be undone. A copy cut short (disk full, preemption, Ctrl-C on the data file) must not pass for a
backup: ``keep_checkpoint_max`` then deletes the Estimator's own files and the rollback has
nothing to restore. So the copy is made in a sibling directory (``<backup>.partial``), checked
(every file of the checkpoint, the same sizes, ``tf.train.load_checkpoint`` of the copy lists the
source's variables with their shapes), marked complete (:data:`MARKER`, the files and their
sizes), then renamed into place. On a later start a backup is taken as done only when its marker
lists files that are all there with those sizes and the copy loads; otherwise it is reported
(a warning naming it) and made again from ``model_dir``'s checkpoint of the same name, or, when
that is gone, an error says what is left and what to do.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

#: The file marking a backup complete: JSON ``{"checkpoint": name, "files": {file: size}}``.
MARKER = "hookbridge-backup.json"
_PARTIAL = ".partial"
_CHUNK = 16 << 20


class BackupError(RuntimeError):
    """A backup directory is incomplete and the checkpoint it copies is gone from model_dir."""


def keep_last_checkpoint(tf: Any, model_dir: str, backup: str) -> str | None:
    """Copies ``model_dir``'s latest checkpoint into ``<model_dir>/<backup>/`` (once), complete
    or not at all; returns the copy's prefix (``None``: nothing copied now).

    Raises:
        BackupError: ``<backup>`` is incomplete and ``model_dir`` no longer holds the
            checkpoint it was copying.
    """
    target = os.path.join(model_dir, backup)
    partial = target + _PARTIAL
    if tf.io.gfile.exists(partial):  # a copy of ours that was cut short: never a backup
        tf.io.gfile.rmtree(partial)
    latest = tf.train.latest_checkpoint(model_dir)
    if tf.io.gfile.exists(target):
        problem, name = _check(tf, target)
        if problem is None:
            return None
        source = os.path.join(model_dir, name) if name else None
        if source is None or not tf.io.gfile.exists(source + ".index"):
            raise BackupError(
                f"estimator_hooks: the backup {target!r} is incomplete ({problem}), and "
                f"{model_dir!r} no longer holds {name or 'the checkpoint it was copying'}: it "
                "cannot be made again, and the Estimator cannot be rolled back from it. Move it "
                "away (or delete it) to go on without a backup, or restore it from a copy of "
                "the model_dir made before the switch."
            )
        warnings.warn(
            f"estimator_hooks: the backup {target!r} is incomplete ({problem}): a copy cut "
            f"short is not a backup. Copying {name} from {model_dir!r} again.",
            stacklevel=3,
        )
        tf.io.gfile.rmtree(target)
        latest = source
    if latest is None:
        return None
    _copy(tf, latest, partial)
    tf.io.gfile.rename(partial, target)
    name = os.path.basename(latest)
    tf.compat.v1.logging.warning(
        "hookbridge.estimator_hooks: kept %s in %s before writing into %s (keep_checkpoint_max "
        "cannot delete it). To roll back to the Estimator: copy that directory to a new "
        "model_dir and point the Estimator at it (docs/migration.md, 'Rolling back').",
        name,
        target,
        model_dir,
    )
    return os.path.join(target, name)


def copy_file(tf: Any, source: str, target: str) -> None:
    """Copies one file in chunks (``tf.io.gfile``: local disks and gs:// alike)."""
    with tf.io.gfile.GFile(source, "rb") as src, tf.io.gfile.GFile(target, "wb") as dst:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            dst.write(chunk)


def _copy(tf: Any, prefix: str, directory: str) -> None:
    """The checkpoint ``prefix`` into ``directory`` (new), checked, then marked complete."""
    name = os.path.basename(prefix)
    tf.io.gfile.makedirs(directory)
    sizes = {}
    for path in sorted(tf.io.gfile.glob(prefix + ".*")):
        file = os.path.basename(path)
        copy_file(tf, path, os.path.join(directory, file))
        sizes[file] = tf.io.gfile.stat(path).length
    with tf.io.gfile.GFile(os.path.join(directory, "checkpoint"), "w") as f:
        f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
    problem = _files_problem(tf, directory, sizes) or _keys_problem(tf, directory, name, prefix)
    if problem is not None:
        raise OSError(f"estimator_hooks: the copy of {prefix!r} into {directory!r} is wrong: "
                      f"{problem}")
    with tf.io.gfile.GFile(os.path.join(directory, MARKER), "w") as f:
        f.write(json.dumps({"checkpoint": name, "files": sizes}))


def _check(tf: Any, directory: str) -> tuple[str | None, str | None]:
    """(what is wrong with the backup in ``directory`` or ``None``, the checkpoint it holds)."""
    name = _checkpoint_name(tf, directory)
    marker = os.path.join(directory, MARKER)
    if not tf.io.gfile.exists(marker):
        return f"no {MARKER}: the copy did not finish", name
    try:
        with tf.io.gfile.GFile(marker) as f:
            done = json.loads(f.read())
        name, sizes = done["checkpoint"], dict(done["files"])
    except (ValueError, KeyError, TypeError) as e:
        return f"{MARKER} unreadable: {e}", name
    return _files_problem(tf, directory, sizes) or _keys_problem(tf, directory, name), name


def _checkpoint_name(tf: Any, directory: str) -> str | None:
    """The checkpoint a backup directory holds or was copying (its files' common prefix)."""
    state = tf.train.get_checkpoint_state(directory)
    if state is not None and state.model_checkpoint_path:
        return os.path.basename(state.model_checkpoint_path)
    for file in sorted(tf.io.gfile.listdir(directory)):
        for suffix in (".index", ".meta", ".data-"):
            if suffix in file:
                return file[: file.index(suffix)]
    return None


def _files_problem(tf: Any, directory: str, sizes: dict[str, int]) -> str | None:
    for file, size in sorted(sizes.items()):
        path = os.path.join(directory, file)
        if not tf.io.gfile.exists(path):
            return f"{file} missing"
        got = tf.io.gfile.stat(path).length
        if got != size:
            return f"{file} has {got} bytes of {size}"
    if not any(f.endswith(".index") for f in sizes) or not any(".data-" in f for f in sizes):
        return "no .index or .data file"
    return None


def _keys_problem(tf: Any, directory: str, name: str, source: str | None = None) -> str | None:
    try:
        copied = tf.train.load_checkpoint(os.path.join(directory, name))
        shapes = copied.get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as e:
        return f"tf.train.load_checkpoint fails: {str(e).splitlines()[0]}"
    if source is not None:
        original = tf.train.load_checkpoint(source).get_variable_to_shape_map()
        if original != shapes:
            return f"its variables differ from the source's ({sorted(set(original) ^ set(shapes))})"
    return None

