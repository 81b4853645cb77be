"""One spec, four runners: generated scenarios, each bridge's trace == the native trace.

Scenarios that hit a known bridge bug are assumed away here (``known_*`` below) and pinned by a
strict xfail in test_semantics.py, so the property keeps covering everything else.
"""

from __future__ import annotations

from hypothesis import example, given, settings

from hookbridge.testing import (
    CallbackScenario,
    CallbackSpec,
    HookScenario,
    HookSpec,
    format_diff,
    run_callback_hook,
    run_fit,
    run_hook_callback,
    run_session,
    strategies,
)

from .conftest import examples


def assert_same(native, bridged, bridge):
    assert bridged == native, "\n" + format_diff(native, bridged, actual_name=bridge)


@settings(max_examples=examples())
@given(strategies.hook_scenarios())
# regression cases kept from shrinking: two feeds (a conflict),
# an error in end after a stop
@example(HookScenario(hooks=(HookSpec(feed=0.5), HookSpec(feed=3.0, fetch="loss"))))
@example(
    HookScenario(
        epochs=2,
        steps_per_epoch=2,
        losses=(1.0, 4.0),
        hooks=(HookSpec(stop_in="after_run", stop_at=1), HookSpec(raise_in="end")),
    )
)
# found by the deep profile: end of input from before_run, then an end() raising it again
@example(
    HookScenario(
        hooks=(
            HookSpec(raise_in="before_run", raise_at=0, error="out_of_range"),
            HookSpec(raise_in="end", error="out_of_range"),
        )
    )
)
def test_hook_callback_in_fit_equals_monitored_session(scenario):
    assert_same(run_session(scenario), run_hook_callback(scenario), "HookCallback")


@settings(max_examples=examples())
@given(strategies.callback_scenarios())
# regression cases: a generator that runs out mid-epoch; a stop and an error in one epoch end
@example(CallbackScenario(epochs=1, steps_per_epoch=2, losses=(1.0, 4.0), end_of_input=3))
@example(
    CallbackScenario(
        epochs=2,
        steps_per_epoch=2,
        losses=(1.0, 4.0),
        callbacks=(
            CallbackSpec(stop_in="epoch_end", stop_at=0),
            CallbackSpec(raise_in="epoch_end", raise_at=1),
        ),
    )
)
def test_callback_hook_in_monitored_session_equals_fit(scenario):
    assert_same(run_fit(scenario), run_callback_hook(scenario), "CallbackHook")


@settings(max_examples=max(examples() // 2, 10))
@given(strategies.callback_scenarios())
@example(CallbackScenario(epochs=1, steps_per_epoch=2, losses=(1.0, 4.0), end_of_input=3))
def test_callbacks_in_a_custom_loop_equal_fit(scenario):
    """The third runner: every callback scenario that runs in ``fit`` runs in ``CallbackLoop``."""
    from hookbridge._conform.runners import run_loop

    assert_same(run_fit(scenario), run_loop(scenario), "CallbackLoop")


@settings(max_examples=max(examples() // 2, 10))
@given(strategies.hook_scenarios())
def test_hook_callback_in_a_custom_loop_equals_monitored_session(scenario):
    """Every hook scenario: HookCallback in ``CallbackLoop`` traces as ``MonitoredSession``."""
    from hookbridge._conform.runners import run_hook_callback_in_loop

    assert_same(run_session(scenario), run_hook_callback_in_loop(scenario), "HookCallback in loop")
