"""CallbackHook on the workers of a real between-graph TF1 cluster on loopback: 1 parameter
server and 2 workers, each a process of its own (``tests/distributed/ps_cluster.py``), on ports
picked free, within a bounded time, with no process left behind.

One cluster launch runs every scenario in turn (each in its own graph and name scope on the same
servers): chief-only callbacks and epochs from the shared global step, then stops decided on the
chief (EarlyStopping, TerminateOnNaN), the same ending with a hand-written native TF1
shared-variable stop, and a stop decided on the non-chief.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from distributed.procs import background, free_ports, run_processes

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tests" / "distributed"
# PYTHONPATH: the processes import this tree's hookbridge, not an installed one.
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
}
KERAS3 = str(getattr(tf.keras, "__version__", "2")).startswith("3")
#: Runs a worker may start after the chief set the shared stop: the one in flight may have read
#: the variable just before the chief set it, the next one reads it set.
MAX_RUNS_AFTER_STOP = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Launches 1 ps + 2 workers once for the module; returns (results by task, out dir)."""
    out = tmp_path_factory.mktemp("cluster")
    ps, w0, w1 = free_ports(3)
    spec = json.dumps({"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]})
    script = str(HERE / "ps_cluster.py")

    def command(role, task):
        return ([sys.executable, script, role, str(task), spec, "all", str(out)], ENV)

    with background([command("ps", 0)]):
        results = run_processes([command("worker", 0), command("worker", 1)], timeout=240)
    by_task = {r["task"]: r for r in results}
    return by_task[0], by_task[1], out


def _epochs(report):
    return [e[0] for e in report["epochs"]]


def test_file_writers_run_on_the_chief_only(cluster):
    chief, other, out = cluster
    got, spe = chief["files"], chief["files"]["spe"]
    # the chief's epoch logs, as its Recorder got them: {epoch: loss}
    logs = {epoch: epoch_logs["loss"] for epoch, _, epoch_logs, _ in got["rec"]["epochs"]}
    assert len(logs) >= 3

    # CSVLogger: the chief's rows are its epoch logs; the non-chief wrote no file.
    with open(out / "worker0" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["epoch"]), float(r["loss"])) for r in rows] == [
        (e, pytest.approx(v)) for e, v in logs.items()
    ]
    assert not (out / "worker1" / "log.csv").exists()

    # TensorBoard: the chief's epoch_loss scalars are its epoch logs; none on the non-chief.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "worker0" / "tb" / "train"))
    acc.Reload()
    scalars = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors("epoch_loss")]
    assert scalars == [(e, pytest.approx(v)) for e, v in logs.items()]
    assert not (out / "worker1" / "tb").exists()

    # ModelCheckpoint: one checkpoint per chief epoch ({epoch} is epoch + 1, as Keras names it),
    # holding w between what the callbacks before and after it read (the other worker trains on).
    before, after = got["rec"]["weights"], got["rec_after"]["weights"]
    template = got["checkpoint_template"]
    for i, e in enumerate(logs):
        saved = _saved_w(template.format(epoch=e + 1))
        assert before[i][0] <= saved <= after[i][0], (e, before[i], saved, after[i])
        # w += 1 per step (2 entries): past the epoch's end, but for the other worker's run in
        # flight (its step incremented, its w not yet)
        assert saved >= 2 * ((e + 1) * spe - 1)
    assert not list((out / "worker1").glob("ckpt-*"))

    # No file writer was even given the model on the non-chief; all of them on the chief.
    assert set(got["given_model"].values()) == {True}
    assert other["files"]["given_model"] == {
        "CSVLogger": False,
        "ModelCheckpoint": False,
        "TensorBoard": False,
        "ProgbarLogger": False,
    }


def _saved_w(path):
    """sum(w) as ModelCheckpoint saved it (h5 on Keras 3, a TF checkpoint on the others)."""
    if path.endswith(".h5"):
        import h5py

        with h5py.File(path) as f:
            keys = []
            f.visit(lambda k: keys.append(k) if isinstance(f[k], h5py.Dataset) else None)
            assert keys == ["files/w"], keys
            return float(np.sum(f["files/w"][()]))
    reader = tf.train.load_checkpoint(path)
    assert set(reader.get_variable_to_shape_map()) == {"files/w"}
    return float(np.sum(reader.get_tensor("files/w")))


def test_other_callbacks_run_on_both_and_chief_only_callbacks_empty_runs_all(cluster):
    chief, other, out = cluster
    for worker, task in ((chief, 0), (other, 1)):
        got = worker["files"]
        # History (not a file writer) runs on both, with each worker's own epoch logs.
        assert got["history"]["loss"] == pytest.approx([e[2]["loss"] for e in got["rec"]["epochs"]])
        # chief_only_callbacks=[]: the CSVLogger of the second hook writes on both workers.
        with open(out / f"worker{task}" / "all.csv") as f:
            rows = [(int(r["epoch"]), float(r["loss"])) for r in csv.DictReader(f)]
        assert rows == [(e[0], pytest.approx(e[2]["loss"])) for e in got["rec_all"]["epochs"]]
        assert rows, task


