"""The census wide & deep model: TF 2.15 Estimator -> Keras twin on every stack -> and back.

The subject is census's canned ``tf.compat.v1.estimator.DNNLinearCombinedClassifier`` (vocabulary,
hash-bucket, bucketized and crossed columns in the linear part; numeric, indicator and embedding
columns in the DNN part; ``tests/fixtures/census_twin/columns.py``), trained 300 steps on TF 2.15
by ``tests/fixtures/census_twin/make_fixture.py``, which checked in its step-300 ``model_dir``,
its logits there, its 60 batch losses continuing to step 360, its step-360 checkpoint and the
drift the Estimator shows against itself under float perturbations (``envelope``).

On every stack (TF 2.21 with Keras 3 or tf_keras: no tensorflow-estimator):
``keras_twin("DNNLinearCombinedClassifier", **census arguments)`` restored ``"auto"`` from the
Estimator's ``model_dir`` predicts its logits (1e-5), continues loss by loss as it did (the first 8
steps within rtol 2e-5, all 60 within the envelope), and the checkpoint it writes through
``estimator_hooks`` holds the Estimator's step-360 weights and optimizer slots (each within 1e-2).
On TF 2.15 the whole way: the twin of the Estimator object, and the Estimator continuing from the
twin's checkpoint as the twin continues in memory. Across stacks: the Estimator on TF 2.15
continuing from the checkpoint the twin wrote on TF 2.21 / Keras 3 (``keras3_back/``, checked in
with ``make_keras_back.py``, which keras3 holds bit-equal to what the code writes now).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from estimator_setup import ESTIMATOR_ONLY, LossRecorder
from fixtures.census_twin import columns, data

import hookbridge

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "census_twin"
EXPECTED = json.loads((FIXTURE / "fixture.json").read_text())
SWITCH = EXPECTED["train_steps"]
STEPS = EXPECTED["continue_steps"]
FIRST_STEPS, FIRST_RTOL, SLOT_RTOL = 8, 2e-5, 1e-2
#: On TF 2.15 the named twin's switch (the ``named`` fixture: the three tests marked with this)
#: is the deep profile's: there ``round_trip`` runs the same switch with ``keras_twin(the
#: Estimator)``, which builds the twin through the same ``build()`` from the arguments it reads
#: (``test_the_named_twin_is_the_estimators_twin`` holds the two twins equal, weights, optimizers
#: and outputs). TF 2.21 (Keras 3, tf_keras) runs the named switch in CI: its only twin there.
NAMED_SWITCH = (
    pytest.mark.deep
    if importlib.util.find_spec("tensorflow_estimator") is not None
    else pytest.mark.usefixtures()
)


def rows(seed: int, n: int, what: str):
    """``data.rows(seed, n)``, checked against the digest of the rows the Estimator ran on."""
    features, labels = data.rows(seed, n)
    assert data.digest(features, labels) == EXPECTED["digests"][what], (
        f"data.py no longer draws the {what} rows make_fixture.py used: rerun it on tf215"
    )
    return features, labels


def continue_in_keras(twin, model_dir: Path, first: int, steps: int, save: bool) -> list[float]:
    """``fit`` from global step ``first`` over ``steps`` continuation batches (in order) under
    ``HookCallback``; with ``save``, ``estimator_hooks(model_dir, model=twin)`` write the
    checkpoint at the end. Returns the batch losses."""
    features, labels = rows(data.CONTINUE_SEED, steps * data.BATCH, "continue")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)
    recorder = LossRecorder()

    def hooks():
        if not save:
            return [recorder]
        return [
            recorder,
            *hookbridge.estimator_hooks(
                model_dir,
                model=twin,
                save_checkpoints_steps=steps,
                save_summary_steps=0,
                log_step_count_steps=None,
            ),
        ]

    # One batch an epoch: Keras logs each batch's own loss, not a running mean over the epoch
    # that the bridge would take apart again in float32 (docs/limits.md, "Batch values Keras
    # does not log": up to 6e-6 relative here by the 44th batch of an epoch).
    twin.fit(
        dataset,
        initial_epoch=first,
        epochs=first + steps,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
        callbacks=[hookbridge.HookCallback(hooks)],
    )
    return recorder.losses


def switch(twin, tmp_path: Path) -> dict:
    """The twin restored from a copy of the Estimator's step-300 model_dir: its logits there, its
    60 continuation losses, the checkpoint it wrote at step 360."""
    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURE / "model_dir", model_dir)
    step = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    features, _ = rows(data.PREDICT_SEED, EXPECTED["predict_rows"], "predict")
    batch = tf.data.Dataset.from_tensor_slices(features).batch(len(_))
    logits = twin.predict(batch, verbose=0)
    losses = continue_in_keras(twin, model_dir, step, STEPS, save=True)
    return {"step": step, "logits": logits, "losses": losses, "model_dir": model_dir}


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """The twin built from census's class name and arguments (every stack)."""
    twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    return switch(twin, tmp_path_factory.mktemp("census_named"))


