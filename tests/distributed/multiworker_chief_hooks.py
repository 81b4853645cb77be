"""One worker of a 2-worker MultiWorkerMirroredStrategy on loopback, running the setup
``docs/distributed.md`` tells users to write: the file writers as ``chief_only_hooks=``.

``python multiworker_chief_hooks.py OUT_DIR`` with ``TF_CONFIG`` set by the caller (or
:func:`run` under a strategy of the caller's: ``multiworker_fit.py`` runs it after its stop
scenarios, in the same pair of workers, so the suite starts one pair). Two fits of
the same model (BatchNormalization included: its moving statistics are ``SyncOnRead``
variables, as the loss tracker's ``count`` is), the same data and the same seed:

* ``native``: no HookCallback, a Keras callback recording the logs of every batch;
* ``bridged``: ``HookCallback(hooks=[a recorder fetching loss:0, a StepCounterHook writing to
  OUT_DIR/everyone], chief_only_hooks=<CheckpointSaverHook, SummarySaverHook on loss:0,
  StepCounterHook, all in OUT_DIR/model>)``: the StepCounterHook in ``hooks=`` is the mistake
  a non-chief worker warns about.

Prints one JSON line: what each fit reported, what the hooks saw, the warnings, and this
worker's own values of the trained weights (read locally, as the chief's checkpoint holds them).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
#: Steps per epoch, epochs, global batch, and CheckpointSaverHook's save_steps.
STEPS, EPOCHS, BATCH, SAVE_STEPS = 4, 2, 16, 3


class Recorder(v1.train.SessionRunHook):
    """The stale global step and ``loss:0`` fetched in each run."""

    def __init__(self) -> None:
        self.steps: list[list] = []

    def begin(self):
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        self._fetches = [v1.train.get_global_step(), loss]

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        step, loss = run_values.results
        self.steps.append([int(step), float(loss)])


class KerasLogs(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.losses: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def chief_only_hooks(model_dir: str, fits: list | None = None):
    """What docs/distributed.md says to pass as chief_only_hooks= (built in the hooks' graph).
    With ``fits`` (a list counting the calls), each fit writes to ``model_dir/<fit number>``."""

    def make():
        directory = model_dir
        if fits is not None:
            fits.append(None)
            directory = os.path.join(model_dir, str(len(fits)))
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        return [
            v1.train.CheckpointSaverHook(directory, save_steps=SAVE_STEPS),
            v1.train.SummarySaverHook(
                save_steps=1, output_dir=directory, summary_op=v1.summary.scalar("batch_loss", loss)
            ),
            v1.train.StepCounterHook(every_n_steps=1, output_dir=directory),
        ]

    return make


def build(strategy):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(3),
                keras.layers.BatchNormalization(),
                keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def dataset():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(STEPS * BATCH, 4)).astype("float32")
    y = (x @ rng.normal(size=(4, 1))).astype("float32")
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)


def fit(model, callbacks) -> dict:
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model.fit(
                dataset(), steps_per_epoch=STEPS, epochs=EPOCHS, verbose=0, callbacks=callbacks
            )
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            traceback.print_exc()
            error = f"{type(e).__name__}: {str(e)[:600]}"
    return {
        "error": error,
        "iterations": int(model.optimizer.iterations.numpy()),
        "warnings": [str(w.message) for w in caught if "HookCallback" in str(w.message)],
    }


def local_weights(model, strategy) -> list:
    """This worker's own value of every weight (no collective)."""
    return [strategy.experimental_local_results(w)[0].numpy().tolist() for w in model.weights]


def run(strategy, out_dir: str) -> dict:
    """The two fits (and a third with the same callback) under ``strategy``: what they reported,
    writing to ``out_dir``."""
    native_logs = KerasLogs()
    native_model = build(strategy)
    native = fit(native_model, [native_logs])
    native.update(losses=native_logs.losses, weights=local_weights(native_model, strategy))

    recorder, bridged_logs = Recorder(), KerasLogs()
    everyone = os.path.join(out_dir, "everyone")
    bridge = hookbridge.HookCallback(
        lambda: [recorder, v1.train.StepCounterHook(every_n_steps=100, output_dir=everyone)],
        chief_only_hooks=chief_only_hooks(os.path.join(out_dir, "model"), fits=[]),
    )
    model = build(strategy)
    bridged = fit(model, [bridge, bridged_logs])
    bridged.update(
        losses=bridged_logs.losses,
        hook_steps=list(recorder.steps),
        weights=local_weights(model, strategy),
        hooks=[type(h).__name__ for h in bridge.hooks],
    )
    # A second fit with the same callback: the warning about hooks= is given once.
    again = fit(build(strategy), [bridge])
    return {
        "is_chief": bool(strategy.extended.should_checkpoint),
        "native": native,
        "bridged": bridged,
        "again": again,
    }


def main(out_dir: str) -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    print(json.dumps(run(strategy, out_dir)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
