"""The BERT walk, TF 2.15 half: the TPUEstimator (``use_tpu=False``) job as it ran.

Writes, under OUT: ``pretrained/`` (unless ``--init_checkpoint`` names BERT's pre-trained
checkpoint: a stand-in, 5 steps on other rows),
``model_dir/`` (the job: 30 steps warm-started from it by ``init_from_checkpoint``; the switch is
its ``model.ckpt-30``), and ``estimator.json``: the Estimator's predictions at the switch and its
20 batch losses continuing a copy of ``model_dir`` (``estimator_continued/``), the reference of
``fit_tf221.py``. With ``--back``, after ``fit_tf221.py``: the Estimator continues 10 steps from
the ``model.ckpt-40`` that Keras ``fit`` wrote into ``model_dir`` (in ``estimator_back/``), into
``back.json``. Deterministic: every op in the caller's thread (``walk.one_thread``); two runs give the same bits.

Run (TF 2.15 with tensorflow-estimator):
python estimator_tf215.py [OUT] [--init_checkpoint PRETRAINED] [--back]
"""

from __future__ import annotations

import random
import shutil
import sys

import classifier
import numpy as np
import tensorflow as tf
import walk

v1 = tf.compat.v1


class LossRecorder(v1.train.SessionRunHook):
    """Each step's batch loss: the tensor of the Estimator's ``loss`` summary."""

    def __init__(self):
        self.losses: list[float] = []

    def begin(self):
        summaries = v1.get_default_graph().get_collection(v1.GraphKeys.SUMMARIES)
        (summary,) = [s for s in summaries if s.op.name == "loss"]
        self._loss = summary.op.inputs[1]

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def input_fn(features, labels=None):
    def make(params):  # TPUEstimator gives the batch size in params
        data = features if labels is None else (features, labels)
        data = tf.data.Dataset.from_tensor_slices(data)
        return data.batch(params["batch_size"], drop_remainder=True)

    return make


def train(model_dir, params, rows, max_steps, seed):
    random.seed(seed)  # TF 2.15's unseeded Keras initializers draw their seeds from `random`
    losses = LossRecorder()
    est = classifier.estimator(model_dir, {"session_config": walk.one_thread()}, params)
    est.train(input_fn(*rows), hooks=[losses], max_steps=max_steps)
    return est, losses.losses


def run(out, init_checkpoint=None):
    """The job; ``init_checkpoint``: BERT's pre-trained checkpoint (default: a stand-in, 5 steps
    on other rows, in OUT/pretrained)."""
    steps = walk.TRAIN_STEPS
    batch = classifier.BATCH
    if init_checkpoint is None:
        pretrained = out / "pretrained"
        shutil.rmtree(pretrained, ignore_errors=True)
        pre_rows = classifier.rows(walk.PRETRAIN_SEED, walk.PRETRAIN_STEPS * batch)
        train(pretrained, classifier.PARAMS, pre_rows, walk.PRETRAIN_STEPS, walk.PRETRAIN_SEED)
        init_checkpoint = str(pretrained)

    model_dir = out / "model_dir"
    shutil.rmtree(model_dir, ignore_errors=True)
    # --8<-- [start:estimator]
    params = dict(classifier.PARAMS, init_checkpoint=init_checkpoint)  # BERT's warm start
    config = {"session_config": walk.one_thread()}
    est = classifier.estimator(model_dir, config, params)  # TPUEstimator(use_tpu=False, ...)
    random.seed(walk.TRAIN_SEED)  # TF 2.15's unseeded Keras initializers draw from `random`
    recorder = LossRecorder()
    rows = classifier.rows(walk.TRAIN_SEED, steps * batch)
    est.train(input_fn(*rows), hooks=[recorder], max_steps=steps)  # model.ckpt-30: the switch
    predictions = list(est.predict(input_fn(walk.predict_features()), yield_single_examples=False))
    # --8<-- [end:estimator]
    losses = recorder.losses
    predicted = {k: np.concatenate([p[k] for p in predictions]) for k in predictions[0]}

    continued = out / "estimator_continued"  # the Estimator going on, the oracle of the fit half
    shutil.rmtree(continued, ignore_errors=True)
    shutil.copytree(model_dir, continued)
    _, native = train(
        continued, params, walk.continue_rows(), steps + walk.CONTINUE_STEPS, walk.CONTINUE_SEED
    )
    walk.write_json(
        out / "estimator.json",
        {
            "train_steps": steps,
            "init_checkpoint": init_checkpoint,
            "train_losses": losses,
            "predictions": walk.as_lists(predicted),
            "continued_losses": native,
        },
    )
    print(
        f"Estimator: trained to step {steps}, loss {losses[-1]:.6g}; continued to step "
        f"{steps + walk.CONTINUE_STEPS}, loss {native[-1]:.6g}"
    )


def back(out):
    """The Estimator takes the job back from the checkpoint Keras fit wrote at step 40."""
    reference = walk.read_json(out / "estimator.json")
    fitted = walk.read_json(out / "fit.json")
    half = walk.CONTINUE_STEPS // 2
    step = walk.TRAIN_STEPS + half
    target = out / "estimator_back"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(out / "model_dir", target, ignore=shutil.ignore_patterns("estimator-backup"))
    # --8<-- [start:back]
    v1.train.update_checkpoint_state(str(target), str(target / f"model.ckpt-{step}"))
    params = dict(classifier.PARAMS, init_checkpoint=reference["init_checkpoint"])  # the job's
    _, losses = train(target, params, walk.continue_rows(half), step + half, walk.CONTINUE_SEED)
    # --8<-- [end:back]
    walk.write_json(out / "back.json", {"from_step": step, "losses": losses})
    vs_native = walk.relative(losses, reference["continued_losses"][half:]).max()
    vs_fit = walk.relative(losses, fitted["losses"][half:]).max()
    print(
        f"Estimator {step} -> {step + half} from fit's checkpoint: {len(losses)} losses, max "
        f"relative difference {vs_native:.2g} vs the Estimator all along, {vs_fit:.2g} vs fit"
    )


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    args = sys.argv[1:]
    given = args[args.index("--init_checkpoint") + 1] if "--init_checkpoint" in args else None
    args = [a for a in args if a not in ("--back", "--init_checkpoint", given)]
    if "--back" in sys.argv[1:]:
        back(walk.out_dir(args))
    else:
        run(walk.out_dir(args), given)
