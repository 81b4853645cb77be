"""More of TF's ``basic_session_run_hooks_test.py``, each scenario run natively and bridged.

Complements ``test_tf_hooks_ported.py`` (whose helpers it imports). Every test runs the TF1
scenario in a real ``SingularMonitoredSession`` on a graph whose train op adds 1 (or, for TF's
multi-step tests, ``steps_per_run``) to the global step, beside ``model.fit`` of a small Keras
model under ``HookCallback`` with the same hooks, and asserts both give the same observable result
and that result's expected value. The same hooks under HookCallback in a custom loop
(``CallbackLoop``) make a third world: in CI for at least one test of each hook class, in the
deep profile for every test (``BRIDGED_WORLD``).

TF's tests drive a bare ``_HookedSession`` that never calls ``after_create_session``; a
MonitoredSession calls it (CheckpointSaverHook saves step 0 there), so some expected values are
shifted, natively and bridged alike: each docstring says so. Where TF patches ``time.time`` with
a mock, ``time.time`` is patched here with a settable clock, set before each run in both worlds
(``EachRun``); where TF wraps ``tf_logging.info``, it is wrapped here too (``Log``).
"""

from __future__ import annotations

import glob
import os
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_data, make_model, step_reads
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorflow.python.platform import tf_logging
from tensorflow.python.training import basic_session_run_hooks

import hookbridge

from .test_tf_hooks_ported import (
    MockCheckpointSaverListener,
    SetIterations,
    fit,
    iterations,
    native_graph,
    saved_step,
)

train = tf.compat.v1.train
keras = tf.keras

#: TF's ``MOCK_START_TIME``.
MOCK_START_TIME = 1484695987.209386
#: The global step read tensor (``global_step + 0``) the built-in hooks fetch, in both graphs.
STEP = "global_step/add:0"


# -- the two worlds -----------------------------------------------------------------------------
def _nothing(run):
    pass


class EachRun(keras.callbacks.Callback):
    """Calls ``before(i)`` before the i-th Keras step's hooks (i from 1, one per execution) and
    ``before("end")`` before their ``end()``: what the native loop does around ``sess.run``."""

    def __init__(self, before):
        super().__init__()
        self.before, self.runs = before, 0

    def on_train_batch_begin(self, batch, logs=None):
        self.runs += 1
        self.before(self.runs)

    def on_train_end(self, logs=None):
        self.before("end")


def bridged(
    hooks, runs, before=_nothing, model=None, scaffold=None, extra=(), loop=False, per_call=1
):
    """``fit`` over ``runs`` Keras steps (fewer if a hook stops it): (runs made, final step).
    ``loop=True``: the same in a custom loop (``CallbackLoop``, ``per_call`` steps per call)."""
    each = EachRun(before)
    callback = hookbridge.HookCallback(hooks, scaffold=scaffold)
    model = fit(
        callback, steps=runs, model=model, extra=[each, *extra], loop=loop, per_call=per_call
    )
    return each.runs, iterations(model)


def looped(hooks, runs, **kwargs):
    """:func:`bridged` in a custom loop: the hooks under HookCallback in a ``CallbackLoop``."""
    return bridged(hooks, runs, loop=True, **kwargs)


#: the three worlds: native (n), HookCallback in fit (b), HookCallback in a custom loop (l)
WORLDS = ("n", "b", "l")


def run_in(world):
    return {"n": native, "b": bridged, "l": looped}[world]


#: For a test whose hook another CI test already runs in a custom loop (each hook class keeps
#: at least one all-worlds test in CI: LoggingTensorHook test_print_every_n_secs, StepCounterHook
#: test_steps_per_run_less_than_every_n_steps, SummarySaverHook test_summary_of_the_loss,
#: CheckpointSaverHook test_save_secs_calls_listeners_periodically and
#: test_listener_stops_training_in_after_save, StopAtStepHook and FinalOpsHook all theirs,
#: GlobalStepWaiterHook test_tf_hooks_ported.py's test_wait_for_step): the native run beside
#: HookCallback in ``fit`` in CI, beside the custom loop in deep.
BRIDGED_WORLD = pytest.mark.parametrize(
    "world", ["b", pytest.param("l", marks=pytest.mark.deep)], ids=["fit", "loop"]
)


def _increment_graph(increment):
    gs = train.get_or_create_global_step()
    with tf.control_dependencies(step_reads(gs)):  # TF's read, and the variable's own
        return gs, tf.compat.v1.assign_add(gs, increment)


