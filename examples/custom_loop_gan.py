"""A GAN that cannot move to ``fit`` (two optimizers, alternating steps) keeps its TF1 hooks and
gains Keras callbacks, in a custom training loop driven by ``hookbridge.CallbackLoop``.

The TF1 original (sketch)::

    d_train = tf.train.AdamOptimizer(1e-3).minimize(d_loss, var_list=d_vars)
    g_train = tf.train.AdamOptimizer(1e-3).minimize(g_loss, var_list=g_vars,
                                                    global_step=tf.train.get_global_step())
    hooks = [tf.train.StopAtStepHook(last_step=60),
             tf.train.LoggingTensorHook({"g_loss": g_loss, "d_loss": d_loss}, every_n_iter=20),
             tf.train.CheckpointSaverHook(model_dir, save_steps=20)]
    with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(d_train); sess.run(g_train)

After the move: the step is a ``tf.function``, the global step is the generator optimizer's
``iterations`` (it counts one per step, as ``g_train`` incremented the global step), the same
hook objects run through ``HookCallback``, and ``EarlyStopping`` / ``CSVLogger`` join them.

Run: python examples/custom_loop_gan.py [MODEL_DIR]
(without MODEL_DIR: a temporary folder, removed when the script ends)
"""

import csv
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
NOISE, BATCH = 4, 32


class GAN(keras.Model):
    """The two networks, in one Keras model the callbacks see (weights, stop_training)."""

    def __init__(self):
        super().__init__()
        self.generator = keras.Sequential(
            [keras.Input((NOISE,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
        )
        self.discriminator = keras.Sequential(
            [keras.Input((1,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
        )
        self.g_optimizer = keras.optimizers.Adam(1e-3)
        self.d_optimizer = keras.optimizers.Adam(1e-3)

    def call(self, noise):
        return self.generator(noise)


def main(model_dir):
    keras.utils.set_random_seed(0)
    v1.logging.set_verbosity(v1.logging.INFO)  # LoggingTensorHook logs at INFO
    gan = GAN()
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    real_data = tf.data.Dataset.from_tensor_slices(
        np.random.default_rng(0).normal(3.0, 0.5, size=(640, 1)).astype("float32")
    ).batch(BATCH)  # 20 steps per epoch

    @tf.function
    def train_step(real):
        noise = tf.random.normal([tf.shape(real)[0], NOISE])
        with tf.GradientTape() as tape:  # the discriminator's step
            fake = gan.generator(noise)
            real_logits, fake_logits = gan.discriminator(real), gan.discriminator(fake)
            d_loss = bce(tf.ones_like(real_logits), real_logits) + bce(
                tf.zeros_like(fake_logits), fake_logits
            )
        d_vars = gan.discriminator.trainable_variables
        gan.d_optimizer.apply_gradients(zip(tape.gradient(d_loss, d_vars), d_vars))
        with tf.GradientTape() as tape:  # then the generator's
            fake_logits = gan.discriminator(gan.generator(noise))
            g_loss = bce(tf.ones_like(fake_logits), fake_logits)
        g_vars = gan.generator.trainable_variables
        gan.g_optimizer.apply_gradients(zip(tape.gradient(g_loss, g_vars), g_vars))
        return {"d_loss": d_loss, "g_loss": g_loss}

    def tf1_hooks():  # built on the bridge's graph: "g_loss:0" is this step's generator loss
        graph = v1.get_default_graph()
        g_loss, d_loss = graph.get_tensor_by_name("g_loss:0"), graph.get_tensor_by_name("d_loss:0")
        return [
            v1.train.StopAtStepHook(last_step=60),
            v1.train.LoggingTensorHook({"g_loss": g_loss, "d_loss": d_loss}, every_n_iter=20),
            v1.train.CheckpointSaverHook(model_dir, save_steps=20),
        ]

    log_path = os.path.join(model_dir, "log.csv")
    callbacks = [
        hookbridge.HookCallback(tf1_hooks, log_names=["d_loss", "g_loss"]),
        keras.callbacks.EarlyStopping(monitor="g_loss", patience=5, mode="min"),
        keras.callbacks.CSVLogger(log_path),
    ]
    loop = hookbridge.CallbackLoop(gan, callbacks, epochs=10, optimizer=gan.g_optimizer)
    with loop:
        for _epoch in loop.epochs():
            for real in loop.steps(real_data):
                loop.step_end(train_step(real))

    step = int(gan.g_optimizer.iterations.numpy())
    with open(log_path) as f:
        rows = list(csv.DictReader(f))
    checkpoint = tf.train.latest_checkpoint(model_dir)
    print(f"stopped at global step {step} (StopAtStepHook last_step=60), {len(rows)} epochs")
    print(f"CSVLogger columns: {list(rows[0])}")
    print(f"last checkpoint: {os.path.basename(checkpoint)}")
    print("history g_loss:", [round(v, 4) for v in loop.history.history["g_loss"]])

    # A restarted job resumes from the hooks' checkpoint: weights and the global step.
    fresh = GAN()
    fresh.compile(optimizer=fresh.g_optimizer)  # the optimizer whose iterations is the step
    restored = hookbridge.restore_checkpoint(fresh, model_dir)
    noise = tf.random.normal([8, NOISE], seed=1)
    same = np.allclose(fresh(noise).numpy(), gan(noise).numpy())
    print(f"restored step {restored}; generator outputs equal after restore: {same}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
