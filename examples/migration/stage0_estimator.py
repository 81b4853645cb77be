"""Stage 0: the TF1 job as it was: an Estimator with the team's hook (TF 2.15 stack).

Trains to global step 20 in OUT/model_dir (checkpoints, events), and the team's hook appends
the loss to OUT/loss_history.csv.

Run: python examples/migration/stage0_estimator.py [OUT]   (default ./migration_demo)
"""

from __future__ import annotations

import os

import project
import tensorflow as tf
from team_hooks import LossHistoryHook

if __name__ == "__main__":
    out = project.out_dir("migration_demo")
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)  # LoggingTensorHook's output
    est = project.estimator(project.model_dir(out))
    history = LossHistoryHook(os.path.join(out, "loss_history.csv"))
    est.train(project.input_fn, hooks=[history], max_steps=20)
    print(f"stage 0: Estimator trained to global step {est.get_variable_value('global_step')}")
