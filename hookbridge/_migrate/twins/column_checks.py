"""Which feature columns the twin's column layers (``columns``) cannot build, and why."""

from __future__ import annotations

from typing import Any


def unsupported(feature_columns: Any, *, dense_only: bool = False) -> list[str]:
    """Every column (or column inside one) the layers cannot build, each with the reason.

    Args:
        feature_columns: feature columns.
        dense_only: the columns of an input layer (a DNN's), where a categorical column
            must be wrapped in an embedding or indicator column.

    Returns:
        ``"<column name> (<type>): <reason>"`` per column, empty when all can be built.
    """
    from hookbridge import _tfcompat

    fc = _tfcompat.feature_column_internals()
    out: list[str] = []
    for column in feature_columns:
        reason = _why_not(fc, column)
        if reason is None and dense_only and not isinstance(column, (fc.dense, fc.shared_v1)):
            reason = (
                "a DNN's input takes dense columns only; wrap it in "
                "tf.feature_column.embedding_column or indicator_column"
            )
        if reason is not None:
            out.append(f"{getattr(column, 'name', column)!s} ({type(column).__name__}): {reason}")
    return out


def _why_not(fc: Any, column: Any) -> str | None:
    if isinstance(column, fc.sequence):
        return (
            "a sequence column (SequenceFeatures / RNN Estimators), not a canned DNN/Linear input"
        )
    if isinstance(column, fc.shared_v1):  # tf.compat.v1 shared_embedding_columns
        inner = column.categorical_column
        if column.ckpt_to_load_from is not None:
            return "ckpt_to_load_from: load the weights with restore_checkpoint instead"
        return _why_not(fc, inner)
    if not isinstance(column, fc.feature_column):
        return "not a tf.feature_column (v2) column"
    if isinstance(column, fc.embedding) and column.ckpt_to_load_from is not None:
        return "ckpt_to_load_from: load the weights with restore_checkpoint instead"
    if isinstance(column, fc.shared_v2):
        if column.shared_embedding_column_creator._ckpt_to_load_from is not None:
            return "ckpt_to_load_from: load the weights with restore_checkpoint instead"
    for parent in getattr(column, "parents", None) or []:
        if isinstance(parent, str):
            continue
        reason = _why_not(fc, parent)
        if reason is not None:
            return f"its column {parent.name!r}: {reason}"
    return None


def refuse(feature_columns: Any, *, dense_only: bool, what: str) -> None:
    bad = unsupported(feature_columns, dense_only=dense_only)
    if bad:
        raise ValueError(
            f"hookbridge {what}: {len(bad)} feature column(s) cannot be built: " + "; ".join(bad)
        )
