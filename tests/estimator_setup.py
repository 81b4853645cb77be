"""Estimator-training setup shared by the tests that move an Estimator's ``model_dir`` to Keras
``fit`` and back: ``test_canned.py``, ``test_optimizer_state.py``, ``test_estimator_continuation.py``.

Imported as the ``conftest`` helpers are (``from estimator_setup import ...``). Importing it needs
no tensorflow-estimator: ``tf.estimator`` is reached only when an Estimator is built, and the
test modules skip first (``pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY,
...)``) on the stacks without it.

* :func:`linear_data` and :func:`dataset_fn`: the data every scenario learns, and its input_fn;
* :class:`LossRecorder`: each step's batch loss, the Estimator's or the bridge's;
* :func:`dnn_model_fn` and :func:`keras_dnn`: one 3 -> 8 -> 1 network as a custom ``model_fn``
  (its variables named as a canned ``DNNRegressor([8])``'s) and as a Keras model;
* :func:`run_config`, :func:`train`, :func:`keras_fit`: an Estimator's ``RunConfig``, training
  that records the batch losses, and ``fit`` between two global steps under ``HookCallback``;
* :func:`switch_and_back`: the round trip (Estimator -> Keras -> Estimator, and a rollback)
  whose runs the tests compare loss by loss with the Estimator's own.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
#: The skip reason of the modules that need tensorflow-estimator.
ESTIMATOR_ONLY = (
    "TF 2.15 stack only: needs tensorflow-estimator, which has no release for TF >= 2.16"
)
BATCH = 16


def linear_data(seed: int, rows: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` samples of 3 standard-normal features (``default_rng(seed)``) and the linear
    target ``x @ [1, -2, 0.5] + 0.3``, both float32."""
    x = np.random.default_rng(seed).normal(size=(rows, 3)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")
    return x, y


def dataset_fn(features: Any, labels: Any) -> Callable[[], tf.data.Dataset]:
    """An Estimator ``input_fn``: the samples in order, in batches of :data:`BATCH`, repeated."""
    return lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH).repeat()


class LossRecorder(v1.train.SessionRunHook):
    """Each step's batch loss: the Estimator's (the input of its ``loss`` summary) or, under
    HookCallback, the bridge's ``loss`` tensor."""

    def __init__(self):
        self.losses = []

    def begin(self):
        graph = v1.get_default_graph()
        summaries = [s for s in graph.get_collection(v1.GraphKeys.SUMMARIES) if s.op.name == "loss"]
        self._loss = summaries[0].op.inputs[1] if summaries else graph.get_tensor_by_name("loss:0")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        self.losses.append(float(run_values.results))


