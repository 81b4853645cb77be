"""Hypothesis strategies for scenarios both worlds can express (needs ``hypothesis``).

Example:
    >>> from hypothesis import given
    >>> from hookbridge.testing import strategies, run_session, run_hook_callback
    >>> @given(strategies.hook_scenarios())
    ... def test_bridge(scenario):
    ...     assert run_hook_callback(scenario) == run_session(scenario)
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hookbridge._conform.scenarios import (
    EXACT_LOSSES,
    FETCH_KINDS,
    CallbackScenario,
    CallbackSpec,
    HookScenario,
    HookSpec,
)

HOOK_METHODS = ("begin", "after_create_session", "before_run", "after_run", "end")
CALLBACK_METHODS = (
    "train_begin",
    "epoch_begin",
    "batch_begin",
    "batch_end",
    "epoch_end",
    "train_end",
)
ERRORS = ("error", "out_of_range", "stop_iteration")


def _maybe(strategy: Any) -> Any:
    return st.one_of(st.none(), strategy)


def hook_specs(max_step: int = 6) -> Any:
    """A :class:`HookSpec`: any fetch structure, maybe a feed, a stop and an error."""
    return st.builds(
        HookSpec,
        fetch=st.sampled_from(FETCH_KINDS),
        feed=_maybe(st.sampled_from((0.5, 3.0))),
        stop_in=_maybe(st.sampled_from(("before_run", "after_run"))),
        stop_at=st.integers(0, max_step),
        raise_in=_maybe(st.sampled_from(HOOK_METHODS)),
        raise_at=st.integers(0, max_step),
        error=st.sampled_from(ERRORS),
    )


def callback_specs(max_step: int = 6) -> Any:
    """A :class:`CallbackSpec`: maybe a stop and an error, anywhere."""
    return st.builds(
        CallbackSpec,
        stop_in=_maybe(st.sampled_from(CALLBACK_METHODS)),
        stop_at=st.integers(0, max_step),
        raise_in=_maybe(st.sampled_from(CALLBACK_METHODS)),
        raise_at=st.integers(0, max_step),
        # Keras takes a callback's StopIteration / OutOfRangeError for the end of the data and
        # goes on with the next epoch: no TF1 run can express that, so callbacks raise errors.
        error=st.just("error"),
    )


@st.composite
def _run_shape(draw: Any, max_epochs: int, max_steps_per_epoch: int) -> dict:
    epochs = draw(st.integers(1, max_epochs))
    spe = draw(st.integers(1, max_steps_per_epoch))
    end_of_input = None
    if epochs == 1:
        # at least one batch: Keras refuses an empty generator (ValueError) before training
        end_of_input = draw(_maybe(st.integers(1, spe + 1)))
    losses = tuple(draw(st.lists(st.sampled_from(EXACT_LOSSES), min_size=spe, max_size=spe)))
    return {
        "epochs": epochs,
        "steps_per_epoch": spe,
        "end_of_input": end_of_input,
        "losses": losses,
    }


@st.composite
def hook_scenarios(
    draw: Any, max_epochs: int = 2, max_steps_per_epoch: int = 3, max_hooks: int = 3
) -> HookScenario:
    """A :class:`HookScenario` with 1..``max_hooks`` scripted recording hooks."""
    shape = draw(_run_shape(max_epochs, max_steps_per_epoch))
    steps = shape["epochs"] * shape["steps_per_epoch"]
    hooks = draw(st.lists(hook_specs(steps), min_size=1, max_size=max_hooks))
    return HookScenario(hooks=tuple(hooks), **shape)


@st.composite
def callback_scenarios(
    draw: Any, max_epochs: int = 2, max_steps_per_epoch: int = 3, max_callbacks: int = 3
) -> CallbackScenario:
    """A :class:`CallbackScenario` with 1..``max_callbacks`` scripted recording callbacks."""
    shape = draw(_run_shape(max_epochs, max_steps_per_epoch))
    steps = shape["epochs"] * shape["steps_per_epoch"]
    callbacks = draw(st.lists(callback_specs(steps), min_size=1, max_size=max_callbacks))
    return CallbackScenario(callbacks=tuple(callbacks), **shape)
