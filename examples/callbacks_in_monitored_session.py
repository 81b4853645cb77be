"""The reverse direction: Keras callbacks inside a TF1 MonitoredTrainingSession.

``hookbridge.CallbackHook`` runs Keras's own ``ReduceLROnPlateau``, ``EarlyStopping`` and
``CSVLogger`` as a ``SessionRunHook``: epochs are synthesized from ``steps_per_epoch``, the logs
are the fetched ``loss`` tensor, ``ReduceLROnPlateau`` lowers the graph's learning-rate variable,
and ``EarlyStopping`` stops the session the way it stops ``fit``.

Run: python examples/callbacks_in_monitored_session.py [OUT_DIR]
(without OUT_DIR: a temporary folder, removed when the script ends)
"""

import csv
import os
import sys
import tempfile

import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras


def main(out_dir):
    with tf.Graph().as_default():
        v1.set_random_seed(0)
        x = v1.random_normal([32, 3])
        w = v1.get_variable("w", [3, 1])
        target = tf.reduce_sum(x, axis=1, keepdims=True)
        loss = v1.reduce_mean(tf.square(tf.matmul(x, w) - target))
        lr = v1.get_variable("learning_rate", initializer=0.1, trainable=False)
        train_op = v1.train.GradientDescentOptimizer(lr).minimize(
            loss, global_step=v1.train.get_or_create_global_step()
        )

        reduce_lr = keras.callbacks.ReduceLROnPlateau(
            monitor="loss", factor=0.5, patience=1, min_delta=1e-3
        )
        stop = keras.callbacks.EarlyStopping(monitor="loss", min_delta=1e-4, patience=2)
        log_path = os.path.join(out_dir, "history.csv")
        hook = hookbridge.CallbackHook(
            [reduce_lr, stop, keras.callbacks.CSVLogger(log_path)],
            logs={"loss": loss},
            steps_per_epoch=10,
            batch_size=x,  # Keras weights epoch means by each batch's sample count
            learning_rate=lr,  # what model.optimizer.learning_rate reads and ReduceLROnPlateau sets
            verbose=0,
        )
        with v1.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(train_op)

    with open(log_path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        print(f"epoch {row['epoch']} loss {float(row['loss']):.6f}")
    # ReduceLROnPlateau adds the learning rate to the epoch logs ("lr" on tf_keras / Keras 2).
    final_lr = float(rows[-1].get("learning_rate") or rows[-1]["lr"])
    print(f"ReduceLROnPlateau left the graph's learning rate at {final_lr:g} (started at 0.1)")
    print(f"EarlyStopping stopped the session at epoch {stop.stopped_epoch}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(f"writing to {sys.argv[1]}")
        main(sys.argv[1])
    else:  # a temporary folder, removed when the script ends
        with tempfile.TemporaryDirectory(prefix="callbacks_in_ms_") as folder:
            print(f"writing to {folder} (temporary, removed at exit; pass a folder to keep it)")
            main(folder)
