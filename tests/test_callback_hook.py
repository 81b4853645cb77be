"""CallbackHook: real Keras callbacks in a real MonitoredSession on a real graph."""

from __future__ import annotations

import csv
import math
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

keras = tf.keras
KERAS3 = hasattr(keras, "ops")
# Each step here feeds one loss value: there are no batches whose sizes could differ.
pytestmark = pytest.mark.filterwarnings("ignore:CallbackHook. batch_size= is not given")


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.events = []

    def on_train_begin(self, logs=None):
        self.events.append(("train_begin",))

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("epoch_begin", epoch))

    def on_train_batch_begin(self, batch, logs=None):
        self.events.append(("batch_begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(("batch_end", batch, dict(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(("epoch_end", epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.events.append(("train_end", dict(logs or {})))


class ReadAtEnd(tf.compat.v1.train.SessionRunHook):
    """Reads tensors with the session in end() (after the CallbackHook listed before it)."""

    def __init__(self, fetches):
        self.fetches, self.values = fetches, None

    def end(self, session):
        self.values = session.run(self.fetches)


def make_graph():
    """A graph whose loss is fed each step; the train op bumps `w` and the global step by 1."""
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        value = tf.compat.v1.placeholder(tf.float32, [], name="value")
        loss = tf.identity(value, name="loss")
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([2]))
        lr = tf.compat.v1.get_variable("lr", initializer=0.1, trainable=False)
        train = tf.group(tf.compat.v1.assign_add(w, tf.ones([2])), tf.compat.v1.assign_add(gs, 1))
    return g, {"gs": gs, "value": value, "loss": loss, "w": w, "lr": lr, "train": train}


def run(hooks_fn, values, *, g=None, t=None, feed_name="value"):
    """Runs one MonitoredSession step per value (fewer if a hook stops); returns steps run."""
    if g is None:
        g, t = make_graph()
    with g.as_default():
        hooks = hooks_fn(t)
        n = 0
        with tf.compat.v1.train.MonitoredSession(hooks=hooks) as sess:
            for v in values:
                if sess.should_stop():
                    break
                sess.run(t["train"], {t[feed_name]: v})
                n += 1
    return n


def test_lifecycle_epochs_and_running_means():
    rec = Recorder()
    n = run(
        lambda t: [hookbridge.CallbackHook([rec], logs={"loss": "loss"}, steps_per_epoch=2)],
        [1.0, 3.0, 5.0, 7.0, 9.0],
    )
    assert n == 5
    kinds = [e[0] for e in rec.events]
    assert kinds == ["train_begin"] + (
        ["epoch_begin"] + ["batch_begin", "batch_end"] * 2 + ["epoch_end"]
    ) * 2 + ["epoch_begin", "batch_begin", "batch_end", "epoch_end", "train_end"]
    batches = [(e[1], e[2]["loss"]) for e in rec.events if e[0] == "batch_end"]
    assert batches == [(0, 1.0), (1, 2.0), (0, 5.0), (1, 6.0), (0, 9.0)]  # restart per epoch
    epochs = [(e[1], e[2]) for e in rec.events if e[0] == "epoch_end"]
    assert epochs == [(0, {"loss": 2.0}), (1, {"loss": 6.0}), (2, {"loss": 9.0})]
    assert all(type(e[2]["loss"]) is float for e in rec.events if e[0] == "batch_end")
    assert rec.events[-1] == ("train_end", {"loss": 9.0})
    assert rec.params == {"epochs": 0, "steps": 2, "verbose": 1}


def test_whole_run_is_one_epoch_and_validation_fn():
    rec = Recorder()
    run(
        lambda t: [
            hookbridge.CallbackHook(
                [rec],
                logs={"loss": t["loss"]},
                validation_fn=lambda session: {"loss": float(session.run(t["w"])[0])},
            )
        ],
        [2.0, 4.0],
    )
    assert rec.params == {"epochs": 1, "steps": None, "verbose": 1}
    epoch_ends = [e for e in rec.events if e[0] == "epoch_end"]
    assert epoch_ends == [("epoch_end", 0, {"loss": 3.0, "val_loss": 2.0})]


def test_stop_training_requests_stop_and_closes_epoch():
    rec = Recorder()
    stopper = keras.callbacks.LambdaCallback(
        on_batch_end=lambda batch, logs: setattr(stopper.model, "stop_training", batch == 1)
    )
    n = run(
        lambda t: [
            hookbridge.CallbackHook([rec, stopper], logs={"loss": "loss"}, steps_per_epoch=5)
        ],
        [1.0] * 10,
    )
    assert n == 2
    assert [e[0] for e in rec.events][-2:] == ["epoch_end", "train_end"]


def test_end_of_input_closes_epoch_and_error_skips_train_end():
    rec = Recorder()
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.train.get_or_create_global_step()
        it = tf.compat.v1.data.make_one_shot_iterator(
            tf.data.Dataset.from_tensor_slices([1.0, 2.0, 3.0])
        )
        x = tf.identity(it.get_next(), name="x")
        with tf.compat.v1.train.MonitoredSession(
            hooks=[hookbridge.CallbackHook([rec], logs={"x": x}, steps_per_epoch=2)]
        ) as sess:
            while not sess.should_stop():
                sess.run(x)
    assert [e for e in rec.events if e[0] in ("epoch_end", "train_end")] == [
        ("epoch_end", 0, {"x": 1.5}),
        ("epoch_end", 1, {"x": 3.0}),
        ("train_end", {"x": 3.0}),
    ]

    rec2 = Recorder()
    with pytest.raises(ValueError, match="user error"):

        def hooks(t):
            return [hookbridge.CallbackHook([rec2], logs={"loss": "loss"})]

        g, t = make_graph()
        with g.as_default(), tf.compat.v1.train.MonitoredSession(hooks=hooks(t)) as sess:
            sess.run(t["train"], {t["value"]: 1.0})
            raise ValueError("user error")
    assert [e[0] for e in rec2.events][-1] == "batch_end"


class AbortOnce(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.done = False

    def after_run(self, run_context, run_values):
        if not self.done:
            self.done = True
            raise tf.errors.AbortedError(None, None, "simulated preemption")


def test_session_recovery_does_not_restart_training():
    rec = Recorder()
    run(
        lambda t: [hookbridge.CallbackHook([rec], logs={"loss": "loss"}), AbortOnce()],
        [1.0, 2.0, 3.0],
    )
    assert [e[0] for e in rec.events].count("train_begin") == 1
    assert rec.events[-1][0] == "train_end"


class AbortAtRun(tf.compat.v1.train.SessionRunHook):
    """Raises AbortedError (a preemption: MonitoredSession recreates the session and retries
    the run) from the ``at``-th run's after_run."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def after_run(self, run_context, run_values):
        self.calls += 1
        if self.calls == self.at:
            raise tf.errors.AbortedError(None, None, "simulated preemption")


def test_recovery_mid_epoch_loses_in_graph_sums_and_says_so():
    """Only epoch-level callbacks: the epoch's sums live in the graph (an op per run, no fetch).
    A session recovery mid-epoch loses them with the failed session, and the hook warns instead
    of being silent. Four after_runs make the epoch (runs 1, 2, the retried 2, 3: MonitoredSession
    repeats the aborted run, natively too); its log averages the two after the recovery, 4.0,
    where every run counted gives 3.0, as a batch-level listener (which fetches) reports."""
    history = keras.callbacks.History()
    with pytest.warns(UserWarning, match="sums were lost with the failed session"):
        run(
            lambda t: [
                hookbridge.CallbackHook(  # verbose=0: no progress bar, a batch listener
                    [history], logs={"loss": "loss"}, steps_per_epoch=4, batch_size=1, verbose=0
                ),
                AbortAtRun(2),
            ],
            [1.0, 3.0, 5.0, 7.0],
        )
    assert history.history == {"loss": [4.0, 7.0]}
    rec = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        run(
            lambda t: [
                hookbridge.CallbackHook(
                    [rec], logs={"loss": "loss"}, steps_per_epoch=4, batch_size=1
                ),
                AbortAtRun(2),
            ],
            [1.0, 3.0, 5.0, 7.0],
        )
    epochs = [e[2]["loss"] for e in rec.events if e[0] == "epoch_end"]
    assert epochs == [pytest.approx((1.0 + 3.0 + 3.0 + 5.0) / 4), 7.0]


def test_history_csv_progbar_lambda(tmp_path, capsys):
    history = keras.callbacks.History()
    path = str(tmp_path / "log.csv")
    seen = []
    cbs = [
        history,
        keras.callbacks.CSVLogger(path),
        keras.callbacks.ProgbarLogger(),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(e)),
    ]
    run(
        lambda t: [
            hookbridge.CallbackHook(cbs, logs={"loss": "loss"}, steps_per_epoch=2, epochs=2)
        ],
        [1.0, 3.0, 5.0, 7.0],
    )
    assert history.history == {"loss": [2.0, 6.0]} and history.epoch == [0, 1]
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [(r["epoch"], float(r["loss"])) for r in rows] == [("0", 2.0), ("1", 6.0)]
    out = capsys.readouterr().out
    assert "Epoch 2/2" in out and "loss: 6.0000" in out
    assert seen == [0, 1]


def test_early_stopping_restores_best_weights():
    reader = []
    es = keras.callbacks.EarlyStopping("loss", patience=1, restore_best_weights=True)

    def hooks(t):
        reader.append(ReadAtEnd(t["w"]))
        return [hookbridge.CallbackHook([es], logs={"loss": "loss"}, steps_per_epoch=1), reader[0]]

    n = run(hooks, [3.0, 1.0, 2.0, 2.5, 0.5, 0.1])
    assert n == 3  # best at epoch 1, no improvement at epoch 2 -> stop
    np.testing.assert_allclose(reader[0].values, [2.0, 2.0])  # w after epoch 1


def test_early_stopping_mode_auto_on_metric():
    es = keras.callbacks.EarlyStopping("accuracy", patience=1)
    n = run(
        lambda t: [hookbridge.CallbackHook([es], logs={"accuracy": "loss"}, steps_per_epoch=1)],
        [0.5, 0.9, 0.6, 0.4, 0.3],
    )
    assert n == 3  # maximized: 0.6 after 0.9 is the first non-improvement


def test_terminate_on_nan():
    n = run(
        lambda t: [
            hookbridge.CallbackHook([keras.callbacks.TerminateOnNaN()], logs={"loss": "loss"})
        ],
        [1.0, math.nan, 1.0],
    )
    assert n == 2


def test_reduce_lr_and_scheduler_change_graph_variable():
    readers = []

    def hooks(t):
        readers.append(ReadAtEnd(t["lr"]))
        cb = keras.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=1, min_lr=0.0)
        return [
            hookbridge.CallbackHook(
                [cb], logs={"loss": "loss"}, steps_per_epoch=1, learning_rate=t["lr"]
            ),
            readers[-1],
        ]

    run(hooks, [1.0, 1.0, 1.0])  # epochs 1 and 2 do not improve -> two halvings
    assert readers[-1].values == pytest.approx(0.025)

    seen = []

    def hooks2(t):
        readers.append(ReadAtEnd(t["lr"]))
        cb = keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 * (epoch + 1))
        probe = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda e, logs: seen.append(float(probe.model.optimizer.learning_rate))
        )
        return [
            hookbridge.CallbackHook(
                [cb, probe], logs={"loss": "loss"}, steps_per_epoch=2, learning_rate="lr"
            ),
            readers[-1],
        ]

    run(hooks2, [1.0] * 6)
    assert seen == pytest.approx([0.1, 0.2, 0.3])
    assert readers[-1].values == pytest.approx(0.3)


def test_model_checkpoint_loads_back(tmp_path):
    path = str(tmp_path / "ckpt" / "w-{epoch}.weights.h5")
    cb = keras.callbacks.ModelCheckpoint(path, save_weights_only=True)
    g, t = make_graph()
    run(
        lambda t: [
            hookbridge.CallbackHook(
                [cb], logs={"loss": "loss"}, steps_per_epoch=2, learning_rate=t["lr"]
            )
        ],
        [1.0] * 4,
        g=g,
        t=t,
    )
    saved = str(tmp_path / "ckpt" / "w-1.weights.h5")
    import h5py

    with h5py.File(saved) as f:
        np.testing.assert_allclose(f["w"][()], [2.0, 2.0])
    assert set(hookbridge.read_weights(saved)) == {"w"}
    with g.as_default(), tf.compat.v1.train.MonitoredSession() as sess:
        assert hookbridge.load_weights(sess, saved) == ["w"]
        np.testing.assert_allclose(sess.run(t["w"]), [2.0, 2.0])


def test_save_weights_tf_checkpoint_format(tmp_path):
    """A non-.h5 path writes a TF checkpoint keyed by op names (tf_keras / Keras 2 paths)."""
    prefix = str(tmp_path / "tfckpt" / "weights")
    saver = keras.callbacks.LambdaCallback(
        on_train_end=lambda logs: saver.model.save_weights(prefix)
    )
    g, t = make_graph()
    run(lambda t: [hookbridge.CallbackHook([saver], logs={"loss": "loss"})], [1.0] * 3, g=g, t=t)
    reader = tf.train.load_checkpoint(prefix)
    np.testing.assert_allclose(reader.get_tensor("w"), [3.0, 3.0])
    with g.as_default(), tf.compat.v1.train.MonitoredSession() as sess:
        hookbridge.load_weights(sess, prefix)
        np.testing.assert_allclose(sess.run(t["w"]), [3.0, 3.0])


def test_tensorboard_scalars_and_learning_rate(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = str(tmp_path / "tb")
    tb = keras.callbacks.TensorBoard(logdir)
    run(
        lambda t: [
            hookbridge.CallbackHook(
                [tb],
                logs={"loss": "loss"},
                steps_per_epoch=2,
                learning_rate=t["lr"],
                validation_fn=lambda s: {"loss": 7.0},
            )
        ],
        [1.0, 3.0, 5.0, 7.0],
    )
    acc = EventAccumulator(os.path.join(logdir, "train"))
    acc.Reload()

    def scalars(acc, tag):
        return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]

    assert scalars(acc, "epoch_loss") == [(0, 2.0), (1, 6.0)]
    if KERAS3:  # Keras 3 logs the rate; tf_keras / Keras 2 only a schedule's (not a variable)
        lr = scalars(acc, "epoch_learning_rate")
        assert [s for s, _ in lr] == [0, 1] and lr[0][1] == pytest.approx(0.1)
    else:
        assert "epoch_learning_rate" not in acc.Tags()["tensors"]
    val = EventAccumulator(os.path.join(logdir, "validation"))
    val.Reload()
    assert scalars(val, "epoch_loss") == [(0, 7.0), (1, 7.0)]


def test_backup_and_restore_is_refused(tmp_path):
    with pytest.raises(ValueError, match="BackupAndRestore.*Keras model"):
        hookbridge.CallbackHook(
            [keras.callbacks.BackupAndRestore(str(tmp_path))], logs={"loss": "loss"}
        )


def test_bad_inputs_name_what_was_received():
    with pytest.raises(TypeError, match="callbacks\\[1\\] = 'oops'"):
        hookbridge.CallbackHook([keras.callbacks.History(), "oops"], logs={})
    with pytest.raises(ValueError, match="'nope'.*Available.*loss:0"):
        run(lambda t: [hookbridge.CallbackHook([Recorder()], logs={"x": "nope"})], [1.0])


def test_bad_batch_size_mode_and_epochs_name_what_was_received():
    with pytest.raises(TypeError, match="batch_size must be an int, a tensor.*received 2.5"):
        hookbridge.CallbackHook([Recorder()], logs={}, batch_size=2.5)
    with pytest.raises(ValueError, match="batch_size must be positive, received 0"):
        hookbridge.CallbackHook([Recorder()], logs={}, batch_size=0)
    with pytest.raises(ValueError, match="epochs must be a non-negative int or None, received -1"):
        hookbridge.CallbackHook([Recorder()], logs={}, epochs=-1)
    with pytest.raises(ValueError, match="predict.*remove validation_fn"):
        hookbridge.CallbackHook([Recorder()], logs={}, mode="predict", validation_fn=dict)
    with pytest.raises(ValueError, match="batch_size = 'nope' is not a tensor"):
        run(
            lambda t: [
                hookbridge.CallbackHook([Recorder()], logs={"x": "loss"}, batch_size="nope")
            ],
            [1.0],
        )


class Curious(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        self.seen = self.model.compiled_loss


def test_unsupported_attribute_names_callback_and_attribute():
    with pytest.raises(
        hookbridge.UnsupportedModelAttributeError, match="Curious accessed `model.compiled_loss`"
    ):
        run(lambda t: [hookbridge.CallbackHook([Curious()], logs={"loss": "loss"})], [1.0])
    with pytest.raises(AttributeError, match="ReduceLROnPlateau.*learning_rate=") as info:
        run(
            lambda t: [
                hookbridge.CallbackHook(
                    [keras.callbacks.ReduceLROnPlateau("loss")], logs={"loss": "loss"}
                )
            ],
            [1.0],
        )
    assert isinstance(info.value, hookbridge.UnsupportedModelAttributeError)


def test_epoch_only_callbacks_are_not_dispatched_per_batch():
    class EpochOnly(keras.callbacks.Callback):
        calls = 0

        def on_epoch_end(self, epoch, logs=None):
            EpochOnly.calls += 1

    hook = hookbridge.CallbackHook(
        [EpochOnly()], logs={"loss": "loss"}, steps_per_epoch=2, verbose=0
    )

    class BeginOnly(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.last = epoch

    begin_only = BeginOnly()
    no_logs = hookbridge.CallbackHook(
        [begin_only], logs={"loss": "loss"}, steps_per_epoch=2, verbose=0
    )
    run(lambda t: [hook, no_logs], [1.0] * 4)
    table = hook._calls.table  # decided in begin(), as Keras
    assert table["on_train_batch_begin"] == [] and table["on_train_batch_end"] == []
    assert no_logs._args is None  # no callback reads logs: nothing fetched
    assert begin_only.last == 1
    assert EpochOnly.calls == 2


class EpochLogs(keras.callbacks.Callback):
    """Listens to epochs only: CallbackHook keeps the sums in the graph (no per-step fetch)."""

    def __init__(self):
        super().__init__()
        self.epochs, self.end = [], None

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append((epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.end = dict(logs)


def test_epoch_only_callbacks_sum_in_the_graph_with_the_same_means(tmp_path):
    values = [1.0, 3.0, 5.0, 0.1, 0.2, 0.7, 1e-3]  # inexact in float32 too
    results = {}
    for path in ("graph", "python"):
        rec = EpochLogs()
        # a per-batch listener makes the hook fetch the tensors and sum them in Python
        extra = (
            []
            if path == "graph"
            else [keras.callbacks.LambdaCallback(on_batch_end=lambda batch, logs: None)]
        )
        g, t = make_graph()
        with g.as_default():
            tf.stack([t["loss"], 3 * t["loss"]], name="pair")  # a non-scalar log: its mean
            hook = hookbridge.CallbackHook(
                [rec, *extra], logs={"loss": "loss", "pair": "pair:0"}, steps_per_epoch=3, verbose=0
            )
            with tf.compat.v1.train.MonitoredTrainingSession(
                checkpoint_dir=str(tmp_path / path), hooks=[hook], save_summaries_steps=None
            ) as sess:
                for v in values:
                    sess.run(t["train"], {t["value"]: v})
        in_graph = [
            op.name for op in g.get_operations() if op.name.startswith("hookbridge_callback_logs/")
        ]
        assert bool(in_graph) == (path == "graph")
        saved = tf.train.load_checkpoint(str(tmp_path / path)).get_variable_to_shape_map()
        assert "global_step" in saved and not [k for k in saved if "hookbridge" in k]
        results[path] = rec.epochs, rec.end
    assert results["graph"] == results["python"]
    f32 = [float(np.float32(v)) for v in values]
    epochs, end = results["graph"]
    assert [e for e, _ in epochs] == [0, 1, 2]
    for (_, logs), chunk in zip(epochs, (f32[0:3], f32[3:6], f32[6:])):
        assert logs["loss"] == pytest.approx(sum(chunk) / len(chunk), rel=1e-12)
        assert logs["pair"] == pytest.approx(2 * sum(chunk) / len(chunk), rel=1e-6)
    assert end == epochs[-1][1]


def test_graph_sums_restart_in_a_recovered_session():
    rec = EpochLogs()
    run(
        lambda t: [hookbridge.CallbackHook([rec], logs={"loss": "loss"}, verbose=0), AbortOnce()],
        [1.0, 2.0, 3.0, 4.0],
    )
    # The aborted session's sums (1.0) are gone with it; the retried step and the rest count.
    assert rec.epochs == [(0, {"loss": 2.5})] and rec.end == {"loss": 2.5}
