"""CallbackHook(is_chief=...) under preemption in a between-graph TF1 cluster (1 ps + 2 workers
on loopback).

One scenario, real processes and real servers (``tests/distributed/ps_preempt.py``), driven by the
harness in ``tests/distributed/preempt_harness.py`` and read back by the tests below:

1. the ps, the chief (worker 0) and worker 1 start; worker 1 trains until it has closed an epoch
   past shared step 30, then is killed with SIGKILL and started again (same task index, same
   port), while the chief trains on;
2. once the restarted worker 1 has closed an epoch and the chief has written checkpoints, the ps is
   killed with SIGKILL while worker 1 trains and the chief is held in ``on_epoch_end`` (after its
   recording callback saw the event, before a callback reads the model, as Keras 2's TensorBoard
   does there); the chief's read fails inside ``on_epoch_end``; once both failed (UnavailableError), a
   standby ps serves on the same port: MonitoredTrainingSession recreates both sessions (the
   chief restores its latest checkpoint; worker 1's session creator is held until the chief has
   trained past the epoch worker 1 had open, then finds the model ready: asked before the chief
   restored, it slept SessionManager's 30 s ``recovery_wait_secs``);
3. both workers train to ``last_step`` (StopAtStepHook) and end normally.

A worker idle while the ps restarts is not part of it: on TF 2.21 its next run on the new ps
failed with CancelledError ("RecvFromRemoteAsync is cancelled", grouped with the ps's ABORTED
"Session handle is not found"), which MonitoredSession does not recover (native TF1: the error
comes from the session run, not from a hook).

Each worker also runs hand-written native ``SessionRunHook``s recording what MonitoredSession itself
calls (and each run's step and loss), beside the CallbackHook's recording Keras callback: the
native view and the bridged one of the same processes. The chief's CSVLogger / TensorBoard files
and MonitoredTrainingSession's checkpoints are read back with the real readers.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import tensorflow as tf
from distributed.preempt_harness import Cluster
from distributed.procs import free_ports

#: The scenario's subject is TensorFlow's (its servers killed and restarted, MonitoredSession's
#: recovery) with the bridge's epochs across it: CI runs it on keras3 and tf215 (TF 2.21 and TF
#: 2.15), tfkeras's Keras 2 callbacks (tf_keras, the lineage of tf215's Keras 2.15) run in the ps
#: cluster of test_cluster.py on every stack; the deep profile runs it on tfkeras too.
pytestmark = pytest.mark.per_tensorflow(
    "the ps preemption and the session recovery are TensorFlow's; tf215 runs Keras 2's callbacks"
)
SPE = 10  # steps per epoch
LAST_STEP = 240
DEADLINE_S = 240.0  # the whole scenario


def events(records: list[dict], name: str) -> list[dict]:
    return [r for r in records if r["ev"] == name]


def run_steps(records: list[dict]) -> list[int]:
    return [r["step"] for r in events(records, "run")]


def checkpoint_step(out: Path) -> int:
    state = tf.train.get_checkpoint_state(str(out / "checkpoints"))
    if state is None or not state.model_checkpoint_path:
        return -1
    return int(state.model_checkpoint_path.rsplit("-", 1)[1])


def recovered(records: list[dict]) -> bool:
    """A second session was created, and a run made in it."""
    created = [i for i, r in enumerate(records) if r["ev"] == "before:after_create_session"]
    return len(created) >= 2 and any(r["ev"] == "run" for r in records[created[1] :])


def since_recovery(records: list[dict]) -> list[dict]:
    """The records from the second session's creation on (none before it)."""
    created = [i for i, r in enumerate(records) if r["ev"] == "before:after_create_session"]
    return records[created[1] :] if len(created) >= 2 else []


def mid_epoch(records: list[dict]) -> bool:
    """The worker's latest epoch is open and it has made a run in it."""
    marks = [r["ev"] for r in records if r["ev"] in ("on_epoch_begin", "on_epoch_end", "run")]
    return "on_epoch_begin" in marks and marks[-1] == "run" and marks[-2] != "on_epoch_end"


@dataclass
class Scenario:
    out: Path
    records: dict[str, list[dict]]
    killed: dict[str, float]
    chief_step_at_worker_kill: int
    chief_steps_before_ps_kill: list[int]
    checkpoint_at_ps_kill: int
    held_epoch: int  # the chief's on_epoch_end the ps died in
    leftovers: list[int] | None


