"""The R tfestimators custom history-saver hook, in Python, inside Keras ``fit`` on mtcars.

The R "Run Hooks" article builds ``hook_history_saver`` as a custom ``session_run_hook``: in
``before_run`` it asks the session's graph for the ``losses`` collection, in ``after_run`` it
counts steps and keeps the mean of the raw losses every ``every_n_step`` steps. It trains a linear
regressor on mtcars (features ``drat`` and ``cyl``, response ``mpg``, batch size 8) for 4 steps.
The same hook, written with the Python API, runs under ``HookCallback``: the bridge's graph puts the
Keras batch loss in the ``losses`` collection, as a TF1 model_fn's ``tf.losses`` did.

Run: python examples/history_saver.py
"""

import csv
from importlib import resources

import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1


class HistorySaverCustomHook(v1.train.SessionRunHook):
    """R's ``hook_history_saver_custom(every_n_step)``."""

    def __init__(self, every_n_step):
        self.every_n_step = every_n_step
        self.iter_count = 0
        self.mean_losses_history = []

    def before_run(self, run_context):
        losses = run_context.session.graph.get_collection("losses")
        return v1.train.SessionRunArgs({"losses": losses})

    def after_run(self, run_context, run_values):
        self.iter_count += 1
        print(f"Running step: {self.iter_count}")
        if self.iter_count % self.every_n_step == 0:
            raw_losses = run_values.results["losses"][0]
            self.mean_losses_history.append(float(np.mean(raw_losses)))


def main():
    tf.keras.utils.set_random_seed(0)  # Python, NumPy, TF and Keras: the same run every time
    with resources.files("hookbridge").joinpath("data/mtcars.csv").open(newline="") as f:
        mtcars = list(csv.DictReader(f))  # the 32-row table shipped with hookbridge
    x = np.array([[float(r["drat"]), float(r["cyl"])] for r in mtcars], "float32")
    y = np.array([[float(r["mpg"])] for r in mtcars], "float32")

    keras = tf.keras
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])  # linear regressor
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")

    hook = HistorySaverCustomHook(every_n_step=1)
    history = model.fit(
        x,
        y,
        batch_size=8,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[hookbridge.HookCallback([hook])],
    )  # 32 rows / 8 = 4 steps
    print("mean_losses_history:", " ".join(f"{v:.4f}" for v in hook.mean_losses_history))
    # The hook saw each batch's loss (as TF1 did); Keras logs the epoch's running mean of them.
    print(
        f"mean of the hook's batch losses: {np.mean(hook.mean_losses_history):.4f}; "
        f"Keras epoch loss: {history.history['loss'][0]:.4f}"
    )


if __name__ == "__main__":
    main()
