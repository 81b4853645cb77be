"""TensorFlow's ``monitored_session_test.py``: the hook scenarios that have a ``fit`` counterpart.

Each test names the TF test it ports (``HookedSessionTest``, ``MonitoredSessionTest``,
``MonitoredTrainingSessionTest``) and runs its scenario twice: natively, hooks in a real
``MonitoredSession`` over a graph whose train op adds 1 to the global step (``native_graph``),
and bridged, the same hooks under ``hookbridge.HookCallback`` in the ``fit`` of a small Keras
model, whose SGD step adds 1 to ``optimizer.iterations``. Both worlds write the hooks' calls into
one kind of trace; the tests assert the traces are equal and equal to TF's concrete values.
TF's tests drive the session by hand (a first ``run(gstep)``, ``run(do_step)`` returning the new
step, ``should_stop()`` after each run); here every run is a train step, and a hook records what
the caller would have seen (the global step after the run, whether a stop was requested).

Scenarios ported elsewhere are not repeated: ``test_recover_and_retry_on_aborted_error``
(test_tf_hooks_ported.py), the order of the five hook methods, end of input and exceptions in
generic form (test_semantics.py), fetch structures, user-facing feeds and options/metadata per run
(tests/test_hook_callback_lifecycle.py, tests/test_hook_callback_session.py).
"""

from __future__ import annotations

import collections
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_model
from tensorflow.core.protobuf import debug_pb2

import hookbridge
from conformance.test_tf_hooks_ported import RaiseOnceAtCountN, fit, iterations, native_graph
from hookbridge import _tfcompat

train = tf.compat.v1.train
SessionRunArgs = train.SessionRunArgs
SessionRunValues = train.SessionRunValues
RunOptions = tf.compat.v1.RunOptions
RunMetadata = tf.compat.v1.RunMetadata
DebugTensorWatch = debug_pb2.DebugTensorWatch


# -- the hooks -----------------------------------------------------------------------------------
class FakeHook(train.SessionRunHook):
    """TF's ``FakeHook`` (call counter, last run context and values, ``request``,
    ``should_stop``), writing its calls into ``trace``: ``(name, "after_create_session", step)``,
    ``(name, "before_run")``, ``(name, "after_run", step, stop_requested)``, ``(name, "end",
    step)``, with ``step`` the global step read through the hook's session at that point."""

    def __init__(self, name="h", trace=None):
        self.name = name
        self.trace = trace if trace is not None else []
        self.should_stop = False
        self.request = None
        self.call_counter = collections.Counter()
        self.last_run_context = None
        self.last_run_values = None
        self.results = []  # every run's run_values.results
        self.sessions = []  # after_create_session's, then end's

    def _read(self, session):
        return int(session.run(self.gs))

    def begin(self):
        self.call_counter["begin"] += 1
        self.trace.append((self.name, "begin"))
        self.gs = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())

    def after_create_session(self, session, coord):
        self.call_counter["after_create_session"] += 1
        self.sessions.append(session)
        self.trace.append((self.name, "after_create_session", self._read(session)))

    def before_run(self, run_context):
        self.call_counter["before_run"] += 1
        self.last_run_context = run_context
        self.trace.append((self.name, "before_run"))
        return self.request

    def after_run(self, run_context, run_values):
        self.call_counter["after_run"] += 1
        self.last_run_values = run_values
        self.results.append(run_values.results)
        if self.should_stop:
            run_context.request_stop()
        step = self._read(run_context.session)
        self.trace.append((self.name, "after_run", step, run_context.stop_requested))

    def end(self, session):
        self.call_counter["end"] += 1
        self.sessions.append(session)
        self.trace.append((self.name, "end", self._read(session)))


class StopFrom(FakeHook):
    """A ``FakeHook`` whose ``should_stop`` turns on before its ``at``-th run (TF's test sets it
    between two ``mon_sess.run`` calls)."""

    def __init__(self, at, name="h", trace=None):
        super().__init__(name, trace)
        self.at = at

    def before_run(self, run_context):
        self.should_stop = self.call_counter["before_run"] + 1 >= self.at
        return super().before_run(run_context)