def say(out: Path, word: str) -> None:
    """The harness's word to the chief's ``HeldInEpochEnd`` (``arm``, ``go:<epoch>``, ``done``),
    written whole (a temporary file renamed)."""
    tmp = out / "hold-w0.tmp"
    tmp.write_text(word)
    os.replace(tmp, out / "hold-w0")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    out = tmp_path_factory.mktemp("preempt")
    ps_port, *worker_ports = free_ports(3)
    config = {
        "ps_port": ps_port,
        "worker_ports": worker_ports,
        "steps_per_epoch": SPE,
        "last_step": LAST_STEP,
        "save_checkpoint_steps": 20,
        "pace": 0.02,
        "chief_record": "w0.jsonl",
    }
    c = Cluster(out, config, DEADLINE_S)
    try:
        rec = c.records
        c.gate("w0", 40)  # the chief waits for worker 1 at step 40
        c.start("ps1", "ps")
        c.start("ps2", "ps", "--start-when", str(out / "ps2.go"))  # the standby ps
        c.start("w0", "worker", "0", "w0")
        c.start("w1a", "worker", "1", "w1a")

        # 1. Worker 1 killed and started again; the chief trains on meanwhile.
        c.wait(
            "worker 1 to close an epoch past shared step 30",
            lambda: (
                bool(events(rec("w1a"), "on_epoch_end"))
                and max(run_steps(rec("w1a")), default=-1) >= 30
            ),
        )
        c.kill("w1a")
        chief_step_at_worker_kill = max(run_steps(rec("w0")))
        c.gate("w0", chief_step_at_worker_kill + 40)
        c.start("w1b", "worker", "1", "w1b")
        c.wait(
            "the restarted worker 1 to close an epoch and the chief to checkpoint past step 40",
            lambda: bool(events(rec("w1b"), "on_epoch_end")) and checkpoint_step(out) >= 40,
        )

        # 2. The ps killed while the chief is held in on_epoch_end (after its recorder saw the
        # event, before its read of the model) and worker 1 trains: the chief's read fails
        # inside on_epoch_end, worker 1's run fails (UnavailableError); once both failed, the
        # standby ps serves on the port. The chief's session is recreated and restored from its
        # checkpoint; worker 1's is recreated when the model is ready again.
        c.gate("w0", None)
        say(out, "arm")
        while True:  # each epoch end of the chief is held; released until the moment is right
            held = len(events(rec("w0"), "held_in_epoch_end"))
            c.wait(
                "the chief held in on_epoch_end",
                lambda n=held: len(events(rec("w0"), "held_in_epoch_end")) > n,
            )
            held_epoch = events(rec("w0"), "held_in_epoch_end")[-1]["epoch"]
            # the shared step a few steps past the latest checkpoint, worker 1 mid-epoch
            if 3 <= run_steps(rec("w0"))[-1] - checkpoint_step(out) <= 12 and mid_epoch(rec("w1b")):
                break
            say(out, f"go:{held_epoch}")
        chief_steps_before_ps_kill = run_steps(rec("w0"))
        # worker 1's recovery waits for the harness (ps_preempt.hold_session_while_told)
        (out / "hold-session-w1b").touch()
        c.kill("ps1")
        say(out, "done")  # the chief reads the model on the lost ps, in on_epoch_end
        c.wait(
            "both workers' runs to fail on the lost ps",
            lambda: all(events(rec(n), "tf_recovery_log") for n in ("w0", "w1b")),
        )
        (out / "ps2.go").touch()
        checkpoint_at_ps_kill = checkpoint_step(out)
        c.wait("the chief's session to be recreated", lambda: recovered(rec("w0")))
        restored = events(rec("w0"), "before:after_create_session")[1]["step"]
        c.gate("w0", restored + 30)  # the chief waits for worker 1 to recover
        # worker 1's session comes back once the chief has trained past the epoch worker 1 had
        # open (restored + 30 is past it: worker 1 was mid-epoch at most 12 steps after it)
        open_epoch = events(rec("w1b"), "on_epoch_begin")[-1]["epoch"]
        c.wait(
            "the chief to train past worker 1's open epoch",
            lambda: max(run_steps(since_recovery(rec("w0"))), default=-1) >= (open_epoch + 1) * SPE,
        )
        (out / "hold-session-w1b").unlink()
        c.wait("worker 1's session to be recreated", lambda: recovered(rec("w1b")))
        c.gate("w0", None)

        # 3. Both train to the last step and end.
        c.finish("w0", "w1b")
        records = {name: rec(name) for name in ("w0", "w1a", "w1b")}
    finally:
        c.close()
    return Scenario(
        out=out,
        records=records,
        killed=dict(c.killed),
        chief_step_at_worker_kill=chief_step_at_worker_kill,
        chief_steps_before_ps_kill=chief_steps_before_ps_kill,
        checkpoint_at_ps_kill=checkpoint_at_ps_kill,
        held_epoch=held_epoch,
        leftovers=c.leftovers,
    )


