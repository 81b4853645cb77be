"""Stage 3: the hooks are replaced, one at a time, by Keras callbacks.

Same job as stage 2 (to global step 80), with the first ``--replaced N`` hooks of REPLACEMENTS
swapped for their Keras counterparts; each replacement was compared with its hook first by
``hookbridge check --replaced-by`` (the command in its row; docs/migration.md shows its report).
The checkpoint, summary and step-counter hooks stay under
HookCallback: they keep model_dir as the Estimator wrote it (TF1-named checkpoint files, the
`loss` curve in TensorBoard) until the team no longer needs that.

Run: python examples/migration/stage3_native_callbacks.py [OUT] [--replaced N]
"""

from __future__ import annotations

import argparse
import os

import project
import tensorflow as tf
from team_hooks import LossHistory, LossHistoryHook

import hookbridge

LAST_STEP = 80

#: (what is replaced, the hook, the callback, the check comparing the two).
REPLACEMENTS = [
    (
        "the team's LossHistoryHook -> LossHistory",
        lambda out: LossHistoryHook(os.path.join(out, "loss_history.csv"), loss="loss:0"),
        lambda out: LossHistory(os.path.join(out, "loss_history.csv")),
        "hookbridge check team_hooks:make_history_hook_csv "
        "--replaced-by team_hooks:make_history_callback_csv",
    ),
    (
        "StopAtStepHook(last_step) -> fit(epochs=last_step // steps_per_epoch)",
        lambda out: tf.compat.v1.train.StopAtStepHook(last_step=LAST_STEP),
        None,  # no callback: fit's own epochs
        "",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?", default="migration_demo")
    parser.add_argument("--replaced", type=int, default=len(REPLACEMENTS))
    args = parser.parse_args()
    out = project.out_dir(args.out)
    model_dir = project.model_dir(out)
    model = project.keras_model()
    step = 0
    if tf.train.latest_checkpoint(model_dir):
        step = hookbridge.restore_checkpoint(model, model_dir, "auto")
    print(f"stage 3: Keras starts at global step {step}")
    kept, callbacks = [], []
    for i, (what, hook, callback, check) in enumerate(REPLACEMENTS):
        if i < args.replaced:
            print(f"replaced: {what}" + (f"  (checked with: {check})" if check else ""))
            if callback is not None:
                callbacks.append(callback(out))
        else:
            kept.append(hook)
    epochs = LAST_STEP // project.STEPS_PER_EPOCH if args.replaced >= 2 else 10_000
    x, y = project.data()
    model.fit(
        x,
        y,
        batch_size=project.BATCH,
        shuffle=False,
        initial_epoch=step // project.STEPS_PER_EPOCH,
        epochs=epochs,
        verbose=0,
        callbacks=[
            hookbridge.HookCallback(
                lambda: hookbridge.estimator_hooks(
                    model_dir,
                    hooks=[make(out) for make in kept],
                    model=model,
                    **project.RUN_CONFIG,
                )
            ),
            *callbacks,
            tf.keras.callbacks.CSVLogger(os.path.join(out, "epochs.csv"), append=True),
            tf.keras.callbacks.TerminateOnNaN(),
        ],
    )
    print(f"stage 3: Keras trained to global step {int(model.optimizer.iterations.numpy())}")


if __name__ == "__main__":
    main()