def native(make, runs, before=_nothing, increment=1, assign=None):
    """The TF1 run: ``make()`` (called in the new graph) returns the hooks, or (hooks, scaffold);
    ``runs`` runs of the train op in a SingularMonitoredSession unless it stops first; ``assign``
    maps a run to a value assigned to the global step before it (through the raw session).
    Returns (runs made, final step)."""
    with tf.Graph().as_default():
        gs, train_op = native_graph() if increment == 1 else _increment_graph(increment)
        value = tf.compat.v1.placeholder(tf.int64, [])
        assign_op = tf.compat.v1.assign(gs, value)
        made = make() if callable(make) else make
        hooks, scaffold = made if isinstance(made, tuple) else (made, None)
        done = 0
        with train.SingularMonitoredSession(hooks=hooks, scaffold=scaffold) as sess:
            while done < runs and not sess.should_stop():
                done += 1
                if assign and done in assign:
                    sess.raw_session().run(assign_op, {value: assign[done]})
                before(done)
                sess.run(train_op)
            before("end")
            step = sess.raw_session().run(gs)
    return done, int(step)


class Clock:
    """A settable ``time.time`` (TF's tests patch it with a mock)."""

    def __init__(self):
        self.now = MOCK_START_TIME

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(time, "time", clock)
    return clock


def at(clock, offsets, log=None):
    """A ``before`` setting the clock to ``MOCK_START_TIME + offsets[i]`` before run i (and
    ``log``'s label to i)."""

    def before(run):
        if log is not None:
            log.label = run
        if run in offsets:
            clock.now = MOCK_START_TIME + offsets[run]

    return before


class Log:
    """``tf_logging.info`` wrapped as LoggingTensorHookTest's setUp does: each message, formatted,
    with the run (1-based, or "end") during which it was logged."""

    def __init__(self, info):
        self.info, self.label, self.records = info, None, []

    def __call__(self, msg, *args, **kwargs):
        self.records.append((self.label, str(msg) % args if args else str(msg)))
        self.info(msg, *args, **kwargs)

    def take(self, needle):
        taken = [(label, m) for label, m in self.records if needle in m]
        self.records, self.label = [], None
        return taken


@pytest.fixture
def log(monkeypatch):
    log = Log(tf_logging.info)
    monkeypatch.setattr(tf_logging, "info", log)
    return log


# -- LoggingTensorHookTest ----------------------------------------------------------------------
class Foo(train.SessionRunHook):
    """TF's ``constant_op.constant(42.0, name='foo')``, made in each run's graph (before the
    LoggingTensorHook's ``begin`` looks its name up)."""

    def begin(self):
        tf.constant(42.0, name="foo")


def logged_twice(log, clock, hooks, runs, offsets, needle="foo", worlds=("b", "l")):
    """The ``needle`` messages of ``hooks`` (reused) over two native, then two bridged runs of
    ``runs`` steps each, TF's "Verify proper reset" (the second fit continues the model, from
    iterations reset to 0), then two in a custom loop (of ``worlds``, "b" and "l"): {world: a
    list of two lists of (run, message)}."""
    out = {"n": []}
    for _ in range(2):
        clock.now = MOCK_START_TIME
        native(hooks, runs, before=at(clock, offsets, log))
        out["n"].append(log.take(needle))
    for world in worlds:
        run, logs = run_in(world), out.setdefault(world, [])
        model = make_model(reuse=True)
        for _ in range(2):
            clock.now = MOCK_START_TIME
            model.optimizer.iterations.assign(0)
            run(hooks, runs, before=at(clock, offsets, log), model=model)
            logs.append(log.take(needle))
    return out


@BRIDGED_WORLD
def test_print_at_end_only(log, clock, world):
    """LoggingTensorHookTest.test_print_at_end_only: ``at_end=True`` alone logs nothing during
    three runs and logs once at end. TF logs the constant ``foo``; the global step read tensor is
    logged beside it (3 at end)."""
    hooks = [Foo(), train.LoggingTensorHook(tensors=["foo:0", STEP], at_end=True)]
    clock.now = MOCK_START_TIME
    native(hooks, 3, before=at(clock, {}, log))
    native_logs = log.take("foo")
    run_in(world)(hooks, 3, before=at(clock, {}, log))
    assert log.take("foo") == native_logs == [("end", f"foo:0 = 42.0, {STEP} = 3")]


def _every_n_steps(at_end):
    """What ``every_n_iter=10`` logs over 32 runs one second apart, in the default format."""
    expected = [(1, f"foo:0 = 42.0, {STEP} = 0")]
    expected += [(r, f"foo:0 = 42.0, {STEP} = {r - 1} (10.000 sec)") for r in (11, 21, 31)]
    if at_end:
        expected.append(("end", f"foo:0 = 42.0, {STEP} = 32 (1.000 sec)"))
    return expected


#: ``at_end=False`` in deep only: CI proves its "nothing logged at end" in test_print_first_step
#: and test_print_formatter, whose whole log lists (no "end" entry) are compared.
AT_END = [pytest.param(False, marks=pytest.mark.deep), True]


