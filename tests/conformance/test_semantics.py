"""Native semantics pinned by name, each against the native runner (and the bridge that imitates it)."""

from __future__ import annotations

import types

import pytest
import tensorflow as tf
from tensorflow.python.training import basic_session_run_hooks

from hookbridge.testing import (
    CallbackScenario,
    CallbackSpec,
    HookScenario,
    HookSpec,
    RecordingCallback,
    RecordingHook,
    assert_hook_conforms,
    run_callback_hook,
    run_fit,
    run_hook_callback,
    run_session,
)
from hookbridge.testing.runners import drive_session

T = tf.compat.v1.train
OK = ("runner", "outcome", "ok")


def methods(trace, actor=None):
    return [e[1] for e in trace if actor is None or e[0] == actor]


def test_order_of_the_five_hook_methods():
    s = HookScenario(
        epochs=1,
        steps_per_epoch=2,
        losses=(1.0, 4.0),
        hooks=(HookSpec(fetch="dict"), HookSpec(fetch="none")),
    )
    expected = [
        ("h0", "begin"),
        ("h1", "begin"),
        ("h0", "after_create_session"),
        ("h1", "after_create_session"),
        ("h0", "before_run", 0),
        ("h1", "before_run", 0),
        ("h0", "after_run", 0, {"gs": 0, "loss": 1.0}, False, 1),
        ("h1", "after_run", 0, None, False, 1),
        ("h0", "before_run", 1),
        ("h1", "before_run", 1),
        ("h0", "after_run", 1, {"gs": 1, "loss": 4.0}, False, 2),
        ("h1", "after_run", 1, None, False, 2),
        ("h0", "end", 2),
        ("h1", "end", 2),
        OK,
    ]
    assert run_session(s) == expected
    assert run_hook_callback(s) == expected


def test_request_stop_from_one_hook_still_runs_the_others_after_run():
    s = HookScenario(
        epochs=2,
        steps_per_epoch=2,
        losses=(1.0,) * 2,
        hooks=(HookSpec(stop_in="after_run", stop_at=0), HookSpec(), HookSpec()),
    )
    native = run_session(s)
    assert [e for e in native if e[1] == "after_run"] == [
        ("h0", "after_run", 0, 0, False, 1),
        ("h1", "after_run", 0, 0, True, 1),  # sees the stop, still runs
        ("h2", "after_run", 0, 0, True, 1),
    ]
    assert methods(native)[-4:] == ["end", "end", "end", "outcome"]
    assert run_hook_callback(s) == native


@pytest.mark.parametrize("kind", ["end_of_input", "out_of_range", "stop_iteration"])
def test_end_of_input_means_no_after_run_for_that_run_and_end_is_called(kind):
    if kind == "end_of_input":
        s = HookScenario(epochs=1, steps_per_epoch=3, losses=(1.0,) * 3, end_of_input=2)
    else:  # the caller's run raises it (the dataset ran out inside session.run)
        s = HookScenario(
            epochs=1,
            steps_per_epoch=3,
            losses=(1.0,) * 3,
            hooks=(HookSpec(), HookSpec(raise_in="before_run", raise_at=2, error=kind)),
        )
    native = run_session(s)
    assert methods(native, "h0") == [
        "begin",
        "after_create_session",
        "before_run",
        "after_run",
        "before_run",
        "after_run",
        "before_run",
        "end",
    ]
    assert native[-1] == OK


def test_end_of_input_global_step_at_end():
    s = HookScenario(epochs=1, steps_per_epoch=3, losses=(1.0,) * 3, end_of_input=2)
    assert run_hook_callback(s) == run_session(s)


#: CI runs the diagonal (each kind, each place once); deep runs the other two pairs.
@pytest.mark.parametrize(
    "kind, where",
    [
        ("out_of_range", "before_run"),
        ("stop_iteration", "after_run"),
        pytest.param("out_of_range", "after_run", marks=pytest.mark.deep),
        pytest.param("stop_iteration", "before_run", marks=pytest.mark.deep),
    ],
)
def test_hook_raising_end_of_input_still_gets_end(kind, where):
    s = HookScenario(
        epochs=1,
        steps_per_epoch=3,
        losses=(1.0,) * 3,
        hooks=(HookSpec(raise_in=where, raise_at=1, error=kind), HookSpec()),
    )
    native = run_session(s)
    assert methods(native)[-3:] == ["end", "end", "outcome"]
    assert run_hook_callback(s) == native


