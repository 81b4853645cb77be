"""``restore_checkpoint(model, path, assignment_map=...)``: TF1 checkpoints into Keras models.

The native side is a real TF1 graph (``tf.compat.v1`` variables named as a ``model_fn`` names
them, a ``MomentumOptimizer`` with its slots, a global step) trained a few steps and saved by a
``Saver``; the Keras model restored from it must predict what the TF1 graph predicts.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
X = np.random.default_rng(0).normal(size=(8, 3)).astype("float32")


def _tf1_checkpoint(directory, names=("dnn/hiddenlayer_0", "dnn/logits"), steps=3):
    """Trains a 3-8-1 MLP in a TF1 graph; returns (checkpoint prefix, its predictions on X)."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, 3])
        h = x
        for scope, units, act in ((names[0], 8, tf.nn.relu), (names[1], 1, None)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.random_normal_initializer())
            h = tf.matmul(h, kernel) + bias
            h = act(h) if act else h
        loss = tf.reduce_mean(tf.square(h - 1.0))
        train = v1.train.MomentumOptimizer(0.01, 0.9).minimize(loss, global_step=step)
        saver = v1.train.Saver()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for _ in range(steps):
                sess.run(train, {x: X})
            prefix = saver.save(sess, str(directory / "model.ckpt"), global_step=step)
            predictions = sess.run(h, {x: X})
    return prefix, predictions


def _keras_model(names=(None, None)):
    model = keras.Sequential(
        [
            keras.Input((3,)),
            keras.layers.Dense(8, activation="relu", name=names[0]),
            keras.layers.Dense(1, name=names[1]),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    return model


def test_auto_assignment_predicts_as_the_tf1_graph(tmp_path):
    _, native = _tf1_checkpoint(tmp_path)
    model = _keras_model()
    # The TF1 Momentum accumulators have no place in an SGD without momentum: named, with why.
    with pytest.warns(
        UserWarning, match=r"optimizer state that was not loaded into SGD: .*/Momentum .*momentum=0"
    ):
        step = hookbridge.restore_checkpoint(model, tmp_path, "auto")
    assert step == 3
    assert int(model.optimizer.iterations.numpy()) == 3
    np.testing.assert_allclose(model.predict(X, verbose=0), native, rtol=1e-5, atol=1e-6)


def test_dry_run_prints_the_mapping_and_changes_nothing(tmp_path):
    prefix, _ = _tf1_checkpoint(tmp_path)
    model = _keras_model(("hidden", "out"))
    before = [w.copy() for w in model.get_weights()]
    out = io.StringIO()
    assert hookbridge.restore_checkpoint(model, prefix, "auto", dry_run=out) == 3
    lines = out.getvalue().splitlines()
    assert lines[0] == f"restore_checkpoint dry run: {prefix}"
    rows = [line.split() for line in lines[1:5]]
    assert rows == [
        ["dnn/hiddenlayer_0/kernel", "[3,", "8]", "->", "hidden/kernel", "[3,", "8]"],
        ["dnn/hiddenlayer_0/bias", "[8]", "->", "hidden/bias", "[8]"],
        ["dnn/logits/kernel", "[8,", "1]", "->", "out/kernel", "[8,", "1]"],
        ["dnn/logits/bias", "[1]", "->", "out/bias", "[1]"],
    ]
    assert lines[5].split() == ["global_step", "[]", "->", "optimizer.iterations", "=", "3"]
    assert "dnn/hiddenlayer_0/kernel/Momentum [3, 8]" in lines[6]
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(model.optimizer.iterations.numpy()) == 0


def test_propose_assignment_and_explicit_entries(tmp_path):
    # Checkpoint layer names whose natural order is NOT the model's: "a_out" sorts first.
    prefix, native = _tf1_checkpoint(tmp_path, names=("z_hidden", "a_out"))
    model = _keras_model(("hidden", "out"))
    # By order and shapes the proposal cannot match "a_out" (8x1) to the 3x8 first layer, so it
    # takes z_hidden for hidden and a_out for out: shapes decide.
    assert hookbridge.propose_assignment(model, prefix) == {
        "z_hidden/kernel": "hidden/kernel",
        "z_hidden/bias": "hidden/bias",
        "a_out/kernel": "out/kernel",
        "a_out/bias": "out/bias",
    }
    # Explicit entries (label, index, variable) plus "*": "auto" for the rest.
    mapping = {
        "a_out/kernel": model.weights[2],
        "a_out/bias": 3,
        "z_hidden/bias": "hidden/bias",
        "*": "auto",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert hookbridge.restore_checkpoint(model, prefix, mapping) == 3
    np.testing.assert_allclose(model.predict(X, verbose=0), native, rtol=1e-5, atol=1e-6)


def test_unassigned_weights_are_listed(tmp_path):
    prefix, _ = _tf1_checkpoint(tmp_path)
    model = _keras_model(("hidden", "out"))
    with pytest.raises(ValueError) as e:
        hookbridge.restore_checkpoint(model, prefix, {"dnn/logits/kernel": "out/kernel"})
    message = str(e.value)
    assert "no checkpoint variable assigned to Keras weight(s) hidden/kernel [3, 8]" in message
    assert "Unused in" in message and "dnn/hiddenlayer_0/kernel [3, 8]" in message


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"nope/kernel": 0}, "does not hold; it holds dnn/hiddenlayer_0/bias [8], "),
        ({"dnn/logits/kernel": "hidden/kernel"}, "of shape [3, 8]"),
        ({"dnn/logits/kernel": "nosuch/kernel"}, "names Keras weight 'nosuch/kernel'"),
        (
            {"dnn/hiddenlayer_0/kernel": 0, "dnn/hiddenlayer_0/bias": 0},
            "assigns both 'dnn/hiddenlayer_0/kernel' and 'dnn/hiddenlayer_0/bias'",
        ),
        ("manual", "assignment_map='manual'; pass 'auto' or a dict"),
    ],
)
def test_bad_assignment_maps(tmp_path, mapping, message):
    prefix, _ = _tf1_checkpoint(tmp_path)
    with pytest.raises(ValueError, match=None) as e:
        hookbridge.restore_checkpoint(_keras_model(("hidden", "out")), prefix, mapping)
    assert message in str(e.value)


