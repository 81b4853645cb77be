"""The names a twin declares before any restore: a census twin that was never restored writes
each weight under the Estimator's name for it.

``keras_twin`` names its weights by construction (``twins/build.declared_names``), so
``estimator_hooks(model_dir, model=twin)`` can write an Estimator checkpoint from a twin trained
from scratch. A swap of two same-shaped names there would write one weight's values under the
other's name with no error; the restore tests cannot see it (a restore names the weights by its
own plan). Here a fresh twin takes the values of a twin restored from the Estimator's checkpoint
by position (the same build, the same weight order) and writes its first checkpoint: each
variable must be the Estimator's, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf
from fixtures.census_twin import columns, data

import hookbridge

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "census_twin"


def test_a_twin_never_restored_writes_each_weight_under_the_estimators_name(tmp_path):
    arguments = columns.estimator_arguments()
    restored = hookbridge.keras_twin("DNNLinearCombinedClassifier", **arguments)
    step = hookbridge.restore_checkpoint(restored, FIXTURE / "model_dir", "auto")
    fresh = hookbridge.keras_twin("DNNLinearCombinedClassifier", **arguments)
    assert [tuple(w.shape) for w in fresh.weights] == [tuple(w.shape) for w in restored.weights]
    fresh.set_weights(restored.get_weights())
    fresh.optimizer.iterations.assign(step)
    model_dir = tmp_path / "fresh"
    features, labels = data.rows(data.CONTINUE_SEED, data.BATCH)
    batch = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)

    def hooks():
        return hookbridge.estimator_hooks(
            model_dir, model=fresh, save_summary_steps=0, log_step_count_steps=None
        )

    # The CheckpointSaverHook writes its first checkpoint when the session is made, at `step`.
    fresh.fit(batch, epochs=1, verbose=0, callbacks=[hookbridge.HookCallback(hooks)])
    mine = tf.train.load_checkpoint(str(model_dir / f"model.ckpt-{step}"))
    theirs = tf.train.load_checkpoint(str(FIXTURE / "model_dir"))
    weights = {
        name
        for name in theirs.get_variable_to_shape_map()
        if name != "global_step"
        and not name.startswith("training/")
        and "/Adagrad" not in name
        and "/Ftrl" not in name
    }
    assert weights, "the Estimator's checkpoint lists no model variable"
    off = {
        name: float(np.abs(mine.get_tensor(name) - theirs.get_tensor(name)).max())
        for name in sorted(weights)
        if not np.array_equal(mine.get_tensor(name), theirs.get_tensor(name))
    }
    assert off == {}