def test_no_process_left_behind(scenario):
    assert scenario.leftovers == []


def test_killed_worker_restarts_at_the_shared_step(scenario):
    """(a) A worker killed with SIGKILL and started again (same task, same port) joins at the shared
    global step, as native TF1 does, and its CallbackHook numbers epochs from that step (epoch =
    step // steps_per_epoch), not from 0; the chief trains on meanwhile, in its one session."""
    killed, restarted, chief = (scenario.records[n] for n in ("w1a", "w1b", "w0"))
    # The killed process: its record ends at its death (no on_train_end, no end()).
    assert len(events(killed, "on_train_begin")) == 1
    assert not events(killed, "on_train_end") and not events(killed, "process_end")
    killed_epochs = [r["epoch"] for r in events(killed, "on_epoch_begin")]

    # Native: the new process's session starts at the shared step (the chief kept it).
    (before,) = events(restarted, "before:after_create_session")[:1]
    (after,) = events(restarted, "after:after_create_session")[:1]
    assert before["step"] > max(run_steps(killed)) >= 30
    # Bridged: on_train_begin once, then epochs numbered from that step.
    assert len(events(restarted, "on_train_begin")) == 1
    first_epoch = events(restarted, "on_epoch_begin")[0]["epoch"]
    assert before["step"] // SPE <= first_epoch <= after["step"] // SPE
    assert first_epoch >= killed_epochs[-1] > 0

    # The chief trained on between the kill and the restarted worker's first run, in one session.
    kill_time = scenario.killed["w1a"]
    first_run = events(restarted, "run")[0]["t"]
    alone = [r for r in events(chief, "run") if kill_time < r["t"] < first_run]
    assert alone, "the chief made no run while worker 1 was down"
    assert alone[-1]["step"] > scenario.chief_step_at_worker_kill
    sessions = [r["t"] for r in events(chief, "before:after_create_session")]
    assert sessions[0] < kill_time and sessions[1] > first_run  # the 2nd is the ps restart


def _epochs_never_restart(records: list[dict]) -> None:
    begun = [r["epoch"] for r in events(records, "on_epoch_begin")]
    closed = [r["epoch"] for r in events(records, "on_epoch_end")]
    assert begun == sorted(set(begun)), f"an epoch begun twice or out of order: {begun}"
    assert closed == sorted(set(closed)), f"an epoch closed twice or out of order: {closed}"
    assert set(closed) <= set(begun)


def test_ps_restart_recovers_sessions_without_restarting_training(scenario):
    """(b) The ps killed and restarted on its port: each worker's session fails and
    MonitoredSession recreates it. Native TF1 calls every hook's ``after_create_session`` again
    (``begin`` not); CallbackHook calls ``on_train_begin`` once, never opens an epoch again nor
    numbers one back, and training ends normally. The shared step goes back to the checkpoint the
    chief restored (the ps lost the variables; worker 1 waits until the chief restored them), and
    the epoch each worker has open stays open until the step passes its end again: the runs
    replaying the lost steps count in it."""
    for name in ("w0", "w1b"):
        records = scenario.records[name]
        # Native view: one begin, a second after_create_session (the recovery), TF's message.
        assert len(events(records, "before:begin")) == 1, name
        assert len(events(records, "before:after_create_session")) == 2, name
        assert events(records, "tf_recovery_log"), name
        # Bridged view: training began once, ended once, epochs went on.
        assert len(events(records, "on_train_begin")) == 1, name
        assert len(events(records, "on_train_end")) == 1, name
        _epochs_never_restart(records)
        # Normal end at the last step (StopAtStepHook), after end() on every hook.
        assert events(records, "before:end")[0]["step"] >= LAST_STEP, name
        assert records[-1]["ev"] == "process_end", name

    # What the shared step does: it restarts at the step of the checkpoint the chief restored,
    # the latest one when the ps died, a few steps below the step reached before (the ps lost
    # the variables). The first run on the restored model read that step, or the step after it
    # (TF1's read of the global step races the increment).
    latest = scenario.checkpoint_at_ps_kill
    assert 40 <= latest < max(scenario.chief_steps_before_ps_kill)
    ps_killed = scenario.killed["ps1"]
    after_restart = [
        r["step"]
        for n in ("w0", "w1b")
        for r in events(scenario.records[n], "run")
        if r["t"] > ps_killed
    ]
    assert min(after_restart) in (latest, latest + 1)
    # Each worker's new session starts at or past the restored step, never at 0.
    for name in ("w0", "w1b"):
        assert events(scenario.records[name], "before:after_create_session")[1]["step"] >= latest