def test_without_assignment_map_the_error_lists_what_the_checkpoint_holds(tmp_path):
    prefix, _ = _tf1_checkpoint(tmp_path, names=("dense", "dense_1"))
    with pytest.raises(ValueError) as e:
        hookbridge.restore_checkpoint(_keras_model(), prefix)
    message = str(e.value)
    assert "the checkpoint holds dense/bias [8], dense/bias/Momentum [8], dense/kernel [3, 8]" in (
        message
    )
    assert "global_step []" in message
    assert "pass assignment_map='auto'" in message
    with pytest.raises(ValueError, match="dry_run needs an assignment_map"):
        hookbridge.restore_checkpoint(_keras_model(), prefix, dry_run=True)


def test_a_hookbridge_checkpoint_still_restores_without_a_map(tmp_path):
    model = _keras_model()
    model.fit(
        X,
        np.ones((8, 1), "float32"),
        epochs=1,
        batch_size=4,
        verbose=0,
        callbacks=[
            hookbridge.HookCallback(
                lambda: [v1.train.CheckpointSaverHook(str(tmp_path), save_steps=1)]
            )
        ],
    )
    fresh = _keras_model()
    assert hookbridge.restore_checkpoint(fresh, tmp_path) == 2
    np.testing.assert_allclose(fresh.predict(X, verbose=0), model.predict(X, verbose=0))
    # "auto" recognizes a HookCallback checkpoint of this model: one call for every restart.
    again = _keras_model()
    assert hookbridge.propose_assignment(again, tmp_path) == {
        "model/000/kernel": hookbridge_label(again, 0),
        "model/001/bias": hookbridge_label(again, 1),
        "model/002/kernel": hookbridge_label(again, 2),
        "model/003/bias": hookbridge_label(again, 3),
    }
    assert hookbridge.restore_checkpoint(again, tmp_path, "auto") == 2
    np.testing.assert_allclose(again.predict(X, verbose=0), model.predict(X, verbose=0))


