"""Canned Estimators continued by their Keras twin, and back (TF 2.15 stack: tensorflow-estimator).

For each canned Estimator with its default optimizer: it trains 8 steps into ``model_dir``; a copy
is continued to step 16 by the Estimator itself (native), the original by ``keras_twin(est)``
after ``restore_checkpoint(twin, model_dir, "auto")`` under ``estimator_hooks(model=twin)``
(bridged), batch loss by batch loss. The 8 steps, the Estimator's predictions after them and its
native continuation are recorded in ``fixtures/canned`` (its ``make_fixture.py``; the deep profile
reruns it against the files). Then the way back: the Estimator continues from the
twin's step-16 checkpoint while the twin goes on in memory, loss by loss again. The features are
declared ``b, a, c`` (the Estimator sorts them: ``a, b, c``); one case adds a vocabulary column
with an OOV bucket (linear), its crossing with a bucketized column, and its embedding (DNN).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from estimator_setup import (
    BATCH,
    ESTIMATOR_ONLY,
    dataset_fn,
    linear_data,
    run_config,
    switch_and_back,
    train,
)
from fixture_modules import fixture_script

pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)

import hookbridge

X, SCORE = linear_data(seed=2)
WORDS = np.random.default_rng(4).choice(["red", "green", "blue", "other"], size=(len(X), 1))
FEATURES = {"b": X[:, :1], "a": X[:, 1:2], "c": X[:, 2:], "color": WORDS}
LABELS = {
    "binary": (SCORE > 0).astype("int64"),
    "classes": np.digitize(SCORE, [-1.0, 1.0]).astype("int64"),
    "regression": SCORE.astype("float32"),
}
CONFIG = {"save_checkpoints_steps": 4, "save_summary_steps": 100, "log_step_count_steps": 100}


def columns():
    return [tf.feature_column.numeric_column(k) for k in ("b", "a", "c")]


def color():
    """A vocabulary column with an OOV bucket ("other" falls in it)."""
    return tf.feature_column.categorical_column_with_vocabulary_list(
        "color", ["red", "green", "blue"], num_oov_buckets=1
    )


CANNED = {
    "DNNClassifier V2": (lambda **k: tf.estimator.DNNClassifier([8, 4], columns(), **k), "binary"),
    "DNNRegressor V2": (lambda **k: tf.estimator.DNNRegressor([8], columns(), **k), "regression"),
    "LinearRegressor V2": (lambda **k: tf.estimator.LinearRegressor(columns(), **k), "regression"),
    "LinearClassifier V2": (
        lambda **k: tf.estimator.LinearClassifier(columns(), n_classes=3, **k),
        "classes",
    ),
    "DNNLinearCombinedClassifier V2": (
        lambda **k: tf.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=columns()[:2],
            dnn_feature_columns=columns(),
            dnn_hidden_units=[8, 4],
            **k,
        ),
        "binary",
    ),
    "DNNLinearCombinedRegressor V1": (
        lambda **k: tf.compat.v1.estimator.DNNLinearCombinedRegressor(
            linear_feature_columns=columns(),
            dnn_feature_columns=columns()[1:],
            dnn_hidden_units=[8],
            **k,
        ),
        "regression",
    ),
    "DNNLinearCombinedClassifier V1, categorical": (
        lambda **k: tf.compat.v1.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=[
                *columns()[:1],
                color(),
                tf.feature_column.crossed_column(
                    [color(), tf.feature_column.bucketized_column(columns()[1], [0.0])], 6
                ),
            ],
            dnn_feature_columns=[*columns(), tf.feature_column.embedding_column(color(), 2)],
            dnn_hidden_units=[8],
            **k,
        ),
        "binary",
    ),
    "DNNClassifier V1": (
        lambda **k: tf.compat.v1.estimator.DNNClassifier([8, 4], columns(), **k),
        "binary",
    ),
    "LinearRegressor V1": (
        lambda **k: tf.compat.v1.estimator.LinearRegressor(columns(), **k),
        "regression",
    ),
}


def estimator(which, model_dir):
    make, _ = CANNED[which]
    return make(config=run_config(model_dir, CONFIG))


def logits(which, model_dir):
    predictions = estimator(which, model_dir).predict(
        lambda: tf.data.Dataset.from_tensor_slices(FEATURES).batch(BATCH)
    )
    return np.stack([p["logits"] if "logits" in p else p["predictions"] for p in predictions])


#: The CI profile runs a representative subset of CANNED: every part (DNN, linear, combined) on
#: each side of V1/V2, every head (binary, 3 classes, regression: V2 regression also through
#: INSTANCES' DNNRegressor V2 and V1 linear regression through its LinearRegressor V1 below).
#: The rest, each a subset of what one of those runs, is the deep profile's
#: (``HOOKBRIDGE_PROFILE=deep``): four round trips of 11 (tf215, load 7: the file 439 -> 340 s).
#: DNNClassifier V2 too: its DNN-only V2 network is INSTANCES' DNNRegressor V2's, its default
#: Adagrad the combined V2 classifier's DNN part's, its binary V2 head that classifier's (tf215
#: alone: 7.6 s of the file's 67 s).
DEEP_CANNED = {
    "DNNRegressor V2",
    "LinearRegressor V2",
    "DNNClassifier V1",
    "LinearRegressor V1",
    "DNNClassifier V2",
}


#: The Estimator's first 8 steps of each case (its step-8 checkpoint), what it predicts there and
#: its own continuation to 16, as ``fixtures/canned/make_fixture.py`` recorded them on TF 2.15
#: (deterministic: two runs bit-equal; the deep profile reruns it against the files). CI reads
#: them: two Estimator trainings and a prediction saved per case. The way back (from the twin's
#: checkpoint) and the rollback stay live Estimator runs.
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "canned"
make_fixture = fixture_script(FIXTURES)


def recorded(which: str) -> dict:
    """The case's recorded step 1 of the round trip, as ``switch_and_back(recorded=...)`` takes."""
    case = FIXTURES / make_fixture.slug(which)
    exp = json.loads((case / "expected.json").read_text())
    assert exp["case"] == which
    return {
        "model_dir": case / "model_dir",
        "at_switch": np.asarray(exp["logits"], "float32"),
        "native": exp["native"],
    }


