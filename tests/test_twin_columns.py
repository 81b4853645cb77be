"""The feature-column layers against TensorFlow's own feature-column code (every stack).

Oracle: ``tf.compat.v1.feature_column.input_layer`` / ``linear_model`` in a ``tf.Graph`` and a
``Session``, on the same features, with the layers' weight values copied into fc's variables by
name. The columns cover each kind and the edges: '' and -1 ids dropped, an empty row, multivalent
sparse and ragged inputs, weights <= 0 under mean/sqrtn, OOV buckets, default_value=-1, values on
bucket boundaries, names like "temp-max" and "a.b" (graph-mode fc refuses "temp max" as a scope name; the
Estimator test has it). On TF 2.15 the canned Estimators' own
checkpoint names (V1 and V2) are compared with ``checkpoint_names()``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf

from hookbridge._migrate.twins import columns as twin_columns

fc = tf.feature_column
B = 5  # rows; row 3 has no entry in any sparse feature


@functools.cache
def vocabulary_file(tmp_dir: str) -> str:
    path = f"{tmp_dir}/vocab.txt"
    with open(path, "w") as f:
        f.write("x\ny\nz\n")
    return path


def raw_features() -> dict:
    """numpy / tf values as an input_fn gives them (ragged ones included)."""
    price = np.array([[0.0], [10.0], [55.5], [100.0], [-3.0]], "float32")  # on the boundaries
    vec = np.arange(15, dtype="float32").reshape(B, 3) / 4.0
    city = np.array([["paris", ""], ["rome", "oslo"], ["", ""], ["", ""], ["lima", "paris"]])
    color = tf.sparse.SparseTensor(
        indices=[[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [4, 0]],
        values=["red", "red", "blue", "green", "mauve", "blue"],
        dense_shape=[B, 2],
    )
    words = tf.ragged.constant([["a", "b", "c"], ["b"], ["c", "d"], [], ["a", "a"]])
    weights = tf.ragged.constant([[1.0, -2.0, 0.5], [0.0], [2.0, 3.0], [], [-1.0, 1.5]])
    uid = np.array([[0, 3], [4, -1], [-1, -1], [-1, -1], [2, 2]], "int64")
    code = np.array([[7], [123], [7], [-1], [99]], "int64")
    ab = np.array([["x"], ["z"], ["w"], [""], ["y"]])
    return {
        "price": price,
        "vec": vec,
        "temp-max": np.linspace(-1, 1, B).astype("float32"),
        "city": city,
        "color": color,
        "words": words,
        "wt": weights,
        "wt2": weights * 0.5,
        "uid": uid,
        "code": code,
        "a.b": ab,
        "unused": np.zeros((B, 4), "float32"),
    }


def for_fc(features: dict) -> dict:
    """What graph-mode fc takes: numpy values, the ragged features as sparse ones (an input_fn
    gives sparse)."""
    out = {}
    for key, value in features.items():
        if isinstance(value, tf.RaggedTensor):
            value = value.to_sparse()
        if isinstance(value, tf.SparseTensor):
            value = tf.compat.v1.SparseTensorValue(
                value.indices.numpy(), value.values.numpy(), value.dense_shape.numpy()
            )
        out[key] = value
    return out


def make_columns(tmp_dir: str) -> dict:
    price = fc.numeric_column("price")
    vec = fc.numeric_column("vec", shape=(3,), default_value=0.0, normalizer_fn=lambda x: x * 2 - 1)
    temp = fc.numeric_column("temp-max")  # "temp max": graph-mode fc refuses it (scope name)
    city = fc.categorical_column_with_vocabulary_list(
        "city", ["paris", "rome", "lima"], num_oov_buckets=2
    )
    color = fc.categorical_column_with_vocabulary_list(
        "color", ["red", "blue", "green"], default_value=-1
    )
    words = fc.categorical_column_with_hash_bucket("words", 11)
    weighted = fc.weighted_categorical_column(words, "wt")
    uid = fc.categorical_column_with_identity("uid", 5)
    code = fc.categorical_column_with_hash_bucket("code", 13, dtype=tf.int64)
    ab = fc.categorical_column_with_vocabulary_file(
        "a.b", vocabulary_file(tmp_dir), num_oov_buckets=1
    )
    price_b = fc.bucketized_column(price, [0.0, 10.0, 100.0])
    vec_b = fc.bucketized_column(vec, [0.0, 2.0])
    cross = fc.crossed_column([price_b, "words", "code"], 17, hash_key=7)
    dense = [
        price,
        vec,
        temp,
        vec_b,
        fc.embedding_column(city, 3, combiner="mean", max_norm=0.9),
        fc.embedding_column(weighted, 2, combiner="sqrtn"),
        fc.embedding_column(cross, 2, combiner="sum"),
        fc.embedding_column(ab, 2, combiner="mean"),
        fc.embedding_column(
            fc.weighted_categorical_column(
                fc.categorical_column_with_hash_bucket("words", 5), "wt2"
            ),
            2,
            combiner="mean",
        ),
        fc.indicator_column(color),
        fc.indicator_column(uid),
        fc.indicator_column(weighted),
    ]
    linear = [
        price,
        vec,
        temp,
        price_b,
        vec_b,
        city,
        color,
        weighted,
        uid,
        code,
        ab,
        cross,
        fc.embedding_column(city, 2, combiner="sqrtn"),
    ]
    return {"dense": dense, "linear": linear}


def randomize(layer, seed: int) -> dict:
    """Random values in the layer's weights; {checkpoint name: value}."""
    rng = np.random.default_rng(seed)
    values = {}
    for weight, name in layer.checkpoint_names():
        value = rng.normal(size=tuple(weight.shape)).astype("float32")
        weight.assign(value)
        values[name] = value
    return values


