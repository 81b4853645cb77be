"""One process of a between-graph TF1 cluster (1 ps + 2 workers) on loopback, for the preemption
tests (tests/test_cluster_preemption.py).

``python ps_preempt.py CONFIG.json ps``: the parameter server (``server.join()`` never returns:
the harness kills it). With ``--start-when PATH`` it imports TensorFlow, then waits for ``PATH``
to exist before serving: a standby ps that replaces a killed one on the same port at once.

``python ps_preempt.py CONFIG.json worker INDEX NAME``: a worker (index 0 is the chief) training a
small linear model whose variables live on the ps (``replica_device_setter``) in a
``MonitoredTrainingSession(master=server.target, is_chief=...)`` with, in this order:

* ``NativeRecorder("before")``: a hand-written ``SessionRunHook`` recording ``begin``, every
  ``after_create_session`` (with the shared global step, and on the chief the checkpoint it can have
  restored) and each run's global step and loss: the native TF1 view;
* ``CallbackHook(is_chief=...)`` with the same callbacks on every worker: a recording Keras
  callback (runs on every worker), a ``CSVLogger`` and a ``TensorBoard`` callback (file writers:
  the chief's only; the files the test reads back); the chief also has ``HeldInEpochEnd`` after
  its recorder, where the harness holds it in ``on_epoch_end`` while it kills the ps;
* ``NativeRecorder("after")``: the global step again after the CallbackHook's
  ``after_create_session`` (so the test brackets the step the CallbackHook read);
* ``StopAtStepHook(last_step)``: training ends at the same shared step on every worker.

Every record is one JSON line appended to ``<out>/<NAME>.jsonl`` and flushed at once, so a process
killed with SIGKILL leaves its record up to its death. MonitoredSession's own log line about a
recreated session (TF's "preemption" message, with the error it caught) is recorded too.

The harness paces the run: before each step a worker waits while the shared step is at or
beyond the number in ``<out>/gate-<NAME>`` (if the file exists), so the phases of a scenario
(kill a worker, restart the ps) happen at chosen steps however slowly processes start on a
loaded machine.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras
GATE_WAIT_LIMIT = 240.0  # seconds a worker waits at a gate before it gives up (harness gone)


class Record:
    """JSON lines appended to a file and flushed at once (they survive a SIGKILL)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    def write(self, event: str, **fields) -> None:
        line = json.dumps({"ev": event, "t": time.time(), **fields})
        self._file.write(line + "\n")
        self._file.flush()


class PreemptionLog(logging.Handler):
    """Records MonitoredSession's message when it recreates a session after an error."""

    def __init__(self, record: Record) -> None:
        super().__init__(logging.INFO)
        self._record = record

    def emit(self, log: logging.LogRecord) -> None:
        text = log.getMessage()
        if "session will be recreated" in text or "preemption" in text.lower():
            self._record.write("tf_recovery_log", message=text[-800:])


class NativeRecorder(tf.compat.v1.train.SessionRunHook):
    """The native TF1 view: what MonitoredSession calls, with the shared global step."""

    def __init__(self, record: Record, tag: str, checkpoint_dir: str | None) -> None:
        self._record = record
        self._tag = tag
        self._checkpoint_dir = checkpoint_dir

    def begin(self) -> None:
        self._gs = tf.compat.v1.train.get_global_step()
        self._record.write(f"{self._tag}:begin")

    def after_create_session(self, session, coord) -> None:
        latest = tf.train.latest_checkpoint(self._checkpoint_dir) if self._checkpoint_dir else None
        step = int(session.run(self._gs))
        self._record.write(f"{self._tag}:after_create_session", step=step, checkpoint=latest)

    def before_run(self, run_context):
        if self._tag == "before":
            loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            return tf.compat.v1.train.SessionRunArgs([self._gs, loss])
        return None

    def after_run(self, run_context, run_values) -> None:
        if self._tag == "before":
            step, loss = run_values.results
            self._record.write("run", step=int(step), loss=float(loss))

    def end(self, session) -> None:
        self._record.write(f"{self._tag}:end", step=int(session.run(self._gs)))


