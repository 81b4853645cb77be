"""Soak: a long run with the standard hooks (and callbacks) keeps memory, files and threads flat.

``HOOKBRIDGE_SOAK_STEPS`` sets the length (CI: the default 2,000; the full soak: 50,000). Usage
is sampled after a warm-up (a tenth of the run, at least 500 steps, so every periodic hook has
fired) and at the end; the figures are printed (``pytest -s``) and must not grow by more than
``RSS_SLACK_MB``.
"""

from __future__ import annotations

import gc
import os
import threading

import psutil
import pytest
import tensorflow as tf
from conftest import make_data, make_model

import hookbridge

keras = tf.keras
STEPS = int(os.environ.get("HOOKBRIDGE_SOAK_STEPS", "2000"))
WARM = max(500, STEPS // 10)
RSS_SLACK_MB = 32.0

pytestmark = pytest.mark.slow


def _usage(directory):
    gc.collect()
    proc = psutil.Process()
    return {
        "rss_mb": proc.memory_info().rss / 2**20,
        "files": len(proc.open_files()),
        "files_in_dir": sorted(
            os.path.basename(f.path) for f in proc.open_files() if f.path.startswith(directory)
        ),
        "threads": threading.active_count(),
        "os_threads": proc.num_threads(),
    }


def _check(name, warm, end):
    growth = end["rss_mb"] - warm["rss_mb"]
    print(
        f"\n{name} soak, {STEPS} steps: RSS {warm['rss_mb']:.1f} -> {end['rss_mb']:.1f} MB "
        f"({growth:+.1f}); open files {warm['files']} -> {end['files']}; Python threads "
        f"{warm['threads']} -> {end['threads']}; OS threads {warm['os_threads']} -> "
        f"{end['os_threads']}"
    )
    assert growth < RSS_SLACK_MB, (warm, end)
    assert end["files"] <= warm["files"], (warm, end)
    assert end["files_in_dir"] == warm["files_in_dir"]
    assert end["threads"] <= warm["threads"]
    assert end["os_threads"] <= warm["os_threads"] + 2  # TF's pools may park a spare thread


def test_hook_callback_soak(tmp_path):
    d = str(tmp_path)
    samples = {}

    class Sampler(tf.compat.v1.train.SessionRunHook):
        def before_run(self, run_context):
            return tf.compat.v1.train.SessionRunArgs(tf.compat.v1.train.get_global_step())

        def after_run(self, run_context, run_values):
            step = int(run_values.results) + 1
            if step == WARM:
                samples["warm"] = _usage(d)
            elif step == STEPS:
                samples["end"] = _usage(d)

    def hooks():
        loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
        return [
            tf.compat.v1.train.StopAtStepHook(last_step=STEPS),
            tf.compat.v1.train.NanTensorHook(loss),
            tf.compat.v1.train.LoggingTensorHook({"loss": loss}, every_n_iter=100),
            tf.compat.v1.train.StepCounterHook(every_n_steps=100, output_dir=d),
            tf.compat.v1.train.SummarySaverHook(
                save_steps=100,
                output_dir=d,
                summary_op=tf.compat.v1.summary.scalar("batch_loss", loss),
            ),
            tf.compat.v1.train.CheckpointSaverHook(d, save_steps=500),
            Sampler(),
        ]

    x, y = make_data(n=256)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
    model = make_model()
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)  # LoggingTensorHook: INFO
    model.fit(
        ds,
        steps_per_epoch=500,
        epochs=STEPS // 500 + 1,
        verbose=0,
        shuffle=False,
        callbacks=[hookbridge.HookCallback(hooks)],
    )
    assert int(model.optimizer.iterations.numpy()) == STEPS
    assert tf.train.latest_checkpoint(d).endswith(f"-{STEPS}")
    _check("HookCallback", samples["warm"], samples["end"])


def test_callback_hook_soak(tmp_path):
    d = str(tmp_path)
    samples = {}
    history = keras.callbacks.History()
    callbacks = [
        history,
        keras.callbacks.EarlyStopping("loss", patience=10**9),
        keras.callbacks.CSVLogger(os.path.join(d, "log.csv")),
        keras.callbacks.TerminateOnNaN(),
    ]
    x, y = make_data(n=256)
    with tf.Graph().as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        xb, yb = tf.compat.v1.data.make_one_shot_iterator(
            tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
        ).get_next()
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([4, 1]))
        loss = tf.reduce_mean(tf.square(xb @ w - yb), name="loss")
        train = tf.compat.v1.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=gs)
        hook = hookbridge.CallbackHook(callbacks, logs={"loss": loss}, steps_per_epoch=100)
        with tf.compat.v1.train.MonitoredSession(
            hooks=[hook, tf.compat.v1.train.StopAtStepHook(last_step=STEPS)]
        ) as sess:
            step = 0
            while not sess.should_stop():
                sess.run(train)
                step += 1
                if step == WARM:
                    samples["warm"] = _usage(d)
                elif step == STEPS:
                    samples["end"] = _usage(d)
        closed = _usage(d)
    assert closed["files_in_dir"] == []  # CSVLogger closed its file at on_train_end
    assert step == STEPS
    assert len(history.history["loss"]) == STEPS // 100
    _check("CallbackHook", samples["warm"], samples["end"])
