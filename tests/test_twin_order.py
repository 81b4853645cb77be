"""No order trap (issue 33 item 4): a hand-built model mapped with ``"auto"`` whose linear
kernel's rows would hold the Estimator's per-column weights in another order than the model
concatenates its columns is refused, never restored silently.

The census shape, in this project's words: a wide part over vocabulary-list columns, a
bucketized age and a crossing, each a branch of Keras preprocessing layers over inputs named
after the features, concatenated into one ``Dense``. The Estimator stacks its columns' weights
sorted by column name (``age_bucketized``, ``education``, ``education_X_occupation``,
``marital_status``, ``relationship``); a model concatenating them as census lists them
(``education, marital_status, relationship, age, cross``) computes other logits with the same
weights. On TF 2.15 the Estimator itself is the oracle (the model in its order predicts its
logits; in the listed order it is refused); on every stack the refusal is checked on a
checkpoint holding the Estimator's names (as ``LinearClassifier`` writes them).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

keras = tf.keras
VOCABULARY = {
    "education": ["Bachelors", "HS-grad", "Masters", "Doctorate", "Some-college"],
    "marital_status": ["Married", "Divorced", "Never-married"],
    "relationship": ["Husband", "Wife", "Own-child", "Unmarried"],
}
AGE_BOUNDARIES = [30.0, 50.0]
CROSS_BUCKETS = 7
LISTED = ["education", "marital_status", "relationship", "age", "cross"]
ESTIMATOR_ORDER = ["age", "education", "cross", "marital_status", "relationship"]
SCOPE = {"age": "age_bucketized", "cross": "education_X_occupation"}


def data(rows=32):
    rng = np.random.default_rng(7)
    out = {k: rng.choice(v, size=(rows, 1)) for k, v in VOCABULARY.items()}
    out["occupation"] = rng.choice(["Sales", "Tech", "Craft"], size=(rows, 1))
    out["age"] = rng.uniform(18, 70, size=(rows, 1)).astype("float32")
    return out


def _concat(parts, join):
    """``parts`` joined on the last axis the way ``join`` names: one ``Concatenate``
    (``flat``), nested ones, the functional op (Keras 3's ``keras.ops.concatenate``, tf_keras's
    ``tf.concat``), or an opaque ``Lambda``."""
    if join == "flat":
        return keras.layers.Concatenate(name="wide")(parts)
    if join == "nested":
        inner = [keras.layers.Concatenate()(parts[:3]), keras.layers.Concatenate()(parts[3:])]
        return keras.layers.Concatenate(name="wide")(inner)
    op = keras.ops.concatenate if hasattr(keras, "ops") else tf.concat
    if join == "op":
        return op(parts, axis=-1)
    return keras.layers.Lambda(lambda t: op(t, axis=-1), name="opaque")(parts)


def hand_built(order, cross=True, join="flat"):
    """The wide part by hand: one branch per column, concatenated in ``order``."""
    inputs = {k: keras.Input((1,), name=k, dtype="string") for k in [*VOCABULARY, "occupation"]}
    inputs["age"] = keras.Input((1,), name="age")
    branch = {
        k: keras.layers.StringLookup(vocabulary=v, num_oov_indices=0, output_mode="one_hot")(
            inputs[k]
        )
        for k, v in VOCABULARY.items()
    }
    bucket = keras.layers.Discretization(bin_boundaries=AGE_BOUNDARIES)(inputs["age"])
    branch["age"] = keras.layers.CategoryEncoding(len(AGE_BOUNDARIES) + 1, output_mode="one_hot")(
        bucket
    )
    if cross:
        branch["cross"] = keras.layers.HashedCrossing(CROSS_BUCKETS, output_mode="one_hot")(
            (inputs["education"], inputs["occupation"])
        )
    wide = _concat([branch[k] for k in order if k in branch], join)
    logits = keras.layers.Dense(1, name="linear")(wide)
    return keras.Model(inputs, logits)


def rows(column):
    return {"age": len(AGE_BOUNDARIES) + 1, "cross": CROSS_BUCKETS}.get(
        column, len(VOCABULARY.get(column, []))
    )


def write_checkpoint(path, columns):
    """A checkpoint of the Estimator's linear model names (seeded values) and global step."""
    rng = np.random.default_rng(3)
    with tf.Graph().as_default():
        variables = [
            tf.compat.v1.Variable(
                rng.normal(size=(rows(c), 1)).astype("float32"),
                name=f"linear/linear_model/{SCOPE.get(c, c)}/weights",
            )
            for c in columns
        ]
        variables.append(
            tf.compat.v1.Variable(np.float32([0.25]), name="linear/linear_model/bias_weights")
        )
        variables.append(tf.compat.v1.Variable(np.int64(5), name="global_step"))
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver(variables).save(session, f"{path}/model.ckpt", global_step=5)


def test_the_census_trap_is_refused_naming_both_orders(tmp_path):
    write_checkpoint(tmp_path, ESTIMATOR_ORDER)
    with pytest.raises(
        ValueError,
        match=(
            r"'wide' concatenates the features in the order \['education', "
            r"'marital_status', 'relationship', 'age_bucketized', 'education_X_occupation'\].*"
            r"order \['age_bucketized', 'education', 'education_X_occupation', "
            r"'marital_status', 'relationship'\]"
        ),
    ):
        hookbridge.restore_checkpoint(hand_built(LISTED), tmp_path, "auto")