class RaiseOnceInAfterRun(train.SessionRunHook):
    """``RaiseOnceAtCountN``, raising from ``after_run`` (the Keras step has then run)."""

    def __init__(self, n, ex):
        self.n, self.ex, self.raised = n, ex, False

    def after_run(self, run_context, run_values):
        self.n -= 1
        if self.n == 0 and not self.raised:
            self.raised = True
            raise self.ex


# -- the two worlds ------------------------------------------------------------------------------
def monitored(make_hooks, steps, *, before_close=None, **session_kw):
    """Native: ``make_hooks()`` in a new graph with TF's global step and train op, in a
    ``MonitoredSession(**session_kw)`` running the train op ``while not should_stop()``, at most
    ``steps`` times; ``before_close(session)`` is called inside its ``with``. Returns the hooks."""
    with tf.Graph().as_default():
        _, train_op = native_graph()
        hooks = make_hooks()
        with train.MonitoredSession(hooks=hooks, **session_kw) as sess:
            for _ in range(steps):
                if sess.should_stop():
                    break
                sess.run(train_op)
            if before_close is not None:
                before_close(sess)
    return hooks


def bridged(make_hooks, steps, model=None, **callback_kw):
    """Bridged: ``make_hooks`` (called with the bridge's graph as the default graph) under
    ``HookCallback`` in the ``fit`` of ``steps`` batches. Returns (the hooks, the model)."""
    callback = hookbridge.HookCallback(make_hooks, **callback_kw)
    model = fit(callback, steps, model=model)
    return callback.hooks, model


def fake_hooks(trace, n=2):
    return lambda: [FakeHook(f"h{i}", trace) for i in range(n)]


def runs(names, steps, first=1, stop_at=None):
    """The trace of ``steps`` runs of hooks ``names`` (global step ``first`` after the first)."""
    out = []
    for step in range(first, first + steps):
        out += [(name, "before_run") for name in names]
        out += [(name, "after_run", step, step == stop_at) for name in names]
    return out


def opening(names, step=0):
    return [(n, "begin") for n in names] + [(n, "after_create_session", step) for n in names]


def closing(names, step):
    return [(n, "end", step) for n in names]


# -- HookedSessionTest ---------------------------------------------------------------------------
def test_calls_hooks_begin_end():
    """HookedSessionTest.testCallsHooksBeginEnd: two FakeHooks that request nothing see
    ``SessionRunValues(None, RunOptions(), RunMetadata())``, the session given to
    after_create_session in every run context and in end(). TF drives a bare ``_HookedSession``
    (no begin/after_create_session/end) for one run of a constant; here a MonitoredSession runs
    the train op twice. ``original_args`` differs as documented (docs/limits.md, "Other
    differences": there is no train op in the bridge's graph; the Keras step is the run)."""
    native_trace, bridged_trace = [], []
    native = monitored(fake_hooks(native_trace), steps=2)
    hooks, model = bridged(fake_hooks(bridged_trace), steps=2)
    names = ["h0", "h1"]
    expected = opening(names) + runs(names, 2) + closing(names, 2)
    assert bridged_trace == native_trace == expected
    assert iterations(model) == 2
    for hook in [*native, *hooks]:
        assert hook.call_counter == {
            "begin": 1,
            "after_create_session": 1,
            "before_run": 2,
            "after_run": 2,
            "end": 1,
        }
        assert hook.last_run_values == SessionRunValues(
            results=None, options=RunOptions(), run_metadata=RunMetadata()
        )
        session = hook.sessions[0]
        assert isinstance(session, tf.compat.v1.Session)
        assert hook.last_run_context.session is session and hook.sessions == [session, session]
    train_op, feed_dict, options = native[0].last_run_context.original_args
    assert train_op.op.type in ("AssignAdd", "AssignAddVariableOp")  # native_graph's train op
    assert feed_dict is None and options is None
    assert hooks[0].last_run_context.original_args == SessionRunArgs(None)


