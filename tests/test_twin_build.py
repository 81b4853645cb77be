"""The named form of keras_twin on every stack, against the TF 2.15 Estimator's checked-in runs.

``tests/fixtures/twin_build/`` holds, per case, a canned Estimator's ``model_dir`` at step 8
(numeric, vocabulary-list with an OOV bucket, hash-bucket, embedding, indicator, crossed and
bucketized columns)
(written on TF 2.15 by ``make_fixture.py``), its logits there, its batch losses continuing 16
steps, and the drift the Estimator shows against itself (its checkpoint times 1+1e-7, times
1 +- 1e-7). Here, on TF 2.21 (Keras 3, tf_keras) and TF 2.15 alike: ``keras_twin(<class name>,
**arguments)`` (no tensorflow-estimator needed) restored ``"auto"`` from that ``model_dir``
predicts the Estimator's logits, continues loss by loss as the Estimator did, and writes
checkpoints holding every variable of the Estimator's under its name and shape.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from estimator_setup import LossRecorder
from fixture_modules import fixture_script

import hookbridge

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "twin_build"
#: The cases, columns and data the fixtures were made of.
make_fixture = fixture_script(FIXTURES)
CASES = sorted(make_fixture.CASES)
DATA = dict(np.load(FIXTURES / "data.npz"))
FEATURES = {k: DATA[k] for k in make_fixture.FEATURES}


def batches(features, y=None):
    """The features (and labels) in batches, in order: Keras 3's fit and predict refuse numpy
    string arrays (docs/limits.md), an input_fn's dataset is what the Estimator took."""
    data = features if y is None else (features, y)
    return tf.data.Dataset.from_tensor_slices(data).batch(make_fixture.BATCH)


def keras_fit(model, y, first_step, last_step, hooks):
    """fit from global step first_step to last_step under HookCallback(hooks()): batch losses."""
    recorder = LossRecorder()
    per_epoch = len(y) // make_fixture.BATCH
    model.fit(
        batches(FEATURES, y),
        initial_epoch=first_step // per_epoch,
        epochs=last_step // per_epoch,
        verbose=0,
        shuffle=False,
        callbacks=[hookbridge.HookCallback(lambda: [recorder, *hooks()])],
    )
    return recorder.losses


def expected(case):
    return json.loads((FIXTURES / case / "expected.json").read_text())


def twin_of(case):
    exp = expected(case)
    return hookbridge.keras_twin(exp["kind"], **make_fixture.arguments(exp["arguments"]))


@pytest.fixture(scope="module", params=CASES)
def run(request, tmp_path_factory):
    """The twin restored from the case's model_dir (a copy), and its continuation."""
    case = request.param
    exp = expected(case)
    model_dir = tmp_path_factory.mktemp(case) / "model_dir"
    shutil.copytree(FIXTURES / case / "model_dir", model_dir)
    twin = twin_of(case)
    step = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    first = {k: v[: exp["batch"]] for k, v in FEATURES.items()}
    logits = twin.predict(batches(first), verbose=0)
    y = DATA[exp["labels"]]
    losses = keras_fit(
        twin,
        y,
        step,
        step + len(exp["losses"]),
        lambda: hookbridge.estimator_hooks(
            model_dir,
            model=twin,
            save_checkpoints_steps=8,
            save_summary_steps=0,
            log_step_count_steps=None,
        ),
    )
    return {"exp": exp, "step": step, "logits": logits, "losses": losses, "model_dir": model_dir}


def test_the_named_twin_predicts_the_estimators_logits(run):
    exp = run["exp"]
    assert run["step"] == exp["switch"]
    native = np.asarray(exp["logits"], "float32")
    np.testing.assert_allclose(
        run["logits"], native.reshape(run["logits"].shape), rtol=1e-5, atol=1e-6
    )


#: The Estimator's own drift over 16 steps from its step-8 checkpoint times 1+1e-7 or 1 +- 1e-7
#: (make_fixture.py; expected.json "drift"): 0.9e-7 to 4.6e-7 relative on TF 2.15. Measured here
#: (Keras 3 and tf_keras on TF 2.21 alike): logits 0.0 off, losses 1.3e-7 to 2.5e-7 relative over
#: the 16 steps. The first 8 steps are held to 2e-5 (issue 33), the whole run to the larger of
#: that and 10 times the case's drift.
FIRST_STEPS_RTOL = 2e-5


def test_the_named_twin_continues_as_the_estimator_loss_by_loss(run):
    exp = run["exp"]
    envelope = max(FIRST_STEPS_RTOL, 10 * max(exp["drift"].values()))
    np.testing.assert_allclose(
        run["losses"][:8], exp["losses"][:8], rtol=FIRST_STEPS_RTOL, atol=1e-7
    )
    np.testing.assert_allclose(run["losses"], exp["losses"], rtol=envelope, atol=1e-7)


def test_the_twin_writes_every_variable_of_the_estimators_checkpoint(run):
    exp = run["exp"]
    reader = tf.train.load_checkpoint(str(run["model_dir"]))
    assert int(reader.get_tensor("global_step")) == exp["switch"] + len(exp["losses"])
    written = {k: list(v) for k, v in reader.get_variable_to_shape_map().items()}
    assert {k: written.get(k) for k in exp["variables"]} == exp["variables"]


def test_a_declared_name_the_checkpoint_lacks_is_refused_by_name(tmp_path):
    """A twin whose columns differ from the checkpoint's: never mapped by shapes and order."""
    exp = expected("linear_v1")
    arguments = make_fixture.arguments(exp["arguments"])
    columns = arguments["feature_columns"]
    renamed = tf.feature_column.numeric_column("b2")  # 'b' -> 'b2': same shape, other name
    arguments["feature_columns"] = [renamed if c.name == "b" else c for c in columns]
    twin = hookbridge.keras_twin(exp["kind"], **arguments)
    with pytest.raises(
        ValueError,
        match=r"does not hold 1 of them.*linear/linear_model/b2/"
        r"weights \(Keras weight .* not in the checkpoint\)",
    ):
        hookbridge.restore_checkpoint(twin, FIXTURES / "linear_v1" / "model_dir", "auto")


def test_extra_features_are_ignored_never_mapped_by_position():
    exp = expected("linear_v1")
    twin = twin_of("linear_v1")
    hookbridge.restore_checkpoint(twin, FIXTURES / "linear_v1" / "model_dir", "auto")
    first = {k: v[:4] for k, v in FEATURES.items()}
    extra = {"0_first": np.full((4, 1), 9.0, "float32"), **first, "zz": np.ones((4, 2), "float32")}
    np.testing.assert_array_equal(
        twin.predict(batches(extra), verbose=0), twin.predict(batches(first), verbose=0)
    )
    assert exp["kind"] == "LinearRegressor"


def test_unknown_and_unsupported_arguments_are_refused_by_name():
    columns = make_fixture.columns()
    with pytest.raises(
        ValueError,
        match=r"DNNClassifier takes no argument 'hidden', 'optimiser'"
        r"; DNNClassifier needs 'hidden_units'; weight_column='w'",
    ):
        hookbridge.keras_twin(
            "DNNClassifier",
            feature_columns=columns,
            hidden=[3],
            optimiser="Adam",
            weight_column="w",
        )
    with pytest.raises(ValueError, match=r"BoostedTreesClassifier is not supported.*trees"):
        hookbridge.keras_twin("BoostedTreesClassifier", feature_columns=columns)
    with pytest.raises(ValueError, match=r"loss_reduction='none'"):
        hookbridge.keras_twin("LinearRegressorV2", feature_columns=columns, loss_reduction="none")
