"""The way back across stacks for a ``model_fn``: the Estimator (TF 2.15) continuing from the
checkpoint ``fit`` wrote on TF 2.21 / Keras 3 (issue 32: "the Estimator continuing from the
checkpoint fit wrote, likewise").

CI runs the stacks in separate environments, so the keras3 half is checked in with the script
that writes it (``tests/fixtures/model_fns/make_keras_back.py``): the BERT subject's
``model_fn_model`` restored from the Estimator's step-30 checkpoint, ``fit`` 31-40 writing its
step-40 checkpoint through ``estimator_hooks`` (``bert/keras3_back/``), then 41-50 in memory
(``bert/keras3_back.json``). keras3 holds the fixture bit-equal to what the code writes now (the
deep profile: the recording's re-derivation); tf215 continues the Estimator from it, 41-50, loss
by loss as ``fit`` went on and as the Estimator went on from its own step-40 state
(``fixtures.json``): the first 8 within rtol 2e-5, every step within the Estimator's drift
against itself over the run (the largest of ``envelope``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import STACK
from fixture_modules import assert_rerun_as_recorded, fixture_script

from hookbridge._migrate.model_fn import compat

HERE = Path(__file__).resolve().parent / "fixtures" / "model_fns"
BERT = json.loads((HERE / "fixtures.json").read_text())["subjects"]["bert"]
BACK = HERE / "bert" / "keras3_back"
RECORDED = json.loads((HERE / "bert" / "keras3_back.json").read_text())
HALF = BERT["continue_steps"] // 2
FIRST_STEPS, FIRST_RTOL = 8, 2e-5


def assert_follows(losses, reference) -> None:
    """The first 8 within rtol 2e-5 and every step within the Estimator's drift against itself
    over the run (the largest of ``envelope``, 1.05e-7: tighter than 2e-5, as issue 32 asks)."""
    losses, reference = np.asarray(losses, np.float64), np.asarray(reference, np.float64)
    assert losses.shape == reference.shape
    deviation = np.abs(losses - reference) / np.abs(reference)
    print(f"max relative deviation {deviation.max():.3g}, first 8 {deviation[:8].max():.3g}")
    assert np.all(deviation[:FIRST_STEPS] <= FIRST_RTOL), deviation
    assert np.all(deviation <= max(BERT["envelope"])), deviation


#: Deep: the recording's re-derivation (a BERT build and 20-step fit, ~8 s). CI holds what it
#: re-derives from: fit's 31-50 on this subject against the Estimator's, on every stack, in
#: test_model_fn_walk.py (the same checkpoint, rows and checks), and the tf215 test below holds
#: the Estimator to the recording.
@pytest.mark.deep
def test_the_keras3_back_fixture_is_what_fit_writes_now(tmp_path):
    """Keras 3: ``make_keras_back.keras_back`` rerun writes the checked-in step-40 checkpoint and
    the checked-in losses (within another CPU's rounding); fit's 31-40 follow the Estimator's."""
    if STACK != "keras3":
        pytest.skip("bert/keras3_back/ is what TF 2.21 with Keras 3 writes: checked there")
    made = fixture_script(HERE, "make_keras_back").keras_back(tmp_path / "back")
    # Within what another CPU gives, not bit for bit (fixture_modules.assert_rerun_as_recorded):
    # on an AMD EPYC machine the rerun's losses were 1.7e-7 from the record.
    assert_rerun_as_recorded(made, RECORDED, tmp_path / "back", BACK, ("first_half", "losses"))
    assert_follows(made["first_half"], BERT["continued_losses"][:HALF])


@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_estimator_continues_from_the_checkpoint_fit_wrote_on_keras3(tmp_path):
    """TF 2.15: the BERT subject's Estimator, from the step-40 checkpoint ``fit`` wrote on
    TF 2.21 / Keras 3, continues 41-50 as ``fit`` did in memory there and as the Estimator did
    from its own state at step 40."""
    from fixtures.model_fns import bert

    assert RECORDED["versions"]["keras"].startswith("3.")
    model_dir = tmp_path / "model_dir"
    shutil.copytree(BACK, model_dir)
    features, labels = bert.rows(BERT["seeds"]["continue"], BERT["continue_steps"] * bert.BATCH)
    rows = slice(HALF * bert.BATCH, None)
    features, labels = tf.nest.map_structure(lambda a: a[rows], features), labels[rows]
    params = dict(bert.PARAMS)
    params.pop("log", None)
    params["init_checkpoint"] = str(HERE / "bert" / "warm_start" / "pretrained.ckpt")
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1
    )
    losses = []

    class Recorder(tf.compat.v1.train.SessionRunHook):
        def begin(self):
            summaries = tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
            (summary,) = [s for s in summaries if s.op.name == "loss"]
            self.loss = summary.op.inputs[1]

        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(self.loss)

        def after_run(self, run_context, run_values):
            losses.append(float(run_values.results))

    def input_fn(params=None):
        batch = (params or {}).get("batch_size", bert.BATCH)
        data = tf.data.Dataset.from_tensor_slices((features, labels))
        return data.batch(batch, drop_remainder=True)

    estimator = bert.estimator(model_dir, {"session_config": config}, params)
    estimator.train(
        input_fn, hooks=[Recorder()], max_steps=BERT["train_steps"] + BERT["continue_steps"]
    )
    assert_follows(losses, RECORDED["losses"])
    assert_follows(losses, BERT["continued_losses"][HALF:])