def fc_graph(features, columns, values, kind: str, units: int = 1, combiner: str = "sum"):
    """TensorFlow's own fc in graph mode with ``values`` in its variables; its output."""
    tensors = for_fc(features)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        if kind == "dense":
            out = tf.compat.v1.feature_column.input_layer(tensors, columns)
        else:
            out = tf.compat.v1.feature_column.linear_model(
                tensors, columns, units=units, sparse_combiner=combiner
            )
        sess.run(tf.compat.v1.tables_initializer())
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        assert sorted(variables) == sorted(values), "checkpoint_names vs fc's variables"
        for name, value in values.items():
            variables[name].load(value, sess)
        return sess.run(out)


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("twin_columns"))


def test_input_layer_equals_fc(tmp_dir):
    columns = make_columns(tmp_dir)["dense"]
    layer = twin_columns.input_layer(columns, scope="input_layer")
    features = raw_features()
    layer(features)
    values = randomize(layer, 1)
    expected = fc_graph(features, columns, values, "dense")
    eager = np.asarray(layer(features))
    assert eager.shape == expected.shape == (B, layer.compute_output_shape(None)[1])
    np.testing.assert_allclose(eager, expected, rtol=1e-6, atol=1e-6)
    traced = np.asarray(tf.function(layer)(features))  # tables inside a tf.function
    np.testing.assert_allclose(traced, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("units", "combiner"), [(1, "sum"), (3, "sum"), (2, "sqrtn")])
def test_linear_model_equals_fc(tmp_dir, units, combiner):
    columns = make_columns(tmp_dir)["linear"]
    layer = twin_columns.linear_model(
        columns, units=units, sparse_combiner=combiner, scope="linear_model"
    )
    features = raw_features()
    layer(features)
    values = randomize(layer, 2 + units)
    expected = fc_graph(features, columns, values, "linear", units, combiner)
    np.testing.assert_allclose(np.asarray(layer(features)), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(tf.function(layer)(features)), expected, rtol=1e-6, atol=1e-6
    )


def test_unsupported_names_every_column(tmp_dir):
    seq = tf.feature_column.sequence_categorical_column_with_identity("s", 4)
    columns = [
        fc.numeric_column("ok"),
        fc.embedding_column(seq, 2),
        tf.feature_column.sequence_numeric_column("t"),
        fc.categorical_column_with_identity("raw", 3),
    ]
    bad = twin_columns.unsupported(columns, dense_only=True)
    assert [b.split(" ")[0] for b in bad] == ["s_embedding", "t", "raw"]
    assert "sequence" in bad[0] and "dense columns only" in bad[2]
    with pytest.raises(ValueError, match="3 feature column"):
        twin_columns.input_layer(columns)
    assert twin_columns.unsupported(columns[:1] + columns[3:]) == []


