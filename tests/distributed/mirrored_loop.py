"""CallbackLoop under MirroredStrategy over 2 logical CPUs, beside ``fit`` running the same step.

The custom loop calls ``strategy.run(step)`` once per global step and reduces its logs; ``fit``'s
oracle runs the same step as its ``train_step`` (which ``fit`` runs per replica). Both carry the
same callbacks: an event recorder and a HookCallback whose hooks record the global step fetched
in the run, the one read in ``after_run``, and the batch loss, and stop at ``last_step``.

Run as a script (logical devices are configured before TensorFlow starts, so this runs in a
process of its own): ``python mirrored_loop.py``. Prints one JSON object. ``mirrored_fit.py
--loop`` runs this scenario after its own, in the same process (one TensorFlow start-up).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
GLOBAL_BATCH, LAST_STEP = 8, 6


class StepRecorder(v1.train.SessionRunHook):
    def __init__(self) -> None:
        self.steps: list[list] = []

    def begin(self):
        self.global_step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.global_step)

    def after_run(self, run_context, run_values):
        fresh = run_context.session.run(self.global_step)
        self.steps.append([int(run_values.results), int(fresh)])


class Events(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[list] = []

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(["epoch_end", epoch, sorted((logs or {}).items())])

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(["batch_end", batch, sorted((logs or {}).items())])


def dataset():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, x.sum(1, keepdims=True))).batch(GLOBAL_BATCH)


def make(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        inner = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        optimizer = keras.optimizers.SGD(0.05)
        inner.compile(optimizer=optimizer)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(inner(x) - y))
        grads = tape.gradient(loss, inner.trainable_variables)
        optimizer.apply_gradients(zip(grads, inner.trainable_variables))
        return loss

    return inner, optimizer, step


def callbacks():
    recorder = StepRecorder()
    hooks = [recorder, v1.train.StopAtStepHook(last_step=LAST_STEP)]
    return recorder, Events(), [hookbridge.HookCallback(hooks)]


def run_fit(strategy):
    inner, optimizer, step = make(strategy)

    class Oracle(keras.Model):
        def __init__(self):
            super().__init__()
            self.inner = inner
            self.tracker = keras.metrics.Mean(name="loss")

        @property
        def metrics(self):
            return [self.tracker]

        def call(self, x):
            return self.inner(x)

        def train_step(self, data):
            x, y = data
            self.tracker.update_state(step(x, y), sample_weight=tf.shape(x)[0])
            return {"loss": self.tracker.result()}

    with strategy.scope():
        model = Oracle()
        model(np.zeros((1, 3), "float32"))
        model.compile(optimizer=optimizer)
    recorder, events, cbs = callbacks()
    model.fit(dataset(), epochs=3, callbacks=[events, *cbs], verbose=0)
    return recorder, events, optimizer, inner


def run_loop(strategy):
    inner, optimizer, step = make(strategy)

    @tf.function
    def distributed_step(batch):
        losses = strategy.run(step, args=batch)
        return {"loss": strategy.reduce("MEAN", losses, axis=None)}

    recorder, events, cbs = callbacks()
    loop = hookbridge.CallbackLoop(inner, [events, *cbs], epochs=3)
    with loop:
        for _ in loop.epochs():
            for batch in loop.steps(strategy.experimental_distribute_dataset(dataset())):
                loop.step_end(distributed_step(batch), batch_size=GLOBAL_BATCH)
    return recorder, events, optimizer, inner


def results(strategy=None) -> dict:
    """The scenario's outputs, under ``strategy`` if given (``mirrored_fit.py --loop`` passes its
    own: a second MirroredStrategy in one process would reuse its collective instance keys)."""
    strategy = strategy or tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    out = {"replicas": strategy.num_replicas_in_sync}
    for name, run in (("fit", run_fit), ("loop", run_loop)):
        recorder, events, optimizer, inner = run(strategy)
        out[name] = {
            "hook_steps": recorder.steps,
            "events": events.events,
            "iterations": int(optimizer.iterations.numpy()),
            "weights": [w.tolist() for w in inner.get_weights()],
        }
    return out


def main() -> None:
    json.dump(results(), sys.stdout)


if __name__ == "__main__":
    main()
