"""CallbackHook under faults: an exception in every callback method and in the training step.

Direction 1 (HookCallback) is covered by test_hook_callback_faults.py. Here, per fault: the error
reaches the caller unchanged (the same object), the native rules hold (MonitoredSession: no
``end()`` after an error, the session is closed; Keras: no ``on_train_end`` after an error), what
the callbacks wrote before the error is on disk (CSV rows, TensorBoard epochs), no file handle or
thread is left once the callbacks are released, and the next run in the same process works.
"""

from __future__ import annotations

import csv
import gc
import os
import threading
import time

import psutil
import pytest
import tensorflow as tf
from conftest import KERAS3

import hookbridge
from hookbridge._lifecycle import CALLBACK_TRAIN_EVENTS

keras = tf.keras

METHODS = list(CALLBACK_TRAIN_EVENTS)
BAD_STEP = 5  # the training step that fails (fault "train_step")


class Injected(Exception):
    pass


class Faulty(keras.callbacks.Callback):
    """Raises ``error`` in ``method``: at the 2nd epoch (epoch methods) or the 4th batch."""

    def __init__(self, method, error):
        super().__init__()
        self.method, self.error, self.calls = method, error, 0

    def _maybe(self, name):
        if name != self.method:
            return
        self.calls += 1
        limit = {"on_train_batch_begin": 4, "on_train_batch_end": 4}.get(name, 2)
        if name in ("on_train_begin", "on_train_end") or self.calls == limit:
            raise self.error

    def on_train_begin(self, logs=None):
        self._maybe("on_train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self._maybe("on_epoch_begin")

    def on_train_batch_begin(self, batch, logs=None):
        self._maybe("on_train_batch_begin")

    def on_train_batch_end(self, batch, logs=None):
        self._maybe("on_train_batch_end")

    def on_epoch_end(self, epoch, logs=None):
        self._maybe("on_epoch_end")

    def on_train_end(self, logs=None):
        self._maybe("on_train_end")


class WitnessCallback(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs_ended, self.train_ended = 0, False

    def on_epoch_end(self, epoch, logs=None):
        self.epochs_ended += 1

    def on_train_end(self, logs=None):
        self.train_ended = True


class WitnessHook(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self.session, self.ended = None, False

    def after_create_session(self, session, coord):
        self.session = session

    def end(self, session):
        self.ended = True


def _graph():
    """Fed loss; the train op fails (InvalidArgumentError) when the fed value is >= 100."""
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        value = tf.compat.v1.placeholder(tf.float32, [], name="value")
        loss = tf.identity(value, name="loss")
        lr = tf.compat.v1.get_variable("lr", initializer=0.1, trainable=False)
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([2]))
        check = tf.debugging.Assert(value < 100.0, [value])
        with tf.control_dependencies([check]):
            train = tf.group(tf.compat.v1.assign_add(w, tf.ones([2]) * lr), gs.assign_add(1))
    return g, value, loss, lr, train


def _scenario(directory, callbacks, steps=12, bad_step=None):
    """MonitoredSession with CallbackHook(callbacks); returns (witness hook, raw session)."""
    g, value, loss, lr, train = _graph()
    witness = WitnessHook()
    with g.as_default():
        hook = hookbridge.CallbackHook(
            callbacks, logs={"loss": loss}, steps_per_epoch=2, learning_rate=lr
        )
        with tf.compat.v1.train.MonitoredSession(hooks=[hook, witness]) as sess:
            for i in range(steps):
                if sess.should_stop():
                    break
                sess.run(train, {value: 1000.0 if i + 1 == bad_step else float(i)})
    return witness


def _callbacks(directory, extra=()):
    # Built outside any graph context: tf_keras's TensorBoard is its v1 class inside one.
    return [
        keras.callbacks.CSVLogger(os.path.join(directory, "log.csv")),
        keras.callbacks.TensorBoard(os.path.join(directory, "tb")),
        *extra,
        WitnessCallback(),
    ]


def _open_under(directory):
    return [f.path for f in psutil.Process().open_files() if f.path.startswith(str(directory))]


def _released(directory, attempts=20):
    """The files still open under ``directory`` once the callbacks are released: collected, and
    again a few times while another thread (a summary writer's, a logging handler's) may hold a
    reference for a moment. Bounded: 20 collections, 50 ms apart."""
    for _ in range(attempts):
        gc.collect()
        still = _open_under(directory)
        if not still:
            return still
        time.sleep(0.05)
    return still


def _label(obj):
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    kind = type(obj).__name__
    return f"{kind} {name}" if isinstance(name, str) else kind


def _holders(directory, depth=5):
    """What keeps a callback writing under ``directory`` alive: referrer chains (type names),
    for the failure message of a test that found its files still open."""
    import types

    alive = [
        o
        for o in gc.get_objects()
        if isinstance(o, keras.callbacks.Callback)
        and str(directory) in " ".join(str(v) for v in vars(o).values() if isinstance(v, str))
    ]
    lines, seen = [], {id(alive)}
    for obj in alive:
        chain, level = [type(obj).__name__], [obj]
        seen.add(id(level))
        for _ in range(depth):
            refs = [
                r
                for o in level
                for r in gc.get_referrers(o)
                if id(r) not in seen and not isinstance(r, types.FrameType)
            ]
            seen.update(id(r) for r in refs)
            seen.add(id(refs))
            if not refs:
                break
            chain.append(", ".join(sorted({_label(r) for r in refs})))
            level = refs
        lines.append(" <- ".join(chain))
    frames = [
        f"{f.f_code.co_filename}:{f.f_code.co_name}"
        for f in gc.get_objects()
        if isinstance(f, types.FrameType)
    ]
    return "\n".join(lines or ["no callback of this test is alive"]) + f"\nframes alive: {frames}"


def _tb_epochs(directory):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(directory, "tb", "train"))
    acc.Reload()
    tags = acc.Tags()
    if "epoch_loss" in tags.get("tensors", []):
        return [e.step for e in acc.Tensors("epoch_loss")]
    return [e.step for e in acc.Scalars("epoch_loss")] if "epoch_loss" in tags["scalars"] else []


@pytest.fixture(scope="module", autouse=True)
def _warm_up(tmp_path_factory):
    """One clean run first, so TF's and Keras's own lazily started threads are in the baseline."""
    _scenario(str(tmp_path_factory.mktemp("warm")), _callbacks(str(tmp_path_factory.mktemp("w"))))


@pytest.mark.parametrize("fault", [*METHODS, "train_step", "keyboard_interrupt"])
def test_fault_in_callback_or_step(tmp_path, fault):
    threads_before = {t.ident for t in threading.enumerate()}
    d = str(tmp_path)
    error = None
    if fault == "train_step":
        error_type, extra, bad_step = tf.errors.InvalidArgumentError, (), BAD_STEP
    elif fault == "keyboard_interrupt":
        error = KeyboardInterrupt()
        error_type, extra, bad_step = KeyboardInterrupt, (Faulty("on_epoch_end", error),), None
    else:
        error = Injected(f"injected in {fault}")
        error_type, extra, bad_step = Injected, (Faulty(fault, error),), None
    callbacks = _callbacks(d, extra)
    witness_cb = callbacks[-1]
    witnesses = []

    def run():
        witnesses.append(None)
        g, value, loss, lr, train = _graph()
        witness = witnesses[-1] = WitnessHook()
        with g.as_default():
            hook = hookbridge.CallbackHook(
                callbacks, logs={"loss": loss}, steps_per_epoch=2, learning_rate=lr
            )
            with tf.compat.v1.train.MonitoredSession(hooks=[hook, witness]) as sess:
                for i in range(12):
                    if sess.should_stop():
                        break
                    sess.run(train, {value: 1000.0 if i + 1 == bad_step else float(i)})

    with pytest.raises(error_type) as info:
        run()
    if fault != "train_step":
        assert info.value is error  # unchanged: the very object raised
    witness = witnesses[-1]
    # MonitoredSession: no end() after an error (the failing end() stops the loop), and Keras:
    # no on_train_end after an error.
    assert witness.ended is False
    assert witness_cb.train_ended is False
    if witness.session is not None:  # None: the error came from after_create_session
        assert witness.session._closed  # the with block closed the session
    # What was written before the error is on disk: one CSV row and one TensorBoard epoch per
    # epoch that ended.
    # (CSVLogger and TensorBoard come before the faulty callback: they saw the failing epoch end.)
    epochs = witness_cb.epochs_ended + (fault in ("on_epoch_end", "keyboard_interrupt"))
    if os.path.exists(os.path.join(d, "log.csv")):
        with open(os.path.join(d, "log.csv")) as f:
            assert [int(r["epoch"]) for r in csv.DictReader(f)] == list(range(epochs))
    # Released callbacks close their files (as after a failed Keras fit); no thread is left.
    # (The traceback holds the frames that hold the callbacks: drop it, as a caller would.)
    info.value.__traceback__ = None
    callbacks = witness_cb = witnesses = extra = info = error = None
    assert _released(d) == [], _holders(d)
    if os.path.isdir(os.path.join(d, "tb", "train")):
        assert _tb_epochs(d) == list(range(epochs))
    assert {t.ident for t in threading.enumerate()} <= threads_before
    # The next run in the same process works and closes everything itself.
    d2 = str(tmp_path / "next")
    cbs = _callbacks(d2)
    witness = _scenario(d2, cbs)
    assert witness.ended and cbs[-1].train_ended and cbs[-1].epochs_ended == 6
    assert _open_under(d2) == []
    assert _tb_epochs(d2) == list(range(6))


@pytest.mark.skipif(KERAS3, reason="Keras 3 has no graph-mode (v1) TensorBoard class")
def test_tensorboard_built_inside_a_graph_gets_a_clear_error(tmp_path):
    with tf.Graph().as_default():
        tb = keras.callbacks.TensorBoard(str(tmp_path))
        with pytest.raises((TypeError, ValueError), match="TensorBoard"):
            hookbridge.CallbackHook([tb], logs={"loss": "loss"})
