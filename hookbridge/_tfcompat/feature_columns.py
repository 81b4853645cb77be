"""TensorFlow's feature-column internals, as canned Estimators run them.

Part of :mod:`hookbridge._tfcompat` (see its docstring).
"""

from __future__ import annotations

from typing import Any


def feature_column_internals() -> Any:
    """TensorFlow's own feature-column code, as canned Estimators run it (TF 2.15 to 2.21).

    A namespace of: ``cache`` (``FeatureTransformationCache``), ``state_manager``
    (``StateManager``, the base the twin's column layers subclass), ``weighted_sum``
    (``_create_weighted_sum``: a column's term of ``linear_model``), ``scope_name``
    (``_sanitize_column_name_for_variable_scope``), ``verify_batch``
    (``_verify_static_batch_size_equality``), the column classes ``feature_column`` (v2
    base), ``categorical``, ``dense``, ``embedding``, ``shared_v2``, ``shared_v1`` (the
    ``tf.compat.v1.feature_column.shared_embedding_columns`` one), ``sequence`` (a tuple) and
    ``lookup_sparse`` / ``lookup_sparse_unsafe`` (the embedding lookups fc calls).
    """
    from types import SimpleNamespace

    from tensorflow.python.feature_column import feature_column as fc_old
    from tensorflow.python.feature_column import feature_column_v2 as fc_v2
    from tensorflow.python.feature_column import feature_column_v2_types as fc_types
    from tensorflow.python.feature_column import sequence_feature_column as fc_seq
    from tensorflow.python.ops import embedding_ops

    return SimpleNamespace(
        cache=fc_v2.FeatureTransformationCache,
        state_manager=fc_v2.StateManager,
        weighted_sum=fc_v2._create_weighted_sum,
        scope_name=fc_v2._sanitize_column_name_for_variable_scope,
        verify_batch=fc_v2._verify_static_batch_size_equality,
        feature_column=fc_types.FeatureColumn,
        categorical=fc_v2.CategoricalColumn,
        dense=fc_v2.DenseColumn,
        embedding=fc_v2.EmbeddingColumn,
        shared_v2=fc_v2.SharedEmbeddingColumn,
        shared_v1=fc_old._SharedEmbeddingColumn,
        sequence=(fc_v2.SequenceCategoricalColumn, fc_seq.SequenceNumericColumn),
        lookup_sparse=embedding_ops.safe_embedding_lookup_sparse,
        lookup_sparse_unsafe=embedding_ops.embedding_lookup_sparse_v2,
    )