def test_should_stop():
    """HookedSessionTest.testShouldStop: no stop after a first run; a hook whose ``should_stop``
    was set requests one in its after_run, and the session stops after that run. The other
    hook's after_run still runs and sees the request."""
    native_trace, bridged_trace = [], []

    def make(trace):
        return lambda: [StopFrom(2, "h0", trace), FakeHook("h1", trace)]

    native = monitored(make(native_trace), steps=10)
    hooks, model = bridged(make(bridged_trace), steps=10)
    names = ["h0", "h1"]
    expected = opening(names) + runs(names, 2, stop_at=2) + closing(names, 2)
    assert bridged_trace == native_trace == expected
    assert iterations(model) == 2
    assert [h.call_counter["after_run"] for h in (*native, *hooks)] == [2, 2, 2, 2]


def test_fetches_hook_requests():
    """HookedSessionTest.testFetchesHookRequests: two hooks fetching ``[another_tensor]`` and
    ``[third_tensor]`` (constants [5] and [10], made with the hooks) get each its own list."""

    def make():
        another = tf.constant([5], name="another_tensor")
        third = tf.constant([10], name="third_tensor")
        hooks = [FakeHook("h0"), FakeHook("h1")]
        hooks[0].request = SessionRunArgs([another])
        hooks[1].request = SessionRunArgs([third])
        return hooks

    def described(hooks):
        return [
            (type(r).__name__, [(type(a).__name__, a.dtype, a.tolist()) for a in r])
            for r in (h.last_run_values.results for h in hooks)
        ]

    got = [described(monitored(make, steps=2)), described(bridged(make, steps=2)[0])]
    assert got[1] == got[0] == [
        ("list", [("ndarray", np.int32, [5])]),
        ("list", [("ndarray", np.int32, [10])]),
    ]


def feeding_hooks(a_value, b_key="b"):
    """TF's feed tests: ``a_tensor`` and ``b_tensor`` (constants [0]) fed by two hooks, and a
    third hook fetching ``a_tensor + b_tensor`` (TF's caller fetch; here the train op is)."""

    def make():
        a = tf.constant([0], name="a_tensor")
        b = tf.constant([0], name="b_tensor")
        hooks = [FakeHook("h0"), FakeHook("h1"), FakeHook("h2")]
        hooks[0].request = SessionRunArgs(None, feed_dict={a: [5]})
        hooks[1].request = SessionRunArgs(None, feed_dict={a if b_key == "a" else b: a_value})
        hooks[2].request = SessionRunArgs(a + b)
        return hooks

    return make


def test_only_hooks_have_feeds():
    """HookedSessionTest.testOnlyHooksHaveFeeds: one hook feeds ``a_tensor`` [5], another
    ``b_tensor`` [10]: the sum fetched in the same run is [15], at every step."""
    sums = []
    for hooks in (monitored(feeding_hooks([10]), 3), bridged(feeding_hooks([10]), 3)[0]):
        sums.append([r.tolist() for r in hooks[2].results])
    assert sums[1] == sums[0] == [[15]] * 3


def test_hooks_feed_conflicts():
    """HookedSessionTest.testHooksFeedConflicts: two hooks feeding ``a_tensor`` raise TF's
    ``RuntimeError('Same tensor is fed by two hooks. Conflict(s): [...]')`` from the second
    hook's before_run: the third hook's before_run is not called, the train op (the Keras step)
    never runs, and no hook's end() is called."""
    made = {"native": [], "bridged": []}

    def make(world):
        return lambda: made[world].extend(feeding_hooks([10], b_key="a")()) or made[world]

    with pytest.raises(RuntimeError) as native_error:
        monitored(make("native"), steps=2)
    callback = hookbridge.HookCallback(make("bridged"))
    model = make_model(reuse=True)
    with pytest.raises(RuntimeError) as bridged_error:
        fit(callback, steps=2, model=model)
    message = str(native_error.value)
    assert str(bridged_error.value) == message
    assert message == (
        "Same tensor is fed by two hooks. Conflict(s): "
        "[<tf.Tensor 'a_tensor:0' shape=(1,) dtype=int32>]"
    )
    assert iterations(model) == 0 and callback.session is None
    opened = {"begin": 1, "after_create_session": 1}
    for world in ("native", "bridged"):
        assert [dict(h.call_counter) for h in made[world]] == [
            {**opened, "before_run": 1},
            {**opened, "before_run": 1},
            opened,
        ], world


