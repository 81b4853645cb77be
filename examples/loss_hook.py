"""The lifecycle article's LossHook, unchanged, inside Keras ``fit``.

The hook below is copied as written in "What is the sequence of SessionRunHook's member function to
be called?" (TF1 code: ``import tensorflow.compat.v1 as tf`` is the only migration step). It logs the
loss every step and requests a stop once the loss falls below a threshold; ``HookCallback`` turns
that request into ``model.stop_training``.

Run: python examples/loss_hook.py
"""

import numpy as np
import tensorflow as tf2
import tensorflow.compat.v1 as tf  # the article's TF1 code, unchanged below

import hookbridge


class LossHook(tf.train.SessionRunHook):
    def __init__(self, loss_tensor, threshold=0.01):
        self.loss_tensor = loss_tensor
        self.threshold = threshold
        self.step = 0

    def begin(self):
        print("begin")

    def after_create_session(self, session, coord):
        print("session created")

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self.loss_tensor)

    def after_run(self, run_context, run_values):
        self.step += 1
        loss_value = run_values.results
        print(f"step={self.step} loss={loss_value:.4f}")
        if loss_value < self.threshold:
            run_context.request_stop()

    def end(self, session):
        print("end")


def main():
    tf2.keras.utils.set_random_seed(0)  # Python, NumPy, TF and Keras: the same run every time
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 2)).astype("float32")
    y = x @ np.array([[2.0], [-1.0]], "float32") + 0.5

    keras = tf2.keras
    model = keras.Sequential([keras.Input(shape=(2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")

    # The hooks callable runs while the bridge's graph is the default graph, so the Keras loss is
    # the tensor "loss:0" there, as a TF1 model_fn's loss was in the Estimator's graph.
    bridge = hookbridge.HookCallback(
        lambda: [LossHook(tf.get_default_graph().get_tensor_by_name("loss:0"), threshold=0.01)]
    )
    history = model.fit(x, y, batch_size=32, epochs=20, verbose=0, callbacks=[bridge])
    print(
        f"fit stopped after {int(model.optimizer.iterations.numpy())} steps, "
        f"{len(history.history['loss'])} epochs"
    )


if __name__ == "__main__":
    main()
