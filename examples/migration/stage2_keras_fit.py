"""Stage 2: the model moves to Keras fit; every hook stays, and so does model_dir.

Restores OUT/model_dir's latest checkpoint into the Keras model (an Estimator's, by layer order
and shapes; or one this script wrote, on a restart) with its global step, then trains to global
step 60 with the hooks Estimator.train added unasked (hookbridge.estimator_hooks: the same
checkpoints, with the Estimator's variable names, `loss` curve, step counter and log lines in
model_dir) and the team's hook under
hookbridge.HookCallback, and the Keras callbacks of stage 1, natively. Runs on every stack; with
no checkpoint in OUT/model_dir it starts from step 0.

Run: python examples/migration/stage2_keras_fit.py [OUT]
"""

from __future__ import annotations

import os

import project
import tensorflow as tf
from team_hooks import LossHistoryHook

import hookbridge

LAST_STEP = 60

if __name__ == "__main__":
    out = project.out_dir("migration_demo")
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
    model_dir = project.model_dir(out)
    model = project.keras_model()
    step = 0
    if tf.train.latest_checkpoint(model_dir):
        hookbridge.restore_checkpoint(model, model_dir, "auto", dry_run=True)
        step = hookbridge.restore_checkpoint(model, model_dir, "auto")
    print(f"stage 2: Keras starts at global step {step}")

    def hooks():  # called on HookCallback's graph, as model_fn was on the Estimator's
        history = LossHistoryHook(os.path.join(out, "loss_history.csv"), loss="loss:0")
        stop = tf.compat.v1.train.StopAtStepHook(last_step=LAST_STEP)  # Estimator's max_steps
        # model=: new checkpoints keep the Estimator's variable names (it can restore them).
        return hookbridge.estimator_hooks(
            model_dir, hooks=[history, stop], model=model, **project.RUN_CONFIG
        )

    x, y = project.data()
    model.fit(
        x,
        y,
        batch_size=project.BATCH,
        shuffle=False,
        initial_epoch=step // project.STEPS_PER_EPOCH,
        epochs=10_000,  # StopAtStepHook ends the run, as max_steps ended the Estimator's
        verbose=0,
        callbacks=[
            hookbridge.HookCallback(hooks),
            tf.keras.callbacks.CSVLogger(os.path.join(out, "epochs.csv"), append=True),
            tf.keras.callbacks.TerminateOnNaN(),
        ],
    )
    print(f"stage 2: Keras trained to global step {int(model.optimizer.iterations.numpy())}")