def test_fit_step_moves_the_weights_as_fc_does(tmp_dir):
    """One SGD step of ``fit`` (tables and sparse gradients inside its tf.function) vs the same
    step on graph-mode fc: every embedding and linear weight moves the same."""
    cols = make_columns(tmp_dir)
    keras = tf.keras
    features = raw_features()
    labels = np.linspace(-1, 2, B).astype("float32").reshape(B, 1)

    class Twin(keras.Model):
        def __init__(self):
            super().__init__()
            self.dnn = twin_columns.input_layer(cols["dense"], scope="input_layer")
            self.linear = twin_columns.linear_model(cols["linear"], scope="linear_model")

        def call(self, x):
            return self.linear(x) + tf.reduce_sum(self.dnn(x), axis=1, keepdims=True)

    twin = Twin()
    twin(features)
    values = {**randomize(twin.dnn, 7), **randomize(twin.linear, 8)}
    twin.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    # Its variables made before fit: on tf_keras / Keras 2 a first trace that creates them (the
    # step counter) is traced again, and this trace is the test's cost (tf215: 2 of 15 s -> 1).
    twin.optimizer.build(twin.trainable_variables)
    data = tf.data.Dataset.from_tensors((features, labels))
    twin.fit(data, epochs=1, verbose=0)
    after = {
        n: np.asarray(w) for layer in (twin.dnn, twin.linear) for w, n in layer.checkpoint_names()
    }

    tensors = for_fc(features)
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        dnn = tf.compat.v1.feature_column.input_layer(tensors, cols["dense"])
        linear = tf.compat.v1.feature_column.linear_model(tensors, cols["linear"])
        logits = linear + tf.reduce_sum(dnn, axis=1, keepdims=True)
        loss = tf.reduce_mean(tf.square(logits - labels))
        step = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
        sess.run(tf.compat.v1.tables_initializer())
        variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
        for name, value in values.items():
            variables[name].load(value, sess)
        sess.run(step)
        native = {name: sess.run(variables[name]) for name in values}
    moved = [n for n in values if not np.array_equal(native[n], values[n])]
    assert len(moved) >= 10, moved  # the step moves embeddings and linear weights
    for name in values:
        np.testing.assert_allclose(after[name], native[name], rtol=1e-6, atol=1e-6, err_msg=name)


def _estimator_names(estimator_class, linear, dnn, model_dir, train: bool = False):
    """The names and shapes in the checkpoint of the Estimator's train graph. ``train``: its
    own ``train`` one step writes it; otherwise its ``model_fn`` in TRAIN mode (what ``train``
    calls) builds the graph and a default sharded ``Saver`` (what ``train``'s ``Scaffold``
    makes: every global variable and saveable) writes the initialized variables, without the
    session hooks, the step, the graph and meta-graph files (the deep profile holds the two
    equal, ``test_the_train_graphs_checkpoint_is_what_train_writes``)."""
    feats = {
        "temp max": np.ones((4, 1), "float32"),
        "temp-max": np.ones((4, 1), "float32"),
        "city": np.array([["a"], ["b"], ["c"], ["a"]]),
        "uid": np.array([[0], [1], [2], [3]]),
        "uid2": np.array([[3], [1], [2], [3]]),
        "code": np.array([["x"], ["y"], ["z"], ["w"]]),
    }
    labels = np.array([[0], [1], [0], [1]])
    if dnn:
        est = estimator_class(
            linear_feature_columns=linear,
            dnn_feature_columns=dnn,
            dnn_hidden_units=[3],
            model_dir=model_dir,
        )
    else:  # a linear-only canned Estimator
        est = estimator_class(feature_columns=linear, model_dir=model_dir)
    if train:
        est.train(lambda: tf.data.Dataset.from_tensors((feats, labels)), steps=1)
        return dict(tf.train.list_variables(model_dir))
    v1 = tf.compat.v1
    tf.io.gfile.makedirs(model_dir)
    with tf.Graph().as_default():
        v1.train.get_or_create_global_step()
        dataset = tf.data.Dataset.from_tensors((feats, labels))
        features, label = v1.data.make_one_shot_iterator(dataset).get_next()
        est.model_fn(features, label, tf.estimator.ModeKeys.TRAIN, est.config)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            v1.train.Saver(sharded=True).save(
                sess, f"{model_dir}/model.ckpt", global_step=0, write_meta_graph=False
            )
    return dict(tf.train.list_variables(model_dir))


KINDS = ["V1 v1-shared", "V1 v2-shared", "V2 v2-shared", "V1 v2-shared linear-only"]