def deep_or_ci(cases):
    return [pytest.param(w, marks=pytest.mark.deep) if w in DEEP_CANNED else w for w in cases]


@pytest.fixture(scope="module", params=deep_or_ci(CANNED))
def runs(request, tmp_path_factory):
    """The Estimator -> its Keras twin -> Estimator round trip (estimator_setup.switch_and_back)
    from the recorded step-8 checkpoint, with what each predicts at the switch."""
    which = request.param
    labels = LABELS[CANNED[which][1]]
    return switch_and_back(
        tmp_path_factory.mktemp(make_fixture.slug(which)),
        lambda model_dir: estimator(which, model_dir),
        dataset_fn(FEATURES, labels),
        lambda model_dir: hookbridge.keras_twin(estimator(which, model_dir)),
        FEATURES,
        labels,
        CONFIG,
        keras_predict=lambda twin: twin.predict(FEATURES, verbose=0),
        rollback=False,  # test_rolled_back_the_estimator_trains_as_it_did runs it
        recorded=recorded(which),
    ) | {"which": which}


def test_the_twin_predicts_the_estimators_logits_at_the_switch(runs):
    assert runs["step"] == 8 and runs["restore_warnings"] == []
    native, twin = runs["at_switch"]
    np.testing.assert_allclose(twin, native.reshape(twin.shape), rtol=1e-5, atol=1e-6)


def test_the_twin_continues_as_the_estimator_loss_by_loss(runs):
    assert len(runs["bridged"]) == len(runs["native"]) == 8
    np.testing.assert_allclose(runs["bridged"], runs["native"], rtol=2e-5, atol=1e-7)


def test_the_estimator_continues_as_the_twin_loss_by_loss(runs):
    assert len(runs["back"]) == len(runs["keras"]) == 8
    np.testing.assert_allclose(runs["back"], runs["keras"], rtol=2e-5, atol=1e-7)


#: Rolling back (the Estimator restarted from the step-8 checkpoint ``estimator_hooks`` kept in
#: ``estimator-backup``, trained to 16) in CI for the two combined classes, V1 and V2 (every part,
#: two optimizers; test_optimizer_state rolls back too); the other cases' in the deep profile: the
#: backup is the Estimator's own checkpoint files, kept whatever the class (tf215, load ~2: an
#: Estimator run of 8 steps, about 4 s each).
ROLLBACK_IN_CI = {"DNNLinearCombinedClassifier V2", "DNNLinearCombinedClassifier V1, categorical"}


@pytest.mark.parametrize(
    "runs",
    [w if w in ROLLBACK_IN_CI else pytest.param(w, marks=pytest.mark.deep) for w in CANNED],
    indirect=True,
    scope="module",
)
def test_rolled_back_the_estimator_trains_as_it_did(runs, tmp_path):
    """From the backup, the Estimator trains as it did from its own step-8 checkpoint
    (``runs["native"]``: recorded), within four float32 roundings: the record is bit for bit on
    the CPU that made it, but another CPU rounds differently (an AMD EPYC machine: 2 of 8 losses
    1 ulp, 7.3e-8 relative, from the record of V1 categorical)."""
    which = runs["which"]
    rollback = tmp_path / "rollback"
    shutil.copytree(runs["back_dir"].parent / "bridged" / "estimator-backup", rollback)
    labels = LABELS[CANNED[which][1]]
    losses = train(estimator(which, rollback), dataset_fn(FEATURES, labels), 16)
    assert len(losses) == 8
    np.testing.assert_allclose(losses, runs["native"], rtol=4 * np.finfo(np.float32).eps, atol=0)


