"""What a Keras twin refuses to restore (issue 33, the audit's edge cases).

The generation guard: a V1 canned Estimator (``tf.compat.v1.estimator``, loss ``SUM``, TF1 slots
``<var>/Adagrad``) and a V2 one (``tf.estimator``, ``SUM_OVER_BATCH_SIZE``, slots under
``training/<Optimizer>/``) of the same architecture have the same weights: the twin of the other
generation would load them and train with the other reduction (losses batch-times or
1/batch the native ones). ``restore_checkpoint`` tells the writer from the optimizer-state
names and refuses, naming both classes, before any weight is set; the twin of the right class
restores the same model_dir and predicts the Estimator's logits (the fixtures of
``tests/fixtures/twin_matrix/``, written by the Estimators on TF 2.15).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixture_modules import fixture_script

import hookbridge

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "twin_matrix"
make_fixture = fixture_script(FIXTURES)
DATA = dict(np.load(FIXTURES / "data.npz"))


def other_generation(kind: str) -> str:
    return kind[:-2] if kind.endswith("V2") else kind + "V2"


@pytest.mark.parametrize("case", ["dnn_v1", "linear_v2"])
def test_a_twin_refuses_the_other_generations_checkpoint(case, tmp_path):
    kind = make_fixture.CASES[case][0]
    wrong = other_generation(kind)
    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURES / case / "model_dir", model_dir)
    twin = hookbridge.keras_twin(wrong, **make_fixture.arguments(case))
    before = [np.array(w) for w in twin.weights]
    with pytest.raises(ValueError) as raised:
        hookbridge.restore_checkpoint(twin, model_dir, "auto")
    message = str(raised.value)
    assert f"keras_twin({kind!r}, ...)" in message, message
    assert f"keras_twin({wrong!r})" in message and "SUM_OVER_BATCH_SIZE" in message, message
    for w, b in zip(twin.weights, before):  # refused before any value was set
        np.testing.assert_array_equal(np.array(w), b)

    right = hookbridge.keras_twin(kind, **make_fixture.arguments(case))
    assert hookbridge.restore_checkpoint(right, model_dir, "auto") == 8
    exp = json.loads((FIXTURES / case / "expected.json").read_text())
    features = make_fixture.features(DATA)
    first = tf.data.Dataset.from_tensor_slices(features).batch(make_fixture.BATCH).take(1)
    logits = right.predict(first, verbose=0)
    np.testing.assert_allclose(logits, np.asarray(exp["logits"]), atol=1e-5)


@pytest.mark.parametrize(
    ("case", "given", "argument", "written"),
    [
        ("dnn_v1", {"optimizer": "Adam"}, "optimizer", "Adagrad"),
        ("combined_v1", {"linear_optimizer": "Adagrad"}, "linear_optimizer", "Ftrl"),
    ],
)
def test_a_twin_refuses_a_checkpoint_of_another_optimizer(case, given, argument, written, tmp_path):
    """The fixtures trained with the Estimators' default optimizers (Adagrad for the DNN, Ftrl
    for the linear part); a twin given another one would drop that state and train on with its
    own: refused, naming the argument and the optimizer the checkpoint was trained with."""
    kind = make_fixture.CASES[case][0]
    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURES / case / "model_dir", model_dir)
    twin = hookbridge.keras_twin(kind, **{**make_fixture.arguments(case), **given})
    with pytest.raises(ValueError) as raised:
        hookbridge.restore_checkpoint(twin, model_dir, "auto")
    message = str(raised.value)
    assert f"{argument}={written!r}" in message, message
    assert "dnn_optimizer" not in message or argument == "dnn_optimizer", message


def colliding_columns():
    fc = tf.feature_column
    return [
        fc.categorical_column_with_vocabulary_list("x>y", ["p", "q"]),
        fc.categorical_column_with_vocabulary_list("x_y", ["p", "q"]),
    ]


def test_a_twin_refuses_columns_sharing_a_checkpoint_scope():
    """``x>y`` and ``x_y`` both get the scope ``x_y``: one weight would be written under a
    fallback name; refused at build, naming both."""
    with pytest.raises(ValueError, match=r"'x>y' and 'x_y' \(linear\) share the checkpoint scope"):
        hookbridge.keras_twin("LinearClassifier", feature_columns=colliding_columns())


def test_the_estimator_refuses_the_same_columns(tmp_path):
    """The native side of the refusal above (TF 2.15, where the Estimator exists)."""
    pytest.importorskip("tensorflow_estimator")
    est = tf.compat.v1.estimator.LinearClassifier(colliding_columns(), model_dir=str(tmp_path))
    data = ({"x>y": [["p"], ["q"]], "x_y": [["q"], ["p"]]}, [[0.0], [1.0]])
    with pytest.raises(ValueError, match="x_y/weights already exists"):
        est.train(lambda: tf.data.Dataset.from_tensor_slices(data).batch(2), steps=1)


def test_a_twin_computes_float32_under_a_mixed_global_policy(tmp_path):
    """The Estimator computes float32: under ``mixed_float16`` the twin (it failed at its first
    call, half + float) is built float32, warns, and predicts the Estimator's logits."""
    case = "dnn_v1"
    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURES / case / "model_dir", model_dir)
    mixed = tf.keras.mixed_precision
    mixed.set_global_policy("mixed_float16")
    try:
        with pytest.warns(UserWarning, match="'mixed_float16' is not applied"):
            twin = hookbridge.keras_twin(
                make_fixture.CASES[case][0], **make_fixture.arguments(case)
            )
        assert mixed.global_policy().name == "mixed_float16"
    finally:
        mixed.set_global_policy("float32")
    hookbridge.restore_checkpoint(twin, model_dir, "auto")
    exp = json.loads((FIXTURES / case / "expected.json").read_text())
    first = tf.data.Dataset.from_tensor_slices(make_fixture.features(DATA)).batch(
        make_fixture.BATCH
    )
    logits = twin.predict(first.take(1), verbose=0)
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, np.asarray(exp["logits"]), atol=1e-5)