# -- MonitoredSessionTest: stopping at a step ----------------------------------------------------
def resumed_runs(tmp_path, first, second, max_steps=10):
    """TF's test_last_step / test_num_steps: ``first`` hooks until they stop, the graph saved;
    then ``second`` hooks in a session restoring it (``Scaffold(init_fn=load_ckpt)``). Bridged,
    the second ``fit`` continues the same Keras model. Returns both worlds' traces and steps."""
    path = str(tmp_path / "step-3")

    scaffold = train.Scaffold()  # finalized by the first native session: its saver saves

    def save(sess):
        scaffold.saver.save(sess._coordinated_creator.tf_sess, path)

    def load_ckpt(scaffold, sess):
        scaffold.saver.restore(sess, path)

    worlds = {}
    for world in ("native", "bridged"):
        trace = []
        make = [lambda hook=hook, trace=trace: [hook(), FakeHook("h", trace)] for hook in (first, second)]
        if world == "native":
            creator = train.ChiefSessionCreator(scaffold)
            monitored(make[0], max_steps, before_close=save, session_creator=creator)
            creator = train.ChiefSessionCreator(train.Scaffold(init_fn=load_ckpt))
            monitored(make[1], max_steps, session_creator=creator)
            worlds[world] = trace
        else:
            _, model = bridged(make[0], max_steps)
            _, model = bridged(make[1], max_steps, model=model)
            worlds[world] = trace
            worlds["iterations"] = iterations(model)
    return worlds


def test_last_step(tmp_path):
    """MonitoredSessionTest.test_last_step: ``StopAtStepHook(last_step=3)`` stops after the run
    reaching step 3 (1, 2, 3: stop); resumed from step 3, ``last_step=5`` after step 5."""
    got = resumed_runs(
        tmp_path,
        lambda: train.StopAtStepHook(last_step=3),
        lambda: train.StopAtStepHook(last_step=5),
    )
    h = ["h"]
    expected = (
        opening(h) + runs(h, 3, stop_at=3) + closing(h, 3)
        + opening(h, 3) + runs(h, 2, first=4, stop_at=5) + closing(h, 5)
    )
    assert got["bridged"] == got["native"] == expected
    assert got["iterations"] == 5


def test_num_steps(tmp_path):
    """MonitoredSessionTest.test_num_steps: ``StopAtStepHook(num_steps=3)`` stops after 3 runs;
    resumed from step 3, ``num_steps=4`` counts from there: the first run gives 4, stop at 7."""
    got = resumed_runs(
        tmp_path,
        lambda: train.StopAtStepHook(num_steps=3),
        lambda: train.StopAtStepHook(num_steps=4),
    )
    h = ["h"]
    expected = (
        opening(h) + runs(h, 3, stop_at=3) + closing(h, 3)
        + opening(h, 3) + runs(h, 4, first=4, stop_at=7) + closing(h, 7)
    )
    assert got["bridged"] == got["native"] == expected
    assert got["iterations"] == 7


