"""examples/migration/canned_dnn.py: a canned DNNClassifier to Keras and back prints the figures
docs/migration.md quotes (TF 2.15 stack: tensorflow-estimator)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow_estimator")

ROOT = Path(__file__).resolve().parent.parent


def test_canned_dnn_walk_prints_equal_losses_both_ways(tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "migration" / "canned_dnn.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "restored at step 40: 6 weights, optimizer Adagrad(learning_rate=0.001)"
    figures = [float(x) for x in re.findall(r"max (?:relative|absolute) difference (\S+)",
                                            proc.stdout)]
    assert len(figures) == 5 and max(figures) < 2e-5, proc.stdout
    # The checkpoint Keras wrote at step 80 is the Estimator's own, variable for variable.
    assert "Keras's model.ckpt-80 vs the Estimator's: the same" in proc.stdout
    assert "training/Adagrad/dnn/logits/kernel/accumulator" in proc.stdout
    assert lines[-1].startswith("rolled back to model.ckpt-40: 40 losses")
