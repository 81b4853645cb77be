"""``hookbridge scan --stage0``: every TF1-only name ``hookbridge upgrade`` would rewrite, with its
replacement; none on the upgraded fixtures (tests/fixtures/upgrade_expected), whose exit code
says stage 0 is clean; ``unverified`` (never clean) without TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbridge import cli
from hookbridge._migrate.scan import findings, scan
from hookbridge._migrate.upgrade import engine

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.per_tensorflow("stage 0 is tf_upgrade_v2's tables and hookbridge's rules")
BEFORE = ROOT / "tests" / "fixtures" / "upgrade"
AFTER = ROOT / "tests" / "fixtures" / "upgrade_expected"


@pytest.fixture(scope="module")
def bert():
    return scan(BEFORE / "bert_like", stage0=True)


def _rows(result):
    return {(x.path, x.line, x.name): x for x in result.findings}


def test_bert_like_lists_the_tf1_only_names_with_their_replacement(bert):
    rows = _rows(bert)
    details = {(path, name): x.detail for (path, _, name), x in rows.items()}
    expected = {
        ("run_classifier.py", "tf.flags"): "absl.flags",
        ("optimization.py", "tf.train.Optimizer"): "tf.compat.v1.train.Optimizer",
        ("run_classifier.py", "tf.gfile.MakeDirs"): "tf.io.gfile.makedirs",
        ("run_classifier.py", "tf.gfile.GFile"): "tf.io.gfile.GFile",
        ("run_classifier.py", "tf.logging.info"): "tf.compat.v1.logging.info",
        ("run_classifier.py", "tf.FixedLenFeature"): "tf.io.FixedLenFeature",
        (
            "run_classifier.py",
            "tf.contrib.tpu.TPUEstimator",
        ): "tf.compat.v1.estimator.tpu.TPUEstimator",
        ("run_classifier.py", "tf.contrib.tpu.RunConfig"): "tf.compat.v1.estimator.tpu.RunConfig",
        ("modeling.py", "tf.contrib.layers.layer_norm"): "tf_slim.layers.layer_norm",
        ("modeling.py", "x.shape[-1].value"): "tf.compat.v1.dimension_value(x.shape[-1])",
        ("run_classifier.py", "tf.app.run"): "absl.app.run(main)",
        ("modeling.py", "tf.nn.dropout(...)"): "arguments rewritten by the upgrade",
    }
    for key, new in expected.items():
        assert key in details, key
        assert details[key].endswith(new) or new in details[key], (key, details[key])
    assert {x.kind for x in bert.findings} == {findings.TF1_NAME}
    assert {x.status for x in bert.findings} == {findings.REMOVED_API}
    assert bert.stages()["0 imports"] == {"removed-api": len(bert.findings)}
    assert len(rows) == len(bert.findings)  # one row per line and name
    assert bert.exit_code() == findings.EXIT_ATTENTION


@pytest.mark.parametrize("project", ["bert_like", "census_like"])
def test_after_upgrade_stage0_is_clean(project, capsys):
    before = scan(BEFORE / project, stage0=True)
    after = scan(AFTER / project, stage0=True)
    assert before.findings and before.exit_code() == findings.EXIT_ATTENTION
    assert after.findings == () and after.exit_code() == findings.EXIT_OK
    assert cli.main(["scan", "--stage0", str(AFTER / project), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["exit_code"] == 0
    assert cli.main(["scan", "--stage0", str(BEFORE / project)]) == findings.EXIT_ATTENTION


def test_census_like_lists_its_four_tf1_names():
    names = {(x.path, x.name) for x in scan(BEFORE / "census_like", stage0=True).findings}
    for name in ("tf.ConfigProto", "tf.decode_csv", "tf.gfile.GFile", "tf.logging.info"):
        assert any(n == name for _, n in names), name
    assert ("hooks.py", "tf.train.SessionRunHook") in names


def test_a_call_is_a_row_only_while_the_upgrade_would_rewrite_it():
    tf1 = "import tensorflow as tf\ny = tf.nn.dropout(x, keep_prob=0.9)\n"
    tf2 = "import tensorflow as tf\ny = tf.nn.dropout(x, rate=0.1)\n"
    assert engine.stage0_names(tf1) == [
        (2, "tf.nn.dropout(...)", "arguments rewritten by the upgrade")
    ]
    assert engine.upgrade_source(tf2).text is None
    assert engine.stage0_names(tf2) == []


def test_without_tensorflow_stage0_is_unverified_never_clean():
    code = (
        "import sys\n"
        "sys.modules['tensorflow'] = None  # `import tensorflow` raises ImportError\n"
        "from hookbridge.cli import main\n"
        f"rc = main(['scan', '--stage0', {str(AFTER / 'census_like')!r}, '--format', 'json'])\n"
        "print('RC', rc, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert "RC 1" in proc.stderr, proc.stderr
    (row,) = json.loads(proc.stdout)["findings"]
    assert row["status"] == findings.UNVERIFIED and row["detail"].startswith("unknown:")
