"""Stage 1: the Estimator stays; Keras callbacks join it through hookbridge.CallbackHook.

Continues OUT/model_dir to global step 40 with the team's hook and, beside it, Keras's
CSVLogger (one row per synthesized epoch of 4 steps, OUT/epochs.csv) and TerminateOnNaN, the
callbacks the Keras job will use natively (TF 2.15 stack).

Run: python examples/migration/stage1_callbacks_in_estimator.py [OUT]
"""

from __future__ import annotations

import os

import project
import tensorflow as tf
from team_hooks import LossHistoryHook

import hookbridge

if __name__ == "__main__":
    out = project.out_dir("migration_demo")
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    est = project.estimator(project.model_dir(out))
    callbacks = hookbridge.CallbackHook(
        [
            tf.keras.callbacks.CSVLogger(os.path.join(out, "epochs.csv"), append=True),
            tf.keras.callbacks.TerminateOnNaN(),
        ],
        logs={"loss": "batch_loss"},
        steps_per_epoch=project.STEPS_PER_EPOCH,
        batch_size=project.BATCH,  # Keras weights epoch means by each batch's sample count
    )
    history = LossHistoryHook(os.path.join(out, "loss_history.csv"))
    est.train(project.input_fn, hooks=[history, callbacks], max_steps=40)
    print(f"stage 1: Estimator trained to global step {est.get_variable_value('global_step')}")
