"""The BERT walk, TF 2.21 half: the same ``model_fn`` continues the job in Keras ``fit``.

``hookbridge.model_fn_model`` makes the ``model_fn`` (``classifier.py``, as ``hookbridge upgrade
--model-fn`` left it) a Keras model whose weights are its variables under their TF1 names;
``restore_checkpoint`` loads the Estimator's ``model.ckpt-30`` from OUT/model_dir by name (weights,
the optimizer's ``adam_m``/``adam_v``, the global step); ``fit`` runs the model_fn's own train op
(its ``AdamWeightDecay``, warmup and polynomial decay, clipping) for 20 steps, with the hooks
``Estimator.train`` ran (``estimator_hooks``) in a ``HookCallback``, writing ``model.ckpt-40`` and
``model.ckpt-50`` into OUT/model_dir as the Estimator writes them. Writes ``fit.json`` (the
predictions at the switch, the 20 batch losses) and, where ``estimator.json`` is there, prints
the differences from the Estimator.

Run (TF 2.21 with Keras 3 or tf_keras, or TF 2.15), after estimator_tf215.py:
python fit_tf221.py [OUT]
"""

from __future__ import annotations

import classifier
import numpy as np
import tensorflow as tf
import walk

import hookbridge


def run(out):
    model_dir = str(out / "model_dir")
    features, labels = walk.continue_rows()
    # --8<-- [start:fit]
    params = dict(classifier.PARAMS, init_checkpoint=None)  # model_dir has the weights
    model = hookbridge.model_fn_model(
        classifier.model_fn, params=params, features=features, labels=labels
    )
    step = hookbridge.restore_checkpoint(model, model_dir)  # by name, no map: 30
    predictions = model(walk.predict_features())  # the model_fn's PREDICT mode

    def hooks():  # what Estimator.train ran, on HookCallback's graph
        return hookbridge.estimator_hooks(
            model_dir, model=model, save_checkpoints_steps=10, keep_checkpoint_max=3
        )

    data = tf.data.Dataset.from_tensor_slices((features, labels)).batch(classifier.BATCH)
    history = model.fit(  # one batch an epoch: history holds each batch's own loss
        data,
        epochs=walk.CONTINUE_STEPS,
        steps_per_epoch=1,
        shuffle=False,
        verbose=0,
        callbacks=[hookbridge.HookCallback(hooks)],
    )
    # --8<-- [end:fit]
    losses = [float(x) for x in history.history["loss"]]
    end = int(model.optimizer.iterations.numpy())
    walk.write_json(
        out / "fit.json",
        {
            "from_step": step,
            "to_step": end,
            "predictions": walk.as_lists(predictions),
            "losses": losses,
        },
    )
    print(f"fit: restored at step {step}, trained to step {end}, loss {losses[-1]:.6g}")
    reference = walk.read_json(out / "estimator.json")
    if reference:
        off = max(
            float(np.max(np.abs(np.asarray(predictions[k]) - np.asarray(v))))
            for k, v in reference["predictions"].items()
        )
        deviation = walk.relative(losses, reference["continued_losses"])
        print(f"at the switch: predictions within {off:.2g} of the Estimator's")
        print(
            f"fit {step} -> {end} vs the Estimator: {len(losses)} losses, max relative "
            f"difference {deviation[:8].max():.2g} (first 8), {deviation.max():.2g} (all)"
        )
    return model


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    run(walk.out_dir())
