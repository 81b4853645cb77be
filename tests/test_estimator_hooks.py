"""``hookbridge.estimator_hooks`` on every stack: what it builds, and the same files natively.

The native run puts the hooks in a ``MonitoredSession`` on the conformance kit's TF1 graph (a
global step, a ``loss`` tensor fed the batch loss); the bridged run in ``HookCallback`` in Keras
``fit`` with the same batch losses. The comparison against a real ``Estimator.train`` is in
``test_estimator_continuation.py`` (TF 2.15 stack).
"""

from __future__ import annotations

import os

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import hookbridge
from hookbridge.testing.runners import drive_fit, drive_session
from hookbridge.testing.scenarios import _Run

v1 = tf.compat.v1
CONFIG = {
    "save_checkpoints_steps": 2,
    "save_summary_steps": 2,
    "log_step_count_steps": 3,
    "keep_checkpoint_max": 2,
}


def test_hooks_and_order_are_estimators():
    graph = tf.Graph()
    with graph.as_default():
        v1.train.get_or_create_global_step()
        tf.identity(0.0, name="loss")
        mine = v1.train.StopAtStepHook(last_step=1)
        hooks = hookbridge.estimator_hooks("unused", hooks=[mine], **CONFIG)
        saver = graph.get_collection(v1.GraphKeys.SAVERS)[0]
        saver.build()  # deferred, as Estimator's: MonitoredSession's Scaffold builds it
    # MonitoredTrainingSession's order: chief-only, StepCounter, SummarySaver, the caller's
    # hooks, then Estimator.train's NanTensor and LoggingTensor.
    assert [type(h).__name__ for h in hooks] == [
        "CheckpointSaverHook",
        "StepCounterHook",
        "SummarySaverHook",
        "StopAtStepHook",
        "NanTensorHook",
        "LoggingTensorHook",
    ]
    assert hooks[3] is mine
    assert saver.as_saver_def().max_to_keep == 2
    assert saver.as_saver_def().sharded


def test_run_config_switches():
    graph = tf.Graph()
    with graph.as_default():
        v1.train.get_or_create_global_step()
        tf.identity(0.0, name="loss")
        none = hookbridge.estimator_hooks(
            "unused",
            save_checkpoints_steps=0,
            save_checkpoints_secs=0,
            save_summary_steps=0,
            log_step_count_steps=None,
        )
    assert [type(h).__name__ for h in none] == ["NanTensorHook"]


def test_errors():
    with pytest.raises(RuntimeError, match="call it inside the hooks callable"):
        hookbridge.estimator_hooks("unused")
    with tf.Graph().as_default():
        with pytest.raises(RuntimeError, match="has no global step"):
            hookbridge.estimator_hooks("unused")
        v1.train.get_or_create_global_step()
        with pytest.raises(ValueError, match="the graph has no tensor 'loss'"):
            hookbridge.estimator_hooks("unused")


def _scalars(model_dir):
    acc = EventAccumulator(str(model_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {
        tag: [(e.step, round(e.value, 4)) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
        if tag != "global_step/sec"
    } | {"global_step/sec steps": [e.step for e in acc.Scalars("global_step/sec")]}


def _checkpoints(model_dir):
    state = tf.train.get_checkpoint_state(str(model_dir))
    return [os.path.basename(p) for p in state.all_model_checkpoint_paths]


def test_same_files_natively_and_under_hookcallback(tmp_path):
    run = _Run(epochs=2, steps_per_epoch=4, losses=(1.5, 0.25, 0.75, 2.0))
    native, bridged = tmp_path / "native", tmp_path / "bridged"
    trace: list = []
    drive_session(lambda g: hookbridge.estimator_hooks(str(native), **CONFIG), run, trace)
    assert trace == [("runner", "outcome", "ok")]
    bridge = hookbridge.HookCallback(lambda: hookbridge.estimator_hooks(str(bridged), **CONFIG))
    trace = []
    drive_fit([bridge], run, trace)
    bridge.close()
    assert trace == [("runner", "outcome", "ok")]
    expected = _scalars(native)
    assert expected["loss"] == [(1, 1.5), (3, 0.75), (5, 1.5), (7, 0.75)]
    assert expected["global_step/sec steps"] == [4, 7]
    assert _scalars(bridged) == expected
    assert _checkpoints(native) == ["model.ckpt-6", "model.ckpt-8"]
    assert _checkpoints(bridged) == _checkpoints(native)
