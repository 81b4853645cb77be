"""``estimator_hooks`` places hooks as ``Estimator.train`` does (TF 2.15 stack: tensorflow-estimator).

One scenario, run natively by ``Estimator.train`` and bridged by Keras ``fit`` under
``HookCallback(estimator_hooks(...))``: ``RunConfig(save_checkpoints_steps=2)``, the caller's
hooks holding a ``CheckpointSaverHook(save_steps=3)`` and a recording hook, the ``model_fn``'s
``EstimatorSpec`` a recording ``training_hooks`` and ``training_chief_hooks`` hook. The
Estimator adds no CheckpointSaverHook of its own then (``_train_with_estimator_spec``), so its
checkpoints are the caller's hook's (steps 0, 3, 6, 9, 12); the recording hooks read the hook list
the session runs (the list holding them, found on the call stack in ``begin``) and log each of
their calls.
"""

from __future__ import annotations

import sys

import pytest
import tensorflow as tf
from estimator_setup import BATCH, ESTIMATOR_ONLY, dataset_fn, dnn_model_fn, keras_dnn, linear_data

pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)

import hookbridge

v1 = tf.compat.v1
X, Y = linear_data(seed=3)
CONFIG = {"save_checkpoints_steps": 2, "save_summary_steps": 4, "log_step_count_steps": 5,
          "keep_checkpoint_max": 50}
STEPS = 12  # 3 epochs of 4 batches


class Recorder(v1.train.SessionRunHook):
    """Logs ``(name, call)`` into ``calls``; in ``begin``, reads the hook list it is run in."""

    def __init__(self, name, calls):
        self.name, self.calls, self.order = name, calls, None

    def begin(self):
        self.calls.append((self.name, "begin"))
        self.order = _running_hooks(self)

    def after_create_session(self, session, coord):
        self.calls.append((self.name, "after_create_session"))

    def before_run(self, run_context):
        self.calls.append((self.name, "before_run"))

    def after_run(self, run_context, run_values):
        self.calls.append((self.name, "after_run"))

    def end(self, session):
        self.calls.append((self.name, "end"))


def _running_hooks(hook):
    """The names of the hooks in the list (of the session running them) that holds ``hook``."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        held = [getattr(owner, "_hooks", None), getattr(owner, "hooks", None)]
        for value in [*frame.f_locals.values(), *held]:
            if (isinstance(value, (list, tuple)) and any(v is hook for v in value)
                    and all(isinstance(v, v1.train.SessionRunHook) for v in value)):
                return [v.name if isinstance(v, Recorder) else type(v).__name__ for v in value]
        frame = frame.f_back
    raise AssertionError("no hook list holds the recorder")


def _checkpoint_steps(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]


def _native(model_dir):
    calls = []
    spec_hooks = [Recorder("training_hooks", calls)]
    chief_hooks = [Recorder("training_chief_hooks", calls)]
    build = dnn_model_fn(lambda: v1.train.GradientDescentOptimizer(0.05))

    def model_fn(features, labels, mode):
        spec = build(features, labels, mode)
        return spec._replace(training_hooks=spec_hooks, training_chief_hooks=chief_hooks)

    est = tf.estimator.Estimator(
        model_fn, config=tf.estimator.RunConfig(model_dir=str(model_dir), **CONFIG)
    )
    user = Recorder("hooks", calls)
    est.train(
        dataset_fn(X, Y),
        hooks=[user, v1.train.CheckpointSaverHook(str(model_dir), save_steps=3)],
        max_steps=STEPS,
    )
    return calls, user.order, _checkpoint_steps(model_dir)


def _bridged(model_dir):
    calls = []
    user = Recorder("hooks", calls)
    model = keras_dnn(tf.keras.optimizers.SGD(0.05))
    model.fit(X, Y, batch_size=BATCH, shuffle=False, epochs=STEPS * BATCH // len(X), verbose=0,
              callbacks=[hookbridge.HookCallback(lambda: hookbridge.estimator_hooks(
                  str(model_dir),
                  hooks=[user, v1.train.CheckpointSaverHook(str(model_dir), save_steps=3)],
                  training_hooks=[Recorder("training_hooks", calls)],
                  training_chief_hooks=[Recorder("training_chief_hooks", calls)],
                  **CONFIG))])
    return calls, user.order, _checkpoint_steps(model_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _native(tmp_path_factory.mktemp("native")), _bridged(tmp_path_factory.mktemp("bridged"))


def test_the_callers_checkpoint_saver_replaces_the_estimators(runs):
    (_, _, native), (_, _, bridged) = runs
    assert native == [0, 3, 6, 9, 12]
    assert bridged == native


def test_the_hooks_run_in_the_estimators_order(runs):
    (native_calls, native_order, _), (bridged_calls, bridged_order, _) = runs
    # Estimator.train's own input and max_steps hooks have no place in fit (Keras feeds the
    # data, epochs end it): the rest is estimator_hooks' and the caller's.
    assert [h for h in native_order if h not in ("_DatasetInitializerHook", "StopAtStepHook")] == [
        "training_chief_hooks", "StepCounterHook", "SummarySaverHook", "hooks",
        "CheckpointSaverHook", "NanTensorHook", "LoggingTensorHook", "training_hooks",
    ]
    assert bridged_order == [
        h for h in native_order if h not in ("_DatasetInitializerHook", "StopAtStepHook")
    ]
    assert len(native_calls) == 3 * 3 + 2 * STEPS * 3  # begin, after_create_session, end
    assert bridged_calls == native_calls