def hookbridge_label(model, i):
    from hookbridge._migrate.assignment import weight_labels

    return weight_labels(model)[i]


# ------------------------------------------------------------------ linear parts, combined
COLUMNS = {"b": 0.5, "a": -2.0, "c": 3.0}  # declared order b, a, c; the Estimator's: a, b, c
FEATURES = {k: np.random.default_rng(i).normal(size=(8, 1)).astype("float32")
            for i, k in enumerate(COLUMNS)}


def _linear_checkpoint(directory):
    """A TF1 linear model as ``LinearRegressor`` names it: one [1, 1] weight per column."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        for name, value in COLUMNS.items():
            v1.get_variable(f"linear/linear_model/{name}/weights", [1, 1],
                            initializer=v1.constant_initializer(value))
        v1.get_variable("linear/linear_model/bias_weights", [1],
                        initializer=v1.constant_initializer(0.25))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(step.assign(7))
            prefix = v1.train.Saver().save(sess, str(directory / "model.ckpt"), global_step=7)
    native = sum(FEATURES[k] * w for k, w in COLUMNS.items()) + 0.25
    return prefix, native


def _linear_model(order):
    inputs = {k: keras.Input((1,), name=k) for k in order}
    out = keras.layers.Dense(1, name="linear")(
        keras.layers.Concatenate()([inputs[k] for k in order])
    )
    model = keras.Model(inputs, out)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def test_auto_stacks_the_column_weights_in_the_estimators_order(tmp_path):
    prefix, native = _linear_checkpoint(tmp_path)
    model = _linear_model(["a", "b", "c"])
    out = io.StringIO()
    hookbridge.restore_checkpoint(model, prefix, "auto", dry_run=out)
    assert [line.split()[0] for line in out.getvalue().splitlines()[1:5]] == [
        "linear/linear_model/a/weights",
        "linear/linear_model/b/weights",
        "linear/linear_model/c/weights",
        "linear/linear_model/bias_weights",
    ]
    assert "-> linear/kernel [3, 1] rows 1:2" in out.getvalue().splitlines()[2]
    assert hookbridge.restore_checkpoint(model, prefix, "auto") == 7
    np.testing.assert_allclose(model.weights[0].numpy()[:, 0], [-2.0, 0.5, 3.0])
    np.testing.assert_allclose(model.predict(FEATURES, verbose=0), native, rtol=1e-6)


def test_a_feature_order_mismatch_is_an_error(tmp_path):
    prefix, _ = _linear_checkpoint(tmp_path)
    model = _linear_model(["b", "a", "c"])  # declared order: the Estimator sorted by name
    with pytest.raises(ValueError, match=r"concatenates the features in the order \['b', 'a', "
                       r"'c'\], the checkpoint's column weights fill its kernel's rows in the order "
                       r"\['a', 'b', 'c'\]"):
        hookbridge.restore_checkpoint(model, prefix, "auto")


def test_an_explicit_tuple_stacks_in_the_given_order(tmp_path):
    prefix, native = _linear_checkpoint(tmp_path)
    model = _linear_model(["b", "a", "c"])
    names = tuple(f"linear/linear_model/{k}/weights" for k in ("b", "a", "c"))
    assert hookbridge.restore_checkpoint(model, prefix, {names: "linear/kernel", "*": "auto"}) == 7
    np.testing.assert_allclose(model.predict(FEATURES, verbose=0), native, rtol=1e-6)
    with pytest.raises(ValueError, match=r"\[1, 1\] \+ \[1, 1\] to Keras weight linear/kernel of "
                       r"shape \[3, 1\] \(stacked by rows\)"):
        hookbridge.restore_checkpoint(model, prefix, {names[:2]: "linear/kernel", "*": "auto"})


# Columns the Estimator orders by their names while the checkpoint holds their variable scopes,
# where every character outside [A-Za-z0-9_.-] is '_': "temp max" < "temp2" but "temp_max" >
# "temp2"; "2nd day" < "Zed" < "a.b" < "temp max" < "temp2" < "x-1" (the Estimator's order).
ODD = {"temp2": -2.0, "temp max": 0.5, "a.b": 3.0, "Zed": 1.5, "2nd day": -0.75, "x-1": 0.125}
ODD_ORDER = ["2nd day", "Zed", "a.b", "temp max", "temp2", "x-1"]


def _scoped_checkpoint(directory):
    """``LinearRegressor``'s variables for the ``ODD`` columns, under their scopes."""
    graph = tf.Graph()
    with graph.as_default():
        v1.train.get_or_create_global_step()
        for name, value in ODD.items():
            scope = name.replace(" ", "_")
            v1.get_variable(f"linear/linear_model/{scope}/weights", [1, 1],
                            initializer=v1.constant_initializer(value))
        v1.get_variable("linear/linear_model/bias_weights", [1],
                        initializer=v1.constant_initializer(0.25))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            prefix = v1.train.Saver().save(sess, str(directory / "model.ckpt"), global_step=0)
    features = {k: np.random.default_rng(i).normal(size=(8, 1)).astype("float32")
                for i, k in enumerate(ODD)}
    return prefix, features, sum(features[k] * w for k, w in ODD.items()) + 0.25