# -- MonitoredSessionTest: errors from hooks -----------------------------------------------------
@pytest.mark.parametrize(
    "error",
    [
        tf.errors.AbortedError(None, None, "Abort"),
        # deep only: the bridge recovers both errors through one tuple, and
        # tests/test_hook_callback_session.py retries after an UnavailableError in CI
        pytest.param(tf.errors.UnavailableError(None, None, "x"), marks=pytest.mark.deep),
    ],
    ids=["aborted", "unavailable"],
)
def test_retry_on_aborted_error(error):
    """MonitoredSessionTest.test_retry_on_aborted_error / test_retry_on_unavailable_error:
    ``RaiseOnceAtCountN(4, error)`` and no checkpoint. The session is re-created (every
    after_create_session again, begin not) and the 4th run retried. TF's first run is a
    ``run(gstep)``; here the 4th run is the 4th train step. Natively the new session re-initializes
    the global step (the retried run gives 1, TF's assertion); under the bridge the Keras model
    is the state that survives, so the step goes on from 3 (docs/limits.md, "Session recovery
    after the Keras step", last paragraph)."""
    traces = {"native": [], "bridged": []}
    raisers = {}

    def make(world):
        def hooks():
            raisers[world] = RaiseOnceAtCountN(4, error)
            return [raisers[world], FakeHook("h", traces[world])]

        return hooks

    monitored(make("native"), steps=5)
    _, model = bridged(make("bridged"), steps=5)
    h = ["h"]
    retried = [("h", "after_create_session", 0), *runs(h, 2)]
    assert traces["native"] == opening(h) + runs(h, 3) + retried + closing(h, 2)
    retried = [("h", "after_create_session", 3), *runs(h, 2, first=4)]
    assert traces["bridged"] == opening(h) + runs(h, 3) + retried + closing(h, 5)
    assert raisers["native"].raised and raisers["bridged"].raised
    assert iterations(model) == 5


def test_retry_initialization_on_aborted_error():
    """MonitoredSessionTest.test_retry_initialization_on_aborted_error: a Scaffold ``init_fn``
    raising ``AbortedError`` once; the session's creation is retried silently, the hooks'
    after_create_session is called once (after the successful creation), at step 0."""
    traces = {"native": [], "bridged": []}
    calls = {"native": [], "bridged": []}

    def scaffold(world):
        def init_fn(scaffold, session):
            calls[world].append(type(session).__name__)
            if len(calls[world]) == 1:
                raise tf.errors.AbortedError(None, None, "Abort")

        return train.Scaffold(init_fn=init_fn)

    with tf.Graph().as_default():
        _, train_op = native_graph()
        hooks = [FakeHook("h", traces["native"])]
        creator = train.ChiefSessionCreator(scaffold=scaffold("native"))
        with train.MonitoredSession(session_creator=creator, hooks=hooks) as sess:
            assert not sess.should_stop()
            sess.run(train_op)
    callback = hookbridge.HookCallback(
        lambda: [FakeHook("h", traces["bridged"])], scaffold=lambda: scaffold("bridged")
    )
    model = fit(callback, steps=1)
    expected = opening(["h"]) + runs(["h"], 1) + closing(["h"], 1)
    assert traces["bridged"] == traces["native"] == expected
    assert len(calls["native"]) == len(calls["bridged"]) == 2
    assert iterations(model) == 1


@pytest.mark.parametrize("error", [tf.errors.OutOfRangeError(None, None, "EOI"), StopIteration])
def test_exit_cleanly_on_end_of_input(error):
    """MonitoredSessionTest.test_exit_cleanly_on_out_of_range_exception / ..._stop_iteration_
    exception: ``RaiseOnceAtCountN(2, error)`` in before_run of the 2nd run: no after_run for
    that run, every hook's end() (at step 1), the error swallowed, the session stopped. TF's first
    run is a ``run(gstep)``; here the 2nd run is the 2nd train step. The train op of the run whose
    before_run raised never runs natively; the Keras step about to run still runs, after every
    end() (docs/limits.md, "A hook ending the input in `before_run`"), with a warning."""
    traces = {"native": [], "bridged": []}

    def make(world):
        return lambda: [RaiseOnceAtCountN(2, error), FakeHook("h", traces[world])]

    monitored(make("native"), steps=5)
    with pytest.warns(UserWarning, match="batch 1 .*cannot cancel a step"):
        hooks, model = bridged(make("bridged"), steps=5)
    h = ["h"]
    assert traces["bridged"] == traces["native"] == opening(h) + runs(h, 1) + closing(h, 1)
    assert hooks[0].raised
    assert iterations(model) == 2


