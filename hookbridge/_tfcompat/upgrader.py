"""TensorFlow's own TF1 -> TF2 upgrader (``tf_upgrade_v2``: in every TF 2 wheel, not in the
``tf`` API), which ``hookbridge upgrade`` runs.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

from typing import Any


def tf_upgrader() -> tuple[Any, Any]:
    """TensorFlow's own TF1 -> TF2 upgrader (``tf_upgrade_v2``, shipped in every TF 2 wheel but
    not part of the ``tf`` API): its ``tf_upgrade_v2`` module (``TFAPIChangeSpec``, the rename
    tables) and its ``ast_edits`` engine (``ASTCodeUpgrader.update_string_pasta``, ``ERROR``)."""
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2

    return tf_upgrade_v2, ast_edits
