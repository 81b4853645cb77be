"""The migration guide's "examples per second" hook, unmodified, inside Keras ``fit``.

TF's guide "Migrate SessionRunHook to Keras callbacks" starts from a hook that reports throughput;
the TF official models repository shipped the classic one, ``ExamplesPerSecondHook``: it fetches the
global step every run and, on a ``SecondOrStepTimer`` trigger, logs the average and the current
examples per second. The hook below is that design, written against the plain TF1 API; it runs
under ``HookCallback`` as it ran under ``Estimator.train``, because the bridge's graph has the global
step and answers its fetch with the step's (pre-step, "stale") value as TF1 did.

Run: python examples/examples_per_second.py
"""

import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1


class ExamplesPerSecondHook(v1.train.SessionRunHook):
    """Logs the average and the current examples per second every N steps or seconds."""

    def __init__(self, batch_size, every_n_steps=None, every_n_secs=None, warm_steps=0):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = v1.train.SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._step_train_time = 0
        self._total_steps = 0
        self._batch_size = batch_size
        self._warm_steps = warm_steps
        self.current_examples_per_sec_list = []

    def begin(self):
        self._global_step_tensor = v1.train.get_global_step()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ExamplesPerSecondHook.")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        global_step = run_values.results
        if self._timer.should_trigger_for_step(global_step) and global_step > self._warm_steps:
            elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
            if elapsed_time is not None:
                self._step_train_time += elapsed_time
                self._total_steps += elapsed_steps
                average = self._batch_size * (self._total_steps / self._step_train_time)
                current = self._batch_size * (elapsed_steps / elapsed_time)
                self.current_examples_per_sec_list.append(current)
                print(
                    f"global_step={global_step} average_examples_per_sec={average:.1f} "
                    f"current_examples_per_sec={current:.1f}"
                )


def main():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2048, 10)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    keras = tf.keras
    model = keras.Sequential(
        [keras.Input(shape=(10,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer="adam", loss="mse")

    hook = ExamplesPerSecondHook(batch_size=64, every_n_steps=10, warm_steps=5)
    model.fit(x, y, batch_size=64, epochs=2, verbose=0, callbacks=[hookbridge.HookCallback([hook])])
    print(
        f"{len(hook.current_examples_per_sec_list)} measurements over "
        f"{int(model.optimizer.iterations.numpy())} steps"
    )


if __name__ == "__main__":
    main()
