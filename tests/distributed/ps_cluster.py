"""One task of a between-graph TF1 cluster on loopback (1 ps + 2 workers) with CallbackHook.

``python ps_cluster.py ROLE TASK CLUSTER_JSON LAUNCH OUT_DIR``: ``ROLE`` ``ps`` serves forever
(the harness kills it); ``worker`` runs the phases of ``LAUNCH`` (``files``, ``stops`` or ``all``), each in
a graph and name scope of its own on the same servers (``replica_device_setter``: variables on
the ps), and prints one JSON line with what each phase recorded, then exits.

Workers of a phase start together: the chief creates its session first and writes a flag; the
other worker then creates its own (a TF1 worker session that finds the model not ready polls
again only after 30 s), writes its flag, and both train (a short sleep per run keeps them
interleaved).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf
from tf1_worker import NativeSharedStop, global_step  # a sibling: this folder is sys.path[0]

import hookbridge

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")
SLEEP = 0.05  # seconds per run: both workers' runs interleave, through the chief's epoch ends


class Recorder(keras.callbacks.Callback):
    """Epoch begins/ends with the global step (``model.optimizer.iterations``), batch counts,
    weights at epoch end, and the time a stop was set (it runs last, after the callbacks that
    stop)."""

    def __init__(self):
        super().__init__()
        self.epochs, self.batches, self.stop_time, self.train_end = [], 0, None, None
        self.begins, self.weights = [], []

    def _step(self):
        return int(self.model.optimizer.iterations)

    def on_epoch_begin(self, epoch, logs=None):
        self.begins.append([epoch, self._step()])
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        self._note_stop()

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append([epoch, self.batches, dict(logs), self._step()])
        self.weights.append([float(w.sum()) for w in self.model.get_weights()])
        self._note_stop()

    def on_train_end(self, logs=None):
        self.train_end = dict(logs or {})

    def _note_stop(self):
        if self.model.stop_training and self.stop_time is None:
            self.stop_time = time.time()

    def report(self):
        return {
            "epochs": self.epochs,
            "begins": self.begins,
            "weights": self.weights,
            "stop_time": self.stop_time,
            "train_end": self.train_end,
        }


class StopAtEpochEnd(keras.callbacks.Callback):
    """Stops at the end of epoch ``epoch`` (or of a later one: a worker may skip numbers)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch >= self.epoch:
            self.model.stop_training = True


def build(scope, cluster, task):
    """The worker's graph under ``scope``: a fed loss, ``w`` (+1 per step) and the global step
    on the ps, the step incremented by the train op (unordered with its reads, as
    ``optimizer.minimize(global_step=...)``)."""
    g = tf.Graph()
    setter = tf.compat.v1.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{task}"
    )
    with g.as_default(), tf.compat.v1.device(setter), tf.compat.v1.name_scope(scope + "/"):
        gs = global_step()
        value = tf.compat.v1.placeholder(tf.float32, [], name="value")
        tf.identity(value, name="loss")
        w = tf.compat.v1.Variable(tf.zeros([2]), name="w")
        lr = tf.compat.v1.Variable(0.1, trainable=False, name="lr")
        train = tf.group(tf.compat.v1.assign_add(w, tf.ones([2])), gs.assign_add(1))
    return g, {"gs": gs, "value": value, "train": train, "loss": f"{scope}/loss", "lr": lr}


def wait_for(path, timeout=60.0):
    """Waits for the other worker's flag; gives up at once if the other worker failed."""
    deadline = time.time() + timeout
    while not path.exists():
        failed = list(path.parent.glob("failed-*"))
        if failed:
            raise RuntimeError(f"the other worker failed ({failed[0].name}): see its output")
        if time.time() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


def run_phase(name, server, cluster, task, out, hooks_of, value_of, max_runs=200):
    """One training session of this worker; returns its runs (start and end times) and the
    final global step."""
    g, t = build(name, cluster, task)
    is_chief = task == 0
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
    runs = []
    with g.as_default():
        hooks = hooks_of(t, is_chief)
        if not is_chief:
            wait_for(out / f"{name}-chief-ready")
        with tf.compat.v1.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief, hooks=hooks, config=config
        ) as sess:
            (out / f"{name}-{'chief' if is_chief else 'worker'}-ready").touch()
            if is_chief:
                wait_for(out / f"{name}-worker-ready")
            while not sess.should_stop() and len(runs) < max_runs:
                start = time.time()
                sess.run(t["train"], {t["value"]: value_of(len(runs), is_chief)})
                runs.append([start, time.time()])
                time.sleep(SLEEP)
        end = time.time()
        with tf.compat.v1.Session(server.target, config=config) as s:
            final = int(s.run(t["gs"]))
    return {"runs": runs, "end": end, "final_step": final}


def checkpoint_path(out):
    return str(out / ("ckpt-{epoch}.weights.h5" if KERAS3 else "ckpt-{epoch}"))


