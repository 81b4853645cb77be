"""``keras_twin``: the Keras model a canned Estimator trains, built from the Estimator itself.

What a canned ``DNNClassifier``/``DNNRegressor``/``LinearClassifier``/``LinearRegressor``
(tensorflow-estimator 2.15, V1 ``tf.compat.v1.estimator.*`` and V2 ``tf.estimator.*``) computes,
read from its constructor arguments:

* the input: its numeric feature columns concatenated **sorted by column name** (``input_layer``
  and ``linear_model`` sort them): one named ``keras.Input`` per column, in that order;
* DNN: ``Dense(units, activation)`` per hidden layer, ``Dropout(dropout)`` after each, a
  ``Dense(logits_dimension)`` for the logits; linear: one ``Dense(logits_dimension)`` (zeros);
* the head: sigmoid / softmax cross-entropy on the logits, or squared error, reduced as the head
  reduces (V1 default ``SUM`` over the batch, V2 ``SUM_OVER_BATCH_SIZE``);
* the optimizer as the Estimator makes it: V2 canned use ``tf.keras.optimizers.legacy``
  (DNN ``'Adagrad'``: ``Adagrad()``, lr 0.001; linear ``'Ftrl'``: lr 0.2, or
  ``min(0.2, 1/sqrt(n_columns))`` when none is given); V1 the ``tf.compat.v1.train`` optimizer
  of that name with lr 0.05 (DNN) / 0.2 (linear), as the Keras optimizer computing its update.

The model's output is the logits (the Estimator's ``predictions["logits"]``). A
``DNNLinearCombined*`` twin trains its ``linear_model`` layer with ``model.extra_optimizers[0]``
(the Estimator's linear optimizer) and the rest with ``model.optimizer``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

_SUPPORTED = (
    "DNNClassifier",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
)
_DNN_V1_LR, _LINEAR_LR = 0.05, 0.2
_COMBINED_DNN_LR, _COMBINED_LINEAR_LR = 0.001, 0.005


def keras_twin(estimator: Any) -> Any:
    """Builds and compiles the Keras model a canned Estimator trains.

    ``restore_checkpoint(twin, estimator.model_dir, "auto")`` then loads the Estimator's weights,
    global step and optimizer state into it, and ``estimator_hooks(model_dir, model=twin)``
    writes checkpoints the Estimator continues from: the switch and the way back are exact
    (``tests/test_canned.py``).

    Args:
        estimator: a canned ``DNNClassifier``, ``DNNRegressor``, ``LinearClassifier``,
            ``LinearRegressor`` or ``DNNLinearCombined*`` (``tf.estimator`` or
            ``tf.compat.v1.estimator``) with numeric feature columns.

    Returns:
        A compiled ``tf.keras.Model`` taking a dict of features (named inputs, one per column,
        in the Estimator's order) and returning the logits.

    Raises:
        ValueError: the Estimator is of another kind (``BoostedTrees*``, a custom
            ``model_fn``), or uses what the twin cannot build (categorical or
            embedding columns, a ``normalizer_fn``, ``batch_norm``, ``weight_column``,
            ``label_vocabulary``, an optimizer callable, a TF1 optimizer it does not map, a
            setting that is a tensor of the Estimator's graph): the message names it.

    Example:
        >>> est = tf.estimator.DNNClassifier([16], columns, model_dir=model_dir)
        >>> twin = hookbridge.keras_twin(est)
        >>> step = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    """
    import tensorflow as tf

    from hookbridge import _tfcompat

    kind = type(estimator).__name__
    v2 = kind.endswith("V2")
    base = kind[:-2] if v2 else kind
    if base not in _SUPPORTED:
        raise ValueError(
            f"keras_twin: {kind} is not supported; it builds the Keras model of "
            f"{', '.join(_SUPPORTED)} (tf.estimator and tf.compat.v1.estimator). "
            + (
                "BoostedTrees models are trees, not Keras layers: there is no Keras twin to "
                "continue them in."
                if "BoostedTrees" in kind
                else "For a custom model_fn, write the Keras model and map it with "
                "restore_checkpoint(model, model_dir, 'auto')."
            )
        )
    args = _tfcompat.canned_estimator_arguments(estimator)
    combined = base.startswith("DNNLinearCombined")
    if combined:  # the same arguments, named dnn_* / linear_*
        args = {
            **args,
            "hidden_units": args["dnn_hidden_units"],
            "activation_fn": args.get("dnn_activation_fn"),
            "dropout": args.get("dnn_dropout"),
        }
    dnn_columns = args["dnn_feature_columns"] if combined else args["feature_columns"]
    linear_columns = args["linear_feature_columns"] if combined else args["feature_columns"]
    head = _tfcompat.canned_head_settings(args["head"])
    _check(args, head, kind)
    keras = tf.keras
    units = int(head["logits_dimension"])
    inputs: dict[str, Any] = {}
    parts = []
    if base.startswith("DNN"):
        x = _input_layer(keras, inputs, _numeric_columns(dnn_columns or [], kind), "dnn")
        for k, hidden in enumerate(args["hidden_units"]):
            x = keras.layers.Dense(
                int(hidden), activation=args.get("activation_fn"), name=f"hiddenlayer_{k}"
            )(x)
            if args.get("dropout"):
                x = keras.layers.Dropout(float(args["dropout"]), name=f"dropout_{k}")(x)
        parts.append(keras.layers.Dense(units, name="logits")(x))
    if base.startswith("Linear") or combined:
        linear = _numeric_columns(linear_columns or [], kind)
        x = _input_layer(keras, inputs, linear, "linear")
        parts.append(keras.layers.Dense(units, kernel_initializer="zeros", name="linear_model")(x))
    logits = parts[0] if len(parts) == 1 else keras.layers.Add(name="add_logits")(parts)
    ordered = {key: inputs[key] for key in sorted(inputs)}
    if not combined:
        model = keras.Model(ordered, logits, name=kind)
        optimizer = _optimizer(args.get("optimizer"), v2, base, len(linear_columns or []))
    else:
        model = _two_optimizer_model(keras)(ordered, logits, name=kind)
        optimizer = _optimizer(args.get("dnn_optimizer"), v2, "DNNCombined", 0)
        model.extra_optimizers = [
            _optimizer(args.get("linear_optimizer"), v2, "LinearCombined", len(linear_columns))
        ]
    model.compile(optimizer=optimizer, loss=_loss(keras, base, head))
    if combined:  # each optimizer built on the part it trains: its state goes there
        dnn, linear = _parts(model.trainable_variables)
        _tfcompat.build_keras_optimizer(optimizer, dnn)
        _tfcompat.build_keras_optimizer(model.extra_optimizers[0], linear)
    return model


def _input_layer(keras: Any, inputs: dict[str, Any], columns: list[tuple[str, int]], part: str):
    """The columns' inputs (shared between the parts) concatenated in the Estimator's order."""
    for key, width in columns:
        if key not in inputs:
            inputs[key] = keras.Input((width,), name=key)
    x = [inputs[key] for key, _ in columns]
    return keras.layers.Concatenate(name=f"{part}_input_layer")(x) if len(x) > 1 else x[0]


def _two_optimizer_model(keras: Any) -> Any:
    """A Keras model whose ``train_step`` updates the ``linear_model`` layer with
    ``extra_optimizers[0]`` and the rest with ``optimizer``, as ``DNNLinearCombined*`` does."""
    import tensorflow as tf

    class TwoOptimizerModel(keras.Model):
        extra_optimizers: ClassVar[list[Any]] = []

        def train_step(self, data):
            x, y = data[0], data[1]
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x, y, y_pred)
            dnn, linear = _parts(self.trainable_variables)
            grads = tape.gradient(loss, dnn + linear)
            self.optimizer.apply_gradients(zip(grads[: len(dnn)], dnn))
            self.extra_optimizers[0].apply_gradients(zip(grads[len(dnn) :], linear))
            return self.compute_metrics(x, y, y_pred, None)

    return TwoOptimizerModel


def _parts(variables: Any) -> tuple[list[Any], list[Any]]:
    """(DNN part, linear part) of a ``DNNLinearCombined*`` twin's trainable variables."""
    linear = [v for v in variables if "linear_model" in v.name]
    return [v for v in variables if "linear_model" not in v.name], linear


def _numeric_columns(feature_columns: Any, kind: str) -> list[tuple[str, int]]:
    """``(key, width)`` of each column, in the Estimator's order (``linear.estimator_order``)."""
    from hookbridge._migrate import linear

    by_name = {c.name: c for c in feature_columns}
    out = []
    for column in (by_name[name] for name in linear.estimator_order(by_name)):
        name = type(column).__name__
        shape = tuple(getattr(column, "shape", ()) or ())
        if name != "NumericColumn":
            raise ValueError(
                f"keras_twin: {kind} has the feature column {column.name!r} of type {name}; the "
                "twin builds numeric columns only (tf.feature_column.numeric_column). Build the "
                "Keras model by hand (a keras.layers preprocessing layer per column) and map it "
                "with restore_checkpoint(model, model_dir, 'auto')."
            )
        if getattr(column, "normalizer_fn", None) is not None or len(shape) != 1:
            raise ValueError(
                f"keras_twin: the numeric column {column.name!r} of {kind} has a normalizer_fn "
                "or a shape of more than one dimension, which the twin does not build."
            )
        out.append((column.key, int(shape[0])))
    return out


def _check(args: dict[str, Any], head: dict[str, Any], kind: str) -> None:
    for what in ("weight_column", "label_vocabulary"):
        if head.get(what) is not None:
            raise ValueError(f"keras_twin: {kind} has {what}={head[what]!r}, not supported.")
    if args.get("batch_norm"):
        raise ValueError(f"keras_twin: {kind} has batch_norm=True, not supported.")


def _reduction(head: dict[str, Any]) -> str:
    reduction = str(head.get("loss_reduction") or "sum_over_batch_size")
    if reduction in ("weighted_sum", "sum"):
        return "sum"
    return "sum_over_batch_size"  # V2 default; V1 SUM_BY_NONZERO_WEIGHTS/MEAN without weights


def _loss(keras: Any, base: str, head: dict[str, Any]) -> Any:
    reduction = _reduction(head)
    if base.endswith("Regressor"):
        if reduction == "sum" and int(head["logits_dimension"]) > 1:
            raise ValueError(
                "keras_twin: a regressor with label_dimension > 1 and a SUM reduction sums "
                "every label; Keras's MeanSquaredError averages them first. Not supported."
            )
        return keras.losses.MeanSquaredError(reduction=reduction)
    if int(head.get("n_classes") or 2) > 2:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)
    return keras.losses.BinaryCrossentropy(from_logits=True, reduction=reduction)


def _optimizer(optimizer: Any, v2: bool, base: str, n_columns: int) -> Any:
    """The optimizer the Estimator builds, as a Keras optimizer computing the same update."""
    import tensorflow as tf

    from hookbridge import _tfcompat

    keras = tf.keras
    linear = base.startswith("Linear")
    if base == "LinearCombined":  # dnn_linear_combined: its own defaults for both parts
        optimizer = optimizer or "Ftrl"
        lr = min(_COMBINED_LINEAR_LR, 1.0 / math.sqrt(n_columns))
    elif base == "DNNCombined":
        optimizer, lr = optimizer or "Adagrad", _COMBINED_DNN_LR
    elif optimizer is None and linear:
        optimizer, lr = "Ftrl", min(_LINEAR_LR, 1.0 / math.sqrt(n_columns))
    elif linear:
        lr = _LINEAR_LR
    else:
        lr = None if v2 else _DNN_V1_LR
    if v2:
        legacy = keras.optimizers.legacy
        if isinstance(optimizer, str):
            classes = {
                "Adagrad": legacy.Adagrad,
                "Adam": legacy.Adam,
                "Ftrl": legacy.Ftrl,
                "RMSProp": legacy.RMSprop,
                "SGD": legacy.SGD,
            }
            return classes[optimizer](learning_rate=lr) if lr else classes[optimizer]()
        if isinstance(optimizer, (legacy.Optimizer, keras.optimizers.Optimizer)):
            # The instance the Estimator trained with: its hyperparameters are variables of
            # the Estimator's graph by now, read as the values they were created with.
            config = _tfcompat.keras_optimizer_config(optimizer)
            if not isinstance(config, dict):
                raise ValueError(_unreadable(optimizer, config))
            return type(optimizer).from_config(config)
    else:
        if isinstance(optimizer, str) and optimizer in _TF1_OPTIMIZERS:
            optimizer = getattr(tf.compat.v1.train, _TF1_OPTIMIZERS[optimizer])(lr)
        if isinstance(optimizer, tf.compat.v1.train.Optimizer):
            return _from_tf1(keras, optimizer)
    raise ValueError(
        f"keras_twin: the Estimator's optimizer {optimizer!r} is not one the twin can copy "
        "(a name, a Keras optimizer for tf.estimator V2, a tf.compat.v1.train Adagrad, Adam, "
        "Ftrl, RMSProp or GradientDescent optimizer for V1); compile the twin yourself with the "
        "Keras optimizer computing its update (docs/limits.md)."
    )


#: The TF1 optimizer a V1 canned Estimator makes of a name (``optimizers.get_optimizer_instance``).
_TF1_OPTIMIZERS = {
    "Adagrad": "AdagradOptimizer",
    "Adam": "AdamOptimizer",
    "Ftrl": "FtrlOptimizer",
    "RMSProp": "RMSPropOptimizer",
    "SGD": "GradientDescentOptimizer",
}


def _from_tf1(keras: Any, optimizer: Any) -> Any:
    """The Keras optimizer computing a ``tf.compat.v1.train`` optimizer's update, with its
    settings (a V1 canned Estimator's, given by name or as an instance)."""
    from hookbridge import _tfcompat

    kind = type(optimizer).__name__
    settings = _tfcompat.tf1_optimizer_settings(optimizer)
    odd = {
        k: v for k, v in settings.items()
        if k not in ("name", "use_locking", "accum_name", "linear_name")
        and not isinstance(v, (bool, int, float, type(None)))
    }
    if odd:
        raise ValueError(_unreadable(optimizer, odd))
    s = settings
    legacy = keras.optimizers.legacy
    builders = {
        # Keras's Adagrad takes epsilon inside the root, 0 = TF1's.
        "AdagradOptimizer": lambda: keras.optimizers.Adagrad(
            s["learning_rate"], initial_accumulator_value=s["initial_accumulator_value"],
            epsilon=0.0),
        "AdamOptimizer": lambda: legacy.Adam(
            s["learning_rate"], beta_1=s["beta1"], beta_2=s["beta2"], epsilon=s["epsilon"]),
        "FtrlOptimizer": lambda: legacy.Ftrl(
            s["learning_rate"],
            learning_rate_power=s["learning_rate_power"],
            initial_accumulator_value=s["initial_accumulator_value"],
            l1_regularization_strength=s["l1_regularization_strength"],
            l2_regularization_strength=s["l2_regularization_strength"],
            l2_shrinkage_regularization_strength=s["l2_shrinkage_regularization_strength"],
            beta=s.get("beta") or 0.0),
        "RMSPropOptimizer": lambda: legacy.RMSprop(
            s["learning_rate"], rho=s["decay"], momentum=s["momentum"], epsilon=s["epsilon"],
            centered=s["centered"]),
        "GradientDescentOptimizer": lambda: legacy.SGD(s["learning_rate"]),
    }
    if kind not in builders:
        raise ValueError(
            f"keras_twin: the Estimator's optimizer {kind} is not one the twin can copy (TF1 "
            f"{', '.join(builders)}); compile the twin yourself with the Keras optimizer "
            "computing its update (docs/limits.md)."
        )
    return builders[kind]()


def _unreadable(optimizer: Any, what: Any) -> str:
    return (
        f"keras_twin: the Estimator's optimizer {type(optimizer).__name__} has settings that "
        f"are tensors of the Estimator's graph, not numbers it can read ({what}): a schedule "
        "or a tensor built in the model_fn's graph is gone with it. Build the twin's optimizer "
        "yourself (twin.compile(optimizer=..., loss=twin.loss)) with the values the Estimator "
        "used, or give the Estimator numbers (docs/limits.md)."
    )
