"""The twin counts a step only when it takes one: its global step is the Estimator's.

An Estimator's ``input_fn`` often gives a dataset of unknown length (a ``filter``, a
``TextLineDataset``). ``fit`` over such an input ends the first epoch of each ``fit`` with one
more ``train_function`` call, whose ``IteratorGetNext`` raises ``OutOfRangeError``. Keras
2.11+'s and Keras 3's optimizers increment ``iterations`` with no dependency on the step, so
Keras's executor may run that increment in the call that has no batch: natively their
``iterations`` counts 8 for 7 batches (measured on all three stacks, the twin included before
its optimizers gated the step). The twin's optimizers make every op of the step wait for its
gradients (``hookbridge/_migrate/twins/optimizer_kernels.py``), as TF1's
``apply_gradients(global_step=)`` increments after its updates.

Here the census twin restored at step 300 trains two ``fit`` calls of one epoch each over 7
batches of unknown length (the last ragged), under ``HookCallback`` with ``estimator_hooks``
writing the checkpoint. Both optimizers' ``iterations``, the global step a hook reads after each
step and the checkpoint's ``global_step`` count the steps taken (301 ... 314), on TensorFlow's
default executor and on its single-threaded one (``tf.experimental.function_executor_type``), on
every stack. On TF 2.15 the oracle runs beside it: the Estimator continued from the same
step-300 checkpoint over the same input reads the same global steps.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from fixtures.census_twin import columns, data

import hookbridge

pytestmark = pytest.mark.filterwarnings("ignore:Your input ran out of data")  # the end, found
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "census_twin" / "model_dir"
ROWS = 6 * data.BATCH + 7  # 7 batches, the last of 7 rows
TAKEN = list(range(301, 315))  # two epochs of 7 steps from step 300


def unknown_length_batches() -> tf.data.Dataset:
    features, labels = data.rows(data.CONTINUE_SEED, ROWS)
    batches = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)
    return batches.filter(lambda x, y: True)  # cardinality unknown, as an input_fn's often is


class GlobalStepAfterRun(tf.compat.v1.train.SessionRunHook):
    """The global step read through the session after each run (no race with the step)."""

    def __init__(self):
        self.steps: list[int] = []

    def begin(self):
        self._step = tf.compat.v1.train.get_global_step()

    def after_run(self, run_context, run_values):
        self.steps.append(int(run_context.session.run(self._step)))


EXECUTORS = {
    "default": contextlib.nullcontext,
    "single": lambda: tf.experimental.function_executor_type("SINGLE_THREADED_EXECUTOR"),
}


@pytest.mark.parametrize("executor", list(EXECUTORS))
def test_the_twins_global_step_counts_the_steps_taken(executor, tmp_path):
    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURE, model_dir)
    twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    assert hookbridge.restore_checkpoint(twin, model_dir, "auto") == 300
    recorder = GlobalStepAfterRun()
    hooks = lambda: [  # noqa: E731
        *hookbridge.estimator_hooks(
            model_dir,
            model=twin,
            save_checkpoints_steps=1000,
            save_summary_steps=0,
            log_step_count_steps=None,
            backup=None,
        ),
        recorder,
    ]
    bridge = hookbridge.HookCallback(hooks)
    with EXECUTORS[executor]():
        for _ in range(2):  # each fit's one epoch ends at the end of the data
            twin.fit(
                unknown_length_batches(), epochs=1, shuffle=False, verbose=0, callbacks=[bridge]
            )
    optimizers = [twin.optimizer, *twin.extra_optimizers]
    assert len(optimizers) == 2
    assert [int(o.iterations.numpy()) for o in optimizers] == [314, 314]
    assert recorder.steps == TAKEN
    checkpoint = tf.train.load_checkpoint(str(model_dir))
    assert int(checkpoint.get_tensor("global_step")) == 314


def test_the_estimator_counts_the_same_steps_over_the_same_input(tmp_path):
    pytest.importorskip("tensorflow_estimator", exc_type=ImportError)
    from fixtures.census_twin import native

    model_dir = tmp_path / "model_dir"
    shutil.copytree(FIXTURE, model_dir)
    recorder = GlobalStepAfterRun()
    estimator = native.estimator(model_dir)
    for _ in range(2):
        estimator.train(unknown_length_batches, hooks=[recorder])
    assert recorder.steps == TAKEN
    assert estimator.get_variable_value("global_step") == 314