def test_chief_files_are_intact(scenario):
    """(c) What the chief wrote survives both preemptions: every checkpoint listed in ``checkpoint``
    loads and their global steps increase; the CSV has its header once, increasing epochs, no torn
    line, and the rows the chief's callbacks saw; TensorBoard's epoch scalars equal the CSV's."""
    out = scenario.out
    state = tf.train.get_checkpoint_state(str(out / "checkpoints"))
    steps, values = [], []
    for path in state.all_model_checkpoint_paths:
        reader = tf.train.load_checkpoint(path)
        # Named after the step CheckpointSaverHook read; the saved value can be a few steps
        # later, as natively: the other worker trains on while the chief saves.
        name, value = int(path.rsplit("-", 1)[1]), int(reader.get_tensor("global_step"))
        assert name <= value <= name + 10, path
        assert reader.get_tensor("w").shape == (4, 1)
        steps.append(name)
        values.append(value)
    assert steps == sorted(set(steps)) and values == sorted(values), (steps, values)
    # Every checkpoint is kept (max_to_keep=100): from the first to the last, across both
    # preemptions, including the one the chief restored after the ps restart.
    assert steps[0] == 0 and scenario.checkpoint_at_ps_kill in steps
    # The final save at the end of training (worker 1 may still increment the step after it).
    assert LAST_STEP <= steps[-1] <= events(scenario.records["w0"], "before:end")[0]["step"]
    assert state.model_checkpoint_path == state.all_model_checkpoint_paths[-1]

    text = (out / "chief.csv").read_text()
    assert text.endswith("\n")
    lines = text.splitlines()
    # Keras 3's CSVLogger adds val_<name> columns (NA) when there is no validation; Keras 2 not.
    assert lines[0].startswith("epoch,loss") and lines.count(lines[0]) == 1, lines[:3]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(None not in row and None not in row.values() for row in rows)  # no torn line
    csv_rows = [(int(row["epoch"]), float(row["loss"])) for row in rows]
    epochs = [e for e, _ in csv_rows]
    assert epochs == sorted(set(epochs))
    seen = [(r["epoch"], r["logs"]["loss"]) for r in events(scenario.records["w0"], "on_epoch_end")]
    assert csv_rows == seen

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tb" / "train"), size_guidance={"tensors": 0})
    acc.Reload()
    scalars = [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors("epoch_loss")]
    assert [s for s, _ in scalars] == epochs
    for (_, tb), (_, value) in zip(scalars, csv_rows):
        assert tb == pytest.approx(value, rel=1e-6)


def epochs_of_runs(records: list[dict]) -> list[tuple[int, float, list[dict]]]:
    """Each epoch a worker closed: (epoch, its logged loss, the runs counted in it). A run is
    counted in the epoch open when its line is written (the native hook records the run before
    the CallbackHook's ``after_run``, which may close the epoch after it)."""
    closed, runs, current = [], [], None
    for r in records:
        if r["ev"] == "on_epoch_begin":
            current, runs = r["epoch"], []
        elif r["ev"] == "run" and current is not None:
            runs.append(r)
        elif r["ev"] == "on_epoch_end":
            assert r["epoch"] == current
            closed.append((current, r["logs"]["loss"], runs))
            current = None
    return closed


def recovery_time(records: list[dict]) -> float:
    return events(records, "before:after_create_session")[1]["t"]


def test_epoch_logs_are_the_means_of_the_workers_own_runs(scenario):
    """Epoch logs are the means of the loss values of the runs each worker made in the epoch
    (the batch size is constant), as the native hook fetched them in the same runs: on the
    chief (log tensors fetched), on worker 1 (epoch sums kept in the graph), before and after
    the restart of worker 1, and for the epochs not spanning the ps restart (next test)."""
    checked = 0
    for name in ("w0", "w1a", "w1b"):
        records = scenario.records[name]
        created = events(records, "before:after_create_session")
        recovered_at = created[1]["t"] if len(created) > 1 else float("inf")
        for epoch, loss, runs in epochs_of_runs(records):
            assert runs, (name, epoch)
            if runs[0]["t"] < recovered_at < runs[-1]["t"]:
                continue  # spans the ps restart
            mean = sum(r["loss"] for r in runs) / len(runs)
            assert loss == pytest.approx(mean, rel=1e-5), (name, epoch)
            checked += 1
    assert checked >= 15