def test_what_the_twin_cannot_build_is_named():
    # tensorflow-estimator 2.15 has no BoostedTrees* left; a custom model_fn has no twin either.
    with pytest.raises(ValueError, match="EstimatorV2 is not supported.*custom model_fn"):
        hookbridge.keras_twin(tf.estimator.Estimator(lambda features, labels, mode: None))
    # A DNN takes dense columns only: a bare categorical column is refused, with every other
    # column the twin does not build, all named at once.
    categorical = tf.feature_column.categorical_column_with_identity("k", 3)
    with pytest.raises(
        ValueError,
        match=r"does not build: k \(IdentityCategoricalColumn\): a "
        r"DNN's input takes dense columns only.*\(dnn\); s \(SequenceCategorical",
    ):
        hookbridge.keras_twin(
            tf.estimator.DNNClassifier(
                [2],
                [categorical, tf.feature_column.sequence_categorical_column_with_identity("s", 3)],
            )
        )


# Column names the Estimator sorts otherwise than their variable scopes ("temp max" < "temp2",
# scopes "temp_max" > "temp2"), with dots, digits, uppercase: declared in no particular order.
ODD_NAMES = ["temp2", "temp max", "a.b", "Zed", "2nd day", "x-1", "temp_1"]
ODD = {
    "LinearRegressor V2": lambda c, **k: tf.estimator.LinearRegressor(c, **k),
    "LinearClassifier V1": lambda c, **k: tf.compat.v1.estimator.LinearClassifier(
        c, n_classes=3, **k
    ),
    "DNNLinearCombinedRegressor V2": lambda c, **k: tf.estimator.DNNLinearCombinedRegressor(
        linear_feature_columns=c,
        dnn_feature_columns=[x for x in c if " " not in x.name],
        dnn_hidden_units=[4],
        **k,
    ),  # the DNN's input_layer takes no spaces (a name scope)
}


#: CI: the linear V1 classifier and the combined V2 regressor, whose linear part takes every
#: name as LinearRegressor V2's does (one linear_model); LinearRegressor V2 alone is the deep
#: profile's (tf215: 2.5 s).
DEEP_ODD = {"LinearRegressor V2"}


def odd_data() -> tuple[dict, dict]:
    """The ODD cases' features (one column a name) and labels (3 classes; regression)."""
    rng = np.random.default_rng(5)
    features = {k: rng.normal(size=(32, 1)).astype("float32") for k in ODD_NAMES}
    score = sum((i - 3) * features[k] for i, k in enumerate(ODD_NAMES))
    return features, {"classes": np.digitize(score, [-1.0, 1.0]), "regression": score}


def odd_estimator(which, model_dir):
    columns = [tf.feature_column.numeric_column(k) for k in ODD_NAMES]
    return ODD[which](columns, config=run_config(model_dir, CONFIG))


def odd_native(which, model_dir):
    """The Estimator trained 6 steps in ``model_dir``: what it predicts then (logits)."""
    features, labels = odd_data()
    labels = labels["classes" if "Classifier" in which else "regression"]
    odd_estimator(which, model_dir).train(dataset_fn(features, labels), max_steps=6)
    predictions = odd_estimator(which, model_dir).predict(
        lambda: tf.data.Dataset.from_tensor_slices(features).batch(BATCH)
    )
    return np.stack([p["logits"] if "logits" in p else p["predictions"] for p in predictions])


@pytest.mark.parametrize(
    "which", [pytest.param(w, marks=pytest.mark.deep) if w in DEEP_ODD else w for w in ODD]
)
def test_the_twin_orders_unusual_column_names_as_the_estimator(which, tmp_path):
    """From the Estimator's step-6 checkpoint (``fixtures/canned/odd_*``: ``odd_native``, as
    recorded), the twin predicts the Estimator's logits."""
    case = FIXTURES / f"odd_{make_fixture.slug(which)}"
    native = np.asarray(json.loads((case / "expected.json").read_text())["logits"], "float32")
    shutil.copytree(case / "model_dir", tmp_path / "model_dir")
    twin = hookbridge.keras_twin(odd_estimator(which, tmp_path / "model_dir"))
    assert hookbridge.restore_checkpoint(twin, str(tmp_path / "model_dir"), "auto") == 6
    predicted = twin.predict(odd_data()[0], verbose=0)
    assert np.abs(native).max() > 0.1  # trained: the order of the weights shows
    np.testing.assert_allclose(predicted, native.reshape(predicted.shape), rtol=1e-5, atol=1e-5)


