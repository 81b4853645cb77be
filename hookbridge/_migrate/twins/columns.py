"""Keras layers computing a canned Estimator's feature columns exactly, on every stack.

``input_layer(columns)`` is what a canned DNN's ``input_from_feature_columns/input_layer``
(``DenseFeatures``) computes: each column's dense tensor, flattened to ``[batch, n]``,
concatenated in the Estimator's order (sorted by column name). ``linear_model(columns)`` is a
canned linear model's ``linear_model`` (tensorflow-estimator's ``_LinearModelLayer``): per column
``value @ weights`` (dense) or the ``sparse_combiner`` weighted sum of the weights' rows of the
column's ids (categorical), ``add_n`` of them, then ``bias_add``.

The ids and values come from TensorFlow's own feature-column code run inside the layer
(``FeatureTransformationCache`` and each column's ``get_dense_tensor`` / ``get_sparse_tensors``,
``_create_weighted_sum``), with a state manager that makes each variable a Keras weight
(trained by ``fit``) and each lookup table once, outside any ``tf.function``. Two things are
hookbridge's own, each marked where it is: the shared embeddings (TensorFlow's creator makes its
variable with ``get_variable`` per graph, which neither Keras owns nor ``fit`` trains) and
ragged inputs (fc takes dense or sparse features; a ragged one is given as its ``to_sparse()``).

Each layer's ``checkpoint_names()`` gives its weights with the names the Estimator's checkpoint
has for them under ``scope`` (``dnn/input_from_feature_columns/input_layer``,
``linear/linear_model``), the same for V1 and V2 canned Estimators (``tests/test_twin_columns.py``
reads them from both on TF 2.15). Shared embeddings, measured there:
``tf.compat.v1.feature_column.shared_embedding_columns`` (V1 Estimators) keep their weight at
``<input layer scope>/<collection>/embedding_weights`` and a linear model names each column's
weights ``<collection>/weights``, ``<collection>_1/weights``, ... in column order;
``tf.feature_column.shared_embeddings`` keep it at ``dnn/input_from_feature_columns/<name>``
(``linear/<name>`` in a linear-only one) under a V1 Estimator, which trains it, and at ``<name>`` under a V2 Estimator, which never
trains it (its variable is made outside the Estimator's Keras layers): the layer's weight is then
not trainable either.
"""

from __future__ import annotations

import functools
from typing import Any

from hookbridge._migrate.twins.column_checks import refuse as _refuse
from hookbridge._migrate.twins.column_checks import unsupported

__all__ = ["DNN_SCOPE", "LINEAR_SCOPE", "input_layer", "linear_model", "unsupported"]

#: The scopes a canned Estimator's checkpoint puts these layers' variables under.
DNN_SCOPE = "dnn/input_from_feature_columns/input_layer"
LINEAR_SCOPE = "linear/linear_model"


def input_layer(
    feature_columns: Any,
    *,
    scope: str = DNN_SCOPE,
    name: str = "input_layer",
    v1: bool = False,
) -> Any:
    """The Keras layer computing a canned DNN's input layer from a dict of features.

    Args:
        feature_columns: the Estimator's ``feature_columns`` (dense columns: numeric,
            bucketized, embedding, shared embedding, indicator).
        scope: the checkpoint scope of its variables (``checkpoint_names``).
        name: the Keras layer's name.
        v1: the layer of a V1 canned Estimator (``tf.compat.v1.estimator``); it only matters
            for ``tf.feature_column.shared_embeddings`` (see the module docstring: shared embeddings).

    Returns:
        A Keras layer; called with a dict of features (extra keys are ignored, features are
        taken by name) it returns the ``[batch, width]`` float32 input of the first hidden layer.

    Raises:
        ValueError: a column it cannot build (``unsupported`` names every one).
    """
    _refuse(feature_columns, dense_only=True, what="input_layer")
    return _classes()[0](feature_columns, scope=scope, name=name, v1=v1)