@BRIDGED_WORLD
@pytest.mark.parametrize("at_end", AT_END)
def test_print_every_n_steps(log, clock, at_end, world):
    """LoggingTensorHookTest.test_print_every_n_steps(_and_end): ``every_n_iter=10`` logs at
    runs 1, 11, 21, 31 (not 32), and at end only with ``at_end``; twice, the same hook reused
    (TF: a new hook in the same session). TF does not patch the time here; the clock is set to
    one second per run so the logged "(10.000 sec)" compares."""
    hooks = [
        Foo(),
        train.LoggingTensorHook(tensors=["foo:0", STEP], every_n_iter=10, at_end=at_end),
    ]
    offsets = {r: float(r) for r in range(1, 33)}
    logs = logged_twice(log, clock, hooks, 32, offsets, worlds=[world])
    expected = _every_n_steps(at_end)
    assert logs[world] == logs["n"] == [expected, expected]


@BRIDGED_WORLD
def test_print_first_step(log, clock, world):
    """LoggingTensorHookTest.test_print_first_step: with ``every_n_iter=1`` the first message
    has no elapsed time ("sec"), the next ones have (one second per run here)."""
    hook = train.LoggingTensorHook(tensors={"foo": "foo:0", "step": STEP}, every_n_iter=1)
    offsets = {1: 1.0, 2: 2.0, 3: 3.0}
    native([Foo(), hook], 3, before=at(clock, offsets, log))
    native_logs = log.take("foo")
    run_in(world)([Foo(), hook], 3, before=at(clock, offsets, log))
    assert log.take("foo") == native_logs
    assert native_logs == [
        (1, "foo = 42.0, step = 0"),
        (2, "foo = 42.0, step = 1 (1.000 sec)"),
        (3, "foo = 42.0, step = 2 (1.000 sec)"),
    ]
    assert "sec" not in native_logs[0][1]


@pytest.mark.parametrize("at_end", AT_END)
def test_print_every_n_secs(log, clock, at_end):
    """LoggingTensorHookTest.test_print_every_n_secs(_and_end): ``every_n_secs=1.0``; logs at
    run 1, not at run 2, then the clock advances 1 s and run 3 logs; at end only with
    ``at_end``. Twice, the same hook reused."""
    hooks = [
        Foo(),
        train.LoggingTensorHook(tensors=["foo:0", STEP], every_n_secs=1.0, at_end=at_end),
    ]
    logs = logged_twice(log, clock, hooks, 3, {1: 0.0, 2: 0.0, 3: 1.0})
    expected = [(1, f"foo:0 = 42.0, {STEP} = 0"), (3, f"foo:0 = 42.0, {STEP} = 2 (1.000 sec)")]
    if at_end:
        expected.append(("end", f"foo:0 = 42.0, {STEP} = 3 (0.000 sec)"))
    assert logs["b"] == logs["n"] == logs["l"] == [expected, expected]


@BRIDGED_WORLD
def test_print_formatter(log, clock, world):
    """LoggingTensorHookTest.test_print_formatter: the formatter's string is what is logged
    (``qqq=42.0``), at runs 1 and 11 of ``every_n_iter=10`` (TF checks run 1 only); the
    formatter sees the global step too."""

    def formatter(items):
        return f"qqq={items['foo:0']} step={items[STEP]}"

    hook = train.LoggingTensorHook(tensors=["foo:0", STEP], every_n_iter=10, formatter=formatter)
    native([Foo(), hook], 11, before=at(clock, {}, log))
    native_logs = log.take("qqq")
    run_in(world)([Foo(), hook], 11, before=at(clock, {}, log))
    assert log.take("qqq") == native_logs == [(1, "qqq=42.0 step=0"), (11, "qqq=42.0 step=10")]


# -- StopAtStepTest -----------------------------------------------------------------------------
class AssignAtStart(train.SessionRunHook):
    """TF's ``sess.run(state_ops.assign(global_step, 5))`` before ``after_create_session``: a hook
    listed before the StopAtStepHook assigns the step through the session it is given."""

    def __init__(self, value):
        self.value = value

    def begin(self):
        self.feed = tf.compat.v1.placeholder(tf.int64, [])
        self.assign = tf.compat.v1.assign(train.get_global_step(), self.feed)

    def after_create_session(self, session, coord):
        session.run(self.assign, {self.feed: self.value})


@pytest.mark.parametrize(
    "assigned, expected",
    [({2: 13, 3: 14}, (3, 15)), ({2: 15}, (2, 16))],
    ids=["num_step", "multiple_steps"],
)
def test_stop_based_on_num_step(assigned, expected):
    """StopAtStepTest.test_stop_based_on_num_step / test_stop_based_with_multiple_steps:
    ``StopAtStepHook(num_steps=10)`` created at step 5 (last step 15), the step then assigned
    from outside before some runs (Keras: on_train_batch_begin). TF's test runs a no-op; here
    the train op adds 1, so num_step stops after the run reaching 15 (3 runs) and multiple_steps
    after the run jumping from 15 to 16 (2 runs)."""
    hooks = [AssignAtStart(5), train.StopAtStepHook(num_steps=10)]
    native_result = native(hooks, 10, assign=assigned)
    keras_assigned = {run - 1: value for run, value in assigned.items()}  # 0-based batches
    bridged_result = bridged(hooks, 10, extra=[SetIterations(keras_assigned)])
    assert bridged_result == native_result == expected
    assert looped(hooks, 10, extra=[SetIterations(keras_assigned)]) == native_result