@pytest.mark.parametrize("where", ["before_run", "after_run", "after_create_session"])
def test_any_other_error_propagates_and_no_end(where):
    s = HookScenario(
        epochs=1,
        steps_per_epoch=3,
        losses=(1.0,) * 3,
        hooks=(HookSpec(), HookSpec(raise_in=where, raise_at=1)),
    )
    native = run_session(s)
    assert "end" not in methods(native)
    assert native[-1] == ("runner", "outcome", "ScenarioError")
    assert run_hook_callback(s) == native


class _AbortOnce(T.SessionRunHook):
    def __init__(self, at):
        self.at, self.runs, self.done = at, 0, False

    def after_run(self, run_context, run_values):
        self.runs += 1
        if self.runs == self.at and not self.done:
            self.done = True
            raise tf.errors.AbortedError(None, None, "scripted abort")


def test_session_recovery_calls_after_create_session_again_not_begin():
    trace = []
    s = HookScenario(epochs=1, steps_per_epoch=3, losses=(1.0,) * 3)
    drive_session(
        lambda g: [RecordingHook("h0", trace, HookSpec(fetch="none")), _AbortOnce(2)], s, trace
    )
    assert methods(trace) == [
        "begin",
        "after_create_session",
        "before_run",
        "after_run",
        "before_run",
        "after_run",  # run 2 aborts after its after_run
        "after_create_session",  # new session: begin is not called again
        "before_run",
        "after_run",
        "before_run",
        "after_run",
        "end",
        "outcome",
    ]


def test_session_recovery_does_not_restart_training_under_callback_hook():
    trace = []
    s = CallbackScenario(epochs=1, steps_per_epoch=3, losses=(1.0,) * 3)
    from hookbridge.testing.runners import callback_hook

    drive_session(
        lambda g: [callback_hook([RecordingCallback("c0", trace)], s), _AbortOnce(2)], s, trace
    )
    assert methods(trace).count("train_begin") == 1
    assert methods(trace)[-3:] == ["epoch_end", "train_end", "outcome"]


@pytest.mark.parametrize("stop_in", ["batch_begin", "batch_end"])
def test_keras_mid_epoch_stop_still_ends_the_epoch_and_training(stop_in):
    s = CallbackScenario(
        epochs=3,
        steps_per_epoch=3,
        losses=(1.0, 4.0, 9.0),
        callbacks=(CallbackSpec(stop_in=stop_in, stop_at=4),),
    )
    native = run_fit(s)
    assert methods(native)[-5:] == ["batch_begin", "batch_end", "epoch_end", "train_end", "outcome"]
    assert native[-3] == ("c0", "epoch_end", 1, {"loss": 2.5}, True)
    assert run_callback_hook(s) == native


@pytest.mark.parametrize("where", ["epoch_begin", "batch_begin", "batch_end", "epoch_end"])
def test_error_in_a_callback_means_no_on_train_end(where):
    s = CallbackScenario(
        epochs=2,
        steps_per_epoch=2,
        losses=(1.0, 4.0),
        callbacks=(CallbackSpec(raise_in=where, raise_at=1), CallbackSpec()),
    )
    native = run_fit(s)
    assert "train_end" not in methods(native)
    assert native[-1] == ("runner", "outcome", "ScenarioError")
    assert run_callback_hook(s) == native


class _FakeClock(T.SessionRunHook):
    """Advances the clock SecondOrStepTimer reads by ``tick`` seconds before every run."""

    def __init__(self, clock, tick):
        self.clock, self.tick = clock, tick

    def before_run(self, run_context):
        self.clock[0] += self.tick


@pytest.fixture
def fake_clock(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(
        basic_session_run_hooks, "time", types.SimpleNamespace(time=lambda: clock[0])
    )
    return clock


@pytest.mark.parametrize("timer", [{"every_n_iter": 3}, {"every_n_secs": 2.5}])
def test_second_or_step_timer_schedules_are_equal_in_both_worlds(fake_clock, timer):
    logged = []

    def make():
        fake_clock[0] = 1000.0
        hook = T.LoggingTensorHook(
            {"loss": "loss:0"}, formatter=lambda v: logged.append(v) or "", **timer
        )
        return [_FakeClock(fake_clock, 1.0), hook]

    result = assert_hook_conforms(make, steps=8, steps_per_epoch=4)
    logged_at = [
        e[2]
        for e in result.native
        if e[0] == "LoggingTensorHook[1]" and e[1] == "after_run" and e[3] is not None
    ]
    assert logged_at == [0, 3, 6]  # every 3 steps, or 2.5 s at 1 s per step
    assert len(logged) == 6  # three times per world