def assert_follows(losses, expected) -> None:
    """``losses`` as ``expected`` step by step: the first 8 within rtol 2e-5, every one within
    the Estimator's own drift envelope (``make_fixture.py``)."""
    assert len(losses) == len(expected)
    np.testing.assert_allclose(losses[:FIRST_STEPS], expected[:FIRST_STEPS], rtol=FIRST_RTOL)
    np.testing.assert_allclose(losses, expected, rtol=EXPECTED["envelope"], atol=0)


def assert_checkpoint_as_the_estimators(model_dir: Path) -> None:
    """The twin's step-360 checkpoint against the Estimator's (``fixtures/census_twin/
    continued``): every variable of the Estimator's, under its name and shape; each slot within
    1e-2 of the Estimator's (largest difference over largest value)."""
    mine = tf.train.load_checkpoint(str(model_dir))
    theirs = tf.train.load_checkpoint(str(FIXTURE / "continued"))
    assert int(mine.get_tensor("global_step")) == SWITCH + STEPS
    shapes = theirs.get_variable_to_shape_map()
    assert {k: mine.get_variable_to_shape_map().get(k) for k in shapes} == shapes
    far = {}
    for name in sorted(shapes):
        if name == "global_step":
            continue
        a, b = mine.get_tensor(name), theirs.get_tensor(name)
        scale = max(float(np.abs(b).max()), 1e-12)
        if float(np.abs(a - b).max()) / scale > SLOT_RTOL:
            far[name] = float(np.abs(a - b).max()) / scale
    assert far == {}


def test_the_rows_are_those_the_estimator_trained_on():
    rows(data.TRAIN_SEED, SWITCH * data.BATCH, "train")
    rows(data.CONTINUE_SEED, STEPS * data.BATCH, "continue")
    rows(data.PREDICT_SEED, EXPECTED["predict_rows"], "predict")


@NAMED_SWITCH
def test_the_named_twin_predicts_the_estimators_logits(named):
    assert named["step"] == SWITCH
    np.testing.assert_allclose(
        named["logits"].reshape(-1), EXPECTED["logits"], rtol=1e-5, atol=1e-5
    )


@NAMED_SWITCH
def test_the_named_twin_continues_as_the_estimator_loss_by_loss(named):
    assert_follows(named["losses"], EXPECTED["losses"])


@NAMED_SWITCH
def test_the_named_twin_writes_the_estimators_variables_and_slots(named):
    assert_checkpoint_as_the_estimators(named["model_dir"])


def twin_facts(twin, features) -> dict:
    """What makes two twins the same model: every weight (the Estimator name it declares, shape,
    dtype, value), each optimizer (class, config), the loss and the logits of ``features``."""
    from hookbridge._hook_callback.graph import tf1_names

    names = tf1_names(twin)
    optimizers = [twin.optimizer, *getattr(twin, "extra_optimizers", [])]
    return {
        "weights": [
            (names[i], tuple(w.shape), w.dtype.name, np.asarray(w).tolist())
            for i, w in enumerate(twin.weights)
        ],
        "optimizers": [(type(o).__name__, o.get_config()) for o in optimizers],
        "loss": tf.keras.losses.serialize(twin.loss),
        "logits": np.asarray(twin(features, training=False)).tolist(),
    }


def test_the_named_twin_is_the_estimators_twin(tmp_path):
    """TF 2.15: ``keras_twin("DNNLinearCombinedClassifier", **census arguments)`` and
    ``keras_twin(census's Estimator)`` are one model (restored from the same checkpoint: the same
    weights under the same names, the same optimizers and loss, the same logits eagerly)."""
    pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)
    from fixtures.census_twin import native

    features, _ = rows(data.PREDICT_SEED, EXPECTED["predict_rows"], "predict")
    features = {k: tf.constant(v) for k, v in features.items()}
    facts = []
    for twin in (
        hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments()),
        hookbridge.keras_twin(native.estimator(tmp_path / "estimator")),
    ):
        assert hookbridge.restore_checkpoint(twin, FIXTURE / "model_dir", "auto") == SWITCH
        facts.append(twin_facts(twin, features))
    assert facts[0] == facts[1]


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """TF 2.15: the twin of the Estimator object, continued 300 -> 360 from its model_dir; then
    the Estimator continues from the twin's step-360 checkpoint (360 -> 420, the continuation
    rows again) while the twin goes on in memory over the same batches."""
    pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)
    from fixtures.census_twin import native

    root = tmp_path_factory.mktemp("census_round_trip")
    twin = hookbridge.keras_twin(native.estimator(root / "estimator"))
    run = switch(twin, root)
    back = root / "back"
    shutil.copytree(run["model_dir"], back)
    run["back"] = native.train(back, data.CONTINUE_SEED, STEPS, SWITCH + 2 * STEPS)
    run["keras"] = continue_in_keras(twin, run["model_dir"], SWITCH + STEPS, STEPS, save=False)
    return run