def regular_raisers(where, error):
    raiser = RaiseOnceAtCountN if where == "before_run" else RaiseOnceInAfterRun
    return lambda trace: [FakeHook("h0", trace), raiser(4, error), FakeHook("h1", trace)]


@pytest.mark.parametrize("where", ["before_run", "after_run"])
def test_regular_exception_pass_through_run(where):
    """MonitoredSessionTest.test_regular_exception_pass_through_run: ``RaiseOnceAtCountN(4,
    RuntimeError('regular exception'))``: the very exception object reaches the caller, and no
    hook's end() is called. Raised in before_run (TF's test), the later hooks' before_run and the
    4th train op (Keras step) do not run: step 3. Also raised in after_run (not in TF's test):
    the step has run (4) and the hooks before the raising one got their after_run."""
    traces = {}
    model = make_model(reuse=True)
    for world in ("native", "bridged"):
        traces[world] = trace = []
        error = RuntimeError("regular exception")
        make = regular_raisers(where, error)
        with pytest.raises(RuntimeError) as got:
            if world == "native":
                monitored(lambda make=make, trace=trace: make(trace), steps=10)
            else:
                fit(hookbridge.HookCallback(lambda make=make, trace=trace: make(trace)), 10, model)
        assert got.value is error
    names = ["h0", "h1"]
    expected = opening(names) + runs(names, 3) + [("h0", "before_run")]
    if where == "after_run":
        expected += [("h1", "before_run"), ("h0", "after_run", 4, False)]
    assert traces["bridged"] == traces["native"] == expected
    assert iterations(model) == (3 if where == "before_run" else 4)


# -- MonitoredSessionTest: the with statement, step_fn, run options ------------------------------
def test_stop_cleanly_when_no_exception_in_with_body():
    """MonitoredSessionTest.test_stop_cleanly_when_no_exception_in_with_body: two runs give 1
    and 2, no stop requested, then the session closes cleanly: every end() at step 2, the
    session closed (natively ``should_stop()`` and ``_is_closed()``; bridged, no session)."""
    traces = {"native": [], "bridged": []}
    with tf.Graph().as_default():
        _, train_op = native_graph()
        session = train.MonitoredSession(hooks=[FakeHook("h", traces["native"])])
        with session:
            session.run(train_op)
            session.run(train_op)
            assert not session.should_stop()
        assert session.should_stop() and session._is_closed()
    callback = hookbridge.HookCallback(lambda: [FakeHook("h", traces["bridged"])])
    model = fit(callback, steps=2)
    assert callback.session is None
    h = ["h"]
    assert traces["bridged"] == traces["native"] == opening(h) + runs(h, 2) + closing(h, 2)
    assert iterations(model) == 2


def test_step_fn_with_hooks():
    """MonitoredSessionTest.test_step_fn_with_hooks: a hook fetches ``stage_1_0`` (add 0.7 to a
    resource variable) in the step's run; its after_run reads the variable (``0.3 + 0.7``) and
    runs ``stage_2`` (+1.1). TF's ``step_fn`` runs ``stage_0`` (+0.3) through the raw session and
    then ``run_with_hooks(stage_1_1)``: there is no step_fn in ``fit``, so the hook runs
    ``stage_0`` through its own session in before_run, and the caller's run is the train step
    (TF's +0.5 of ``stage_1_1`` is left out). Three steps, each adding 2.1 in all."""

    class Hook(train.SessionRunHook):
        def begin(self):
            self.var = tf.compat.v1.get_variable("var", initializer=0.0, use_resource=True)
            self.stage_0 = self.var.assign_add(0.3)
            self.stage_1_0 = self.var.assign_add(0.7)
            self.stage_2 = self.var.assign_add(1.1)
            self.seen = []

        def before_run(self, run_context):
            self.seen.append(run_context.session.run(self.stage_0))
            return SessionRunArgs(fetches=self.stage_1_0)

        def after_run(self, run_context, run_values):
            self.seen.append(run_values.results)
            self.seen.append(run_context.session.run(self.var))
            self.seen.append(run_context.session.run(self.stage_2))

    native = monitored(lambda: [Hook()], steps=3)[0].seen
    bridged_seen = bridged(lambda: [Hook()], steps=3)[0][0].seen
    expected = [v + 2.1 * k for k in range(3) for v in (0.3, 1.0, 1.0, 2.1)]
    np.testing.assert_allclose(native, expected, rtol=1e-6)
    np.testing.assert_allclose(bridged_seen, native, rtol=1e-6)


