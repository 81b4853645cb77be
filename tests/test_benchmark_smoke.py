"""The benchmark runs end to end in its short mode (no timing assertions: targets live in
benchmarks/bench.py, never in tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"
#: benchmarks/ has no TensorFlow/Keras version branch (the stack only names itself in the
#: report); the bridge it times is tested on every stack by the rest of the suite.
pytestmark = pytest.mark.one_stack("the benchmark scripts have no TensorFlow/Keras version branch")
CASES = (
    "bare",
    "keras_noop",
    "idle_1",
    "nan",
    "standard",
    "keras_nan",
    "keras_equiv",
    "idle_10",
    "idle_100",
    "wide_bare",
    "wide_standard",
    "cnn_bare",
    "cnn_keras_noop",
    "cnn_standard",
    "cnn_keras_equiv",
    "ms_bare",
    "ms_nan_hook",
    "ms_standard",
    "ms_tf1_equiv",
    "ms_callback_hook",
    "ms_callback_hook_epoch",
)


def _run(script, *args, timeout):
    """Runs ``benchmarks/<script>`` with ``args``; returns its stdout (it must exit 0)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    proc = subprocess.run(
        [sys.executable, str(BENCH.parent / script), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_bench_short_mode_runs_every_case():
    out = _run("bench.py", "--short", timeout=600)
    assert "machine:" in out
    rows = {line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")}
    missing = [c for c in CASES if c not in rows]
    assert not missing, f"cases missing from the table: {missing}\n{out}"
    assert "short mode: every case ran" in out
    assert "MISS" not in out and "PASS" not in out  # short mode gives no verdicts


def test_isolated_bridge_work_runs_every_case():
    out = _run("isolated.py", "--steps", "200", timeout=300)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "µs" not in line]
    assert [r.split("|")[1].strip() for r in rows] == [
        "no hooks",
        "1 idle hook",
        "NanTensorHook",
        "100 idle hooks",
        "standard set (bench.py; saves every 500 steps, summaries every 100)",
        "History, EarlyStopping, CSVLogger (sums in the graph)",
        "+ TerminateOnNaN (the loss fetched every step)",
    ]
    assert all(float(r.split("|")[2]) > 0 for r in rows)


def test_percall_measures_every_case():
    out = _run(
        "percall.py", "--fits", "1", "--steps", "30", "--epochs", "2", "--skip", "10", timeout=300
    )
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:4]
        for line in out.splitlines()
        if line.startswith("| ") and not line.startswith("| case")
    }
    assert set(rows) == {"keras_noop", "idle_1", "keras_nan", "nan"}, out
    for case, cells in rows.items():  # "p20 / median" per fit, both phases, positive
        for cell in cells:
            p20, median = (float(v) for v in cell.split("/"))
            assert 0 < p20 <= median, (case, cell)
    verdict = [line for line in out.splitlines() if line.startswith("nan: begin + end median")]
    assert len(verdict) == 1 and verdict[0].endswith(("PASS", "MISS")), out
