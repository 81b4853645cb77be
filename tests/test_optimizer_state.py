"""An Estimator's optimizer state continued by Keras, and Keras's written back for the Estimator
(TF 2.15 stack: tensorflow-estimator).

For a custom ``model_fn`` with each TF1 slot optimizer (Adam, Momentum, Adagrad, RMSProp): the
Estimator trains 8 steps into ``model_dir``; a copy is continued to step 16 by the Estimator
itself (native), the original by Keras ``fit`` after ``restore_checkpoint(..., "auto")`` under
``HookCallback(estimator_hooks(..., model=model))`` (bridged): the batch losses are compared step
by step. Then the way back: the Estimator continues from the checkpoint Keras wrote, Keras goes on
in memory, and their batch losses are compared again.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest
import tensorflow as tf

try:
    import tensorflow_estimator  # noqa: F401
except ImportError:
    pytest.skip(
        "TF 2.15 stack only: needs tensorflow-estimator, which has no release for TF >= 2.16",
        allow_module_level=True,
    )

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
RNG = np.random.default_rng(1)
X = RNG.normal(size=(64, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")
BATCH = 16
STEPS_PER_EPOCH = len(X) // BATCH
CONFIG = {
    "save_checkpoints_steps": 2,
    "save_summary_steps": 100,
    "log_step_count_steps": 100,
    "keep_checkpoint_max": 2,
}

#: TF1 optimizer and the Keras optimizer computing the same updates.
OPTIMIZERS = {
    "adam": (
        lambda: v1.train.AdamOptimizer(0.01),
        lambda: keras.optimizers.Adam(0.01, epsilon=1e-8),
    ),
    "momentum": (
        lambda: v1.train.MomentumOptimizer(0.02, momentum=0.9),
        lambda: keras.optimizers.SGD(0.02, momentum=0.9),
    ),
    "adagrad": (
        lambda: v1.train.AdagradOptimizer(0.1),
        lambda: keras.optimizers.Adagrad(0.1, epsilon=0.0),
    ),
    "rmsprop": (
        lambda: v1.train.RMSPropOptimizer(0.005, momentum=0.5),
        lambda: keras.optimizers.RMSprop(0.005, momentum=0.5, epsilon=1e-10),
    ),
}


class LossRecorder(v1.train.SessionRunHook):
    """Each step's batch loss: the Estimator's (the input of its ``loss`` summary) or, under
    HookCallback, the bridge's ``loss`` tensor."""

    def __init__(self):
        self.losses = []

    def begin(self):
        graph = v1.get_default_graph()
        summaries = [
            s for s in graph.get_collection(v1.GraphKeys.SUMMARIES) if s.op.name == "loss"
        ]
        self._loss = summaries[0].op.inputs[1] if summaries else graph.get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def make_model_fn(which):
    def model_fn(features, labels, mode):
        h = features
        for scope, units, act in (("dnn/hiddenlayer_0", 8, tf.nn.relu), ("dnn/logits", 1, None)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
            h = tf.matmul(h, kernel) + bias
            h = act(h) if act else h
        loss = v1.losses.mean_squared_error(labels, h)
        train_op = OPTIMIZERS[which][0]().minimize(loss, v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def input_fn():
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH).repeat()


def estimator(which, model_dir):
    config = tf.estimator.RunConfig(model_dir=str(model_dir), tf_random_seed=0, **CONFIG)
    return tf.estimator.Estimator(make_model_fn(which), config=config)


def train(which, model_dir, max_steps):
    recorder = LossRecorder()
    estimator(which, model_dir).train(input_fn, hooks=[recorder], max_steps=max_steps)
    return recorder.losses


def keras_fit(model, first_step, last_step, hooks):
    recorder = LossRecorder()
    model.fit(
        X,
        Y,
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=first_step // STEPS_PER_EPOCH,
        epochs=last_step // STEPS_PER_EPOCH,
        verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: [recorder, *hooks()])],
    )
    return recorder.losses


def run(which, root):
    bridged, native, back = root / "bridged", root / "native", root / "back"
    train(which, bridged, 8)  # the TF1 job, preempted at step 8
    shutil.copytree(bridged, native)
    native_losses = train(which, native, 16)

    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=OPTIMIZERS[which][1](), loss="mse")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hookbridge.restore_checkpoint(model, bridged, "auto")
    assert step == 8
    restore_warnings = [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)]
    bridged_losses = keras_fit(
        model, 8, 16, lambda: hookbridge.estimator_hooks(bridged, model=model, **CONFIG)
    )
    # Rolling back: the Estimator's step-8 checkpoint was kept out of keep_checkpoint_max's reach.
    rollback = root / "rollback"
    shutil.copytree(bridged / "estimator-backup", rollback)
    rollback_losses = train(which, rollback, 16)
    # The way back: the Estimator continues from Keras's step-16 checkpoint, Keras goes on.
    shutil.copytree(bridged, back)
    back_losses = train(which, back, 24)
    keras_losses = keras_fit(model, 16, 24, lambda: [])
    return {
        "native": native_losses,
        "bridged": bridged_losses,
        "back": back_losses,
        "keras": keras_losses,
        "restore_warnings": restore_warnings,
        "rollback": rollback_losses,
        "backup": sorted(p.name for p in (bridged / "estimator-backup").iterdir()),
        "back_dir": back,
    }


@pytest.fixture(scope="module", params=sorted(OPTIMIZERS))
def runs(request, tmp_path_factory):
    return request.param, run(request.param, tmp_path_factory.mktemp(request.param))


def test_keras_continues_the_estimators_optimizer_loss_by_loss(runs):
    _which, r = runs
    assert r["restore_warnings"] == []
    assert len(r["bridged"]) == len(r["native"]) == 8
    np.testing.assert_allclose(r["bridged"], r["native"], rtol=2e-5, atol=1e-7)


def test_the_estimator_continues_keras_optimizer_loss_by_loss(runs):
    _which, r = runs
    assert len(r["back"]) == len(r["keras"]) == 8
    np.testing.assert_allclose(r["back"], r["keras"], rtol=2e-5, atol=1e-7)


def test_the_switch_can_be_undone_from_the_kept_estimator_checkpoint(runs):
    _which, r = runs
    # keep_checkpoint_max=2 deleted the Estimator's own step-6 and step-8 files from model_dir.
    assert r["backup"] == [
        "checkpoint",
        "model.ckpt-8.data-00000-of-00001",
        "model.ckpt-8.index",
        "model.ckpt-8.meta",
    ]
    # The Estimator restarted from the kept checkpoint trains exactly as it did natively.
    np.testing.assert_array_equal(r["rollback"], r["native"])