def test_epochs_follow_the_shared_global_step(cluster):
    """Both workers number their epochs from the shared step, close them in order, and their
    batches add up: every run is in exactly one epoch of one worker, so the batches of all
    epochs sum to the final global step; per epoch the two workers' batches sum to
    steps_per_epoch, give or take the run in flight on one worker when the other crossed the
    boundary (it counts in the epoch it began in)."""
    chief, other, _ = cluster
    spe, n_epochs = chief["files"]["spe"], chief["files"]["epochs"]
    final = max(chief["files"]["final_step"], other["files"]["final_step"])
    per_epoch = {}
    for worker in (chief, other):
        got = worker["files"]
        rec = got["rec"]
        epochs = _epochs(rec)
        assert epochs == sorted(set(epochs)), epochs  # on_epoch_end in order
        assert epochs[-1] <= n_epochs - 1 and rec["epochs"][-1][3] >= n_epochs * spe
        for epoch, batches, _logs, step_at_end in rec["epochs"]:
            assert step_at_end >= (epoch + 1) * spe  # closed once the shared step passed it
            per_epoch[epoch] = per_epoch.get(epoch, 0) + batches
            # its own batches: this worker fed 100 * task + run index
        for epoch, step_at_begin in rec["begins"]:
            assert step_at_begin >= epoch * spe  # opened with the number the step says
        assert sum(e[1] for e in rec["epochs"]) == len(got["runs"])
        assert rec["train_end"] == rec["epochs"][-1][2]
    # every epoch was closed by some worker (a worker may skip a number if it lagged an epoch)
    assert sorted(per_epoch) == list(range(n_epochs))
    assert sum(per_epoch.values()) == final
    # each worker stops at its first run that sees the last step: at most one run per worker
    # past epochs * steps_per_epoch (the step is read in the run that increments it)
    assert n_epochs * spe <= final <= n_epochs * spe + 2
    for batches in per_epoch.values():
        assert abs(batches - spe) <= 2, per_epoch
    # the means are each worker's own batches: the chief fed 0, 1, 2, ... and the other
    # 100, 101, ...; its epoch means lie in its own range
    assert all(e[2]["loss"] < 100 for e in chief["files"]["rec"]["epochs"])
    assert all(e[2]["loss"] >= 100 for e in other["files"]["rec"]["epochs"])


def _runs_after(worker_phase, when):
    return sum(1 for start, _ in worker_phase["runs"] if start > when)


@pytest.mark.parametrize("scenario", ["early", "nan"])
def test_a_stop_on_the_chief_stops_every_worker(cluster, scenario):
    chief, other, _ = cluster
    spe = chief["spe"]
    c, o = chief[scenario], other[scenario]
    stop_time = c["rec"]["stop_time"]
    assert stop_time is not None
    if scenario == "early":  # constant loss: EarlyStopping(patience=1) stops after epoch 1
        assert len(_epochs(c["rec"])) == 2
    else:  # the chief's 6th run fed a NaN: TerminateOnNaN stopped at that batch
        assert len(c["runs"]) == 6
        assert np.isnan(c["rec"]["train_end"]["loss"])
    # The non-chief ended at its next run(s), long before its own end (epochs=50).
    assert _runs_after(o, stop_time) <= MAX_RUNS_AFTER_STOP, (o["runs"], stop_time)
    assert o["end"] - stop_time < 20.0
    final = max(c["final_step"], o["final_step"])
    assert final < 4 * spe + 2 * MAX_RUNS_AFTER_STOP < 50 * spe
    # and ran on_train_end with its last epoch's logs, as after a stop in fit
    assert o["rec"]["train_end"] == o["rec"]["epochs"][-1][2]


def test_the_chief_stop_ends_like_the_native_tf1_shared_variable(cluster):
    """The same cluster with a hand-written SessionRunHook sharing a stop variable (the TF1
    way): the non-chief ends the same way, within the same number of runs."""
    chief, other, _ = cluster
    native_stop = chief["native"]["stop_time"]
    assert native_stop is not None
    native_after = _runs_after(other["native"], native_stop)
    bridged_after = _runs_after(other["early"], chief["early"]["rec"]["stop_time"])
    assert native_after <= MAX_RUNS_AFTER_STOP and bridged_after <= MAX_RUNS_AFTER_STOP
    for phase in ("native", "early"):
        final = max(chief[phase]["final_step"], other[phase]["final_step"])
        stopped_at = len(chief[phase]["runs"]) + len(other[phase]["runs"])
        assert final == stopped_at  # every run of either worker is one step


def test_a_stop_on_a_non_chief_stops_that_worker_only(cluster):
    chief, other, _ = cluster
    spe = chief["spe"]
    other_epochs, chief_epochs = _epochs(other["own"]["rec"]), _epochs(chief["own"]["rec"])
    assert len(other_epochs) == 2 and other_epochs[-1] < 3  # stopped itself after its epoch 1
    assert chief_epochs[-1] == 3  # epochs=4: the chief trained on to the end
    assert chief["own"]["final_step"] >= 4 * spe
    assert chief["own"]["end"] > other["own"]["end"]


EXAMPLE = ROOT / "examples" / "distributed" / "ps_cluster_callbacks.py"


def _deep_off_keras3(test):
    """CI runs the example (a ps and 2 workers: three TensorFlow start-ups) on keras3, the
    primary stack; what it shows (chief-only file writers, EarlyStopping on the chief stopping
    the other worker) the ``cluster`` fixture's scenarios prove on every stack. The deep profile
    runs it on every stack."""
    return test if KERAS3 else pytest.mark.deep(test)


@_deep_off_keras3
def test_ps_cluster_example_runs_on_one_machine(tmp_path):
    """The example spawns its own ps and 2 workers on free loopback ports, and ends them all."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(tmp_path)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    summary = json.loads(next(ln for ln in lines if ln.startswith("{")))
    assert summary["processes_left"] == 0
    chief, other = summary["workers"]
    assert chief["stopped_by"] == "EarlyStopping (chief)"
    assert other["stopped_by"] == "the chief's stop"
    with open(tmp_path / "worker0.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == chief["epochs"]
    assert [float(r["loss"]) for r in rows] == pytest.approx(chief["losses"])
    assert not (tmp_path / "worker1.csv").exists()
