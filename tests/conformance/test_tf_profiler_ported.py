"""TensorFlow's ``ProfilerHookTest``, each scenario run natively and bridged.

Ports ``ProfilerHookTest`` of ``tensorflow/python/training/basic_session_run_hooks_test.py``:
every scenario runs in a real ``SingularMonitoredSession`` on TF's graph (a global step and a
train op adding 1 to it) beside ``model.fit`` of a small Keras model under
``HookCallback(lambda: [ProfilerHook(...)])`` (its constructor opens a ``FileWriter``, so it is
built in the hooks callable). The timeline files are counted before each run and after the
last, as TF's test counts them after each run, and their names compared. Where TF patches
``time.time`` with a mock, ``time.time`` is patched with a settable clock, set before each run
in both worlds.

A bridged timeline describes a real run of the bridge's graph, not the Keras step
(docs/limits.md, "ProfilerHook's scope"): the traced ops are compared accordingly. Last, a user
hook's ``RunOptions`` (``trace_level``, ``output_partition_graphs``) and the ``RunMetadata`` it
gets back, with and without options.
"""

from __future__ import annotations

import glob
import json
import os

import pytest
import tensorflow as tf
from conftest import make_model

import hookbridge

from .test_tf_basic_hooks_ported import (  # noqa: F401 (clock: a fixture)
    MOCK_START_TIME,
    EachRun,
    _nothing,
    clock,
)
from .test_tf_hooks_ported import fit, iterations, native_graph

train = tf.compat.v1.train
keras = tf.keras


# -- the two worlds -----------------------------------------------------------------------------
def bridged(make_hooks, runs, before=_nothing, **kwargs):
    """``fit`` of ``runs`` Keras steps under ``HookCallback(make_hooks)``: the steps run."""
    model = fit(
        hookbridge.HookCallback(make_hooks, **kwargs),
        steps=runs,
        model=make_model(reuse=True),
        extra=[EachRun(before)],
    )
    return iterations(model)


def native(make_hooks, runs, before=_nothing):
    """TF's setUp graph, ``make_hooks()`` called in it, ``runs`` runs of the train op in a
    ``SingularMonitoredSession``, ``before(i)`` before run i and ``before("end")`` after the
    last: the final global step."""
    with tf.Graph().as_default():
        global_step, train_op = native_graph()
        tf.identity(tf.constant(0.5), name="loss")  # "loss:0", as in the bridge's graph
        with train.SingularMonitoredSession(hooks=make_hooks()) as sess:
            for run in range(1, runs + 1):
                before(run)
                sess.run(train_op)
            before("end")
            return int(sess.raw_session().run(global_step))