def test_the_epoch_spanning_a_session_recovery_counts_every_run(scenario):
    """The epoch in progress on worker 1 when the ps restarted: its log is the mean of all the
    runs worker 1 made in it, before and after its session was recreated, as on the chief."""
    checked = []
    for name in ("w0", "w1b"):
        records = scenario.records[name]
        recovered_at = recovery_time(records)
        for epoch, loss, runs in epochs_of_runs(records):
            if runs and runs[0]["t"] < recovered_at < runs[-1]["t"]:
                mean = sum(r["loss"] for r in runs) / len(runs)
                checked.append(name)
                assert loss == pytest.approx(mean, rel=1e-5), (name, epoch, len(runs))
    if "w1b" not in checked:
        pytest.skip(
            "worker 1's failed run was the first of its epoch (retried in the new session): no "
            "run before the recovery to lose in this run"
        )


def test_a_recovered_worker_closes_the_epoch_the_shared_step_passed(scenario):
    """While worker 1's session was down (the ps restart, then the harness's hold of its session
    creator), the chief trained past the end of the epoch worker 1 had open. Epochs follow the
    shared step: that epoch ends before worker 1's first run in its new session, which counts in
    the epoch the shared step is in."""
    records = scenario.records["w1b"]
    created = [i for i, r in enumerate(records) if r["ev"] == "before:after_create_session"]
    recovery = created[1]
    step = records[recovery]["step"]
    open_epoch = [r["epoch"] for r in records[:recovery] if r["ev"] == "on_epoch_begin"][-1]
    assert step >= (open_epoch + 1) * SPE, (
        f"worker 1's session came back at step {step}, before the end of its open epoch "
        f"{open_epoch}: the harness's hold did not keep it"
    )
    marks = [r["ev"] for r in records[:recovery] if r["ev"] in ("on_epoch_begin", "run")]
    after = records[recovery:]
    first_run = next(i for i, r in enumerate(after) if r["ev"] == "run")
    closed = [i for i, r in enumerate(after) if r["ev"] == "on_epoch_end"]
    begun = [i for i, r in enumerate(after) if r["ev"] == "on_epoch_begin"]
    if marks[-1] == "run":  # worker 1 ran in the open epoch: it is closed with those runs
        assert closed and closed[0] < first_run, "the stale epoch took the first run"
        assert after[closed[0]]["epoch"] == open_epoch
    else:
        # The failed run was the first of its epoch (the epoch was begun for it): no run of
        # worker 1 counts in it, so it is dropped without on_epoch_end (CallbackHook warns).
        assert all(after[i]["epoch"] != open_epoch for i in closed), "an epoch without a run ended"
    assert begun and begun[0] < first_run, "the first run after the recovery has no epoch"
    assert after[begun[0]]["epoch"] >= step // SPE


def test_the_epoch_the_ps_died_in_is_closed_once(scenario):
    """The chief was held in ``on_epoch_end(E)`` while the ps was killed: its recorder had seen the
    event, the next callback's read of the model failed (UnavailableError) and MonitoredSession
    recovered. Epoch E is closed once for every callback, whatever the moment of the error (it
    was closed twice when the ps died there by chance on a loaded machine): the recorder's
    ``on_epoch_end(E)`` once, before the recovery; the CSV row and TensorBoard scalar of E once
    (the callbacks the error kept from the event get it in the new session); the first epoch
    begun after the recovery is later than E."""
    records = scenario.records["w0"]
    epoch = scenario.held_epoch
    (released,) = [r for r in records if r["ev"] == "released_in_epoch_end" and r["ps_lost"]]
    assert released["epoch"] == epoch
    ends = events(records, "on_epoch_end")
    assert [r["epoch"] for r in ends].count(epoch) == 1
    recovered_at = recovery_time(records)
    assert next(r["t"] for r in ends if r["epoch"] == epoch) < released["t"] < recovered_at
    begun_after = [r["epoch"] for r in events(records, "on_epoch_begin") if r["t"] > recovered_at]
    assert begun_after and begun_after[0] > epoch
    rows = list(csv.DictReader(io.StringIO((scenario.out / "chief.csv").read_text())))
    assert [int(row["epoch"]) for row in rows].count(epoch) == 1