def test_column_weights_stack_in_the_order_of_the_column_names_not_their_scopes(tmp_path):
    prefix, features, native = _scoped_checkpoint(tmp_path)
    model = _linear_model(ODD_ORDER)
    out = io.StringIO()
    hookbridge.restore_checkpoint(model, prefix, "auto", dry_run=out)
    assert [line.split()[0] for line in out.getvalue().splitlines()[1:7]] == [
        f"linear/linear_model/{k.replace(' ', '_')}/weights" for k in ODD_ORDER
    ]
    hookbridge.restore_checkpoint(model, prefix, "auto")
    np.testing.assert_allclose(model.weights[0].numpy()[:, 0], [ODD[k] for k in ODD_ORDER])
    np.testing.assert_allclose(model.predict(features, verbose=0), native, rtol=1e-6)


def test_a_model_concatenating_in_the_scopes_order_is_an_error(tmp_path):
    # sorted by scope: "temp2" before "temp max" (the order the weights had stacked in before)
    prefix, _, _ = _scoped_checkpoint(tmp_path)
    by_scope = sorted(ODD_ORDER, key=lambda k: k.replace(" ", "_"))
    assert by_scope != ODD_ORDER
    with pytest.raises(ValueError, match=r"concatenates the features in the order \['2nd day', "
                       r"'Zed', 'a.b', 'temp2', 'temp max', 'x-1'\], the checkpoint's column "
                       r"weights fill its kernel's rows in the order \['2nd day', 'Zed', 'a.b', "
                       r"'temp max', 'temp2', 'x-1'\]"):
        hookbridge.restore_checkpoint(_linear_model(by_scope), prefix, "auto")


def test_without_the_column_names_an_undecided_order_is_refused(tmp_path):
    prefix, features, native = _scoped_checkpoint(tmp_path)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(1, name="linear")])
    with pytest.raises(ValueError, match=r"the order of \['temp_max'\] among "
                       r"\['2nd_day', 'Zed', 'a.b', 'temp2', 'temp_max', 'x-1'\] depends on the "
                       r"names they stand for.*keras.Input\(name='temp max'\)"):
        hookbridge.restore_checkpoint(model, prefix, "auto")
    names = tuple(f"linear/linear_model/{k.replace(' ', '_')}/weights" for k in ODD_ORDER)
    hookbridge.restore_checkpoint(model, prefix, {names: "linear/kernel", "*": "auto"})
    x = np.concatenate([features[k] for k in ODD_ORDER], axis=1)
    np.testing.assert_allclose(model.predict(x, verbose=0), native, rtol=1e-6)
