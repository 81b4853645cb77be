"""Every built-in TF1 hook under HookCallback, with its real output, compared to a native run."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
import reused_models
import tensorflow as tf
from conftest import make_data, make_model, run_native
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import hookbridge

train = tf.compat.v1.train


def fit(hooks, epochs=3, model=None, **kw):
    x, y = make_data()
    model = model or make_model(reuse=True)
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=epochs,
        verbose=0,
        shuffle=False,
        callbacks=[hookbridge.HookCallback(hooks)],
        **kw,
    )
    return model


def steps_of(model):
    return int(model.optimizer.iterations.numpy())


@pytest.mark.parametrize("kwargs, expected", [({"last_step": 6}, 6), ({"num_steps": 5}, 5)])
def test_stop_at_step(kwargs, expected):
    model = fit([train.StopAtStepHook(**kwargs)], epochs=10)
    assert steps_of(model) == expected
    assert run_native([train.StopAtStepHook(**kwargs)], steps=40) == expected


def test_stop_at_step_num_steps_counts_from_the_current_step():
    model = fit([], epochs=1)  # 4 steps
    fit([train.StopAtStepHook(num_steps=3)], epochs=10, model=model)
    assert steps_of(model) == 7


def test_nan_tensor_hook_raises():
    x, y = make_data()
    y[20] = np.nan  # second batch has a NaN loss
    model = make_model(reuse=True)
    with pytest.raises(train.NanLossDuringTrainingError):
        model.fit(
            x,
            y,
            batch_size=16,
            epochs=2,
            verbose=0,
            shuffle=False,
            callbacks=[hookbridge.HookCallback([train.NanTensorHook("loss:0")])],
        )
    assert steps_of(model) == 2


def test_nan_tensor_hook_can_stop_instead():
    x, y = make_data()
    y[40] = np.nan  # third batch
    model = make_model(reuse=True)
    hook = train.NanTensorHook("loss:0", fail_on_nan_loss=False)
    model.fit(
        x,
        y,
        batch_size=16,
        epochs=2,
        verbose=0,
        shuffle=False,
        callbacks=[hookbridge.HookCallback([hook])],
    )
    assert steps_of(model) == 3


class _Counter(train.SessionRunHook):
    def __init__(self):
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def _logging_calls(**kwargs):
    """LoggingTensorHook with a formatter recording at which run (1-based) it logged."""
    calls = []
    counter = _Counter()

    def formatter(values):
        calls.append({"step": counter.runs, **values})
        return "logged"

    def make():
        tensors = kwargs.pop("tensors", None) or {"loss": "loss:0"}
        return [counter, train.LoggingTensorHook(tensors, formatter=formatter, **kwargs)]

    return calls, make


#: every_n_iter=3 in deep only: every_n_iter=5 with at_end runs the same every_n_iter schedule
#: (logs at runs 1, 6, 11) and the at_end log besides.
@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"every_n_iter": 3}, marks=pytest.mark.deep),
        {"every_n_iter": 5, "at_end": True},
    ],
)
def test_logging_tensor_hook_schedule_matches_native(kwargs):
    bridged, make = _logging_calls(**kwargs)
    fit(make, epochs=3)  # 12 steps
    native, make_native = _logging_calls(**kwargs)
    run_native(make_native, steps=12)
    assert [c["step"] for c in bridged] == [c["step"] for c in native]
    assert len(bridged) >= 3 and all(np.isfinite(c["loss"]) for c in bridged)


def test_logging_tensor_hook_every_n_secs_logs_first_step():
    bridged, make = _logging_calls(tensors=["loss:0"], every_n_secs=3600)
    fit(make, epochs=1)
    native, make_native = _logging_calls(tensors=["loss:0"], every_n_secs=3600)
    run_native(make_native, steps=4)
    assert len(bridged) == len(native) == 1


def test_checkpoint_saver_steps_match_native_and_restore(tmp_path):
    bridged_dir, native_dir = str(tmp_path / "bridged"), str(tmp_path / "native")
    listener_calls = []

    class Listener(train.CheckpointSaverListener):
        def after_save(self, session, global_step_value):
            listener_calls.append(int(global_step_value))

    model = fit(
        [train.CheckpointSaverHook(bridged_dir, save_steps=5, listeners=[Listener()])], epochs=3
    )
    run_native([train.CheckpointSaverHook(native_dir, save_steps=5)], steps=12)

    def saved_steps(d):
        state = tf.train.get_checkpoint_state(d)
        return sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)

    assert saved_steps(bridged_dir) == saved_steps(native_dir) == [0, 5, 10, 12]
    assert listener_calls == [0, 5, 10, 12]
    reader = tf.train.load_checkpoint(bridged_dir)
    assert int(reader.get_tensor("global_step")) == 12
    for i, w in enumerate(model.get_weights()):
        name = next(
            k for k in reader.get_variable_to_shape_map() if k.startswith(f"model/{i:03d}/")
        )
        np.testing.assert_array_equal(reader.get_tensor(name), w)
    fresh = make_model(seed=1, reuse=True)
    assert hookbridge.restore_checkpoint(fresh, bridged_dir) == 12
    assert steps_of(fresh) == 12
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_at_step_k_equals_model_trained_k_steps(tmp_path):
    reference = make_model(reuse=True)
    x, y = make_data()
    reference.fit(x[:80], y[:80], batch_size=16, epochs=1, verbose=0, shuffle=False)  # 4 steps
    reference.fit(x[:16], y[:16], batch_size=16, epochs=1, verbose=0, shuffle=False)  # step 5
    expected = reference.get_weights()
    # the same model, reset to its built state, trains under the hook (no second build/trace)
    reused_models.release_all()
    d = str(tmp_path)
    fit([train.CheckpointSaverHook(d, save_steps=5)], epochs=3)
    restored = make_model(seed=3, reuse=True)
    assert hookbridge.restore_checkpoint(restored, os.path.join(d, "model.ckpt-5")) == 5
    for a, b in zip(restored.get_weights(), expected):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_restore_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        hookbridge.restore_checkpoint(make_model(reuse=True), str(tmp_path))
    d = str(tmp_path / "c")
    fit([train.CheckpointSaverHook(d, save_steps=100)], epochs=1)
    other = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="shape"):
        hookbridge.restore_checkpoint(other, d)


def _scalar_steps(logdir, tag):
    steps = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        acc = EventAccumulator(path)
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            steps += [(e.step, e.value) for e in acc.Scalars(tag)]
    return steps


def test_summary_saver_hook_on_the_bridges_loss(tmp_path):
    def hooks():
        loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
        op = tf.compat.v1.summary.scalar("batch_loss", loss)
        return [train.SummarySaverHook(save_steps=3, output_dir=str(tmp_path / "b"), summary_op=op)]

    def native_hooks():
        loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
        op = tf.compat.v1.summary.scalar("batch_loss", loss)
        return [train.SummarySaverHook(save_steps=3, output_dir=str(tmp_path / "n"), summary_op=op)]

    fit(hooks, epochs=3)
    run_native(native_hooks, steps=12)
    bridged = _scalar_steps(str(tmp_path / "b"), "batch_loss")
    native = _scalar_steps(str(tmp_path / "n"), "batch_loss")
    assert [s for s, _ in bridged] == [s for s, _ in native] == [1, 4, 7, 10]
    assert all(np.isfinite(v) and v > 0 for _, v in bridged)


def test_step_counter_hook_writes_steps_per_sec(tmp_path):
    fit([train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path / "b"))], epochs=3)
    run_native(lambda: [train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path / "n"))], 12)
    tf.compat.v1.summary.FileWriterCache.clear()  # StepCounterHook never flushes (native too)
    events = _scalar_steps(str(tmp_path / "b"), "global_step/sec")
    native = _scalar_steps(str(tmp_path / "n"), "global_step/sec")
    assert [s for s, _ in events] == [s for s, _ in native] == [3, 5, 7, 9, 11]
    assert all(v > 0 for _, v in events)


def test_global_step_waiter_hook_passes_when_step_reached():
    model = fit([], epochs=1)  # 4 steps already
    fit(
        [train.GlobalStepWaiterHook(wait_until_step=4), train.StopAtStepHook(num_steps=2)],
        model=model,
    )
    assert steps_of(model) == 6


def test_final_ops_hook_runs_final_ops_on_the_bridges_graph():
    holder = {}

    def hooks():
        g = tf.compat.v1.get_default_graph()
        final = g.get_tensor_by_name("loss:0") + tf.cast(
            tf.compat.v1.train.get_global_step(), tf.float32
        )
        holder["hook"] = train.FinalOpsHook(final)
        return [holder["hook"]]

    fit(hooks, epochs=1)
    value = holder["hook"].final_ops_values
    assert np.isfinite(value) and value > 4.0


def test_feed_fn_hook_feeds_the_runs():
    seen = []

    class Reader(train.SessionRunHook):
        def begin(self):
            self.doubled = tf.compat.v1.get_default_graph().get_tensor_by_name("extra:0") * 2

        def before_run(self, run_context):
            return train.SessionRunArgs(self.doubled)

        def after_run(self, run_context, run_values):
            seen.append(float(run_values.results))

    def hooks():
        tf.compat.v1.placeholder(tf.float32, [], name="extra")
        counter = iter(range(100))
        return [train.FeedFnHook(lambda: {"extra:0": float(next(counter))}), Reader()]

    fit(hooks, epochs=1)
    assert seen == [0.0, 2.0, 4.0, 6.0]


def test_profiler_hook_writes_timeline_and_profiles_the_keras_step(tmp_path):
    # ProfilerHook makes its FileWriter in __init__, which needs a graph: build it in the callable.
    fit(lambda: [train.ProfilerHook(save_steps=2, output_dir=str(tmp_path))], epochs=1)
    run_native(lambda: [train.ProfilerHook(save_steps=2, output_dir=str(tmp_path / "n"))], 4)
    timelines = sorted(glob.glob(str(tmp_path / "timeline-*.json")))
    native = sorted(glob.glob(str(tmp_path / "n" / "timeline-*.json")))
    assert [os.path.basename(t) for t in timelines] == [os.path.basename(t) for t in native]
    assert [os.path.basename(t) for t in timelines] == ["timeline-2.json", "timeline-4.json"]
    for path in timelines:  # a real run of the bridge's graph (the step read ProfilerHook asks)
        with open(path) as f:
            ops = {e.get("name") for e in json.load(f)["traceEvents"] if e.get("ph") == "X"}
        assert "ReadVariableOp" in ops, (path, ops)
    profiles = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert profiles, "the real Keras step was not profiled"