def test_the_estimators_twin_predicts_and_continues_as_the_estimator(round_trip):
    assert round_trip["step"] == SWITCH
    np.testing.assert_allclose(
        round_trip["logits"].reshape(-1), EXPECTED["logits"], rtol=1e-5, atol=1e-5
    )
    assert_follows(round_trip["losses"], EXPECTED["losses"])
    assert_checkpoint_as_the_estimators(round_trip["model_dir"])


def test_the_estimator_continues_from_the_twins_checkpoint_as_the_twin(round_trip):
    assert_follows(round_trip["back"], round_trip["keras"])


# The way back across stacks: the Estimator (TF 2.15) continuing from the checkpoint census's
# twin wrote on TF 2.21 / Keras 3. CI runs the stacks in separate environments, so the keras3
# half is checked in with the script that writes it (fixtures/census_twin/make_keras_back.py):
# keras3 holds the fixture to what the code writes now, tf215 continues from it.
BACK = FIXTURE / "keras3_back"


def test_the_keras3_back_fixture_is_what_the_twin_writes_now(tmp_path):
    """Keras 3: ``make_keras_back.keras_back`` rerun writes the checked-in step-360 checkpoint
    bit for bit (every tensor) and the checked-in losses; its 300 -> 360 losses follow the
    Estimator's."""
    from conftest import STACK

    if STACK != "keras3":
        pytest.skip("keras3_back/ is what TF 2.21 with Keras 3 writes: checked there")
    from fixture_modules import assert_rerun_as_recorded, fixture_script

    made = fixture_script(FIXTURE, "make_keras_back").keras_back(tmp_path / "back")
    recorded = json.loads((FIXTURE / "keras3_back.json").read_text())
    assert_rerun_as_recorded(made, recorded, tmp_path / "back", BACK, ("switch_losses", "losses"))
    assert_follows(made["switch_losses"], EXPECTED["losses"])


def estimator_back(tmp_path: Path, checkpoint: Path = BACK) -> list[float]:
    """TF 2.15: the Estimator continuing from a copy of ``checkpoint`` (step 360) over the
    continuation rows again, 360 -> 420; its batch losses."""
    from fixtures.census_twin import native

    model_dir = tmp_path / checkpoint.name
    shutil.copytree(checkpoint, model_dir)
    return native.train(model_dir, data.CONTINUE_SEED, STEPS, SWITCH + 2 * STEPS)


#: The Estimator's own way back: from its step-360 checkpoint (``continued/``), 360 -> 420, as
#: ``make_continued_back.py`` recorded it on TF 2.15 (deterministic: two runs bit-equal). CI
#: reads it (a 60-step Estimator run saved); the deep profile reruns it against the record.
CONTINUED_BACK = json.loads((FIXTURE / "continued_back.json").read_text())


def test_the_estimator_continues_from_the_keras3_twins_checkpoint(tmp_path):
    """TF 2.15: the Estimator, from the step-360 checkpoint the twin wrote on TF 2.21 / Keras 3,
    continues loss by loss as the twin did in memory there and as the Estimator does from its
    own step-360 checkpoint (``continued/``, ``CONTINUED_BACK``): the first 8 within rtol 2e-5,
    all 60 within the census envelope."""
    pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)
    recorded = json.loads((FIXTURE / "keras3_back.json").read_text())
    assert recorded["versions"]["keras"].startswith("3.")
    back = estimator_back(tmp_path)
    assert_follows(back, recorded["losses"])
    assert_follows(back, CONTINUED_BACK["losses"])


@pytest.mark.deep
def test_the_estimators_own_way_back_is_the_recorded_one(tmp_path):
    """TF 2.15: ``continued_back.json`` is what the Estimator continuing from ``continued/``
    gives now, loss for loss (bit-equal: the run is deterministic)."""
    pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)
    assert CONTINUED_BACK["versions"]["tensorflow"] == tf.__version__
    assert estimator_back(tmp_path, FIXTURE / "continued") == CONTINUED_BACK["losses"]
