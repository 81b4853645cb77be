"""``keras_twin``: the Keras model a canned Estimator trains, on every stack.

Two forms, one code path: ``keras_twin(estimator)`` (TF 2.15, tensorflow-estimator) reads the
Estimator's constructor arguments (``twins/arguments.py``) and calls the named form,
``keras_twin("DNNLinearCombinedClassifier", linear_feature_columns=..., ...)``, which needs
only ``tf.feature_column`` (TF 2.15 and TF 2.21 with Keras 3 or tf_keras). What the twin is:

* a Keras model taking the dict of features the Estimator's ``input_fn`` gives (read by name;
  extra keys ignored) and returning the logits (``predictions["logits"]``; a regressor's
  ``predictions``), ``twins/model.py``;
* DNN: ``input_layer`` of the DNN columns (``twins/columns.py``), per hidden layer ``activation(bias_add(matmul))``
  (TF 1 ``dense``, ``twins/layers.py``), ``Dropout`` after each when ``dropout`` is given, a
  logits layer; linear: ``linear_model`` of the linear columns (zeros); both: their sum;
* the head's loss and reduction (``twins/heads.py``), the Estimator's optimizers
  (``twins/optimizers.py``): ``DNNLinearCombined*`` trains its linear part with
  ``model.extra_optimizers[0]``;
* every weight declared under the Estimator's checkpoint name (``set_tf1_names``), which
  ``restore_checkpoint(twin, model_dir, "auto")`` uses first and ``estimator_hooks(model_dir,
  model=twin)`` writes back.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any

from hookbridge._migrate.twins import arguments as _arguments
from hookbridge._migrate.twins import heads as _heads

#: The DNN part's checkpoint scope (V1 and V2 alike, measured on TF 2.15).
DNN_SCOPE = "dnn"


def keras_twin(estimator: Any, /, **kwargs: Any) -> Any:
    """Builds and compiles the Keras model a canned Estimator trains.

    ``restore_checkpoint(twin, model_dir, "auto")`` then loads the Estimator's weights (by the
    names the twin declares), global step and optimizer state into it, and
    ``estimator_hooks(model_dir, model=twin)`` writes checkpoints the Estimator continues from
    (``tests/test_canned.py``, ``tests/test_twin_build.py``).

    Args:
        estimator: a canned Estimator object (TF 2.15: ``tf.estimator.DNNClassifier(...)``,
            ``tf.compat.v1.estimator.LinearRegressor(...)``, ...), or the canned class's name
            (``"DNNLinearCombinedClassifier"``: the ``tf.compat.v1.estimator`` class;
            ``"DNNLinearCombinedClassifierV2"``: the ``tf.estimator`` one) on any stack.
        **kwargs: with a name, the class's constructor arguments (``feature_columns``,
            ``hidden_units``, ``n_classes``, ``optimizer``, ``linear_feature_columns``, ...;
            ``model_dir`` and ``config`` are accepted and change nothing). An optimizer is a
            name, a dict ``{"name": "Ftrl", "learning_rate": 0.1, ...}`` or an instance.

    Returns:
        A compiled Keras model taking a dict of features and returning the logits.

    Raises:
        ValueError: another kind of Estimator (``BoostedTrees*``, a custom ``model_fn``), an
            argument the class does not take, or what the twin cannot build (named, every one).

    Example:
        >>> est = tf.estimator.DNNClassifier([16], columns, model_dir=model_dir)
        >>> twin = hookbridge.keras_twin(est)          # TF 2.15
        >>> twin = hookbridge.keras_twin("DNNClassifierV2", hidden_units=[16],
        ...                              feature_columns=columns)   # TF 2.21, Keras 3
        >>> step = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    """
    if isinstance(estimator, str):
        return build(estimator, kwargs)
    if kwargs:
        raise TypeError(
            "keras_twin(estimator) takes no other argument: the Estimator's own are read; "
            "give the class name for keyword arguments: keras_twin('DNNClassifier', ...)."
        )
    kind, args = _arguments.from_estimator(estimator)
    return build(kind, args)


def build(kind: str, given: dict[str, Any]) -> Any:
    """The twin of ``kind(**given)`` (see :func:`keras_twin`), float32 whatever the global
    Keras dtype policy: the Estimator computes in float32 (``docs/limits.md``)."""
    import tensorflow as tf

    mixed = tf.keras.mixed_precision
    policy = mixed.global_policy()
    name = getattr(policy, "name", str(policy))
    if name == "float32":
        return _build(kind, given)
    warnings.warn(
        f"keras_twin: the global Keras dtype policy {name!r} is not applied to the {kind} "
        "twin: its layers compute in float32, as the Estimator does (another dtype would "
        "not continue it).",
        stacklevel=3,
    )
    mixed.set_global_policy("float32")
    try:
        return _build(kind, given)
    finally:
        mixed.set_global_policy(policy)


def _build(kind: str, given: dict[str, Any]) -> Any:
    import tensorflow as tf

    from hookbridge import _tfcompat
    from hookbridge._hook_callback.graph import set_tf1_names
    from hookbridge._migrate.twins import columns, guards, layers, model, optimizers

    base, family, v2 = _arguments.split_name(kind)
    args = _arguments.check(kind, given)
    keras = tf.keras
    combined = family == "DNNLinearCombined"
    if combined:
        dnn_columns, linear_columns = args["dnn_feature_columns"], args["linear_feature_columns"]
        hidden, activation, dropout = (
            args["dnn_hidden_units"],
            args["dnn_activation_fn"],
            args["dnn_dropout"],
        )
        combiner = args["linear_sparse_combiner"]
    else:
        dnn_columns = args["feature_columns"] if family == "DNN" else None
        linear_columns = args["feature_columns"] if family == "Linear" else None
        hidden, activation, dropout = (
            args.get("hidden_units"),
            args.get("activation_fn"),
            args.get("dropout"),
        )
        combiner = args.get("sparse_combiner", "sum")
    dnn_columns, linear_columns = list(dnn_columns or []), list(linear_columns or [])
    _check_columns(kind, dnn_columns, linear_columns)
    units = _heads.logits_dimension(base, args)
    loss = _heads.loss(keras, base, args)
    dnn_features = linear = logits = None
    hidden_layers = []
    if dnn_columns:
        dnn_features = columns.input_layer(dnn_columns, v1=not v2)
        dnn_features.build(None)
        width = int(dnn_features.compute_output_shape(None)[-1])
        activation = tf.nn.relu if activation == "relu" else activation
        dense = layers.dense_class(keras)
        for k, n in enumerate(hidden):
            scope = f"{DNN_SCOPE}/hiddenlayer_{k}"
            hidden_layers.append(dense(int(n), width, activation, scope, name=f"hiddenlayer_{k}"))
            width = int(n)
        logits = dense(units, width, None, f"{DNN_SCOPE}/logits", name="logits")
    if linear_columns:
        linear = columns.linear_model(
            linear_columns,
            units=units,
            sparse_combiner=combiner,
            v1=not v2,
            share_with=dnn_features,  # shared embeddings: one weight, as in the Estimator
        )
        linear.build(None)
    twin = model.twin_class(keras)(
        dnn_features=dnn_features,
        hidden=hidden_layers,
        dropout=dropout,
        logits=logits,
        linear=linear,
        name=kind,
    )
    twin.built = True  # every weight made above: the column layers build without features

    def optimizer(part: str) -> Any:
        spec = args[f"{part}_optimizer"] if combined else args["optimizer"]
        lr = optimizers.canned_default_lr(base, part, spec, v2, len(linear_columns))
        default = "Adagrad" if part == "dnn" else "Ftrl"
        return optimizers.estimator_optimizer(spec, v2=v2, default_name=default, default_lr=lr)

    main = optimizer("dnn" if dnn_columns else "linear")
    twin.compile(optimizer=main, loss=loss)
    if dnn_columns and linear_columns:  # each optimizer built on the part it trains
        twin.extra_optimizers = [optimizer("linear")]
        dnn, lin = twin.parts()
        _tfcompat.build_keras_optimizer(main, dnn)
        _tfcompat.build_keras_optimizer(twin.extra_optimizers[0], lin)
    set_tf1_names(twin, declared_names(twin))
    guards.remember(twin, kind)
    return twin


def declared_names(twin: Any) -> dict[int, str]:
    """``{index in twin.weights: the Estimator's checkpoint name}`` of every weight."""
    index = {id(w): i for i, w in enumerate(twin.weights)}
    names = {}
    for weight, name in twin.checkpoint_names():
        names[index[id(weight)]] = name
    return names


def _check_columns(kind: str, dnn_columns: Sequence[Any], linear_columns: Sequence[Any]) -> None:
    """Raises naming every column the twin does not build (all of them at once)."""
    from hookbridge._migrate.twins import columns

    refused = [
        *(f"{r} (dnn)" for r in columns.unsupported(dnn_columns, dense_only=True)),
        *(f"{r} (linear)" for r in columns.unsupported(linear_columns)),
    ]
    for part, cols in (("dnn", dnn_columns), ("linear", linear_columns)):
        scopes: dict[str, list[str]] = {}
        for column in cols:
            name = getattr(column, "name", None)
            if isinstance(name, str):
                scopes.setdefault(re.sub(r"[^A-Za-z0-9_.\-]", "_", name), []).append(name)
        refused += [
            f"{' and '.join(repr(n) for n in names)} ({part}) share the checkpoint scope "
            f"{scope!r}, as the Estimator refuses (rename one)"
            for scope, names in scopes.items()
            if len(names) > 1
        ]
    if refused:
        raise ValueError(
            f"keras_twin: {kind} has feature columns the twin does not build: "
            + "; ".join(refused)
            + ". Build the Keras model by hand and map it with restore_checkpoint(model, "
            "model_dir, 'auto')."
        )
