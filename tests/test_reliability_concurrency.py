"""Direction 2 concurrency: two MonitoredSessions in two threads, each with its own CallbackHook,
do not interfere (logs, epochs, weights, learning rates, stops and files stay per session)."""

from __future__ import annotations

import csv
import os
import threading

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras


def _train(name, offset, steps, stop_at_epoch, directory, out, barrier):
    """A session whose loss is ``offset + step``; EarlyStopping-free stop at ``stop_at_epoch``."""
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.identity(tf.cast(gs, tf.float32) + offset, name="loss")
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([3]))
        lr = tf.compat.v1.get_variable("lr", initializer=offset, trainable=False)
        with tf.control_dependencies([loss]):  # the loss reads the pre-step global step
            train = tf.group(tf.compat.v1.assign_add(w, tf.ones([3]) * lr), gs.assign_add(1))
        history = keras.callbacks.History()
        seen = {"batches": [], "lr": [], "weights": None, "model": set()}

        class Probe(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                seen["batches"].append(batch)
                seen["model"].add(id(self.model))
                barrier_wait(barrier)

            def on_epoch_end(self, epoch, logs=None):
                seen["lr"].append(float(self.model.optimizer.learning_rate))
                self.model.optimizer.learning_rate = float(self.model.optimizer.learning_rate) * 2
                if epoch == stop_at_epoch:
                    self.model.stop_training = True

            def on_train_end(self, logs=None):
                seen["weights"] = self.model.get_weights()

        callbacks = [
            history,
            keras.callbacks.CSVLogger(os.path.join(directory, f"{name}.csv")),
            Probe(),
        ]
        hook = hookbridge.CallbackHook(
            callbacks, logs={"loss": loss}, steps_per_epoch=2, learning_rate=lr
        )
        n = 0
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            while not sess.should_stop() and n < steps:
                sess.run(train)
                n += 1
        out[name] = (n, history.history, seen)


def barrier_wait(barrier):
    try:
        barrier.wait(timeout=30)
    except threading.BrokenBarrierError:  # the other thread has stopped: go on alone
        pass


def test_two_sessions_in_two_threads_do_not_interfere(tmp_path):
    out: dict = {}
    errors = []
    barrier = threading.Barrier(2)  # interleave the two sessions step by step

    def target(*args):
        try:
            _train(*args)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)
        finally:
            barrier.abort()

    threads = [
        threading.Thread(target=target, args=("a", 1.0, 40, 2, str(tmp_path), out, barrier)),
        threading.Thread(target=target, args=("b", 100.0, 40, 4, str(tmp_path), out, barrier)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    (na, ha, sa), (nb, hb, sb) = out["a"], out["b"]
    assert (na, nb) == (6, 10)  # each stopped at its own epoch: stops do not leak across
    # loss at run i is offset + i (the pre-step global step); epoch means of 2 steps
    assert ha["loss"] == [1.5, 3.5, 5.5]
    assert hb["loss"] == [100.5, 102.5, 104.5, 106.5, 108.5]
    assert sa["lr"] == [1.0, 2.0, 4.0] and sb["lr"] == [100.0, 200.0, 400.0, 800.0, 1600.0]
    # w grew by each step's own learning rate (two steps per epoch)
    np.testing.assert_allclose(sa["weights"][0], [2 * (1 + 2 + 4)] * 3)
    np.testing.assert_allclose(sb["weights"][0], [2 * (100 + 200 + 400 + 800 + 1600)] * 3)
    assert sa["batches"] == [0, 1] * 3 and sb["batches"] == [0, 1] * 5
    assert not (sa["model"] & sb["model"])
    for name, losses in (("a", ha["loss"]), ("b", hb["loss"])):
        with open(tmp_path / f"{name}.csv") as f:
            assert [float(r["loss"]) for r in csv.DictReader(f)] == losses