def launch_files(server, cluster, task, out):
    """Default chief-only callbacks, chief_only_callbacks=[], epochs from the shared step."""
    mine = out / f"worker{task}"
    mine.mkdir(parents=True, exist_ok=True)
    rec, rec_all, history = Recorder(), Recorder(), keras.callbacks.History()
    writers = [
        keras.callbacks.CSVLogger(str(mine / "log.csv")),
        keras.callbacks.ModelCheckpoint(checkpoint_path(mine), save_weights_only=True),
        keras.callbacks.TensorBoard(str(mine / "tb")),
        keras.callbacks.ProgbarLogger(),
    ]
    rec_after = Recorder()  # after ModelCheckpoint: the weights it saved lie between the two
    callbacks = [rec, history, *writers, rec_after]
    all_csv = keras.callbacks.CSVLogger(str(mine / "all.csv"))
    spe, epochs = 5, 4

    def hooks_of(t, is_chief):
        return [
            hookbridge.CallbackHook(
                callbacks,
                logs={"loss": t["loss"]},
                steps_per_epoch=spe,
                epochs=epochs,
                batch_size=1,
                is_chief=is_chief,
                verbose=0,
                learning_rate=t["lr"],  # TensorBoard logs epoch_learning_rate
            ),
            hookbridge.CallbackHook(
                [all_csv, rec_all],
                logs={"loss": t["loss"]},
                steps_per_epoch=spe,
                epochs=epochs,
                batch_size=1,
                is_chief=is_chief,
                chief_only_callbacks=[],
            ),
        ]

    phase = run_phase("files", server, cluster, task, out, hooks_of, lambda i, c: 100 * task + i)
    phase.update(
        spe=spe,
        epochs=epochs,
        rec=rec.report(),
        rec_after=rec_after.report(),
        rec_all=rec_all.report(),
        history=history.history if history.model is not None else None,
        given_model={type(cb).__name__: getattr(cb, "model", None) is not None for cb in writers},
        checkpoint_template=checkpoint_path(mine),
    )
    return {"files": phase}


def launch_stops(server, cluster, task, out):
    """Stops decided on the chief (EarlyStopping, TerminateOnNaN), the native TF1 shared-stop
    hook, and a stop decided on the non-chief."""
    result = {}
    spe = 4

    def bridged(callbacks_of, epochs=50):
        def hooks_of(t, is_chief):
            rec = Recorder()
            hooks_of.rec = rec
            return [
                hookbridge.CallbackHook(
                    [*callbacks_of(is_chief), rec],
                    logs={"loss": t["loss"]},
                    steps_per_epoch=spe,
                    epochs=epochs,
                    batch_size=1,
                    is_chief=is_chief,
                )
            ]

        return hooks_of

    # EarlyStopping: the chief's loss stops improving (constant), the other's keeps improving.
    hooks_of = bridged(lambda c: [keras.callbacks.EarlyStopping(monitor="loss", patience=1)])
    phase = run_phase(
        "early", server, cluster, task, out, hooks_of, lambda i, c: 1.0 if c else 100.0 - i
    )
    result["early"] = {**phase, "rec": hooks_of.rec.report()}

    # TerminateOnNaN: the chief feeds a NaN loss at its 6th run.
    hooks_of = bridged(lambda c: [keras.callbacks.TerminateOnNaN()])
    phase = run_phase(
        "nan", server, cluster, task, out, hooks_of, lambda i, c: np.nan if c and i == 5 else 1.0
    )
    result["nan"] = {**phase, "rec": hooks_of.rec.report()}

    # Native TF1: the chief sets a shared variable at global step 9 by hand.
    native = {}

    def native_hooks(t, is_chief):
        native["hook"] = NativeSharedStop(is_chief, stop_at=9)
        return [native["hook"]]

    phase = run_phase("native", server, cluster, task, out, native_hooks, lambda i, c: 1.0)
    result["native"] = {**phase, "stop_time": native["hook"].stop_time}

    # A stop decided on the non-chief: that worker only.
    hooks_of = bridged(lambda c: [] if c else [StopAtEpochEnd(1)], epochs=4)
    phase = run_phase("own", server, cluster, task, out, hooks_of, lambda i, c: 1.0)
    result["own"] = {**phase, "rec": hooks_of.rec.report()}
    result["spe"] = spe
    return result


def launch_all(server, cluster, task, out):
    return {**launch_files(server, cluster, task, out), **launch_stops(server, cluster, task, out)}


LAUNCHES = {"files": launch_files, "stops": launch_stops, "all": launch_all}


def main(role, task, cluster_json, launch, out_dir):
    cluster = tf.train.ClusterSpec(json.loads(cluster_json))
    server = tf.distribute.Server(cluster, job_name=role, task_index=int(task))
    if role == "ps":
        server.join()  # never returns: the harness kills this process
    out = Path(out_dir)
    try:
        result = LAUNCHES[launch](server, cluster, int(task), out)
    except BaseException:
        (out / f"failed-{task}").touch()  # the other worker stops waiting for this one
        raise
    print(json.dumps({"task": int(task), **result}), flush=True)
    sys.stderr.flush()
    os._exit(0)  # the in-process server's threads would keep the process alive


if __name__ == "__main__":
    main(*sys.argv[1:])