# -- StepCounterHookTest ------------------------------------------------------------------------
def scalars(logdir):
    """Every scalar summary under ``logdir``: {tag: [(step, value), ...]}."""
    tf.compat.v1.summary.FileWriterCache.clear()  # StepCounterHook never flushes (native too)
    found = {}
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        acc = EventAccumulator(path)
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            found.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return found


def _rates(tmp_path, clock, make_hook, runs, offsets, model=None, increment=1, worlds=WORLDS):
    """StepCounterHook's summaries over a native, a bridged and a custom-loop run (of
    ``worlds``) of ``runs`` steps (native: ``runs // increment`` runs; the others ``increment``
    steps per execution): {world: summaries}."""
    out = {}
    for world in worlds:
        clock.now = MOCK_START_TIME
        hook = make_hook(str(tmp_path / world))
        if world == "n":
            native([hook], runs // increment, before=at(clock, offsets), increment=increment)
        else:
            kwargs = {"model": model} if world == "b" else {"per_call": increment}
            run_in(world)([hook], runs, before=at(clock, offsets), **kwargs)
        out[world] = scalars(str(tmp_path / world))
    return out


@BRIDGED_WORLD
def test_step_counter_every_n_steps(tmp_path, clock, monkeypatch, world):
    """StepCounterHookTest.test_step_counter_every_n_steps: ``every_n_steps=10``, 30 runs
    0.01 s apart: ``global_step/sec`` summaries at steps 11 and 21, 10 steps in 0.1 s (100/s),
    and no "global step has not been increased" warning. TF records to a FakeSummaryWriter; here
    the hook's own ``output_dir`` writer, read back with EventAccumulator."""
    warned = []
    monkeypatch.setattr(
        basic_session_run_hooks.logging,
        "log_first_n",
        lambda level, msg, n, *args: warned.append(msg % args),
    )
    offsets = {r: 0.01 * r for r in range(1, 31)}
    out = _rates(
        tmp_path,
        clock,
        lambda d: train.StepCounterHook(every_n_steps=10, output_dir=d),
        30,
        offsets,
        worlds=["n", world],
    )
    native_summaries = out["n"]
    assert out[world] == native_summaries
    assert list(native_summaries) == ["global_step/sec"]
    assert [s for s, _ in native_summaries["global_step/sec"]] == [11, 21]
    assert all(v == pytest.approx(100.0, rel=1e-3) for _, v in native_summaries["global_step/sec"])
    assert warned == []


@BRIDGED_WORLD
def test_step_counter_every_n_secs(tmp_path, clock, world):
    """StepCounterHookTest.test_step_counter_every_n_secs: ``every_n_secs=0.1``, three runs
    0.2 s apart: summaries at steps 2 and 3, one step per 0.2 s (5/s)."""
    out = _rates(
        tmp_path,
        clock,
        lambda d: train.StepCounterHook(every_n_steps=None, every_n_secs=0.1, output_dir=d),
        3,
        {1: 0.0, 2: 0.2, 3: 0.4},
        worlds=["n", world],
    )
    native_summaries = out["n"]
    assert out[world] == native_summaries
    assert [s for s, _ in native_summaries["global_step/sec"]] == [2, 3]
    assert all(v == pytest.approx(5.0, rel=1e-3) for _, v in native_summaries["global_step/sec"])


@BRIDGED_WORLD
def test_global_step_name(tmp_path, clock, world):
    """StepCounterHookTest.test_global_step_name: the summary tag is the global step op's name
    plus ``/sec``; ``every_n_steps=1`` over two runs writes it at step 2 only. TF names its global
    step ``bar/foo``; the bridge's global step (``optimizer.iterations``) is always named
    ``global_step``, so the native graph keeps the default name: ``global_step/sec``."""
    out = _rates(
        tmp_path,
        clock,
        lambda d: train.StepCounterHook(every_n_steps=1, every_n_secs=None, output_dir=d),
        2,
        {1: 0.0, 2: 0.5},
        worlds=["n", world],
    )
    assert out[world] == out["n"] == {"global_step/sec": [(2, 2.0)]}


def test_steps_per_run_less_than_every_n_steps(tmp_path, clock):
    """StepCounterHookTest.test_steps_per_run_less_than_every_n_steps: ``every_n_steps=10`` with
    ``_set_steps_per_run(5)`` and a train op adding 5, five runs 0.01 s apart: summaries at 15
    and 25 (10 steps in 0.02 s: 500/s). Bridged: ``steps_per_execution=5``, whose executions are
    the runs."""

    def make_hook(d):
        hook = train.StepCounterHook(every_n_steps=10, output_dir=d)
        hook._set_steps_per_run(5)
        return hook

    offsets = {r: 0.01 * r for r in range(1, 6)}
    model = make_model(reuse=True, steps_per_execution=5)
    with pytest.warns(UserWarning, match="steps_per_execution"):
        out = _rates(tmp_path, clock, make_hook, 25, offsets, model=model, increment=5)
    native_summaries = out["n"]
    assert out["b"] == native_summaries == out["l"]
    assert [s for s, _ in native_summaries["global_step/sec"]] == [15, 25]
    assert all(v == pytest.approx(500.0, rel=1e-3) for _, v in native_summaries["global_step/sec"])
    assert iterations(model) == 25


# -- SummarySaverHookTest -----------------------------------------------------------------------
def my_summaries(output_dir, two=False, **kwargs):
    """TF's setUp (a variable incremented by the summary op itself, ``my_summary`` of it and
    ``my_summary2`` of twice it) and a SummarySaverHook writing to ``output_dir``; called in the
    run's graph."""

    def make():
        var = tf.compat.v1.Variable(0.0, name="var")
        tensor = tf.compat.v1.assign_add(var, 1.0)
        ops = [tf.compat.v1.summary.scalar("my_summary", tensor)]
        if two:
            ops.append(tf.compat.v1.summary.scalar("my_summary2", tensor * 2))
        summary_op = ops if two else ops[0]
        return [train.SummarySaverHook(output_dir=output_dir, summary_op=summary_op, **kwargs)]

    return make


def _summaries(tmp_path, clock, runs, offsets, worlds, **kwargs):
    out = {}
    for world in worlds:
        clock.now = MOCK_START_TIME
        make = my_summaries(str(tmp_path / world), **kwargs)
        run_in(world)(make, runs, before=at(clock, offsets))
        out[world] = scalars(str(tmp_path / world))
    return out


@BRIDGED_WORLD
@pytest.mark.parametrize(
    "kwargs, runs, spacing, expected",
    [
        pytest.param(
            {"save_steps": 8},
            30,
            0.0,
            {"my_summary": [(1, 1.0), (9, 2.0), (17, 3.0), (25, 4.0)]},
            marks=pytest.mark.deep,
        ),
        (
            {"save_steps": 8, "two": True},
            10,
            0.0,
            {"my_summary": [(1, 1.0), (9, 2.0)], "my_summary2": [(1, 2.0), (9, 4.0)]},
        ),
        pytest.param(
            {"save_secs": 0.5},
            4,
            0.5,
            {"my_summary": [(1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)]},
            marks=pytest.mark.deep,
        ),
        ({"save_secs": 9.0}, 8, 3.1, {"my_summary": [(1, 1.0), (4, 2.0), (7, 3.0)]}),
    ],
    ids=[
        "save_steps",
        "multiple_summaries",
        "save_secs_saving_once_every_step",
        "save_secs_saving_once_every_three_steps",
    ],
)
def test_summary_saver(tmp_path, clock, kwargs, runs, spacing, expected, world):
    """SummarySaverHookTest.test_save_steps / test_multiple_summaries /
    test_save_secs_saving_once_every_step / _every_three_steps: the summarized variable counts
    the summary op's runs, so steps and values show when the hook fetched it. TF records to a
    FakeSummaryWriter; here to ``output_dir``, read back with EventAccumulator. The clock
    advances ``spacing`` seconds per run. CI runs one variant per trigger (multiple_summaries:
    save_steps; every_three_steps: save_secs, with runs that do not save); deep runs all four."""
    offsets = {r: spacing * (r - 1) for r in range(1, runs + 1)}
    out = _summaries(tmp_path, clock, runs, offsets, ["n", world], **kwargs)
    assert out[world] == out["n"] == expected


def _batch_losses(steps):
    """Each batch's loss as ``fit`` computes it (before that batch's update), step by step."""
    model = make_model(reuse=True)
    x, y = make_data(n=16 * steps)
    losses = []
    for i in range(steps):
        xb, yb = x[16 * i : 16 * (i + 1)], y[16 * i : 16 * (i + 1)]
        losses.append(float(np.mean((np.asarray(model(xb)) - yb) ** 2)))
        model.train_on_batch(xb, yb)
    return losses


def test_summary_of_the_loss(tmp_path):
    """SummarySaverHookTest.test_save_steps on the loss: ``save_steps=2`` over six runs of a
    summary of ``loss:0``. Natively ``loss:0`` is fed each Keras batch's loss (computed step by
    step beside), bridged it is the bridge's batch loss: the same steps (1, 3, 5) and values."""
    losses = _batch_losses(6)

    def make(output_dir):
        def hooks():
            loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            op = tf.compat.v1.summary.scalar("batch_loss", loss)
            return [train.SummarySaverHook(save_steps=2, output_dir=output_dir, summary_op=op)]

        return hooks

    bridged(make(str(tmp_path / "b")), 6)
    looped(make(str(tmp_path / "l")), 6)
    with tf.Graph().as_default():
        _, train_op = native_graph()
        fed = tf.compat.v1.placeholder(tf.float32, [])
        tf.identity(fed, name="loss")
        with train.MonitoredSession(hooks=make(str(tmp_path / "n"))()) as sess:
            for loss in losses:
                sess.run(train_op, {fed: loss})
    native_summaries = scalars(str(tmp_path / "n"))["batch_loss"]
    bridged_summaries = scalars(str(tmp_path / "b"))["batch_loss"]
    assert [s for s, _ in bridged_summaries] == [s for s, _ in native_summaries] == [1, 3, 5]
    assert [v for _, v in native_summaries] == pytest.approx(losses[::2], rel=1e-6)
    assert [v for _, v in bridged_summaries] == pytest.approx(
        [v for _, v in native_summaries], rel=1e-5
    )
    # the loop hands HookCallback the values its step returned: the same batch losses
    loop_summaries = scalars(str(tmp_path / "l"))["batch_loss"]
    assert [s for s, _ in loop_summaries] == [s for s, _ in native_summaries]
    assert [v for _, v in loop_summaries] == pytest.approx(
        [v for _, v in native_summaries], rel=1e-5
    )


# -- CheckpointSaverHookTest --------------------------------------------------------------------
class Listener(MockCheckpointSaverListener):
    """TF's MockCheckpointSaverListener with its ``ask_for_stop``, recording the saved steps."""

    def __init__(self):
        super().__init__()
        self.ask_for_stop, self.steps = False, []

    def after_save(self, session, global_step):
        super().after_save(session, global_step)
        self.steps.append(int(global_step))
        return True if self.ask_for_stop else None


class SavedAfterRun(train.SessionRunHook):
    """TF's ``load_variable(model_dir, global_step)`` after each run: listed after the
    CheckpointSaverHook, it reads the newest checkpoint in both worlds."""

    def __init__(self, model_dir):
        self.model_dir, self.steps = model_dir, []

    def after_run(self, run_context, run_values):
        self.steps.append(saved_step(self.model_dir))


def _saver_run(tmp_path, world, runs, before=_nothing, model=None, **kwargs):
    """A CheckpointSaverHook (``kwargs``, sharing the run's Scaffold) with a Listener and a
    SavedAfterRun: ((runs, final step), listener, saved after each run, newest saved step)."""
    model_dir = str(tmp_path / world)
    listener, saved = Listener(), SavedAfterRun(model_dir)

    def make(scaffold):
        hook = train.CheckpointSaverHook(
            model_dir, scaffold=scaffold, listeners=[listener], **kwargs
        )
        return [hook, saved]

    if world == "n":

        def hooks_and_scaffold():
            scaffold = train.Scaffold()
            return make(scaffold), scaffold

        result = native(hooks_and_scaffold, runs, before=before)
    else:
        scaffold = train.Scaffold()
        result = run_in(world)(make(scaffold), runs, before=before, model=model, scaffold=scaffold)
    return result, listener, saved.steps, saved_step(model_dir)


def _both(tmp_path, clock, runs, offsets=None, worlds=WORLDS, **kwargs):
    """[native, bridged, loop] (of ``worlds``) of :func:`_saver_run`'s outcome."""
    out = []
    for world in worlds:
        clock.now = MOCK_START_TIME
        before = at(clock, offsets) if offsets else _nothing
        result, listener, saved, last = _saver_run(tmp_path, world, runs, before, **kwargs)
        out.append((result, listener.counts, listener.steps, saved, last))
    return out


@BRIDGED_WORLD
def test_save_secs_saves_periodically(tmp_path, clock, world):
    """CheckpointSaverHookTest.test_save_secs_saves_periodically (and
    test_save_secs_saves_in_first_step): ``save_secs=2``, runs at +0, +0.5, +2.5, +2.6, +2.7 and
    +10 s. TF's bare session saves at runs 1, 3 and 6 (checkpointed steps 1, 1, 3, 3, 3, 6); a
    MonitoredSession's after_create_session saves step 0 and starts the timer, so run 1 does not
    save: 0, 0, 3, 3, 3, 6."""
    offsets = {1: 0.0, 2: 0.5, 3: 2.5, 4: 2.6, 5: 2.7, 6: 10.0}
    native_out, bridged_out = _both(tmp_path, clock, 6, offsets, ["n", world], save_secs=2)
    assert bridged_out == native_out
    assert native_out[3] == [0, 0, 3, 3, 3, 6]
    assert native_out[2] == [0, 3, 6]  # nothing new at end: step 6 was just saved


def test_save_secs_calls_listeners_periodically(tmp_path, clock):
    """CheckpointSaverHookTest.test_save_secs_calls_listeners_periodically: ``save_secs=2``,
    runs at +0.5, +0.5, +3, +3.5, +4, +6.5, +7 s, end at +7.5 s: four saves, each between
    before_save and after_save. TF's bare session saves at runs 1, 3, 6 and at end; here at
    session creation (step 0), runs 3 and 6, and at end (step 7): the same counts."""
    offsets = {1: 0.5, 2: 0.5, 3: 3.0, 4: 3.5, 5: 4.0, 6: 6.5, 7: 7.0, "end": 7.5}
    native_out, bridged_out, loop_out = _both(tmp_path, clock, 7, offsets, save_secs=2)
    assert bridged_out == native_out == loop_out
    assert native_out[1] == {"begin": 1, "before_save": 4, "after_save": 4, "end": 1}
    assert native_out[2] == [0, 3, 6, 7]


@BRIDGED_WORLD
def test_save_secs_calls_listeners_at_begin_and_end(tmp_path, clock, world):
    """CheckpointSaverHookTest.test_save_secs_calls_listeners_at_begin_and_end and
    test_save_saves_at_end: ``save_secs=2``, two runs within the two seconds: saved at session
    creation (TF's bare session: at run 1) and at end, where step 2 is checkpointed."""
    native_out, bridged_out = _both(tmp_path, clock, 2, None, ["n", world], save_secs=2)
    assert bridged_out == native_out
    assert native_out[1] == {"begin": 1, "before_save": 2, "after_save": 2, "end": 1}
    assert native_out[2] == [0, 2]
    assert native_out[4] == 2


def _stopping_listener(model_dir, world):
    listener = Listener()

    def before(run):
        if run == 3:
            listener.ask_for_stop = True

    hook = train.CheckpointSaverHook(model_dir, save_steps=1, listeners=[listener])
    result = run_in(world)([hook], 10, before=before)
    return result, listener.counts, listener.steps, saved_step(model_dir)


def test_listener_stops_training_in_after_save(tmp_path):
    """CheckpointSaverHookTest.test_listener_stops_training_in_after_save: ``save_steps=1``;
    the listener's after_save returns True from run 3 on (``ask_for_stop`` set before it), which
    stops training after run 3 of 10 (nothing saved at end: step 3 was just saved). TF uses a
    SingularMonitoredSession with the scaffold and checkpoint_dir (nothing to restore), as here
    without them."""
    native_out = _stopping_listener(str(tmp_path / "n"), "n")
    bridged_out = _stopping_listener(str(tmp_path / "b"), "b")
    loop_out = _stopping_listener(str(tmp_path / "l"), "l")
    assert bridged_out == native_out == loop_out
    counts = {"begin": 1, "before_save": 4, "after_save": 4, "end": 1}
    assert native_out == ((3, 3), counts, [0, 1, 2, 3], 3)


@BRIDGED_WORLD
def test_two_listeners_with_default_saver(tmp_path, world):
    """CheckpointSaverHookTest.test_two_listeners_with_default_saver (and
    test_listener_with_default_saver): no saver nor scaffold given, ``save_steps=1``, two runs:
    each listener sees three saves; a new SingularMonitoredSession on a graph holding only a
    global step restores step 2 from the checkpoint directory, bridged as natively."""
    out = []
    for each in ("n", world):
        model_dir = str(tmp_path / each)
        listeners = [MockCheckpointSaverListener(), MockCheckpointSaverListener()]
        hook = train.CheckpointSaverHook(model_dir, save_steps=1, listeners=listeners)
        result = run_in(each)([hook], 2)
        with tf.Graph().as_default():
            global_step = train.get_or_create_global_step()
            with train.SingularMonitoredSession(checkpoint_dir=model_dir) as sess2:
                restored = int(sess2.run(global_step))
        out.append((result, [listener.counts for listener in listeners], restored))
    counts = {"begin": 1, "before_save": 3, "after_save": 3, "end": 1}
    assert out[1] == out[0] == ((2, 2), [counts, counts], 2)


@BRIDGED_WORLD
def test_save_steps_with_checkpoint_basename(tmp_path, world):
    """CheckpointSaverHook(save_steps=2, checkpoint_basename="my.ckpt") over five runs (not in
    TF's test file; its save_steps tests with the default name): checkpoints my.ckpt-0, -2, -4
    and, at end, -5, listed as such in the directory's checkpoint state."""
    out = []
    for each in ("n", world):
        model_dir = str(tmp_path / each)
        hook = train.CheckpointSaverHook(model_dir, save_steps=2, checkpoint_basename="my.ckpt")
        result = run_in(each)([hook], 5)
        state = tf.train.get_checkpoint_state(model_dir)
        paths = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
        out.append((result, paths, os.path.basename(state.model_checkpoint_path)))
    assert out[1] == out[0]
    assert out[0] == ((5, 5), ["my.ckpt-0", "my.ckpt-2", "my.ckpt-4", "my.ckpt-5"], "my.ckpt-5")
    assert int(tf.train.load_checkpoint(str(tmp_path / world)).get_tensor("global_step")) == 5


def test_multi_step_save_steps_saves_periodically(tmp_path):
    """CheckpointSaverHookMultiStepTest.test_save_steps_saves_periodically (and
    test_save_steps_saves_at_end): ``save_steps=10`` with ``_set_steps_per_run(5)`` and a train op
    adding 5; bridged ``steps_per_execution=5``. TF's bare session checkpoints 5, 5, 15, 15, 25;
    a MonitoredSession saves step 0 at creation, so: 0, 10, 10, 20, 20, and 25 at end."""
    out = []
    for world in WORLDS:
        model_dir = str(tmp_path / world)
        listener, saved = Listener(), SavedAfterRun(model_dir)
        hook = train.CheckpointSaverHook(model_dir, save_steps=10, listeners=[listener])
        hook._set_steps_per_run(5)
        if world == "n":
            result = native([hook, saved], 5, increment=5)
        elif world == "l":
            result = looped([hook, saved], 25, per_call=5)
        else:
            model = make_model(reuse=True, steps_per_execution=5)
            with pytest.warns(UserWarning, match="steps_per_execution"):
                result = bridged([hook, saved], 25, model=model)
        out.append((result, saved.steps, listener.steps, saved_step(model_dir)))
    assert out[1] == out[0] == out[2] == ((5, 25), [0, 10, 10, 20, 20], [0, 10, 20, 25], 25)


# -- FinalOpsHookTest ---------------------------------------------------------------------------
def _final_ops(world):
    made = []

    def hooks():
        vector = tf.constant([1, 6, 3, 5, 2, 4])
        fed = tf.compat.v1.placeholder(tf.float32)
        step = tf.compat.v1.get_default_graph().get_tensor_by_name(STEP)
        made[:] = [
            train.FinalOpsHook(vector),
            train.FinalOpsHook(fed, {fed: [4, -3]}),
            train.FinalOpsHook({"step": step, "four": tf.constant(4)}),
        ]
        return list(made)

    result = run_in(world)(hooks, 3)
    vector, fed, named = (hook.final_ops_values for hook in made)
    return result, vector.tolist(), fed.tolist(), named


def test_final_ops_is_tensor_and_with_dictionary():
    """FinalOpsHookTest.test_final_ops_is_tensor / test_final_ops_with_dictionary (and
    _is_scalar_tensor): at end, a constant vector, a placeholder fed by
    ``final_ops_feed_dict``, and (beside TF's) a dict holding the global step read. TF calls
    ``end`` on a bare session with no run; here after three runs."""
    native_out, bridged_out = _final_ops("n"), _final_ops("b")
    assert bridged_out == native_out == _final_ops("l")
    assert native_out == ((3, 3), [1, 6, 3, 5, 2, 4], [4.0, -3.0], {"step": 3, "four": 4})


def test_final_ops_triggers_out_of_range_error(monkeypatch):
    """FinalOpsHookTest.test_final_ops_triggers_out_of_range_error: the final op reads a
    one-element dataset another hook already consumed (TF: ``session.run(read_ops)`` before
    ``end``): ``end`` logs the "dependency back to some input source" warning and raises
    OutOfRangeError, out of the MonitoredSession's close natively and out of ``fit`` bridged."""
    warned = []
    monkeypatch.setattr(tf_logging, "warning", lambda msg, *args: warned.append(msg % args))

    class Consume(train.SessionRunHook):
        def __init__(self, read):
            self.read = read

        def after_create_session(self, session, coord):
            session.run(self.read)

    def hooks():
        dataset = tf.data.Dataset.range(1)
        read = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        return [Consume(read), train.FinalOpsHook(read)]

    with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
        native(hooks, 2)
    native_warned, warned[:] = list(warned), []
    pattern = "dependency back to some input source"
    for loop in (False, True):  # fit, then a custom loop
        model = make_model(reuse=True)
        with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
            fit(hookbridge.HookCallback(hooks), steps=2, model=model, loop=loop)
        assert [pattern in m for m in warned] == [pattern in m for m in native_warned] == [True]
        assert iterations(model) == 2
        warned[:] = []


# -- GlobalStepWaiterHookTest -------------------------------------------------------------------
@BRIDGED_WORLD
def test_not_wait_for_step_zero(monkeypatch, world):
    """GlobalStepWaiterHookTest.test_not_wait_for_step_zero: ``wait_until_step=0`` returns from
    before_run without sleeping (TF calls before_run once on a bare session; here two runs)."""
    sleeps = []
    monkeypatch.setattr(basic_session_run_hooks.time, "sleep", sleeps.append)
    native_result = native([train.GlobalStepWaiterHook(wait_until_step=0)], 2)
    bridged_result = run_in(world)([train.GlobalStepWaiterHook(wait_until_step=0)], 2)
    assert bridged_result == native_result == (2, 2)
    assert sleeps == []
