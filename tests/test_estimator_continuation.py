"""Continuing an Estimator's model_dir in Keras ``fit`` (TF 2.15 stack: tensorflow-estimator).

One Estimator job trains 8 steps into ``model_dir``; a copy of that directory is continued to
step 16 by the Estimator itself (native), the original by Keras ``fit`` with
``restore_checkpoint(..., "auto")`` and ``HookCallback(estimator_hooks(...))`` (bridged). Plain
SGD on the same batches in the same order, so both continuations compute the same steps.

Everything Estimator-side runs before any Keras model exists: Keras 2.15 invalidates models made
before a layer is built in a v1 graph, and Estimator.predict builds one.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from estimator_setup import (
    BATCH,
    ESTIMATOR_ONLY,
    dataset_fn,
    dnn_model_fn,
    keras_dnn,
    linear_data,
    run_config,
)

pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
X, Y = linear_data(seed=0)
LR = 0.05
CONFIG = {
    "save_checkpoints_steps": 4,
    "save_summary_steps": 2,
    "log_step_count_steps": 2,
    "keep_checkpoint_max": 3,
}
input_fn = dataset_fn(X, Y)


def estimator(model_dir):
    """Plain SGD: both continuations compute the same steps."""
    model_fn = dnn_model_fn(lambda: v1.train.GradientDescentOptimizer(LR))
    return tf.estimator.Estimator(model_fn, config=run_config(model_dir, CONFIG))


def predict(est):
    return np.concatenate(
        list(est.predict(lambda: tf.data.Dataset.from_tensor_slices(X).batch(BATCH)))
    ).reshape(-1, 1)


def scalars(model_dir):
    """Every scalar of every event file, by step. Each file is read on its own, without
    TensorBoard's purge of "orphaned" steps: the order of files written in the same second, and
    a native summary landing a step off (TF1's global-step race), must not drop events."""
    found: dict = {}
    for path in sorted(Path(model_dir).glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0}, purge_orphaned_data=False)
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return {tag: sorted(events) for tag, events in found.items()}


def checkpoints(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("continuation")
    native, bridged = root / "native", root / "bridged"
    estimator(bridged).train(input_fn, max_steps=8)  # the TF1 job, preempted at step 8
    shutil.copytree(bridged, native)
    # TF1 names an event file after the second it was opened in (and the host): a writer opened
    # for the copy within the same second as the original would truncate the copied file.
    time.sleep(1.1)
    at_switch = predict(estimator(bridged))
    estimator(native).train(input_fn, max_steps=16)  # native: the Estimator continues
    native_final = predict(estimator(native))

    model = keras_dnn(keras.optimizers.SGD(LR))
    step = hookbridge.restore_checkpoint(model, bridged, "auto")
    keras_at_switch = model.predict(X, verbose=0)
    callback = hookbridge.HookCallback(
        lambda: hookbridge.estimator_hooks(
            bridged, hooks=[v1.train.StopAtStepHook(last_step=16)], model=model, **CONFIG
        )
    )
    steps_per_epoch = len(X) // BATCH
    model.fit(
        X,
        Y,
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=step // steps_per_epoch,
        epochs=100,
        verbose=0,
        callbacks=[callback],
    )
    keras_final = model.predict(X, verbose=0)
    # Switching back: the Estimator restores what Keras wrote (model_fn's names), both go on.
    estimator(native).train(input_fn, max_steps=20)
    estimator(bridged).train(input_fn, max_steps=20)
    back = {"native": predict(estimator(native)), "bridged": predict(estimator(bridged))}
    return {
        "back": back,
        "native": native,
        "bridged": bridged,
        "step": step,
        "at_switch": at_switch,
        "keras_at_switch": keras_at_switch,
        "native_final": native_final,
        "keras_final": keras_final,
        "iterations": int(model.optimizer.iterations.numpy()),
    }


def test_keras_resumes_at_the_estimators_step_with_its_predictions(runs):
    assert runs["step"] == 8
    np.testing.assert_allclose(runs["keras_at_switch"], runs["at_switch"], rtol=1e-5, atol=1e-6)


def test_keras_continues_as_the_estimator_would(runs):
    assert runs["iterations"] == 16
    np.testing.assert_allclose(runs["keras_final"], runs["native_final"], rtol=1e-4, atol=1e-5)


def test_the_estimator_continues_from_the_keras_checkpoints(runs):
    names = tf.train.load_checkpoint(str(runs["bridged"] / "model.ckpt-16"))
    assert sorted(names.get_variable_to_shape_map()) == [
        "dnn/hiddenlayer_0/bias",
        "dnn/hiddenlayer_0/kernel",
        "dnn/logits/bias",
        "dnn/logits/kernel",
        "global_step",
    ]
    np.testing.assert_allclose(
        runs["back"]["bridged"], runs["back"]["native"], rtol=1e-4, atol=1e-5
    )


def test_same_event_tags_steps_and_losses(runs):
    native, bridged = scalars(runs["native"]), scalars(runs["bridged"])
    assert set(native) == set(bridged) == {"loss", "global_step/sec"}
    assert [s for s, _ in bridged["loss"]] == [s for s, _ in native["loss"]]
    assert [s for s, _ in native["loss"]] == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]  # 17, 19: back
    # The same batch losses: the curve continues across the switch.
    np.testing.assert_allclose(
        [v for _, v in bridged["loss"]], [v for _, v in native["loss"]], rtol=1e-4
    )
    assert [s for s, _ in bridged["global_step/sec"]] == [s for s, _ in native["global_step/sec"]]


def test_same_checkpoint_names(runs):
    assert checkpoints(runs["bridged"]) == checkpoints(runs["native"])
    assert checkpoints(runs["native"]) == ["model.ckpt-12", "model.ckpt-16", "model.ckpt-20"]
    # keep_checkpoint_max=3 deletes the Estimator's older files too, as the Estimator does.
    for which in ("native", "bridged"):
        on_disk = sorted(p.name for p in runs[which].glob("model.ckpt-*.index"))
        assert on_disk == ["model.ckpt-12.index", "model.ckpt-16.index", "model.ckpt-20.index"]