class CallbackRecord(keras.callbacks.Callback):
    """What the Keras callbacks see, one line per call. No batch method: on a worker where no
    callback reads batch logs, CallbackHook keeps the epoch sums in the graph (worker 1; the
    chief's TensorBoard callback reads batches, so the chief fetches the log tensors)."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self._record = record

    def on_train_begin(self, logs=None):
        self._record.write("on_train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self._record.write("on_epoch_begin", epoch=epoch)

    def on_epoch_end(self, epoch, logs=None):
        self._record.write("on_epoch_end", epoch=epoch, logs=dict(logs or {}))

    def on_train_end(self, logs=None):
        self._record.write("on_train_end", logs=dict(logs or {}))


def cluster_spec(config: dict) -> tf.train.ClusterSpec:
    return tf.train.ClusterSpec(
        {
            "ps": [f"127.0.0.1:{config['ps_port']}"],
            "worker": [f"127.0.0.1:{p}" for p in config["worker_ports"]],
        }
    )


def run_ps(config: dict, start_when: str | None) -> None:
    if start_when is not None:
        deadline = time.monotonic() + GATE_WAIT_LIMIT
        while not os.path.exists(start_when):
            if time.monotonic() > deadline:
                raise SystemExit(f"standby ps: {start_when} never appeared")
            time.sleep(0.01)
    server = tf.distribute.Server(cluster_spec(config), job_name="ps", task_index=0, start=True)
    print(json.dumps({"ps": "serving", "t": time.time()}), flush=True)
    server.join()


def hold_session_while_told(record: Record, path: Path) -> None:
    """Makes a non-chief's ``SessionManager.wait_for_session`` (where MonitoredTrainingSession's
    worker session creator waits for the model, at the start and after an error) wait first while
    the harness's file ``path`` exists: the harness holds worker 1's recovery until the chief has
    restored and trained past the epoch worker 1 had open. Without it worker 1 asked before the
    chief restored and slept SessionManager's ``recovery_wait_secs`` (30 s; measured 31.2 s of an
    86 s scenario on TF 2.15 under load), and whether the chief had passed that epoch meanwhile
    was left to timing. TF's own check runs unchanged once released."""
    manager = tf.compat.v1.train.SessionManager
    wait_for_session = manager.wait_for_session

    def held_wait_for_session(self, *args, **kwargs):
        if path.exists():
            record.write("held_session")
            deadline = time.monotonic() + GATE_WAIT_LIMIT
            while path.exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"held before the session by {path} too long")
                time.sleep(0.01)
            record.write("released_session")
        return wait_for_session(self, *args, **kwargs)

    manager.wait_for_session = held_wait_for_session


def wait_for_chief(config: dict) -> None:
    """A non-chief that asks before the chief initialized the variables sleeps
    SessionManager's recovery_wait_secs (30 s): start once the chief has run a step."""
    path = Path(config["out"]) / config["chief_record"]
    deadline = time.monotonic() + GATE_WAIT_LIMIT
    while not (path.exists() and '"ev": "run"' in path.read_text()):
        if time.monotonic() > deadline:
            raise SystemExit("the chief never ran a step")
        time.sleep(0.05)


def wait_at_gate(gate: Path, step: int, record: Record) -> None:
    """Waits while the harness's gate holds this step (see the module docstring); records
    ``held`` when it starts waiting (``0`` in the gate file: hold now)."""
    deadline = time.monotonic() + GATE_WAIT_LIMIT
    held = False
    while True:
        try:
            limit = int(gate.read_text())
        except (FileNotFoundError, ValueError):  # no gate, or the harness is writing it
            limit = None
        if limit is None or step < limit:
            if held:
                record.write("released", step=step)
            return
        if not held:
            held = True
            record.write("held", step=step, limit=limit)
        if time.monotonic() > deadline:
            raise SystemExit(f"held at the gate (step {step} >= {limit}) too long")
        time.sleep(0.02)


class HeldInEpochEnd(keras.callbacks.Callback):
    """The chief's, after its recorder: while the harness arms it (``<out>/hold-w0``), each
    ``on_epoch_end`` waits for the harness's word before it reads the model; the harness
    releases it (``go:<epoch>``) or kills the ps meanwhile (``done``, then no more holds), so
    the read (``model.optimizer.iterations``, as Keras 2's TensorBoard reads it at each epoch
    end) fails on the lost ps inside ``on_epoch_end``, after the recorder saw the event: the
    interleaving that made a worker close an epoch twice, forced instead of hoped for."""

    def __init__(self, record: Record, path: Path) -> None:
        super().__init__()
        self._record = record
        self._path = path
        self._done = False

    def _word(self) -> str | None:
        try:
            return self._path.read_text()
        except FileNotFoundError:
            return None

    def on_epoch_end(self, epoch, logs=None):
        if not self._done and self._word() not in (None, "done"):
            self._record.write("held_in_epoch_end", epoch=epoch)
            deadline = time.monotonic() + GATE_WAIT_LIMIT
            while self._word() not in (f"go:{epoch}", "done"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"held in on_epoch_end({epoch}) too long")
                time.sleep(0.01)
            self._done = self._word() == "done"
            self._record.write("released_in_epoch_end", epoch=epoch, ps_lost=self._done)
        int(self.model.optimizer.iterations)


