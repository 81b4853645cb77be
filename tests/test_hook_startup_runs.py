"""HookCallback's session start-up runs what a native MonitoredSession runs, and the values a real
run reads afterwards are the model's.

The bridge's graph variables (global step, weight mirrors) are initialized by the Scaffold's
default ``init_op``, in its one run, as natively: before a hook's ``after_create_session`` the
real session has run what ``SessionManager.prepare_session`` runs (``init_op``,
``ready_for_local_init_op``, ``local_init_op``, ``ready_op``), counted here beside a native
``MonitoredSession`` of the same hooks. The graph's global step then holds 0 (its initializer):
a model that has trained already is copied in when a run first reads it; a run is fed only the
Keras values it reads, so a Saver's runs keep one feed signature. The tests below read, in real
runs, the global step of a resumed model, its weights and Keras's running mean.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from conftest import make_data, make_model, run_native

import hookbridge

train = tf.compat.v1.train
keras = tf.keras


class RunsAtStart(train.SessionRunHook):
    """Records how many real ``Session.run`` calls were made before its after_create_session."""

    def __init__(self, calls: list):
        self.calls = calls
        self.at_start: int | None = None

    def after_create_session(self, session, coord):
        self.at_start = len(self.calls)


def _count_runs(monkeypatch) -> list:
    calls: list = []
    real_run = tf.compat.v1.Session.run

    def run(self, *args, **kwargs):
        calls.append(args[0] if args else kwargs.get("fetches"))
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(tf.compat.v1.Session, "run", run)
    return calls


def test_session_start_runs_what_native_monitored_session_runs(monkeypatch, tmp_path):
    """With hooks that read only held values (the loss, the global step), the bridge makes no
    session run of its own at start-up: as many as native, none of them a sync."""
    calls = _count_runs(monkeypatch)

    def hooks(probe, out):
        return [
            train.NanTensorHook("loss:0"),
            train.StepCounterHook(every_n_steps=1000, output_dir=str(out)),
            probe,
        ]

    native_probe = RunsAtStart(calls)
    run_native(lambda: hooks(native_probe, tmp_path / "native"), 2)
    native_runs = native_probe.at_start
    del calls[:]
    probe = RunsAtStart(calls)
    x, y = make_data(16)
    make_model(reuse=True).fit(
        x,
        y,
        batch_size=8,
        epochs=1,
        verbose=0,
        callbacks=[hookbridge.HookCallback(hooks(probe, tmp_path / "bridge"))],
    )
    assert native_runs == 4  # init_op, ready_for_local_init_op, local_init_op, ready_op
    assert probe.at_start == native_runs


class RealReads(train.SessionRunHook):
    """Reads the global step, the weights and Keras's running mean through ops of its own (real
    runs of the graph, not values the bridge answers from Python)."""

    def begin(self):
        gs = train.get_global_step()
        self.step = tf.identity(gs.read_value()) * 1
        self.weights = [tf.identity(v) for v in tf.compat.v1.trainable_variables()]
        graph = tf.compat.v1.get_default_graph()
        self.mean = graph.get_tensor_by_name("running_mean/loss:0") * 1.0
        self.at_start = None
        self.means: list = []
        self.steps: list = []

    def after_create_session(self, session, coord):
        self.at_start = session.run([self.step, self.weights])

    def after_run(self, run_context, run_values):
        step, mean = run_context.session.run([self.step, self.mean])
        self.steps.append(int(step))
        self.means.append(float(mean))


class BatchLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses: list = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def test_a_resumed_model_s_step_weights_and_running_mean_in_real_runs(tmp_path):
    """A model that trained 3 steps: the first real run reads step 3 and its weights; after each
    step a real run reads the new step and Keras's running mean (what the logs carry). The
    Saver's runs (a checkpoint at the start and at the end) write the same step and weights."""
    x, y = make_data(32)
    model = make_model(reuse=True)
    model.fit(x[:24], y[:24], batch_size=8, epochs=1, verbose=0)
    step0 = int(model.optimizer.iterations.numpy())
    weights0 = [w.numpy() for w in model.trainable_weights]
    reads, logs = RealReads(), BatchLogs()
    saver = train.CheckpointSaverHook(str(tmp_path), save_steps=1000)
    callback = hookbridge.HookCallback([reads, saver])
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[callback, logs])

    assert step0 == 3
    step, weights = reads.at_start
    assert int(step) == step0
    for got, want in zip(weights, weights0):
        np.testing.assert_array_equal(got, want)
    assert reads.steps == [4, 5, 6, 7]
    np.testing.assert_allclose(reads.means, logs.losses, rtol=1e-6)
    first = tf.train.load_checkpoint(str(tmp_path / f"model.ckpt-{step0}"))
    last = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-7"))
    assert first.get_tensor("global_step") == step0
    assert last.get_tensor("global_step") == 7
    names = sorted(n for n in first.get_variable_to_shape_map() if n != "global_step")
    assert len(names) == len(weights0)
    final = [w.numpy() for w in model.trainable_weights]
    for name, want0, want in zip(names, weights0, final):  # model/000/kernel, model/001/...
        np.testing.assert_array_equal(first.get_tensor(name), want0)
        np.testing.assert_array_equal(last.get_tensor(name), want)
