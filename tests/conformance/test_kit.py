"""The user-facing kit: fixtures from the pytest plugin, readable diffs, the table renderer."""

from __future__ import annotations

import json
import pathlib

import pytest
import tensorflow as tf

from hookbridge.testing import (
    assert_hook_conforms,
    compat_table,
    first_difference,
    format_diff,
    normalize,
)
from hookbridge.testing.scenarios import ScenarioError

T = tf.compat.v1.train


class EveryOther(T.SessionRunHook):
    def begin(self):
        self.gs = T.get_global_step()

    def before_run(self, run_context):
        return T.SessionRunArgs({"gs": self.gs, "loss": "loss:0"})

    def after_run(self, run_context, run_values):
        if run_values.results["gs"] >= 3:
            run_context.request_stop()


def test_plugin_is_registered(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("hookbridge")


def test_hook_fixture(hook_conforms):
    result = hook_conforms(EveryOther, steps=6, steps_per_epoch=3)
    assert result.native[-2][:3] == ("EveryOther[0]", "after_run", 3)


def test_callback_fixture(callback_conforms):
    result = callback_conforms(
        lambda: tf.keras.callbacks.EarlyStopping("loss", patience=0),
        steps=4,
        steps_per_epoch=1,
        losses=[1.0],
    )
    assert ("EarlyStopping[0]", "on_epoch_end") in [e[:2] for e in result.native]


class StopsWithoutTrainOp(T.SessionRunHook):
    """Differs by design: under HookCallback there is no caller fetch (no train op) to see."""

    def after_run(self, run_context, run_values):
        if run_context.original_args.fetches is None:
            run_context.request_stop()


def test_a_difference_is_reported_side_by_side():
    with pytest.raises(AssertionError) as info:
        assert_hook_conforms(StopsWithoutTrainOp, steps=4)
    text = str(info.value)
    assert "first difference at event" in text and "HookCallback" in text
    assert ">>" in text and "StopsWithoutTrainOp[0]" in text


def test_an_error_of_the_hook_is_part_of_the_trace():
    class Raises(T.SessionRunHook):
        def after_create_session(self, session, coord):
            raise ScenarioError("boom")

    result = assert_hook_conforms(Raises, steps=2)
    assert result.native == [
        ("Raises[0]", "after_create_session", "raised", "ScenarioError"),
        ("runner", "outcome", "ScenarioError"),
    ]


def test_steps_must_be_whole_epochs():
    with pytest.raises(ValueError, match="multiple of steps_per_epoch"):
        assert_hook_conforms(EveryOther, steps=5, steps_per_epoch=2)


def test_compat_table_renders_from_results(tmp_path):
    (tmp_path / "s.json").write_text(
        json.dumps(
            {
                "stack": "tfX-k",
                "tensorflow": "X",
                "keras": "k",
                "results": {
                    "hook:A": {"kind": "hook", "name": "A", "status": "passed", "note": ""},
                    "callback:B": {
                        "kind": "callback",
                        "name": "B",
                        "status": "xfail",
                        "note": "why",
                    },
                },
            }
        )
    )
    out = tmp_path / "c.md"
    assert compat_table.main([str(tmp_path), str(out)]) == 0
    text = out.read_text()
    assert "| `A` | ✅ conforms |" in text and "⚠️ known gap [1]" in text and "[1] why" in text


class LossSummary(T.SessionRunHook):
    """Fetches a scalar summary of ``loss:0`` every step (as SummarySaverHook does)."""

    def begin(self):
        loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
        self.op = tf.compat.v1.summary.scalar("loss_summary", loss)
        self.gs = T.get_global_step()

    def before_run(self, run_context):
        return T.SessionRunArgs({"summary": self.op, "step": self.gs})

    def after_run(self, run_context, run_values):
        pass


def test_a_trace_holds_what_summaries_contain():
    """Issue 13 item 9: a summary in a trace is its tags and values (and an event's step), so a
    bridge handing a hook another step's summary differs from native (as "<bytes>" did not)."""
    result = assert_hook_conforms(LossSummary, steps=3, losses=(0.25, 1.0, 2.25))
    runs = [e for e in result.native if e[1] == "after_run"]
    assert [e[3] for e in runs] == [
        {"step": i, "summary": ("Summary", (("loss_summary", loss),))}
        for i, loss in enumerate((0.25, 1.0, 2.25))
    ]
    assert result.bridged == result.native


def test_summaries_with_other_values_differ_in_a_trace():
    with tf.Graph().as_default():
        value = tf.compat.v1.placeholder(tf.float32, [])
        op = tf.compat.v1.summary.scalar("loss", value)
        with tf.compat.v1.Session() as sess:
            now, before = (sess.run(op, {value: v}) for v in (2.0, 1.0))
    event = tf.compat.v1.Event(step=3, summary=tf.compat.v1.Summary.FromString(now))
    assert normalize(now) == ("Summary", (("loss", 2.0),))
    assert normalize(event.SerializeToString()) == ("Event", 3, ("Summary", (("loss", 2.0),)))
    assert normalize(b"not a summary") == "<bytes>"
    native = [("h0", "after_run", 1, {"s": normalize(now)})]
    lagged = [("h0", "after_run", 1, {"s": normalize(before)})]
    assert first_difference(native, lagged) == 0
    assert "('loss', 2.0)" in format_diff(native, lagged)


def test_committed_results_are_compared_with_what_was_measured():
    """Issue 13 item 9: the suite fails when a stack's committed results are stale."""
    row = {"kind": "hook", "name": "A", "status": "passed", "note": ""}
    versions = {"tensorflow": "2.21.0", "keras": "3.15.1 (keras)"}
    committed = {**versions, "results": {"hook:A": row}}
    assert compat_table.differences(committed, {"hook:A": row}, versions) == []
    failed = {**row, "status": "failed"}
    assert compat_table.differences(committed, {"hook:A": failed}, versions) == [
        "hook:A: committed 'passed' (''), measured 'failed' ('')"
    ]
    new_row = {**row, "name": "B"}
    assert compat_table.differences(committed, {"hook:B": new_row}, versions) == [
        "hook:B: not in the committed results, measured 'passed'"
    ]
    other_tf = {**versions, "tensorflow": "2.22.0"}
    assert compat_table.differences(committed, {"hook:A": row}, other_tf) == [
        "tensorflow: committed '2.21.0', measured '2.22.0'"
    ]
    assert compat_table.differences({}, {"hook:A": row}, versions) == [
        "no committed results for this stack"
    ]
    meta = {"stack": "s", **versions, "hookbridge": "0.1.0", "measured": "2026-11-23"}
    data = compat_table.updated(committed, {"hook:B": new_row}, meta)
    assert (
        data["results"] == {"hook:A": row, "hook:B": new_row}
        and data["measured"] == meta["measured"]
    )
    assert compat_table.differences(data, {"hook:B": new_row}, versions) == []


def test_the_compatibility_page_is_rendered_from_the_committed_results():
    root = pathlib.Path(__file__).parents[2]
    files = sorted((root / "hookbridge" / "data" / "conformance").glob("*.json"))
    stacks = [json.loads(f.read_text()) for f in files]
    assert all(s.get("hookbridge") and s.get("measured") for s in stacks), (
        "a results file lacks the hookbridge version or date: regenerate it with "
        "HOOKBRIDGE_UPDATE_RESULTS=1 (docs/conformance.md)"
    )
    page = (root / "docs" / "compatibility.md").read_text()
    nightly = compat_table.load(root / "tests" / "conformance" / "nightly")
    assert page == compat_table.render(stacks, nightly), (
        "docs/compatibility.md is not what the committed results render: run "
        "python -m hookbridge.testing.compat_table"
    )