# Optimizer instances (item 8 of issue 31): the twin is made of the Estimator object that just
# trained with them, whose Keras optimizer's hyperparameters are variables of a graph now gone.
INSTANCES = {
    "DNNRegressor V2, Keras Adam": lambda **k: tf.estimator.DNNRegressor(
        [8],
        columns(),
        optimizer=tf.keras.optimizers.legacy.Adam(0.01, beta_1=0.8, epsilon=1e-6),
        **k,
    ),
    "LinearRegressor V1, TF1 Ftrl": lambda **k: tf.compat.v1.estimator.LinearRegressor(
        columns(),
        optimizer=tf.compat.v1.train.FtrlOptimizer(
            0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.001
        ),
        **k,
    ),
}
INSTANCE_SETTINGS = {
    "DNNRegressor V2, Keras Adam": (
        "Adam",
        {"learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.999, "epsilon": 1e-6},
    ),
    "LinearRegressor V1, TF1 Ftrl": (
        "Ftrl",
        {
            "learning_rate": 0.1,
            "l1_regularization_strength": 0.01,
            "l2_regularization_strength": 0.001,
            "learning_rate_power": -0.5,
            "initial_accumulator_value": 0.1,
        },
    ),
}


@pytest.fixture(scope="module", params=list(INSTANCES))
def instance_runs(request, tmp_path_factory):
    which = request.param
    made, twins = {}, []

    def make(model_dir):
        made.setdefault(model_dir, INSTANCES[which](config=run_config(model_dir, CONFIG)))
        return made[model_dir]

    def twin(model_dir):
        twins.append(hookbridge.keras_twin(made[model_dir]))  # of the one that trained
        return twins[-1]

    runs = switch_and_back(
        tmp_path_factory.mktemp(which.replace(" ", "_").replace(",", "")),
        make,
        dataset_fn(FEATURES, LABELS["regression"]),
        twin,
        FEATURES,
        LABELS["regression"],
        CONFIG,
        rollback=False,  # no test of instance_runs reads it: the CANNED runs roll back
    )
    return runs | {"which": which, "twin": twins[0]}


def test_the_twin_of_an_optimizer_instance_continues_as_the_estimator(instance_runs):
    runs = instance_runs
    assert runs["step"] == 8 and runs["restore_warnings"] == []
    assert len(runs["bridged"]) == len(runs["native"]) == 8
    np.testing.assert_allclose(runs["bridged"], runs["native"], rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(runs["back"], runs["keras"], rtol=2e-5, atol=1e-7)


def test_the_twin_of_an_optimizer_instance_has_its_settings(instance_runs):
    # The twin instance_runs made of the Estimator that had just trained 8 steps (its settings
    # are constants: fit left them as they were).
    kind, expected = INSTANCE_SETTINGS[instance_runs["which"]]
    optimizer = instance_runs["twin"].optimizer
    config = optimizer.get_config()
    assert type(optimizer).__name__ in (kind, f"Estimator{kind}")  # twins/optimizers.py
    got = {
        k: float(np.asarray(config[k] if k in config else getattr(optimizer, k))) for k in expected
    }
    assert got == pytest.approx(expected, rel=1e-7)


def test_an_optimizer_setting_that_is_a_tensor_is_refused():
    with tf.Graph().as_default():
        rate = tf.constant(0.02) * 0.5
    est = tf.compat.v1.estimator.DNNRegressor(
        [4], columns(), optimizer=tf.compat.v1.train.AdamOptimizer(rate)
    )
    with pytest.raises(
        ValueError,
        match=r"optimizer AdamOptimizer has settings that are tensors "
        r"of the Estimator.s graph.*learning_rate.*compile the twin yourself",
    ):
        hookbridge.keras_twin(est)


@pytest.mark.deep
@pytest.mark.parametrize("which", [*CANNED, *(f"odd {w}" for w in ODD)])
def test_the_recorded_estimator_runs_are_what_the_estimator_does(which, tmp_path):
    """TF 2.15: ``fixtures/canned/<case>`` is what the Estimator gives now, bit for bit: its
    step-8 (ODD: step-6) checkpoint, its predictions there, its losses continuing to 16."""
    case = FIXTURES / make_fixture.slug(which)
    exp = json.loads((case / "expected.json").read_text())
    assert exp["versions"]["tensorflow"] == tf.__version__
    now = make_fixture.run(which, tmp_path)
    reader = tf.train.load_checkpoint(str(case / "model_dir"))
    assert sorted(reader.get_variable_to_shape_map()) == sorted(now["tensors"])
    for name, value in now["tensors"].items():
        np.testing.assert_array_equal(reader.get_tensor(name), value, err_msg=name)
    np.testing.assert_array_equal(now["logits"], np.asarray(exp["logits"], "float32"))
    assert now["native"] == exp["native"]
