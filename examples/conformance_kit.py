"""Check your own TF1 hook and Keras callback with hookbridge's conformance kit.

Runs each natively and under the bridge, and fails with both call traces side by side if the
bridge would call them differently. In a pytest suite the same checks are two lines with the
plugin's fixtures (``hook_conforms`` / ``callback_conforms``), see docs/conformance.md.

    python examples/conformance_kit.py
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf

from hookbridge.testing import assert_callback_conforms, assert_hook_conforms


class LossThresholdHook(tf.compat.v1.train.SessionRunHook):
    """Stops training once the batch loss falls below ``threshold``."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    def begin(self):
        self.loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self.loss)

    def after_run(self, run_context, run_values):
        if run_values.results < self.threshold:
            run_context.request_stop()


class EpochCounter(tf.keras.callbacks.Callback):
    """Stops after ``epochs`` epochs, whatever fit was asked for."""

    def __init__(self, epochs: int) -> None:
        super().__init__()
        self.epochs, self.seen = epochs, 0

    def on_epoch_end(self, epoch, logs=None):
        self.seen += 1
        if self.seen >= self.epochs:
            self.model.stop_training = True


def main() -> None:
    result = assert_hook_conforms(
        lambda: LossThresholdHook(2.0), steps=6, steps_per_epoch=3, losses=[9.0, 4.0, 1.0]
    )
    print(f"LossThresholdHook conforms ({len(result.native)} events), last: {result.native[-2]}")
    result = assert_callback_conforms(lambda: EpochCounter(2), steps=8, steps_per_epoch=2)
    print(f"EpochCounter conforms ({len(result.native)} events), last: {result.native[-2]}")


if __name__ == "__main__":
    main()
