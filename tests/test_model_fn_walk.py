"""docs/migration.md's BERT walk ("the model_fn in Keras fit") runs as written, with its figures.

``examples/bert_model_fn/``: on TF 2.15 the TPUEstimator half writes the model_dir, and it is
``tests/fixtures/model_fns``'s bert subject bit for bit (the deep profile); on every stack the
``fit`` half continues that model_dir (the fixture's: the same checkpoint) and is held to the Estimator
continuing (predictions 1e-5, losses rtol 2e-5 for 8 steps, then the Estimator's own drift
envelope); on TF 2.15 the Estimator takes the job back from fit's checkpoint; the hand-written Keras
BERT refuses "auto", restores by its explicit map and predicts what ``model_fn_model`` predicts.
The doc's code blocks are the scripts' marked regions, and ``upgrade --model-fn`` makes the
example's ``model_fn`` from its TF1 spelling.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixture_modules import assert_checkpoint_as_recorded, assert_json_as_recorded

from hookbridge._migrate.model_fn import compat
from hookbridge._migrate.upgrade import engine

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "bert_model_fn"
DOC = ROOT / "docs" / "migration.md"
FIXTURE = ROOT / "tests" / "fixtures" / "model_fns"
BERT = json.loads((FIXTURE / "fixtures.json").read_text())["subjects"]["bert"]
#: BERT's pre-trained checkpoint: the fixture's (the walk's own stand-in is 5 steps more).
PRETRAINED = str(FIXTURE / "bert" / "warm_start" / "pretrained.ckpt")
FIRST_STEPS, FIRST_RTOL = 8, 2e-5
MODULES = ("classifier", "walk", "estimator_tf215", "fit_tf221", "rewrite")


#: The Estimator's own drift over the run (its checkpoint times ``1 ± 1e-7``): every step's bound.
DRIFT = max(BERT["envelope"])


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    """The whole walk in one output folder, each script's ``run`` in process; returns what each
    printed and wrote."""
    out = tmp_path_factory.mktemp("bert_walk")
    printed: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(EXAMPLE))
        for name in MODULES:
            sys.modules.pop(name, None)
        import estimator_tf215
        import fit_tf221
        import rewrite

        def run(label, function):
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer), warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                result = function(out)
            printed[label] = buffer.getvalue()
            printed[f"{label} warnings"] = "\n".join(str(x.message) for x in w)
            return result

        # The Estimator half's model_dir and estimator.json: the fixture's, which that half
        # writes bit for bit on TF 2.15 (the deep profile's test_the_estimator_half_is_the_
        # fixtures_run_bit_for_bit reruns it: a 30-step TPUEstimator BERT job, its prediction and
        # its 20-step continuation, ~20 s of the tf215 file's CI time).
        shutil.copytree(FIXTURE / "bert" / "model_dir", out / "model_dir")
        (out / "estimator.json").write_text(json.dumps(dict(BERT, init_checkpoint=PRETRAINED)))
        model = run("fit", fit_tf221.run)
        if compat.NATIVE:
            run("back", estimator_tf215.back)
        off = run("rewrite", lambda out: rewrite.run(out, model))  # fit's model: step 50
        for name in MODULES:
            sys.modules.pop(name, None)
    yield {"out": out, "printed": printed, "model": model, "rewrite_off": off}
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.deep
@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_estimator_half_is_the_fixtures_run_bit_for_bit(tmp_path):
    """The walk's Estimator half, run as written, writes the fixture the CI walk starts from:
    its losses, predictions and continuation (rtol 2e-5, the issue's first-steps tolerance), and
    its step-30 checkpoint (each tensor within 1e-5 of its kind's largest value): bit for bit on
    the machine that recorded them; on an AMD EPYC machine 30 Adam steps took a loss 2.3e-6
    relative off."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(EXAMPLE))
        for name in MODULES:
            sys.modules.pop(name, None)
        import estimator_tf215

        try:
            with contextlib.redirect_stdout(io.StringIO()):
                estimator_tf215.run(tmp_path, PRETRAINED)
        finally:
            for name in MODULES:
                sys.modules.pop(name, None)
    written = json.loads((tmp_path / "estimator.json").read_text())
    for key in ("train_losses", "predictions", "continued_losses"):  # 30 Adam steps amplify
        assert_json_as_recorded(written[key], BERT[key], rtol=2e-5, where=key)  # a rounding
    assert_checkpoint_as_recorded(
        str(tmp_path / "model_dir" / "model.ckpt-30"),
        str(FIXTURE / "bert" / "model_dir" / "model.ckpt-30"),
    )


def test_fit_continues_the_estimators_model_dir_as_the_estimator_did(walked):
    out = walked["out"]
    reference = json.loads((out / "estimator.json").read_text())
    fitted = json.loads((out / "fit.json").read_text())
    assert (fitted["from_step"], fitted["to_step"]) == (30, 50)
    for key, expected in reference["predictions"].items():  # at the switch
        np.testing.assert_allclose(fitted["predictions"][key], expected, rtol=1e-5, atol=1e-5)
    losses = np.asarray(fitted["losses"])
    native = np.asarray(reference["continued_losses"])
    deviation = np.abs(losses - native) / np.abs(native)
    assert len(losses) == 20
    assert np.all(deviation[:FIRST_STEPS] <= FIRST_RTOL), deviation
    assert np.all(deviation <= DRIFT), deviation
    # The checkpoints fit wrote are the Estimator's: names, BERT's slots, the global step.
    assert tf.train.latest_checkpoint(str(out / "model_dir")).endswith("model.ckpt-50")
    reader = tf.train.load_checkpoint(str(out / "model_dir" / "model.ckpt-40"))
    names = set(reader.get_variable_to_shape_map())
    assert reader.get_tensor("global_step") == 40
    assert "bert/encoder/layer_1/attention/self/query/kernel/adam_m" in names
    assert sum(n.endswith(("/adam_m", "/adam_v")) for n in names) == 82
    assert names == set(
        tf.train.load_checkpoint(
            str(out / "model_dir" / "model.ckpt-30")
        ).get_variable_to_shape_map()
    )
    assert "at the switch: predictions within" in walked["printed"]["fit"]


@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_estimator_takes_the_job_back_from_fits_checkpoint(walked):
    out = walked["out"]
    back = json.loads((out / "back.json").read_text())
    native = json.loads((out / "estimator.json").read_text())["continued_losses"][10:]
    fitted = json.loads((out / "fit.json").read_text())["losses"][10:]
    assert back["from_step"] == 40 and len(back["losses"]) == 10
    for reference in (native, fitted):
        deviation = np.abs(np.subtract(back["losses"], reference)) / np.abs(reference)
        assert np.all(deviation[:FIRST_STEPS] <= FIRST_RTOL), deviation
        assert np.all(deviation <= DRIFT), deviation


def test_the_rewrite_refuses_auto_and_predicts_what_the_model_fn_predicts(walked):
    printed = walked["printed"]["rewrite"]
    assert "cannot decide which checkpoint variable fills 28 Keras weight(s)" in printed
    quoted = DOC.read_text().split("restore_checkpoint: assignment_map='auto' cannot decide")[1]
    assert printed.split("cannot decide")[1].split(" of '")[0] == quoted.split(" of '")[0]
    assert "41 weights" in printed
    assert max(walked["rewrite_off"].values()) <= 1e-5, walked["rewrite_off"]
    # Its restore had no optimizer for BERT's 82 adam_m/adam_v slots, and said so.
    warned = walked["printed"]["rewrite warnings"]
    assert "optimizer state that was not loaded" in warned and "(74 more)" in warned, warned


def _region(path: Path, name: str) -> str:
    text = path.read_text()
    start = text.index(f"# --8<-- [start:{name}]\n") + len(f"# --8<-- [start:{name}]\n")
    return textwrap.dedent(text[start : text.index(f"# --8<-- [end:{name}]")]).rstrip()


def test_the_docs_code_blocks_are_the_scripts():
    """Each ``<!-- walk: SCRIPT:REGION -->`` in the doc is followed by that region, verbatim."""
    page = DOC.read_text()
    quoted = re.findall(r"<!-- walk: (\S+):(\w+) -->\n```python\n(.*?)\n```", page, re.S)
    assert {(s, r) for s, r, _ in quoted} == {
        ("estimator_tf215.py", "estimator"),
        ("fit_tf221.py", "fit"),
        ("estimator_tf215.py", "back"),
        ("rewrite.py", "rewrite"),
        ("rewrite.py", "names"),
    }
    for script, region, block in quoted:
        assert block == _region(EXAMPLE / script, region), f"{script}:{region}"


def test_upgrade_model_fn_makes_the_examples_model_fn_from_its_tf1_spelling():
    """The example's classifier.py is what ``hookbridge upgrade --model-fn`` makes of the TF1
    spelling (the same code as the AST says; ruff then formatted it)."""
    upgraded = (EXAMPLE / "classifier.py").read_text()
    tf1 = upgraded.replace("import hookbridge.estimator_compat\n", "")
    for new, old in [
        ("hookbridge.estimator_compat.layers.", "tf.compat.v1.layers."),
        ("hookbridge.estimator_compat.ModeKeys", "tf.estimator.ModeKeys"),
        (
            "hookbridge.estimator_compat.TPUEstimatorSpec",
            "tf.compat.v1.estimator.tpu.TPUEstimatorSpec",
        ),
    ]:
        tf1 = tf1.replace(new, old)
    assert "estimator_compat." not in tf1.split('"""', 2)[2]
    result = engine.upgrade_source(tf1, "classifier.py", model_fn=True)
    assert len(result.changes) == 10
    assert ast.dump(ast.parse(result.text)) == ast.dump(ast.parse(upgraded))