# -- timelines ----------------------------------------------------------------------------------
def timelines(output_dir):
    """TF's ``_count_timeline_files`` pattern: the timeline files' names, sorted."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(output_dir, "timeline-*")))


def counting(output_dir, counts, clock=None, offsets=None):
    """A ``before`` recording the timeline count before each run and at the end (so after each
    run), setting ``clock`` to ``MOCK_START_TIME + offsets[run]`` first."""

    def before(run):
        counts.append(len(timelines(output_dir)))
        if clock is not None and run in offsets:
            clock.now = MOCK_START_TIME + offsets[run]

    return before


def profiler(output_dir, **kwargs):
    return lambda: [train.ProfilerHook(output_dir=str(output_dir), **kwargs)]


def traced_ops(path):
    """The ops of a timeline, parsed as a Chrome trace: the names of its complete ("X") events."""
    with open(path) as f:
        trace = json.load(f)
    assert isinstance(trace["traceEvents"], list), path
    return {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}


def assert_real_runs(native_dir, bridged_dir):
    """Every timeline is a Chrome trace of a real run: natively of the train op (the global
    step's read and increment); bridged of the bridge's graph, whose run reads the global step
    but does not train (docs/limits.md, "ProfilerHook's scope")."""
    for name in timelines(native_dir):
        ops = traced_ops(os.path.join(native_dir, name))
        assert {"ReadVariableOp", "AssignAddVariableOp"} <= ops, (name, ops)
    for name in timelines(bridged_dir):
        ops = traced_ops(os.path.join(bridged_dir, name))
        assert "ReadVariableOp" in ops and "AssignAddVariableOp" not in ops, (name, ops)


def keras_profiles(output_dir):
    """The TensorFlow Profiler traces of the Keras step the bridge writes on traced steps."""
    return glob.glob(os.path.join(output_dir, "plugins", "profile", "*", "*.xplane.pb"))


# -- ProfilerHookTest ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"save_secs": 10, "save_steps": 20}, "Can not provide both every_secs and every_steps"),
        ({"save_secs": None, "save_steps": None}, "Either every_secs or every_steps should be"),
    ],
    ids=["both", "none"],
)
def test_raise_in_secs_and_steps(tmp_path, kwargs, message):
    """ProfilerHookTest.test_raise_in_both_secs_and_steps and test_raise_in_none_secs_and_steps:
    the constructor's ValueError, natively and from ``fit`` (whose hooks callable builds it)."""
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        train.ProfilerHook(output_dir=str(tmp_path / "n"), **kwargs)
    with pytest.raises(ValueError, match=message):
        bridged(profiler(tmp_path / "b", **kwargs), 1)


@pytest.mark.deep  # CI: test_save_secs_saves_periodically (nothing saved at run 1), and
# test_save_steps_does_not_save_in_first_step (no profile of the Keras step without a trace)
def test_save_secs_does_not_save_in_first_step(tmp_path):
    """ProfilerHookTest.test_save_secs_does_not_save_in_first_step: ``save_secs=2``, one run:
    no timeline (and, bridged, no profile of the Keras step: nothing asked for a trace)."""
    assert native(profiler(tmp_path / "n", save_secs=2), 1) == 1
    assert bridged(profiler(tmp_path / "b", save_secs=2), 1) == 1
    assert timelines(tmp_path / "n") == timelines(tmp_path / "b") == []
    assert not os.path.exists(tmp_path / "b" / "plugins")


def test_save_secs_saves_periodically(tmp_path, clock):
    """ProfilerHookTest.test_save_secs_saves_periodically: ``save_secs=2``, runs at +0, +2.5
    (saved), +2.6, +4.4 (not saved), +4.5 (saved): timelines of steps 2 and 5."""
    offsets = {1: 0.0, 2: 2.5, 3: 2.6, 4: 4.4, 5: 4.5}
    native_counts, bridged_counts = [], []
    clock.now = MOCK_START_TIME
    before = counting(tmp_path / "n", native_counts, clock, offsets)
    native(profiler(tmp_path / "n", save_secs=2), 5, before)
    clock.now = MOCK_START_TIME
    before = counting(tmp_path / "b", bridged_counts, clock, offsets)
    bridged(profiler(tmp_path / "b", save_secs=2), 5, before)
    assert native_counts == bridged_counts == [0, 0, 1, 1, 1, 2]
    names = ["timeline-2.json", "timeline-5.json"]
    assert timelines(tmp_path / "n") == timelines(tmp_path / "b") == names
    assert_real_runs(str(tmp_path / "n"), str(tmp_path / "b"))
    assert keras_profiles(str(tmp_path / "b")), "the traced Keras steps were not profiled"


def test_save_steps_does_not_save_in_first_step(tmp_path):
    """ProfilerHookTest.test_save_steps_does_not_save_in_first_step: ``save_steps=1``, one run:
    no timeline (and, bridged, no profile of the Keras step)."""
    assert native(profiler(tmp_path / "n", save_steps=1), 1) == 1
    assert bridged(profiler(tmp_path / "b", save_steps=1), 1) == 1
    assert timelines(tmp_path / "n") == timelines(tmp_path / "b") == []
    assert not os.path.exists(tmp_path / "b" / "plugins")


def test_save_steps_saves_periodically(tmp_path):
    """ProfilerHookTest.test_save_steps_saves_periodically: ``save_steps=2``, five runs: none
    before the first run, then 0, 1, 1, 2, 2 timelines (steps 2 and 4)."""
    native_counts, bridged_counts = [], []
    native(profiler(tmp_path / "n", save_steps=2), 5, counting(tmp_path / "n", native_counts))
    bridged(profiler(tmp_path / "b", save_steps=2), 5, counting(tmp_path / "b", bridged_counts))
    assert native_counts == bridged_counts == [0, 0, 1, 1, 2, 2]
    names = ["timeline-2.json", "timeline-4.json"]
    assert timelines(tmp_path / "n") == timelines(tmp_path / "b") == names
    assert_real_runs(str(tmp_path / "n"), str(tmp_path / "b"))
    assert keras_profiles(str(tmp_path / "b")), "the traced Keras steps were not profiled"


def run_metadata_events(output_dir):
    """The ``tagged_run_metadata`` events the hook's (cached) FileWriter wrote: {tag: metadata}.
    TF's test reads them from a fake writer; here the real one is flushed and its file read."""
    tf.compat.v1.summary.FileWriterCache.get(str(output_dir)).flush()
    found = {}
    for path in glob.glob(os.path.join(output_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.HasField("tagged_run_metadata"):
                metadata = tf.compat.v1.RunMetadata.FromString(
                    event.tagged_run_metadata.run_metadata
                )
                found[event.tagged_run_metadata.tag] = metadata
    return found


def test_run_metadata_saves(tmp_path):
    """ProfilerHookTest.test_run_metadata_saves: ``save_steps=1``, two runs: the hook adds the
    run metadata of step 2 only (tag ``step_2``), with the step stats of a real run."""
    assert native(profiler(tmp_path / "n", save_steps=1), 2) == 2
    assert bridged(profiler(tmp_path / "b", save_steps=1), 2) == 2
    native_md, bridged_md = run_metadata_events(tmp_path / "n"), run_metadata_events(tmp_path / "b")
    assert list(native_md) == list(bridged_md) == ["step_2"]
    for metadata in (native_md["step_2"], bridged_md["step_2"]):
        assert any(dev.node_stats for dev in metadata.step_stats.dev_stats), metadata
    assert timelines(tmp_path / "n") == timelines(tmp_path / "b") == ["timeline-2.json"]


# -- a user hook's RunOptions -------------------------------------------------------------------
class Describe(train.SessionRunHook):
    """Asks ``options`` (or none) in every ``before_run`` while fetching ``fetches``; keeps a copy
    of each run's ``run_values.run_metadata``."""

    def __init__(self, fetches, options):
        self.fetches, self.options, self.metadata = fetches, options, []

    def before_run(self, run_context):
        return train.SessionRunArgs(self.fetches, options=self.options)

    def after_run(self, run_context, run_values):
        metadata = tf.compat.v1.RunMetadata()
        metadata.CopyFrom(run_values.run_metadata)
        self.metadata.append(metadata)


def described(fetches, options, runs=2):
    """The RunMetadata a ``Describe`` hook got over ``runs`` runs: (native, bridged)."""
    hooks = {}
    native(lambda: [hooks.setdefault("n", Describe(fetches, options))], runs)
    bridged(lambda: [hooks.setdefault("b", Describe(fetches, options))], runs)
    assert len(hooks["n"].metadata) == len(hooks["b"].metadata) == runs
    return hooks["n"].metadata, hooks["b"].metadata


def describes(metadata):
    """Whether ``metadata`` has (a partition graph, step stats of executed nodes)."""
    return (
        len(metadata.partition_graphs) >= 1,
        any(dev.node_stats for dev in metadata.step_stats.dev_stats),
    )


def full_trace():
    return tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE, output_partition_graphs=True
    )


@pytest.mark.parametrize("fetches", ["loss:0", None], ids=["loss", "nothing"])
def test_user_hook_run_options_describe_a_real_run(fetches):
    """A hook asking ``RunOptions(trace_level=FULL_TRACE, output_partition_graphs=True)`` (as
    ProfilerHook asks a trace): every run's ``run_values.run_metadata`` has a partition graph and
    step stats, natively (the train op's run) and bridged (a real run of the bridge's graph:
    the fetches and the global step's read; ``loss:0`` alone is fed, so it would execute
    nothing)."""
    native_md, bridged_md = described(fetches, full_trace())
    assert [describes(m) for m in native_md] == [describes(m) for m in bridged_md]
    assert [describes(m) for m in bridged_md] == [(True, True)] * 2


@pytest.mark.parametrize(
    "fetches",
    # a fetch in deep only: without RunOptions nothing is traced, whatever the hook fetches
    [pytest.param("loss:0", marks=pytest.mark.deep), None],
    ids=["loss", "nothing"],
)
def test_user_hook_without_run_options_gets_empty_run_metadata(fetches):
    """A hook passing no ``RunOptions``: every ``run_values.run_metadata`` is empty (ByteSize 0),
    natively and bridged."""
    native_md, bridged_md = described(fetches, None)
    assert [m.ByteSize() for m in native_md] == [m.ByteSize() for m in bridged_md] == [0, 0]
