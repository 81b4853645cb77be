"""examples/migration/: every stage of the walk-through runs, as docs/migration.md says.

On the TF 2.15 stack the whole chain runs into one output directory (the Estimator job, callbacks
inside it, the switch to Keras fit in the same model_dir, hooks replaced by callbacks); on every
stack the Keras stages run from an empty model_dir; and each replacement's ``hookbridge check``
passes.
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
from one_process import Job, run_scripts

from hookbridge._migrate import check as _check

MIGRATION = Path(__file__).resolve().parent.parent / "examples" / "migration"
ROOT = MIGRATION.parent.parent
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    # This checkout first (the stages import its hookbridge), then the caller's path.
    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
}
STAGES = [
    "stage0_estimator.py",
    "stage1_callbacks_in_estimator.py",
    "stage2_keras_fit.py",
    "stage3_native_callbacks.py",
]

try:
    import tensorflow_estimator  # noqa: F401

    HAS_ESTIMATOR = True
except ImportError:
    HAS_ESTIMATOR = False


def run_stage(name: str, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(MIGRATION / name), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def loss_steps(model_dir: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(model_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def loss_steps_per_file(model_dir: Path) -> list[list[int]]:
    """The ``loss`` summary steps of each event file (one per stage), oldest file first."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    per_file = []
    for path in sorted(model_dir.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        if "loss" in acc.Tags()["scalars"]:
            per_file.append([e.step for e in acc.Scalars("loss")])
    return per_file


def history_steps(out: Path) -> list[int]:
    with open(out / "loss_history.csv") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def test_every_script_is_a_stage_or_shared():
    # canned_dnn.py stands on its own: tests/test_migration_canned.py runs it.
    assert {p.name for p in MIGRATION.glob("*.py")} == {
        *STAGES,
        "project.py",
        "team_hooks.py",
        "canned_dnn.py",
    }


@pytest.mark.skipif(
    not HAS_ESTIMATOR, reason="TF 2.15 stack only: stages 0-1 need tensorflow-estimator"
)
def test_the_whole_migration_in_one_model_dir(tmp_path):
    out = tmp_path / "demo"
    proc = run_stage("stage0_estimator.py", str(out))
    assert f"writing to {out}" in proc.stdout
    assert "stage 0: Estimator trained to global step 20" in proc.stdout
    proc = run_stage("stage1_callbacks_in_estimator.py", str(out))
    assert "stage 1: Estimator trained to global step 40" in proc.stdout
    with open(out / "epochs.csv") as f:
        # CallbackHook's epochs of 4 steps continue from the restored step 20: epochs 5..9.
        assert [row["epoch"] for row in csv.DictReader(f)] == ["5", "6", "7", "8", "9"]

    proc = run_stage("stage2_keras_fit.py", str(out))
    lines = proc.stdout.splitlines()
    dry = lines.index(next(x for x in lines if x.startswith("restore_checkpoint dry run")))
    assert [x.split()[0] for x in lines[dry + 1 : dry + 6]] == [
        "dnn/hiddenlayer_0/kernel",
        "dnn/hiddenlayer_0/bias",
        "dnn/logits/kernel",
        "dnn/logits/bias",
        "global_step",
    ]
    assert "stage 2: Keras starts at global step 40" in proc.stdout
    assert "stage 2: Keras trained to global step 60" in proc.stdout
    assert "loss = " in proc.stderr and "step = 50" in proc.stderr  # Estimator's log line

    proc = run_stage("stage3_native_callbacks.py", str(out))
    assert "stage 3: Keras starts at global step 60" in proc.stdout
    assert "stage 3: Keras trained to global step 80" in proc.stdout

    # One TensorBoard `loss` curve from step 1 to 80, every 5 steps and at each restart, as the
    # Estimator's SummarySaverHook writes it; the step counter throughout.
    steps = loss_steps(out / "model_dir")
    assert set(steps) == {"loss", "global_step/sec"}
    # The Keras stages (steps 41-80) write exactly where the Estimator's SummarySaverHook writes
    # on a quiet machine. The Estimator stages are native TF1, where the hook fetches the global
    # step in the same run as the train op's increment (a race, see DESIGN.md): under load one
    # of their summaries can land a step late, so they are checked by range and spacing only.
    stage0, stage1, stage2, stage3 = loss_steps_per_file(out / "model_dir")
    assert stage2 == [41, 46, 51, 56]
    assert stage3 == [61, 66, 71, 76]
    for start, native in ((0, stage0), (20, stage1)):
        assert native[0] == start + 1 and native[-1] <= start + 21, (start, native)
        assert 4 <= len(native) <= 5 and all(b - a >= 4 for a, b in itertools.pairwise(native))
    rates = steps["global_step/sec"]  # the native stages' StepCounterHook has the same race
    assert len(rates) == 4 and rates[2:] == [51, 71]
    assert abs(rates[0] - 11) <= 1 and abs(rates[1] - 31) <= 1, rates
    # The team's loss history, first from its hook, then from its Keras replacement.
    # The hook's rows: exact in the Keras stages; in the native Estimator stages its global-step
    # fetch races the increment (as the summaries above), so a row can repeat or go missing there.
    history = history_steps(out)
    assert [s for s in history if s > 41] == list(range(45, 81, 5))
    native_rows = [s for s in history if s <= 41]
    assert 6 <= len(native_rows) <= 10 and native_rows == sorted(native_rows), history
    assert all(s % 5 == 0 for s in native_rows), history
    state = tf.train.get_checkpoint_state(str(out / "model_dir"))
    names = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    assert names == ["model.ckpt-60", "model.ckpt-70", "model.ckpt-80"]
    assert sorted(p.name for p in (out / "model_dir").glob("model.ckpt-*.index")) == [
        "model.ckpt-60.index",
        "model.ckpt-70.index",
        "model.ckpt-80.index",
    ]
    assert {p.name for p in out.iterdir()} == {"model_dir", "epochs.csv", "loss_history.csv"}
    # Written by Keras, named as the Estimator named them: the Estimator could take over again.
    reader = tf.train.load_checkpoint(str(out / "model_dir"))
    assert sorted(reader.get_variable_to_shape_map()) == [
        "dnn/hiddenlayer_0/bias",
        "dnn/hiddenlayer_0/kernel",
        "dnn/logits/bias",
        "dnn/logits/kernel",
        "global_step",
    ]


#: On TF 2.15 test_the_whole_migration_in_one_model_dir runs stages 2 and 3 (their StopAtStepHook,
#: the team's hook and its callback, fit on Keras 2.15) in their subprocesses already: there the
#: empty model_dir's two more (TF's start-up each: 9 s of the file's 28 s, tf215 alone) are the
#: deep profile's. Keras 3 and tf_keras run them in CI: their only run of the Keras stages.
def _deep_where_the_whole_migration_runs(test):
    return pytest.mark.deep(test) if HAS_ESTIMATOR else test


@_deep_where_the_whole_migration_runs
def test_keras_stages_from_an_empty_model_dir(tmp_path, tmp_path_factory, monkeypatch):
    """Stages 2 and 3 one after the other in ONE subprocess (``one_process.run_scripts``: each
    as ``python stage.py ARGS`` runs it, one TensorFlow start-up for both): stage 3 builds its
    own model and restores stage 2's last checkpoint from model_dir, as a second process does."""
    # No argument: the default ./migration_demo (the subprocess's working directory is this
    # test's), said, and nothing else written.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "migration_demo"
    jobs = [
        Job("stage2", MIGRATION / "stage2_keras_fit.py"),
        Job("stage3", MIGRATION / "stage3_native_callbacks.py", (str(out), "--replaced", "1")),
    ]
    ran = run_scripts(jobs, tmp_path_factory.mktemp("stages"), ENV, timeout=600)
    proc = ran["stage2"].check()
    assert f"writing to {out}" in proc.stdout
    assert "stage 2: Keras starts at global step 0" in proc.stdout
    assert "stage 2: Keras trained to global step 60" in proc.stdout
    proc = ran["stage3"].check()
    assert "stage 3: Keras starts at global step 60" in proc.stdout
    assert "replaced: the team's LossHistoryHook -> LossHistory" in proc.stdout
    assert "stage 3: Keras trained to global step 80" in proc.stdout
    # The hook's rows: exact in the Keras stages; in the native Estimator stages its global-step
    # fetch races the increment (as the summaries above), so a row can repeat or go missing there.
    history = history_steps(out)
    assert [s for s in history if s > 41] == list(range(45, 81, 5))
    native_rows = [s for s in history if s <= 41]
    assert 6 <= len(native_rows) <= 10 and native_rows == sorted(native_rows), history
    assert all(s % 5 == 0 for s in native_rows), history
    assert loss_steps(out / "model_dir")["loss"][-4:] == [61, 66, 71, 76]
    assert {p.name for p in tmp_path.iterdir()} == {"migration_demo"}
    assert {p.name for p in out.iterdir()} == {"model_dir", "epochs.csv", "loss_history.csv"}


@pytest.mark.parametrize(
    ("target", "callback"),
    [
        ("team_hooks:make_history_hook", False),  # stage 2: the hook runs the same in fit
        ("team_hooks:make_history_callback", True),  # stage 3: its replacement, in both worlds
        ("team_hooks:make_terminate_on_nan", True),
    ],
)
def test_each_replacement_is_proven_by_check(monkeypatch, target, callback):
    monkeypatch.syspath_prepend(str(MIGRATION))
    out, err = io.StringIO(), io.StringIO()
    request = _check.CheckRequest(target, steps=6, steps_per_epoch=3, callback=callback)
    assert _check.main(request, out, err) == 0, out.getvalue() + err.getvalue()
    assert out.getvalue().splitlines()[0].endswith(": conforms")