def test_the_estimators_order_restores(tmp_path):
    write_checkpoint(tmp_path, ESTIMATOR_ORDER)
    model = hand_built(ESTIMATOR_ORDER)
    assert hookbridge.restore_checkpoint(model, tmp_path, "auto") == 5
    reader = tf.train.load_checkpoint(str(tmp_path))
    stacked = np.concatenate(
        [
            reader.get_tensor(f"linear/linear_model/{SCOPE.get(c, c)}/weights")
            for c in ESTIMATOR_ORDER
        ]
    )
    np.testing.assert_array_equal(model.get_layer("linear").kernel.numpy(), stacked)


def _stacked(path, order):
    reader = tf.train.load_checkpoint(str(path))
    return np.concatenate(
        [reader.get_tensor(f"linear/linear_model/{SCOPE.get(c, c)}/weights") for c in order]
    )


@pytest.mark.parametrize("join", ["nested", "op"])
def test_nested_and_functional_op_concatenations_are_read_through(tmp_path, join):
    """The reviewer's variants: the listed order behind nested ``Concatenate`` layers or the
    functional concatenate op is refused naming both orders; the Estimator's order restores
    exactly."""
    write_checkpoint(tmp_path, ESTIMATOR_ORDER)
    with pytest.raises(
        ValueError,
        match=(
            r"concatenates the features in the order \['education', 'marital_status', "
            r"'relationship', 'age_bucketized', 'education_X_occupation'\]"
        ),
    ):
        hookbridge.restore_checkpoint(hand_built(LISTED, join=join), tmp_path, "auto")
    model = hand_built(ESTIMATOR_ORDER, join=join)
    assert hookbridge.restore_checkpoint(model, tmp_path, "auto") == 5
    np.testing.assert_array_equal(
        model.get_layer("linear").kernel.numpy(), _stacked(tmp_path, ESTIMATOR_ORDER)
    )


@pytest.mark.parametrize("order", [LISTED, ESTIMATOR_ORDER], ids=["listed", "estimator"])
def test_an_order_the_graph_does_not_prove_is_refused_with_the_map_that_restores(
    tmp_path, order
):
    """An opaque ``Lambda`` hides the order, even the right one: ``"auto"`` refuses, listing
    the columns and the tuple map; that map, in the model's order, restores."""
    write_checkpoint(tmp_path, ESTIMATOR_ORDER)
    model = hand_built(order, join="lambda")
    with pytest.raises(
        ValueError,
        match=(
            r"(?s)would stack the Estimator's weights of the columns \['age_bucketized', "
            r"'education', 'education_X_occupation', 'marital_status', 'relationship'\] into "
            r"Keras weight linear/kernel.*does not prove.*Lambda 'opaque'.*"
            r"assignment_map=\{\('linear/linear_model/age_bucketized/weights', .*"
            r"'linear/linear_model/relationship/weights',\): 'linear/kernel', '\*': 'auto'\}"
        ),
    ):
        hookbridge.restore_checkpoint(model, tmp_path, "auto")
    names = tuple(f"linear/linear_model/{SCOPE.get(c, c)}/weights" for c in order)
    assert hookbridge.restore_checkpoint(model, tmp_path, {names: "linear/kernel", "*": "auto"})
    np.testing.assert_array_equal(
        model.get_layer("linear").kernel.numpy(), _stacked(tmp_path, order)
    )


def test_an_explicit_stacking_in_the_models_order_is_taken(tmp_path):
    """A tuple entry stacks the weights in the order the user gives: no refusal."""
    write_checkpoint(tmp_path, ESTIMATOR_ORDER)
    model = hand_built(LISTED)
    names = tuple(f"linear/linear_model/{SCOPE.get(c, c)}/weights" for c in LISTED)
    hookbridge.restore_checkpoint(
        model, tmp_path, {names: "linear/kernel", "linear/linear_model/bias_weights": "linear/bias"}
    )


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_estimator") is None,
    reason="TF 2.15 stack only: the Estimator is the oracle",
)
@pytest.mark.filterwarnings("ignore:restore_checkpoint.*optimizer state")
def test_against_the_estimator_its_order_is_exact_and_the_listed_one_refused(tmp_path):
    fc = tf.feature_column
    columns = [fc.categorical_column_with_vocabulary_list(k, v) for k, v in VOCABULARY.items()]
    columns.append(fc.bucketized_column(fc.numeric_column("age"), AGE_BOUNDARIES))
    features = data()
    labels = (features["age"] > 40).astype("int64")
    est = tf.compat.v1.estimator.LinearClassifier(
        columns,
        model_dir=str(tmp_path),
        config=(tf.estimator.RunConfig(tf_random_seed=0, save_summary_steps=1000)),
    )
    est.train(
        lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(8).repeat(),
        max_steps=12,
    )
    native = np.stack(
        [
            p["logits"]
            for p in est.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(8))
        ]
    )
    model = hand_built(ESTIMATOR_ORDER, cross=False)
    hookbridge.restore_checkpoint(model, tmp_path, "auto")
    np.testing.assert_allclose(model.predict(features, verbose=0), native, rtol=1e-5, atol=1e-6)
    listed = hand_built(LISTED, cross=False)
    with pytest.raises(ValueError, match=r"concatenates the features in the order"):
        hookbridge.restore_checkpoint(listed, tmp_path, "auto")
    # What the refusal prevents: the same weights in the listed order predict otherwise.
    reader = tf.train.load_checkpoint(str(tmp_path))
    listed.get_layer("linear").set_weights(
        [
            np.concatenate(
                [
                    reader.get_tensor(f"linear/linear_model/{SCOPE.get(c, c)}/weights")
                    for c in ESTIMATOR_ORDER
                    if c != "cross"
                ]
            ),
            reader.get_tensor("linear/linear_model/bias_weights"),
        ]
    )
    assert np.abs(listed.predict(features, verbose=0) - native).max() > 0.05
