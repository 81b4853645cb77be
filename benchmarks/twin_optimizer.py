"""Per-step cost of the twins' optimizers (``hookbridge/_migrate/twins/optimizer_kernels.py``)
beside Keras's own on the same model, in ``fit``.

    python benchmarks/twin_optimizer.py                 # 5 interleaved repeats
    python benchmarks/twin_optimizer.py --repeats 9 --steps 400

The model is a wide & deep shape with a sparse gradient: an embedding table (20,000 x 16)
gathered by 8 ids a row (Zipf-distributed: duplicates in every batch of 256), averaged, then
Dense 64 (ReLU) and Dense 1, MSE. Cases: the twin's ``Adagrad`` and ``Ftrl`` (TF1 flavor, what
``estimator_optimizer`` gives a V1 canned Estimator) and Keras's own ``Adagrad`` / ``Ftrl``
(``optimizers.legacy`` ones too where they exist). Each case's model is built and traced once;
each repeat runs every case in a fresh shuffled order for ``--steps`` steps, timed from a
callback's ``on_epoch_begin`` to its ``on_epoch_end`` (garbage collector off while timed);
the median µs/step and its ratio to Keras's optimizer of the same kind are printed. Not a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import tensorflow as tf

from hookbridge._migrate.twins.optimizers import estimator_optimizer

keras = tf.keras
VOCAB, DIM, IDS, BATCH = 20_000, 16, 8, 256


class Embedded(keras.layers.Layer):
    def build(self, input_shape):
        self.table = self.add_weight(name="table", shape=(VOCAB, DIM), initializer="uniform")

    def call(self, ids):
        return tf.reduce_mean(tf.gather(self.table, ids), axis=1)


def cases() -> dict[str, object]:
    out = {
        "twin Adagrad": lambda: estimator_optimizer("Adagrad", v2=False, default_lr=0.05),
        "keras Adagrad": lambda: keras.optimizers.Adagrad(0.05, epsilon=0.0),
        "twin Ftrl": lambda: estimator_optimizer("Ftrl", v2=False, default_lr=0.05),
        "keras Ftrl": lambda: keras.optimizers.Ftrl(0.05),
    }
    legacy = getattr(keras.optimizers, "legacy", None)
    if legacy is not None and not str(getattr(keras, "__version__", "2")).startswith("3"):
        out["legacy Adagrad"] = lambda: legacy.Adagrad(0.05)
        out["legacy Ftrl"] = lambda: legacy.Ftrl(0.05)
    return out


class Timer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ids = np.minimum(rng.zipf(1.3, size=(BATCH * 64, IDS)), VOCAB) - 1
    y = rng.normal(size=(BATCH * 64, 1)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((ids.astype("int64"), y)).repeat().batch(BATCH)
    data = data.prefetch(4)
    models = {}
    for name, make in cases().items():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [
                keras.Input((IDS,), dtype="int64"),
                Embedded(),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        model.compile(optimizer=make(), loss="mse")
        model.fit(data, steps_per_epoch=20, epochs=1, verbose=0)  # trace, warm up
        models[name] = model
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.repeats):
        order = list(models)
        random.shuffle(order)
        for name in order:
            timer = Timer()
            gc.collect()
            gc.disable()
            try:
                models[name].fit(
                    data, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=[timer]
                )
            finally:
                gc.enable()
            times[name].append(timer.seconds / args.steps * 1e6)
    print(
        f"TF {tf.__version__}, Keras {getattr(keras, '__version__', '?')}; "
        f"{args.repeats} repeats x {args.steps} steps, batch {BATCH}"
    )
    for name, values in times.items():
        median = statistics.median(values)
        kind = name.split()[-1]
        reference = statistics.median(times[f"keras {kind}"])
        print(f"{name:16s} {median:9.1f} us/step   {median / reference:5.2f}x keras {kind}")


if __name__ == "__main__":
    main()