class RunOptionsMetadataHook(train.SessionRunHook):
    """TF's ``RunOptionsMetadataHook``: requests RunOptions, keeps the options and metadata."""

    def __init__(self, trace_level, timeout_in_ms, output_partition_graphs, watch, report):
        self.options = RunOptions(
            trace_level=trace_level,
            timeout_in_ms=timeout_in_ms,
            output_partition_graphs=output_partition_graphs,
            report_tensor_allocations_upon_oom=report,
        )
        self.options.debug_options.debug_tensor_watch_opts.extend([watch])
        self.run_options_list, self.run_metadata_list = [], []

    def before_run(self, run_context):
        return SessionRunArgs(None, None, options=self.options)

    def after_run(self, run_context, run_values):
        self.run_options_list.append(run_values.options)
        self.run_metadata_list.append(run_values.run_metadata)


def watch(node):
    return DebugTensorWatch(node_name=node, output_slot=0, debug_ops=["DebugIdentity"])


def options_hooks():
    tf.constant(42, name="my_const")
    tf.constant(24, name="my_const_2")
    return [
        RunOptionsMetadataHook(2, 30000, False, watch("my_const"), False),
        RunOptionsMetadataHook(3, 60000, True, watch("my_const_2"), True),
    ]


def test_merge_run_options_from_hooks():
    """MonitoredSessionTest.test_merge_run_options_from_hooks: two hooks' RunOptions merged
    (the larger trace level and timeout, ``output_partition_graphs`` and the OOM report or-ed,
    the debug watches concatenated in hook order) and given to both hooks' after_run, with a
    RunMetadata. One run, as TF's."""
    native = monitored(options_hooks, steps=1)
    hooks, _ = bridged(options_hooks, steps=1)
    merged = RunOptions(
        trace_level=3,
        timeout_in_ms=60000,
        output_partition_graphs=True,
        debug_options=debug_pb2.DebugOptions(
            debug_tensor_watch_opts=[watch("my_const"), watch("my_const_2")]
        ),
        report_tensor_allocations_upon_oom=True,
    )
    for world in (native, hooks):
        assert world[1].run_options_list == [merged]
        assert [type(m) for m in world[1].run_metadata_list] == [RunMetadata]


def test_merge_run_options_partition_graphs():
    """MonitoredSessionTest.test_merge_run_options_from_hooks, its last assertion: the run's
    RunMetadata holds the partition graphs ``output_partition_graphs=True`` asked for."""
    native = monitored(options_hooks, steps=1)
    hooks, _ = bridged(options_hooks, steps=1)
    counts = [len(w[1].run_metadata_list[0].partition_graphs) for w in (native, hooks)]
    assert counts[0] > 0 and counts[1] > 0


