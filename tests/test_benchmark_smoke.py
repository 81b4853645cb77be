"""The benchmark runs end to end in its short mode (no timing assertions: targets live in
benchmarks/bench.py, never in tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from one_process import Job, run_scripts

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


#: Each script's arguments (its short mode).
RUNS = {
    "bench.py": ("--short",),
    "isolated.py": ("--steps", "200"),
    "percall.py": ("--fits", "1", "--steps", "30", "--epochs", "2", "--skip", "10"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three scripts run in turn in ONE subprocess (:func:`one_process.run_scripts`: each as
    ``python benchmarks/<script> ARGS`` runs it), TensorFlow's start-up paid once."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0")
    jobs = [Job(script, BENCH.parent / script, args) for script, args in RUNS.items()]
    return run_scripts(jobs, tmp_path_factory.mktemp("bench"), env, timeout=1200)


def _run(runs, script):
    """The stdout of ``benchmarks/<script>`` (it must exit 0)."""
    return runs[script].check().stdout


def test_bench_short_mode_runs_every_case(runs):
    out = _run(runs, "bench.py")
    assert "machine:" in out
    rows = {line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")}
    missing = [c for c in CASES if c not in rows]
    assert not missing, f"cases missing from the table: {missing}\n{out}"
    assert "short mode: every case ran" in out
    assert "MISS" not in out and "PASS" not in out  # short mode gives no verdicts


def test_isolated_bridge_work_runs_every_case(runs):
    out = _run(runs, "isolated.py")
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


def test_percall_measures_every_case(runs):
    out = _run(runs, "percall.py")
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