def build_callbacks(config: dict, record: Record, is_chief: bool) -> list:
    """Every worker gets the same callbacks: a recorder, a CSVLogger and a TensorBoard callback,
    whose files are the chief's (the file writers run on the chief only); the chief also gets
    :class:`HeldInEpochEnd` after its recorder. Built before the TF1 graph is the default graph
    (tf_keras would return its graph-mode classes)."""
    out = Path(config["out"])
    held = [HeldInEpochEnd(record, out / "hold-w0")] if is_chief else []
    return [
        CallbackRecord(record),
        *held,
        keras.callbacks.CSVLogger(str(out / "chief.csv")),
        keras.callbacks.TensorBoard(str(out / "tb")),
    ]


def run_worker(config: dict, index: int, name: str) -> None:
    out = Path(config["out"])
    record = Record(out / f"{name}.jsonl")
    record.write("process_start", pid=os.getpid())
    hold_session_while_told(record, out / f"hold-session-{name}")
    tf.get_logger().setLevel(logging.INFO)
    tf.get_logger().addHandler(PreemptionLog(record))
    is_chief = index == 0
    spec = cluster_spec(config)
    server = tf.distribute.Server(spec, job_name="worker", task_index=index, start=True)
    checkpoint_dir = str(out / "checkpoints") if is_chief else None
    last_step = config["last_step"]
    rng = np.random.default_rng(index)
    true_w = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)

    callbacks = build_callbacks(config, record, is_chief)
    graph = tf.Graph()
    with graph.as_default():
        worker_device = f"/job:worker/task:{index}"
        setter = tf.compat.v1.train.replica_device_setter(cluster=spec, worker_device=worker_device)
        with tf.compat.v1.device(setter):
            gs = tf.compat.v1.train.get_or_create_global_step()
            x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
            y = tf.compat.v1.placeholder(tf.float32, [None, 1], name="y")
            w = tf.compat.v1.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y), name="loss")
            lr = tf.constant(0.02, name="learning_rate")
            train_op = tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(
                loss, global_step=gs
            )
        hooks = [
            NativeRecorder(record, "before", checkpoint_dir),
            hookbridge.CallbackHook(
                callbacks,
                logs={"loss": loss},
                steps_per_epoch=config["steps_per_epoch"],
                batch_size=x,
                learning_rate=lr,
                verbose=0,
                is_chief=is_chief,
            ),
            NativeRecorder(record, "after", checkpoint_dir),
            tf.compat.v1.train.StopAtStepHook(last_step=last_step),
        ]
        session_config = tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", worker_device]  # independent of the other worker
        )
        if not is_chief:
            wait_for_chief(config)
        gate, step = out / f"gate-{name}", 0
        with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=is_chief,
            checkpoint_dir=checkpoint_dir,
            save_checkpoint_steps=config["save_checkpoint_steps"],
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=None,
            hooks=hooks,
            config=session_config,
            # MonitoredTrainingSession's own saver (sharded over the ps), keeping every
            # checkpoint so that the test reads them all back.
            scaffold=tf.compat.v1.train.Scaffold(
                saver=tf.compat.v1.train.Saver(sharded=True, max_to_keep=100)
            ),
        ) as sess:
            while not sess.should_stop():
                wait_at_gate(gate, step, record)
                batch = rng.normal(size=(8, 4)).astype(np.float32)
                step = int(sess.run([train_op, gs], {x: batch, y: batch @ true_w})[1])
                time.sleep(config["pace"])
    record.write("process_end")
    print(json.dumps({"ok": True, "name": name}), flush=True)


def main(argv: list[str]) -> None:
    config = json.loads(Path(argv[1]).read_text())
    if argv[2] == "ps":
        start_when = argv[4] if len(argv) > 4 and argv[3] == "--start-when" else None
        run_ps(config, start_when)
    else:
        run_worker(config, int(argv[3]), argv[4])


if __name__ == "__main__":
    main(sys.argv)