def linear_model(
    feature_columns: Any,
    *,
    units: int = 1,
    sparse_combiner: str = "sum",
    scope: str = LINEAR_SCOPE,
    name: str = "linear_model",
    v1: bool = False,
    share_with: Any = None,
) -> Any:
    """The Keras layer computing a canned linear model's logits from a dict of features.

    Its weights (one ``weights`` of ``[num_buckets or width, units]`` per column, the columns'
    own state such as embeddings, and ``bias_weights``) are zeros, as the Estimator makes them.

    Args:
        feature_columns: the Estimator's (linear) feature columns.
        units: the logits dimension.
        sparse_combiner: how a categorical column's weights combine ('sum', the canned
            default; 'mean'; 'sqrtn').
        scope: the checkpoint scope of its variables (``checkpoint_names``).
        name: the Keras layer's name.
        v1: the layer of a V1 canned Estimator (see the module docstring: shared embeddings).
        share_with: the ``input_layer`` of the same ``DNNLinearCombined*`` twin: shared
            embeddings are then one weight, the input layer's, as in the Estimator's graph
            (which builds the DNN part first); ``checkpoint_names`` lists it there only.

    Returns:
        A Keras layer; called with a dict of features it returns the ``[batch, units]`` logits.

    Raises:
        ValueError: a column it cannot build (``unsupported`` names every one).
    """
    _refuse(feature_columns, dense_only=False, what="linear_model")
    return _classes()[1](
        feature_columns,
        units=units,
        sparse_combiner=sparse_combiner,
        scope=scope,
        name=name,
        v1=v1,
        share_with=share_with,
    )


def _sorted(feature_columns: Any) -> list[Any]:
    """The columns in the Estimator's order (``_normalize_feature_columns``: by name)."""
    columns = list(feature_columns)
    names = [c.name for c in columns]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"hookbridge: duplicate feature column names {duplicated}.")
    return sorted(columns, key=lambda c: c.name)


def _features(features: Any) -> dict[str, Any]:
    """The layer's input as fc reads it: a dict of named features (only those the columns ask
    for are read). A ragged feature is given as its ``to_sparse()``: hookbridge's own step, fc
    takes dense and sparse features only (an Estimator's ``input_fn`` gives those)."""
    import tensorflow as tf

    if not isinstance(features, dict):
        raise ValueError(
            f"hookbridge feature-column layer: expected a dict of named features, got "
            f"{type(features).__name__}."
        )
    return {
        key: value.to_sparse() if isinstance(value, tf.RaggedTensor) else value
        for key, value in features.items()
    }


