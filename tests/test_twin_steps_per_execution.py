"""The census twin trained k steps a ``tf.function`` call: the fast route, as exact as one a call.

Plain ``fit`` pays Keras's per-call work (its loop, callbacks, the ``tf.function`` dispatch)
once a step; ``twin.compile(optimizer=twin.optimizer, loss=twin.loss, steps_per_execution=k)``
pays it once per k steps (``benchmarks/twin_step.md``). Here, on every stack: the twin restored
from the Estimator's step-300 ``model_dir`` and continued 20 steps under ``HookCallback`` with
``estimator_hooks`` writes the same step-320 checkpoint (every variable and optimizer slot,
under the Estimator's names) with 10 steps a call as with one; and the hooks see what
``docs/limits.md`` says: one ``before_run``/``after_run`` per call, the global step advancing
by 10, with a warning saying so.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixtures.census_twin import columns, data

import hookbridge

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "census_twin" / "model_dir"
STEPS, K = 20, 10


class SeenSteps(tf.compat.v1.train.SessionRunHook):
    """The global step each ``after_run`` sees (fetched in ``before_run``)."""

    def __init__(self):
        self.steps: list[int] = []

    def begin(self):
        self._step = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        self.steps.append(int(run_values.results))


def continue_twin(tmp_path: Path, per_execution: int):
    """The twin from the step-300 model_dir, ``STEPS`` continuation steps, ``per_execution``
    a call: (the step-320 checkpoint's reader, the global steps the hooks saw, warnings)."""
    model_dir = tmp_path / f"k{per_execution}"
    shutil.copytree(FIXTURE, model_dir)
    twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    first = hookbridge.restore_checkpoint(twin, model_dir, "auto")
    if per_execution > 1:  # the documented route: the twin's own optimizers and loss kept
        twin.compile(optimizer=twin.optimizer, loss=twin.loss, steps_per_execution=per_execution)
    features, labels = data.rows(data.CONTINUE_SEED, STEPS * data.BATCH)
    batches = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)
    seen = SeenSteps()
    hooks = lambda: [  # noqa: E731
        seen,
        *hookbridge.estimator_hooks(
            model_dir,
            model=twin,
            save_checkpoints_steps=STEPS,
            save_summary_steps=0,
            log_step_count_steps=None,
            backup=None,
        ),
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        twin.fit(
            batches,
            steps_per_epoch=STEPS,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[hookbridge.HookCallback(hooks)],
        )
    assert first == 300
    messages = [str(w.message) for w in caught if "steps_per_execution" in str(w.message)]
    return tf.train.load_checkpoint(str(model_dir)), seen.steps, messages


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("twin_spe")
    return continue_twin(tmp, 1), continue_twin(tmp, K)


def test_k_steps_a_call_write_the_checkpoint_one_step_a_call_writes(runs):
    (one, _, _), (many, _, _) = runs
    assert int(one.get_tensor("global_step")) == int(many.get_tensor("global_step")) == 320
    names = one.get_variable_to_shape_map()
    assert many.get_variable_to_shape_map() == names
    assert any("Ftrl" in n for n in names) and any("Adagrad" in n for n in names)
    for name in sorted(names):
        np.testing.assert_array_equal(many.get_tensor(name), one.get_tensor(name), err_msg=name)


def test_hooks_see_one_boundary_a_call_and_are_warned(runs):
    (_, one_steps, one_warned), (_, many_steps, many_warned) = runs
    assert one_steps == list(range(300, 320)) and one_warned == []  # read as the step began
    assert many_steps == one_steps[::K] == [300, 310]
    assert len(many_warned) == 1 and f"runs {K} steps per execution" in many_warned[0]
