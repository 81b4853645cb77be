"""Canned Estimators continued by their Keras twin, and back (TF 2.15 stack: tensorflow-estimator).

For each canned Estimator with its default optimizer: it trains 8 steps into ``model_dir``; a copy
is continued to step 16 by the Estimator itself (native), the original by ``keras_twin(est)``
after ``restore_checkpoint(twin, model_dir, "auto")`` under ``estimator_hooks(model=twin)``
(bridged), batch loss by batch loss. Then the way back: the Estimator continues from the
twin's step-16 checkpoint while the twin goes on in memory, loss by loss again. The features are
declared ``b, a, c`` (the Estimator sorts them: ``a, b, c``).
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
import tensorflow as tf

try:
    import tensorflow_estimator  # noqa: F401
except ImportError:
    pytest.skip(
        "TF 2.15 stack only: needs tensorflow-estimator, which has no release for TF >= 2.16",
        allow_module_level=True,
    )

import hookbridge

v1 = tf.compat.v1
RNG = np.random.default_rng(2)
X = RNG.normal(size=(64, 3)).astype("float32")
FEATURES = {"b": X[:, :1], "a": X[:, 1:2], "c": X[:, 2:]}
SCORE = X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3
LABELS = {
    "binary": (SCORE > 0).astype("int64"),
    "classes": np.digitize(SCORE, [-1.0, 1.0]).astype("int64"),
    "regression": SCORE.astype("float32"),
}
BATCH = 16
STEPS_PER_EPOCH = len(X) // BATCH
CONFIG = {"save_checkpoints_steps": 4, "save_summary_steps": 100, "log_step_count_steps": 100}


def columns():
    return [tf.feature_column.numeric_column(k) for k in ("b", "a", "c")]


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
            linear_feature_columns=columns()[:2], dnn_feature_columns=columns(),
            dnn_hidden_units=[8, 4], **k,
        ),
        "binary",
    ),
    "DNNLinearCombinedRegressor V1": (
        lambda **k: tf.compat.v1.estimator.DNNLinearCombinedRegressor(
            linear_feature_columns=columns(), dnn_feature_columns=columns()[1:],
            dnn_hidden_units=[8], **k,
        ),
        "regression",
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


class LossRecorder(v1.train.SessionRunHook):
    """Each step's batch loss: the input of the Estimator's ``loss`` summary, or, under
    HookCallback, the bridge's ``loss`` tensor."""

    def __init__(self):
        self.losses = []

    def begin(self):
        graph = v1.get_default_graph()
        summaries = [
            s for s in graph.get_collection(v1.GraphKeys.SUMMARIES) if s.op.name == "loss"
        ]
        self._loss = summaries[0].op.inputs[1] if summaries else graph.get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def estimator(which, model_dir):
    make, _ = CANNED[which]
    config = tf.estimator.RunConfig(model_dir=str(model_dir), tf_random_seed=0, **CONFIG)
    return make(config=config)


def train(which, model_dir, max_steps):
    labels = LABELS[CANNED[which][1]]
    recorder = LossRecorder()
    estimator(which, model_dir).train(
        lambda: tf.data.Dataset.from_tensor_slices((FEATURES, labels)).batch(BATCH).repeat(),
        hooks=[recorder],
        max_steps=max_steps,
    )
    return recorder.losses


def logits(which, model_dir):
    predictions = estimator(which, model_dir).predict(
        lambda: tf.data.Dataset.from_tensor_slices(FEATURES).batch(BATCH)
    )
    return np.stack([p["logits"] if "logits" in p else p["predictions"] for p in predictions])


def keras_fit(which, model, first_step, last_step, hooks):
    recorder = LossRecorder()
    model.fit(
        FEATURES,
        LABELS[CANNED[which][1]],
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=first_step // STEPS_PER_EPOCH,
        epochs=last_step // STEPS_PER_EPOCH,
        verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: [recorder, *hooks()])],
    )
    return recorder.losses


@pytest.fixture(scope="module", params=list(CANNED))
def runs(request, tmp_path_factory):
    which = request.param
    root = tmp_path_factory.mktemp(which.replace(" ", "_"))
    bridged, native, back = root / "bridged", root / "native", root / "back"
    train(which, bridged, 8)
    shutil.copytree(bridged, native)
    at_switch = logits(which, bridged)
    native_losses = train(which, native, 16)
    twin = hookbridge.keras_twin(estimator(which, bridged))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hookbridge.restore_checkpoint(twin, bridged, "auto")
    twin_at_switch = twin.predict(FEATURES, verbose=0)
    bridged_losses = keras_fit(
        which, twin, 8, 16, lambda: hookbridge.estimator_hooks(bridged, model=twin, **CONFIG)
    )
    shutil.copytree(bridged / "estimator-backup", root / "rollback")
    rollback_losses = train(which, root / "rollback", 16)
    shutil.copytree(bridged, back)
    back_losses = train(which, back, 24)
    keras_losses = keras_fit(which, twin, 16, 24, lambda: [])
    return {
        "which": which,
        "step": step,
        "warnings": [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)],
        "at_switch": (at_switch, twin_at_switch),
        "native": native_losses,
        "bridged": bridged_losses,
        "back": back_losses,
        "keras": keras_losses,
        "rollback": rollback_losses,
    }


def test_the_twin_predicts_the_estimators_logits_at_the_switch(runs):
    assert runs["step"] == 8 and runs["warnings"] == []
    native, twin = runs["at_switch"]
    np.testing.assert_allclose(twin, native.reshape(twin.shape), rtol=1e-5, atol=1e-6)


def test_the_twin_continues_as_the_estimator_loss_by_loss(runs):
    assert len(runs["bridged"]) == len(runs["native"]) == 8
    np.testing.assert_allclose(runs["bridged"], runs["native"], rtol=2e-5, atol=1e-7)


def test_the_estimator_continues_as_the_twin_loss_by_loss(runs):
    assert len(runs["back"]) == len(runs["keras"]) == 8
    np.testing.assert_allclose(runs["back"], runs["keras"], rtol=2e-5, atol=1e-7)


def test_rolled_back_the_estimator_trains_as_it_did(runs):
    np.testing.assert_array_equal(runs["rollback"], runs["native"])


def test_what_the_twin_cannot_build_is_named():
    # tensorflow-estimator 2.15 has no BoostedTrees* left; a custom model_fn has no twin either.
    with pytest.raises(ValueError, match="EstimatorV2 is not supported.*custom model_fn"):
        hookbridge.keras_twin(tf.estimator.Estimator(lambda features, labels, mode: None))
    categorical = tf.feature_column.categorical_column_with_identity("k", 3)
    with pytest.raises(ValueError, match="column 'k' of type IdentityCategoricalColumn"):
        hookbridge.keras_twin(tf.estimator.LinearClassifier([categorical]))
