"""The feature columns a canned Estimator's Keras twin builds: one list for the whole library.

The twin's column layers (:mod:`hookbridge._migrate.twins.columns`) and ``hookbridge scan``
(:mod:`hookbridge._migrate.scan.columns`, which reads source code and never imports TensorFlow)
both read :data:`SUPPORTED_COLUMNS`, so what the scan promises is what the twin builds. Each
entry names the ``tf.feature_column`` function a user writes and the class of
``feature_column_v2`` it returns (the same function under ``tf.compat.v1.feature_column``
returns the same class; ``tf.compat.v1.feature_column.shared_embedding_columns`` returns
``feature_column.py``'s ``_SharedEmbeddingColumn``, named otherwise in the checkpoint, which the
twin builds under those names: ``tests/test_twin_shared.py``).

This module imports nothing from TensorFlow.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class ColumnKind(NamedTuple):
    """A feature column the twin builds."""

    function: str  # the tf.feature_column function: "embedding_column"
    cls: str  # the class it returns (tensorflow/python/feature_column/feature_column_v2.py)


#: Every feature column the twin builds, in ``tf.feature_column``'s spelling.
SUPPORTED_COLUMNS: Final = (
    ColumnKind("numeric_column", "NumericColumn"),  # shape, default_value, normalizer_fn
    ColumnKind("bucketized_column", "BucketizedColumn"),
    ColumnKind("categorical_column_with_vocabulary_list", "VocabularyListCategoricalColumn"),
    ColumnKind("categorical_column_with_vocabulary_file", "VocabularyFileCategoricalColumn"),
    ColumnKind("categorical_column_with_hash_bucket", "HashedCategoricalColumn"),
    ColumnKind("categorical_column_with_identity", "IdentityCategoricalColumn"),
    ColumnKind("crossed_column", "CrossedColumn"),
    ColumnKind("embedding_column", "EmbeddingColumn"),
    ColumnKind("indicator_column", "IndicatorColumn"),
    ColumnKind("weighted_categorical_column", "WeightedCategoricalColumn"),
    ColumnKind("shared_embeddings", "SharedEmbeddingColumn"),
    ColumnKind("shared_embedding_columns", "_SharedEmbeddingColumn"),  # tf.compat.v1 only
)
SUPPORTED_FUNCTIONS: Final = frozenset(kind.function for kind in SUPPORTED_COLUMNS)
SUPPORTED_CLASSES: Final = frozenset(kind.cls for kind in SUPPORTED_COLUMNS)

#: The columns a DNN's input layer takes (dense ones); the categorical ones only feed the linear
#: part (the twin's input layer refuses them, as the Estimator's ``input_layer`` does).
DENSE_FUNCTIONS: Final = frozenset(
    {"numeric_column", "bucketized_column", "embedding_column", "indicator_column"}
    | {"shared_embeddings", "shared_embedding_columns"}
)
DNN_INPUT_REASON: Final = (
    "a DNN's input takes dense columns only; wrap it in tf.feature_column.embedding_column or "
    "indicator_column"
)
#: An embedding initialised from another checkpoint (``ckpt_to_load_from``) is refused: its
#: position in each column function's signature, and why.
CHECKPOINT_ARGUMENT: Final = {
    "embedding_column": 4,
    "shared_embeddings": 5,
    "shared_embedding_columns": 5,
}
CHECKPOINT_REASON: Final = "ckpt_to_load_from: load the weights with restore_checkpoint instead"

#: Functions that return a list of columns (one per categorical column given), not one.
LIST_FUNCTIONS: Final = frozenset({"shared_embeddings", "shared_embedding_columns"})

#: Why a feature column the twin does not build is refused, by how its function is named
#: (the first match wins; any other column: :data:`OTHER_REASON`).
REFUSED: Final = (
    (
        "sequence_",
        "a sequence column (SequenceFeatures for RNN models): no canned DNN/Linear Estimator "
        "takes it, and the twin does not build it",
    ),
)
#: Columns of ``tf.contrib.layers`` / ``tf.contrib.feature_column``.
CONTRIB_REASON: Final = (
    "a tf.contrib column (removed in TF 2): rewrite it with tf.feature_column first"
)
OTHER_REASON: Final = "not a column the twin builds"

#: Canned constructor arguments the twin refuses when given (not None / False).
UNSUPPORTED_ARGUMENTS: Final = ("weight_column", "label_vocabulary", "batch_norm")


def refusal(function: str, contrib: bool = False) -> str:
    """Why the twin does not build a column made by ``function`` ("" when it builds it)."""
    if contrib:
        return CONTRIB_REASON
    if function in SUPPORTED_FUNCTIONS:
        return ""
    for prefix, reason in REFUSED:
        if function.startswith(prefix):
            return reason
    return OTHER_REASON
