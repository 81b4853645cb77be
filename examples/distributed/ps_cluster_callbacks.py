"""Keras callbacks on the workers of a TF1 parameter-server cluster, on one machine.

A between-graph cluster: 1 parameter server and 2 workers, each a process (this script starts
them as subprocesses of itself, on free loopback ports, and ends them all). Every worker trains
the same linear model (variables on the ps, ``replica_device_setter``) in a
``MonitoredTrainingSession`` with a ``hookbridge.CallbackHook`` holding a ``CSVLogger`` and an
``EarlyStopping``:

* ``is_chief=`` tells the hook where it runs. The CSVLogger writes on the chief only (the file
  writers do by default); EarlyStopping is made chief-only here too (``chief_only_callbacks``):
  the chief decides, as one process decided in TF1 clusters.
* Epochs follow the global step the workers share (``steps_per_epoch`` global steps each).
* When the chief's EarlyStopping stops training, every worker stops at its next run.

Run: python examples/distributed/ps_cluster_callbacks.py [--out DIR]
(without --out: a temporary folder, removed when the script ends)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np

STEPS_PER_EPOCH, EPOCHS = 10, 100


def worker(task: int, cluster, server, out: Path) -> dict:
    """One worker: trains until its session stops; returns what happened."""
    import tensorflow as tf  # in the tasks only: the launcher does not need TensorFlow

    import hookbridge

    v1, keras = tf.compat.v1, tf.keras
    is_chief = task == 0
    rng = np.random.default_rng(task)
    x = rng.normal(size=(256, 3)).astype("float32")
    y = x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3
    with tf.Graph().as_default():
        with v1.device(
            v1.train.replica_device_setter(
                cluster=cluster, worker_device=f"/job:worker/task:{task}"
            )
        ):
            global_step = v1.train.get_or_create_global_step()
            batch = v1.data.make_one_shot_iterator(
                tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
            )
            features, labels = batch.get_next()
            w = v1.get_variable("w", [3, 1], initializer=v1.zeros_initializer())
            b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(features @ w + b - labels), name="loss")
            train_op = v1.train.GradientDescentOptimizer(0.02).minimize(loss, global_step)

        csv_logger = keras.callbacks.CSVLogger(str(out / f"worker{task}.csv"))
        early = keras.callbacks.EarlyStopping(monitor="loss", min_delta=1e-3, patience=2)
        hook = hookbridge.CallbackHook(
            [csv_logger, early],
            logs={"loss": loss},
            batch_size=features,
            steps_per_epoch=STEPS_PER_EPOCH,
            epochs=EPOCHS,
            verbose=0,
            is_chief=is_chief,
            chief_only_callbacks=[csv_logger, early],
        )
        # Only this worker's own tasks: a worker does not wait for the other workers.
        config = v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
        if not is_chief:  # a worker polls for the chief's initialization every 30 s: wait here
            _wait_for(out / "chief-ready")
        runs = 0
        with v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief, hooks=[hook], config=config
        ) as sess:
            (out / ("chief-ready" if is_chief else "worker-ready")).touch()
            if is_chief:  # start together, as the workers of a real cluster would
                _wait_for(out / "worker-ready")
            while not sess.should_stop():
                sess.run(train_op)
                runs += 1
                time.sleep(0.002)  # a real step takes longer: let the two workers interleave
        with v1.Session(server.target, config=config) as s:
            step = int(s.run(global_step))
    if is_chief:
        stopped_by = "EarlyStopping (chief)" if early.stopped_epoch > 0 else "epochs"
    else:
        stopped_by = "the chief's stop" if step < EPOCHS * STEPS_PER_EPOCH else "epochs"
    rows = []
    if (out / f"worker{task}.csv").exists():
        rows = (out / f"worker{task}.csv").read_text().splitlines()[1:]
    return {
        "task": task,
        "runs": runs,
        "global_step": step,
        "stopped_by": stopped_by,
        "epochs": [int(r.split(",")[0]) for r in rows],
        "losses": [float(r.split(",")[1]) for r in rows],
    }


def _wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def launch(out: Path) -> dict:
    """Starts the ps and the 2 workers, waits for the workers (4 minutes at most), kills the
    ps, and checks that no process is left."""
    ps, w0, w1 = _free_ports(3)
    spec = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]}

    def start(role, task, **kw):
        argv = [sys.executable, __file__, "--role", role, "--task", str(task)]
        argv += ["--cluster", json.dumps(spec), "--out", str(out)]
        return subprocess.Popen(argv, start_new_session=True, text=True, **kw)

    procs = [start("ps", 0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        workers = [start("worker", t, stdout=subprocess.PIPE) for t in (0, 1)]
        procs += workers
        results = []
        for proc in workers:
            stdout, _ = proc.communicate(timeout=240)
            if proc.returncode != 0:
                raise RuntimeError(f"worker {proc.args} failed ({proc.returncode})")
            results.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for proc in procs:  # the ps serves forever: end it (and anything left) here
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    left = 0
    for proc in procs:
        try:
            os.killpg(proc.pid, 0)
            left += 1
        except ProcessLookupError:
            pass
    return {"workers": results, "processes_left": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the workers write (default: a temporary folder)")
    parser.add_argument("--role", choices=["ps", "worker"], help=argparse.SUPPRESS)
    parser.add_argument("--task", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cluster", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is not None:  # one task of the cluster
        import tensorflow as tf

        cluster = tf.train.ClusterSpec(json.loads(args.cluster))
        server = tf.distribute.Server(cluster, job_name=args.role, task_index=args.task)
        if args.role == "ps":
            server.join()  # serves until the launcher kills it
        print(json.dumps(worker(args.task, cluster, server, Path(args.out))), flush=True)
        os._exit(0)  # the in-process server's threads would keep the process alive
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        summary = launch(out)
        for w in summary["workers"]:
            role = "chief" if w["task"] == 0 else "worker"
            print(
                f"worker {w['task']} ({role}): {w['runs']} runs, stopped by {w['stopped_by']} "
                f"at global step {w['global_step']}; CSV epochs {w['epochs'] or 'none (chief only)'}"
            )
        print(f"processes left: {summary['processes_left']}")
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