# -- MonitoredTrainingSessionTest ----------------------------------------------------------------
def test_custom_saving(tmp_path):
    """MonitoredTrainingSessionTest.test_custom_saving: a FakeHook in ``chief_only_hooks`` (with
    ``save_checkpoint_secs=0``: no checkpoint) is run on the chief: begin once, and its calls come
    before those of the other hooks, as ``MonitoredTrainingSession`` orders them. HookCallback
    without a multi-worker strategy is the chief; it saves no checkpoint of its own."""
    traces = {"native": [], "bridged": []}
    with tf.Graph().as_default():
        _, train_op = native_graph()
        chief, other = FakeHook("chief", traces["native"]), FakeHook("h", traces["native"])
        with train.MonitoredTrainingSession(
            is_chief=True,
            checkpoint_dir=str(tmp_path / "n"),
            chief_only_hooks=[chief],
            hooks=[other],
            save_checkpoint_secs=0,
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=None,
        ) as sess:
            sess.run(train_op)
            sess.run(train_op)
    callback = hookbridge.HookCallback(
        lambda: [FakeHook("h", traces["bridged"])],
        chief_only_hooks=lambda: [FakeHook("chief", traces["bridged"])],
    )
    fit(callback, steps=2)
    names = ["chief", "h"]
    expected = opening(names) + runs(names, 2) + closing(names, 2)
    assert traces["bridged"] == traces["native"] == expected
    assert chief.call_counter["begin"] == 1
    assert tf.train.latest_checkpoint(str(tmp_path / "n")) is None


def summary_events(logdir):
    """``(tag, step, value)`` of the event files in ``logdir`` (``global_step/sec`` values are
    rates in time, so only their steps are kept)."""
    events = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                rate = value.tag == "global_step/sec"
                events.append((value.tag, event.step, None if rate else value.simple_value))
    return sorted(events, key=lambda e: (e[0], e[1]))


def summary_hooks(logdir, scaffold):
    """What ``MonitoredTrainingSession(checkpoint_dir=logdir, save_summaries_steps=100,
    log_step_count_steps=10)`` adds: StepCounterHook, then SummarySaverHook on the Scaffold's
    ``summary_op`` (every summary of the graph: TF's ``my_summary_tag``)."""
    step = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())
    tf.compat.v1.summary.scalar("my_summary_tag", tf.cast(step, tf.float32) * 2)
    return [
        train.StepCounterHook(output_dir=logdir, every_n_steps=10),
        train.SummarySaverHook(scaffold=scaffold, save_steps=100, output_dir=logdir),
    ]


def test_summaries_steps(tmp_path):
    """MonitoredTrainingSessionTest.test_summaries_steps: 101 runs with summaries every 100 steps
    and the step rate every 10: ``my_summary_tag`` and ``global_step/sec`` are written. TF's
    summary is ``new_gstep * 2`` (the train op's value); there is no train op under the bridge,
    so here it is twice the global step read in the run (the stale step), in both worlds. The
    native side is a ``MonitoredTrainingSession`` with checkpoints off; the bridged one gets the
    two hooks it builds."""
    native_dir, bridged_dir = str(tmp_path / "n"), str(tmp_path / "b")
    with tf.Graph().as_default():
        _, train_op = native_graph()
        step = _tfcompat.global_step_read_tensor(tf.compat.v1.get_default_graph())
        tf.compat.v1.summary.scalar("my_summary_tag", tf.cast(step, tf.float32) * 2)
        with train.MonitoredTrainingSession(
            is_chief=True,
            checkpoint_dir=native_dir,
            save_summaries_steps=100,
            log_step_count_steps=10,
            save_checkpoint_secs=None,
        ) as sess:
            for _ in range(101):
                sess.run(train_op)
    scaffold = train.Scaffold()
    callback = hookbridge.HookCallback(
        lambda: summary_hooks(bridged_dir, scaffold), scaffold=scaffold
    )
    model = fit(callback, steps=101)
    native = summary_events(native_dir)
    assert {tag for tag, _, _ in native} == {"my_summary_tag", "global_step/sec"}
    assert [e for e in native if e[0] == "my_summary_tag"] == [
        ("my_summary_tag", 1, 0.0),
        ("my_summary_tag", 101, 200.0),
    ]
    assert [step for tag, step, _ in native if tag == "global_step/sec"] == list(range(11, 102, 10))
    assert iterations(model) == 101
    assert summary_events(bridged_dir) == native
