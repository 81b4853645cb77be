"""SummarySaverHook inside Keras ``fit``, read back with TensorBoard's EventAccumulator.

``SummarySaverHook(save_steps=N, ...)`` writes the summary op's value every N global steps, as in
TF1. The summary op is built in the hooks callable, while the bridge's graph is the default graph:
a scalar of the batch loss and a histogram of the first layer's kernel (the bridge copies the
Keras weights into its graph only for runs that read them).

Run: python examples/summary_saver.py [LOGDIR]
(without LOGDIR: a temporary folder, removed when the script ends)
"""

import sys
import tempfile

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import hookbridge

v1 = tf.compat.v1


def main(logdir):
    tf.keras.utils.set_random_seed(0)  # Python, NumPy, TF and Keras: the same run every time
    rng = np.random.default_rng(0)
    x = rng.normal(size=(320, 4)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    keras = tf.keras
    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
    )

    def hooks():
        graph = v1.get_default_graph()
        # The bridge's graph mirrors the model's weights as variables named model/NNN/<name>.
        kernel = next(v for v in v1.global_variables() if v.op.name == "model/000/kernel")
        summary_op = v1.summary.merge(
            [
                v1.summary.scalar("batch_loss", graph.get_tensor_by_name("loss:0")),
                v1.summary.histogram("dense/kernel", kernel),
            ]
        )
        return [v1.train.SummarySaverHook(save_steps=5, output_dir=logdir, summary_op=summary_op)]

    model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[hookbridge.HookCallback(hooks)])

    events = EventAccumulator(logdir, size_guidance={"scalars": 0, "histograms": 0})  # keep all
    events.Reload()
    for event in events.Scalars("batch_loss"):
        print(f"batch_loss step={event.step} value={event.value:.4f}")
    for event in events.Histograms("dense/kernel"):
        hist = event.histogram_value
        print(f"dense/kernel step={event.step} num={int(hist.num)} sum={hist.sum:.4f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(f"writing to {sys.argv[1]}")
        main(sys.argv[1])
    else:  # a temporary folder, removed when the script ends
        with tempfile.TemporaryDirectory(prefix="summary_saver_") as folder:
            print(f"writing to {folder} (temporary, removed at exit; pass a folder to keep it)")
            main(folder)