def _kind(kind: str):
    """The kind's Estimator class, its linear and dnn columns (none: linear-only, a
    ``LinearClassifier``), and whether it is V1."""
    v1 = kind.startswith("V1")
    city = fc.categorical_column_with_vocabulary_list("city", ["a", "b"], num_oov_buckets=1)
    uid = fc.categorical_column_with_identity("uid", 4)
    uid2 = fc.categorical_column_with_identity("uid2", 4)
    code = fc.categorical_column_with_hash_bucket("code", 5)
    with tf.Graph().as_default():  # both shared-embedding functions refuse eager mode
        if "v1-shared" in kind:
            shared = tf.compat.v1.feature_column.shared_embedding_columns([uid, uid2], 2)
        else:
            shared = fc.shared_embeddings([uid, uid2], 2)
    # "temp max": DenseFeatures and the v1 feature-column path refuse it as a scope name
    temp = fc.numeric_column("temp max" if kind.startswith("V2") else "temp-max")
    dnn = [
        fc.numeric_column("temp-max"),
        fc.embedding_column(city, 3),
        fc.indicator_column(uid),
        *shared,
    ]
    linear = [
        temp,
        city,
        uid,
        fc.crossed_column(["city", "code"], 7),
        fc.embedding_column(code, 2),
        *shared,
    ]
    if kind.endswith("linear-only"):  # the shared embeddings in the linear model alone
        return tf.compat.v1.estimator.LinearClassifier, linear, [], v1
    estimator = (
        tf.compat.v1.estimator.DNNLinearCombinedClassifier
        if v1
        else tf.estimator.DNNLinearCombinedClassifier
    )
    return estimator, linear, dnn, v1


@pytest.mark.parametrize("kind", KINDS)
def test_checkpoint_names_are_the_estimators(kind, tmp_path):
    """The canned Estimators' own checkpoint (TF 2.15): every variable of their input layer and
    linear model is in checkpoint_names(), under the same name and shape, and nothing else."""
    pytest.importorskip("tensorflow_estimator", exc_type=ImportError)
    estimator, linear, dnn, v1 = _kind(kind)
    native = _estimator_names(estimator, linear, dnn, str(tmp_path))
    dnn_layer = twin_columns.input_layer(dnn, v1=v1) if dnn else None
    linear_layer = twin_columns.linear_model(linear, v1=v1, share_with=dnn_layer)
    ours = {
        name: list(weight.shape)
        for layer in (dnn_layer, linear_layer)
        if layer is not None
        for weight, name in layer.checkpoint_names()
    }
    other = ("Adagrad", "Ftrl", "global_step", "hiddenlayer", "logits", "training/")
    theirs = {n: s for n, s in native.items() if not any(t in n for t in other)}
    assert ours == theirs


def test_layers_in_a_functional_model():
    """Called on ``keras.Input``s (a functional twin), the layers give what they give eagerly."""
    keras = tf.keras
    city = fc.categorical_column_with_vocabulary_list("city", ["a", "b"], num_oov_buckets=1)
    dnn = twin_columns.input_layer([fc.numeric_column("x"), fc.embedding_column(city, 2)])
    linear = twin_columns.linear_model([city, fc.numeric_column("x")], units=2)
    inputs = {
        "city": keras.Input((2,), name="city", dtype="string"),
        "x": keras.Input((1,), name="x"),
    }
    model = keras.Model(inputs, [dnn(inputs), linear(inputs)])
    randomize(linear, 3)
    features = {
        "city": tf.constant([["a", ""], ["b", "c"], ["", ""], ["a", "a"]]),
        "x": tf.constant([[1.0], [2.0], [3.0], [4.0]]),
    }
    got = model(features)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(dnn(features)))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(linear(features)))


@pytest.mark.deep
@pytest.mark.parametrize("kind", KINDS)
def test_the_train_graphs_checkpoint_is_what_train_writes(kind, tmp_path):
    """TF 2.15: the checkpoint ``_estimator_names`` writes from the Estimator's train graph
    (CI's) has the names and shapes of the one the Estimator's ``train`` writes."""
    pytest.importorskip("tensorflow_estimator", exc_type=ImportError)
    estimator, linear, dnn, _ = _kind(kind)
    trained = _estimator_names(estimator, linear, dnn, str(tmp_path / "train"), train=True)
    graph = _estimator_names(estimator, linear, dnn, str(tmp_path / "graph"))
    assert graph == trained