@functools.cache
def _classes() -> tuple[Any, Any]:
    """The two layer classes, made on first use (from the stack's ``tf.keras``)."""
    import numpy as np
    import tensorflow as tf

    from hookbridge import _tfcompat

    fc = _tfcompat.feature_column_internals()
    keras = tf.keras

    class _KerasStateManager(fc.state_manager):
        """fc's state manager whose variables are the layer's Keras weights (``get_variable``
        answers the ``tf.Variable`` fc's ops need) and whose tables are made once."""

        def __init__(self, layer: Any, prefix: str) -> None:
            self._layer, self._prefix = layer, prefix
            self.variables: dict[tuple[Any, str], Any] = {}
            self.names: list[tuple[Any, str]] = []
            self.scopes: dict[Any, str] = {}  # a column's scope when not its name
            self._resources: dict[tuple[Any, str], Any] = {}

        def create_variable(
            self,
            feature_column,
            name,
            shape,
            dtype=None,
            trainable=True,
            use_resource=True,
            initializer=None,
        ):
            del use_resource  # Keras weights are resource variables
            scope = self.scopes.get(feature_column) or fc.scope_name(feature_column.name)
            weight = self._layer.add_weight(
                name=f"{scope}.{name}",
                shape=tuple(int(d) for d in shape),
                dtype="float32" if dtype is None else tf.as_dtype(dtype).name,
                initializer=initializer or "zeros",
                trainable=bool(trainable) and self._layer.trainable,
            )
            self.variables[(feature_column, name)] = weight
            self.names.append((weight, f"{self._prefix}/{scope}/{name}"))
            return weight

        def get_variable(self, feature_column, name):
            return _tfcompat.keras_weight_variable(self.variables[(feature_column, name)])

        def add_resource(self, feature_column, resource_name, resource):
            self._resources[(feature_column, resource_name)] = resource

        def has_resource(self, feature_column, resource_name):
            return (feature_column, resource_name) in self._resources

        def get_resource(self, feature_column, resource_name):
            return self._resources[(feature_column, resource_name)]

    class _ColumnsLayer(keras.layers.Layer):
        def __init__(self, feature_columns, *, scope, name, v1=False, share_with=None, **kwargs):
            super().__init__(name=name, **kwargs)
            self._columns = _sorted(feature_columns)
            self._scope, self._v1 = scope, bool(v1)
            self._state = _KerasStateManager(self, scope)
            # collection -> Keras weight; one dict for the two parts of a combined twin
            self._shared: dict[str, Any] = {} if share_with is None else share_with._shared
            if hasattr(self, "_convert_input_args"):  # Keras 3: features stay as given
                self._convert_input_args = False
                self._allow_non_tensor_positional_args = True

        def __call__(self, features, *args, **kwargs):
            # Keras 3 refuses a dict mixing numpy arrays and tensors: numpy ones become tensors
            # (of their own dtype, as an input_fn's dataset gives them).
            if isinstance(features, dict):
                features = {
                    k: tf.convert_to_tensor(v) if isinstance(v, (np.ndarray, list)) else v
                    for k, v in features.items()
                }
            return super().__call__(features, *args, **kwargs)

        def build(self, input_shape=None):
            if self.built:
                return
            with tf.init_scope():  # tables and weights: once, outside fit's tf.function
                for column in self._columns:
                    self._create(column)
            super().build(input_shape)

        def _create(self, column):
            if isinstance(column, (fc.shared_v1, fc.shared_v2)):
                self._shared_weights(column)
            else:
                column.create_state(self._state)

        def checkpoint_names(self) -> list[tuple[Any, str]]:
            """Each Keras weight this layer owns and the name the Estimator's checkpoint gives
            it (``<scope>/<column>/<variable>``)."""
            if not self.built:
                self.build(None)
            return list(self._state.names)

        def _shared_weights(self, column):
            """The shared embedding's weights, one Keras weight per collection (hookbridge's
            own: TensorFlow's creator makes a ``get_variable`` per graph, outside Keras);
            named as the module docstring says."""
            if isinstance(column, fc.shared_v1):
                key = column.shared_embedding_collection_name
                dimension, initializer = column.dimension, column.initializer
                buckets = column.categorical_column.num_buckets
                trainable, path = column.trainable, f"{self._scope}/{key}/embedding_weights"
            else:
                creator = column.shared_embedding_column_creator
                key, dimension = creator._name, creator._dimension
                initializer, buckets = creator._initializer, creator._num_buckets
                # a V2 Estimator never trains it; a V1 one does
                trainable = creator._trainable and self._v1
                path = f"{self._scope.rsplit('/', 1)[0]}/{key}" if self._v1 else key
            if key not in self._shared:
                weight = self.add_weight(
                    name=f"{key}.embedding_weights",
                    shape=(int(buckets), int(dimension)),
                    dtype="float32",
                    initializer=initializer,
                    trainable=bool(trainable) and self.trainable,
                )
                self._shared[key] = weight
                self._state.names.append((weight, path))
            return _tfcompat.keras_weight_variable(self._shared[key])

        def _dense(self, column, cache, training):
            if isinstance(column, (fc.shared_v1, fc.shared_v2)):
                return self._shared_lookup(column, cache)
            try:
                return column.get_dense_tensor(cache, self._state, training=training)
            except TypeError:
                return column.get_dense_tensor(cache, self._state)

        def _shared_lookup(self, column, cache):
            """``SharedEmbeddingColumn._get_dense_tensor_internal`` with the Keras weight."""
            with tf.name_scope(column.name):
                ids = column.categorical_column.get_sparse_tensors(cache, self._state)
                lookup = fc.lookup_sparse
                rank = ids.id_tensor.dense_shape.get_shape()[0]
                if not column.use_safe_embedding_lookup and rank is not None and rank <= 2:
                    lookup = fc.lookup_sparse_unsafe
                return lookup(
                    self._shared_weights(column),
                    ids.id_tensor,
                    ids.weight_tensor,
                    combiner=column.combiner,
                    name=f"{column.name}_weights",
                    max_norm=column.max_norm,
                )

        def compute_output_shape(self, input_shape):
            return (None, self._width())

    class InputLayer(_ColumnsLayer):
        """A canned DNN's ``input_layer`` (``DenseFeatures``) over feature columns."""

        def _width(self):
            return sum(_dense_width(fc, c) for c in self._columns)

        def call(self, features, training=None):
            cache = fc.cache(_features(features))
            outputs = []
            for column in self._columns:
                with tf.name_scope(fc.scope_name(column.name)):
                    tensor = self._dense(column, cache, training)
                    width = _dense_width(fc, column)
                    outputs.append(tf.reshape(tensor, (tf.shape(tensor)[0], width)))
            fc.verify_batch(outputs, self._columns)
            return tf.concat(outputs, -1)

    class LinearModel(_ColumnsLayer):
        """A canned linear model's ``linear_model`` over feature columns."""

        def __init__(self, feature_columns, *, units, sparse_combiner, scope, name, **kwargs):
            share_with = kwargs.get("share_with")
            if share_with is not None and not share_with.built:
                share_with.build(None)  # the DNN part first, as the Estimator's graph
            super().__init__(feature_columns, scope=scope, name=name, **kwargs)
            self._units, self._combiner = int(units), sparse_combiner

        def _width(self):
            return self._units

        def _create(self, column):
            super()._create(column)
            if isinstance(column, fc.shared_v1):  # fc's _LinearModel: a scope per collection
                taken = sum(
                    1
                    for c in self._state.scopes
                    if isinstance(c, fc.shared_v1)
                    and c.shared_embedding_collection_name
                    == column.shared_embedding_collection_name
                )
                key = column.shared_embedding_collection_name
                self._state.scopes[column] = f"{key}_{taken}" if taken else key
            if isinstance(column, fc.categorical):
                rows = column.num_buckets
            else:
                rows = _dense_width(fc, column)
            self._state.create_variable(column, "weights", (rows, self._units), initializer="zeros")

        def build(self, input_shape=None):
            if self.built:
                return
            super().build(input_shape)
            with tf.init_scope():
                self.bias = self.add_weight(
                    name="bias_weights",
                    shape=(self._units,),
                    dtype="float32",
                    initializer="zeros",
                    trainable=self.trainable,
                )
            self._state.names.append((self.bias, f"{self._scope}/bias_weights"))

        def call(self, features):
            cache = fc.cache(_features(features))
            sums = []
            for column in self._columns:
                with tf.name_scope(fc.scope_name(column.name)):
                    weights = self._state.get_variable(column, "weights")
                    if isinstance(column, (fc.shared_v1, fc.shared_v2)):
                        # fc's dense weighted sum, with the shared embedding as its dense tensor
                        tensor = self._shared_lookup(column, cache)
                        tensor = tf.reshape(tensor, (tf.shape(tensor)[0], _dense_width(fc, column)))
                        sums.append(tf.matmul(tensor, weights, name="weighted_sum"))
                        continue
                    sums.append(
                        fc.weighted_sum(column, cache, self._state, self._combiner, weights)
                    )
            fc.verify_batch(sums, self._columns)
            no_bias = tf.math.add_n(sums, name="weighted_sum_no_bias")
            bias = _tfcompat.keras_weight_variable(self.bias)
            return tf.nn.bias_add(no_bias, bias, name="weighted_sum")

    return InputLayer, LinearModel


def _dense_width(fc: Any, column: Any) -> int:
    if isinstance(column, fc.shared_v1):
        return int(column.dimension)
    return int(column.variable_shape.num_elements())