def dnn_model_fn(optimizer: Callable[[], Any]) -> Callable:
    """A custom ``model_fn``: ReLU hidden layer of 8 then 1 output (``dnn/hiddenlayer_0``,
    ``dnn/logits``), mean squared error, trained by ``optimizer()`` (a TF1 optimizer)."""

    def model_fn(features, labels, mode):
        h = features
        for scope, units, act in (("dnn/hiddenlayer_0", 8, tf.nn.relu), ("dnn/logits", 1, None)):
            with v1.variable_scope(scope):
                kernel = v1.get_variable("kernel", [h.shape[-1], units])
                bias = v1.get_variable("bias", [units], initializer=v1.zeros_initializer())
            h = tf.matmul(h, kernel) + bias
            h = act(h) if act else h
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=h)
        loss = v1.losses.mean_squared_error(labels, h)
        train_op = optimizer().minimize(loss, v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def keras_dnn(optimizer: Any) -> Any:
    """:func:`dnn_model_fn`'s network in Keras, compiled with ``optimizer`` and MSE."""
    model = keras.Sequential(
        [keras.Input((3,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile(optimizer=optimizer, loss="mse")
    return model


def run_config(model_dir: Any, config: dict) -> Any:
    """The Estimator's ``RunConfig``: ``model_dir``, random seed 0, and ``config``."""
    return tf.estimator.RunConfig(model_dir=str(model_dir), tf_random_seed=0, **config)


def train(estimator: Any, input_fn: Callable, max_steps: int) -> list[float]:
    """``estimator.train`` to ``max_steps``; returns the batch losses of the steps it ran."""
    recorder = LossRecorder()
    estimator.train(input_fn, hooks=[recorder], max_steps=max_steps)
    return recorder.losses


def keras_fit(
    model: Any, x: Any, y: Any, first_step: int, last_step: int, hooks: Callable[[], list]
) -> list[float]:
    """``fit`` from global step ``first_step`` to ``last_step`` (whole epochs of ``x``, ``y``, in
    order) under ``HookCallback`` with ``hooks()``; returns the batch losses."""
    recorder = LossRecorder()
    steps_per_epoch = len(y) // BATCH
    model.fit(
        x,
        y,
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=first_step // steps_per_epoch,
        epochs=last_step // steps_per_epoch,
        verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: [recorder, *hooks()])],
    )
    return recorder.losses


def switch_and_back(
    root: Path,
    estimator: Callable[[Path], Any],
    input_fn: Callable,
    keras_model: Callable[[Path], Any],
    x: Any,
    y: Any,
    config: dict,
    *,
    estimator_predict: Callable[[Path], Any] | None = None,
    keras_predict: Callable[[Any], Any] | None = None,
    rollback: bool = True,
    recorded: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The round trip, each run returned for the tests to compare with its native counterpart.

    1. ``root/bridged``: the Estimator trains 8 steps (the TF1 job, preempted at step 8); a copy,
       ``root/native``, continues to step 16 (``"native"`` losses).
    2. The switch: ``keras_model(bridged)`` restored from it (``"auto"``; ``"step"``, and the
       ``"restore_warnings"``), then ``fit`` 8 -> 16 under ``estimator_hooks(bridged,
       model=..., **config)`` (``"bridged"``).
    3. Rolling back: the Estimator restarted from the step-8 checkpoint kept in
       ``bridged/estimator-backup`` (``"backup"``: its files) trains to 16 (``"rollback"``).
    4. The way back: a copy of ``bridged`` (``"back_dir"``) continues to 24 with the Estimator
       (``"back"``), while Keras goes on in memory 16 -> 24 (``"keras"``).

    Args:
        estimator: the Estimator of a ``model_dir``.
        keras_model: the Keras model to continue in, given the ``model_dir`` (not yet restored).
        x, y: what ``fit`` trains on (the batches ``input_fn`` gives, in the same order).
        estimator_predict, keras_predict: what each side predicts at the switch (the Estimator
            before the native run, Keras after the restore): ``"at_switch"``.
        rollback: run step 3 (an Estimator training); ``False`` for the tests that read no
            ``"rollback"`` (``None`` then; ``"backup"`` is still listed).
        recorded: step 1 as a fixture recorded it (``tests/fixtures/canned``): ``"model_dir"``,
            the Estimator's step-8 checkpoint, copied to ``root/bridged``; ``"native"``, its
            losses continuing to 16; ``"at_switch"``, what it predicts at step 8 (no
            ``estimator_predict`` then).
    """
    bridged, native, back = root / "bridged", root / "native", root / "back"
    if recorded is None:
        train(estimator(bridged), input_fn, 8)  # the TF1 job, preempted at step 8
        shutil.copytree(bridged, native)
        at_switch = estimator_predict(bridged) if estimator_predict else None
        native_losses = train(estimator(native), input_fn, 16)
    else:
        shutil.copytree(recorded["model_dir"], bridged)
        at_switch, native_losses = recorded["at_switch"], recorded["native"]

    model = keras_model(bridged)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hookbridge.restore_checkpoint(model, bridged, "auto")
    restore_warnings = [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)]
    keras_at_switch = keras_predict(model) if keras_predict else None
    bridged_losses = keras_fit(
        model, x, y, 8, 16, lambda: hookbridge.estimator_hooks(bridged, model=model, **config)
    )
    # Rolling back: the Estimator's step-8 checkpoint was kept out of keep_checkpoint_max's reach.
    rollback_losses = None
    if rollback:
        shutil.copytree(bridged / "estimator-backup", root / "rollback")
        rollback_losses = train(estimator(root / "rollback"), input_fn, 16)
    # The way back: the Estimator continues from Keras's step-16 checkpoint, Keras goes on.
    shutil.copytree(bridged, back)
    back_losses = train(estimator(back), input_fn, 24)
    keras_losses = keras_fit(model, x, y, 16, 24, lambda: [])
    return {
        "step": step,
        "restore_warnings": restore_warnings,
        "at_switch": (at_switch, keras_at_switch),
        "native": native_losses,
        "bridged": bridged_losses,
        "back": back_losses,
        "keras": keras_losses,
        "rollback": rollback_losses,
        "backup": sorted(p.name for p in (bridged / "estimator-backup").iterdir()),
        "back_dir": back,
    }
