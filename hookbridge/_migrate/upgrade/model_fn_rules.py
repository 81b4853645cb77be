"""``hookbridge upgrade --model-fn``: point what a ``model_fn`` names from ``tf.estimator`` and
``tf.layers`` at ``hookbridge.estimator_compat``, so it runs under ``model_fn_model`` on TF 2.21.

Opt-in, and narrow: only the names a ``model_fn`` itself uses and ``hookbridge.estimator_compat``
provides are rewritten, after the stage-0 rewrite (whose result keeps running under the Estimator
on TF 2.15: there these names ARE TensorFlow's classes and ``tf.compat.v1.layers``, so the same
file still trains under ``tf.estimator`` too):

* ``tf.estimator.ModeKeys``, ``tf.estimator.EstimatorSpec`` (and their ``tf.compat.v1.estimator``
  spellings), ``TPUEstimatorSpec`` (``tf.estimator.tpu``, ``tf.contrib.tpu``,
  ``tf.compat.v1.estimator.tpu``) -> ``hookbridge.estimator_compat.<name>``;
* ``tf.layers.`` / ``tf.compat.v1.layers.`` ``dense``, ``conv2d``, ``max_pooling2d``, ``dropout``,
  ``batch_normalization``, ``flatten`` -> ``hookbridge.estimator_compat.layers.<name>``.

Everything else of ``tf.estimator`` (``Estimator``, ``RunConfig``, ``train_and_evaluate``, input
functions) is what ``model_fn_model`` replaces, and stays: the Estimator's own code is left to
run on TF 2.15. Other ``tf.layers`` names (the layer classes) stay and are findings of
``hookbridge scan``.
"""

from __future__ import annotations

import ast
from typing import Final

from hookbridge._migrate.upgrade.rules import ROOTS, Change, dotted, tensorflow_alias

HOME: Final = "hookbridge.estimator_compat"
IMPORT: Final = f"import {HOME}"
_WHY = (
    "tf.estimator is gone from TF 2.16 and tf.compat.v1.layers does not load on Keras 3: "
    f"{HOME} is TensorFlow's own where it exists, hookbridge's (same fields, variables and "
    "values) where not, for a model_fn run by hookbridge.model_fn_model"
)
LAYERS: Final = ("dense", "conv2d", "max_pooling2d", "dropout", "batch_normalization", "flatten")


def _table() -> dict[str, str]:
    table = {}
    for home in ("tf.estimator", "tf.compat.v1.estimator"):
        for name in ("ModeKeys", "EstimatorSpec"):
            table[f"{home}.{name}"] = f"{HOME}.{name}"
    for home in ("tf.estimator.tpu", "tf.contrib.tpu", "tf.compat.v1.estimator.tpu"):
        table[f"{home}.TPUEstimatorSpec"] = f"{HOME}.TPUEstimatorSpec"
    for home in ("tf.layers", "tf.compat.v1.layers"):
        for name in LAYERS:
            table[f"{home}.{name}"] = f"{HOME}.layers.{name}"
    return table


#: Canonical old spelling (rooted at ``tf``) -> new spelling.
TABLE: Final = _table()


def rewrite(source: str) -> tuple[str, list[Change]]:
    """``source`` with :data:`TABLE`'s names rewritten (and ``import hookbridge.estimator_compat``
    added after the TensorFlow import when used), and the changes; unchanged when nothing
    matches or the module does not import TensorFlow."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source, []
    found = tensorflow_alias(tree)
    if found is None:
        return source, []
    alias, root = found
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = dotted(node)
        if not name or not (name == alias or name.startswith(alias + ".")):
            continue
        canonical = root + name[len(alias) :]
        new = TABLE.get(canonical)
        if new is not None:
            edits.append((node, canonical, new))
    if not edits:
        return source, []
    lines = source.splitlines(keepends=True)
    for node, _, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        if node.lineno != node.end_lineno:  # a name split over lines: left for a person
            continue
        line = lines[node.lineno - 1]
        start = len(line.encode()[: node.col_offset].decode())
        end = len(line.encode()[: node.end_col_offset].decode())
        lines[node.lineno - 1] = line[:start] + new + line[end:]
    text = "".join(lines)
    changes = [
        Change(node.lineno, canonical, new, _WHY)
        for node, canonical, new in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset))
        if node.lineno == node.end_lineno
    ]
    if changes and not _imports_home(tree):
        end = max(
            n.end_lineno
            for n in tree.body
            if isinstance(n, ast.Import) and any(a.name in ROOTS for a in n.names)
        )
        lines = text.splitlines(keepends=True)
        newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
        lines.insert(end, IMPORT + newline)
        text = "".join(lines)
    return text, changes


def _imports_home(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.Import) and any(a.name == HOME and a.asname is None for a in n.names)
        for n in tree.body
    )
