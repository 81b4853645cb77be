"""Writing and reading the graph variables that ``model.save_weights`` covers under CallbackHook.

Two formats, chosen by the path: ``*.h5`` is an HDF5 file with one dataset per variable (its
``op.name``); any other path is a TF checkpoint prefix (``SaveV2``: ``<path>.index`` and
``<path>.data-*``) keyed by the variables' op names, exactly as ``tf.compat.v1.train.Saver`` writes
it, so ``tf.train.load_checkpoint`` reads it and a Saver of the same graph restores it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat


def write_weights(path: str, values: Mapping[str, np.ndarray]) -> None:
    """Writes ``values`` (variable op name -> array) to ``path`` (``.h5`` or a TF checkpoint)."""
    dirname = os.path.dirname(path)
    if dirname:
        os.makedirs(dirname, exist_ok=True)
    if path.endswith(".h5"):
        import h5py

        with h5py.File(path, "w") as f:
            f.attrs["hookbridge_names"] = [n.encode() for n in values]
            for name, value in values.items():
                f.create_dataset(name, data=value)
        return
    with _tfcompat.eager():
        names = list(values)
        tf.raw_ops.SaveV2(
            prefix=path,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(values[n]) for n in names],
        )
    # As tf_keras's save_weights in the TF format: the directory's ``checkpoint`` file names it
    # (ModelCheckpoint(load_weights_on_restart=True) finds it through tf.train.latest_checkpoint).
    tf.compat.v1.train.update_checkpoint_state(
        dirname or ".", os.path.basename(path), [os.path.basename(path)]
    )


def read_weights(path: str) -> dict[str, np.ndarray]:
    """Reads weights written by ``model.save_weights`` / ``model.save`` under CallbackHook.

    Args:
        path: an ``.h5`` file, or a TF checkpoint prefix (or a directory: its latest checkpoint).

    Returns:
        A dict from variable op name (``"dense/kernel"``) to its saved value. An HDF5 file not
        written by hookbridge is read as tf_keras's weights layout (``dense/kernel:0`` is
        ``dense/kernel``), else by dataset path.

    Raises:
        FileNotFoundError: nothing readable at ``path``.
    """
    if path.endswith(".h5") and os.path.isfile(path):
        import h5py

        with h5py.File(path, "r") as f:
            if "hookbridge_names" not in f.attrs:
                return _read_keras_h5(f)
            names = [_text(n) for n in f.attrs["hookbridge_names"]]
            return {n: np.asarray(f[n]) for n in names}
    prefix = tf.train.latest_checkpoint(path) if os.path.isdir(path) else path
    if not prefix or not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(
            f"hookbridge.read_weights: no weights at {path!r}: expected an .h5 file written by "
            "ModelCheckpoint under CallbackHook, a TF checkpoint prefix (with a .index file) or a "
            "directory holding checkpoints."
        )
    reader = tf.train.load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _read_keras_h5(f: Any) -> dict[str, np.ndarray]:
    """A tf_keras / Keras 2 weights file (``layer_names``, each layer's ``weight_names``, e.g.
    ``dense/kernel:0``), or any HDF5 file: its datasets by path. Keyed by the names without
    ``:0``, as the graph's variables of the same names (``tf.compat.v1.layers.dense``'s)."""
    out: dict[str, np.ndarray] = {}
    group = f.get("model_weights", f)
    if "layer_names" in group.attrs:
        for layer in group.attrs["layer_names"]:
            g = group[_text(layer)]
            for weight in g.attrs.get("weight_names", []):
                out[_text(weight).split(":")[0]] = np.asarray(g[_text(weight)])
        return out

    def visit(name: str, node: Any) -> None:
        if hasattr(node, "shape") and hasattr(node, "dtype"):
            out[name.split(":")[0]] = np.asarray(node)

    f.visititems(visit)
    return out


def load_weights(session: Any, path: str, variables: Sequence[Any] | None = None) -> list[str]:
    """Loads weights saved by a callback under ``CallbackHook`` back into graph variables.

    Works on a finalized graph (e.g. inside a ``MonitoredSession``): values are fed to each
    variable's initializer, no op is added.

    Args:
        session: a ``tf.compat.v1.Session`` on the variables' graph, or a ``MonitoredSession``
            (loaded through ``run_step_fn``: no hook runs, no step is counted).
        path: what ``ModelCheckpoint`` wrote: an ``.h5`` file or a TF checkpoint prefix/directory.
        variables: the variables to load (default: the session graph's global variables); each
            is matched by ``op.name``, variables absent from the file are left unchanged.

    Returns:
        The names of the variables loaded.

    Raises:
        FileNotFoundError: nothing readable at ``path``.
        ValueError: a saved value's shape does not match its variable's.

    Example:
        >>> with tf.compat.v1.train.MonitoredSession() as sess:   # doctest: +SKIP
        ...     hookbridge.load_weights(sess, "ckpt/best.weights.h5")
    """
    if not isinstance(session, tf.compat.v1.Session) and hasattr(session, "run_step_fn"):
        # A MonitoredSession: its step_fn receives the raw session, no hook runs.
        return session.run_step_fn(
            lambda step_context: load_weights(step_context.session, path, variables)
        )
    values = read_weights(path)
    graph = session.graph
    if variables is None:
        with graph.as_default():
            variables = tf.compat.v1.global_variables()
    loaded = []
    for var in variables:
        name = var.op.name
        if name not in values:
            continue
        value = values[name]
        if tuple(value.shape) != tuple(var.shape.as_list()):
            raise ValueError(
                f"hookbridge.load_weights: {path!r} holds {name} with shape {value.shape}, the "
                f"graph's variable has shape {var.shape}. Load into the graph that wrote it."
            )
        init = var.initializer
        session.run(init, {init.inputs[1]: value})
        loaded.append(name)
    return loaded
