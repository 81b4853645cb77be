"""hookbridge.testing: the conformance kit (a validator for hooks and callbacks).

One scenario, four runners: hooks natively in ``MonitoredSession`` (:func:`run_session`) and
under :class:`hookbridge.HookCallback` in Keras ``fit`` (:func:`run_hook_callback`); callbacks
natively in ``fit`` (:func:`run_fit`) and under :class:`hookbridge.CallbackHook` in a
``MonitoredSession`` (:func:`run_callback_hook`). Each returns a normalized trace (a list of event
tuples); a bridge conforms when its trace equals the native one, event by event.

For your own code: :func:`assert_hook_conforms` and :func:`assert_callback_conforms`, or the
pytest plugin's fixtures (``hook_conforms``, ``callback_conforms``). Hypothesis strategies live in
:mod:`hookbridge.testing.strategies` (imported on demand: it needs ``hypothesis``).

The names are imported on first use, so the pytest plugin (``hookbridge.testing.pytest_plugin``)
loads no TensorFlow when pytest starts.

Example:
    >>> from hookbridge.testing import assert_hook_conforms
    >>> assert_hook_conforms(lambda: MyHook(every_n_iter=2), steps=6, steps_per_epoch=3)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookbridge._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy table resolves to, for type checkers and IDEs
    from hookbridge._conform.conform import (
        Conformance,
        assert_callback_conforms,
        assert_hook_conforms,
    )
    from hookbridge._conform.recorders import RecordingCallback, RecordingHook
    from hookbridge._conform.runners import (
        SessionGraph,
        keras_model,
        run_callback_hook,
        run_fit,
        run_hook_callback,
        run_session,
    )
    from hookbridge._conform.scenarios import (
        EXACT_LOSSES,
        CallbackScenario,
        CallbackSpec,
        HookScenario,
        HookSpec,
        ScenarioError,
    )
    from hookbridge._conform.trace import (
        Event,
        Trace,
        first_difference,
        format_diff,
        normalize,
    )

_TRACE = "hookbridge._conform.trace"
_CONFORM = "hookbridge._conform.conform"
_RECORDERS = "hookbridge._conform.recorders"
_RUNNERS = "hookbridge._conform.runners"
_SCENARIOS = "hookbridge._conform.scenarios"
_EXPORTS = {
    "EXACT_LOSSES": _SCENARIOS,
    "CallbackScenario": _SCENARIOS,
    "CallbackSpec": _SCENARIOS,
    "Conformance": _CONFORM,
    "Event": _TRACE,
    "HookScenario": _SCENARIOS,
    "HookSpec": _SCENARIOS,
    "RecordingCallback": _RECORDERS,
    "RecordingHook": _RECORDERS,
    "ScenarioError": _SCENARIOS,
    "SessionGraph": _RUNNERS,
    "Trace": _TRACE,
    "assert_callback_conforms": _CONFORM,
    "assert_hook_conforms": _CONFORM,
    "first_difference": _TRACE,
    "format_diff": _TRACE,
    "keras_model": _RUNNERS,
    "normalize": _TRACE,
    "run_callback_hook": _RUNNERS,
    "run_fit": _RUNNERS,
    "run_hook_callback": _RUNNERS,
    "run_session": _RUNNERS,
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "EXACT_LOSSES",
    "CallbackScenario",
    "CallbackSpec",
    "Conformance",
    "Event",
    "HookScenario",
    "HookSpec",
    "RecordingCallback",
    "RecordingHook",
    "ScenarioError",
    "SessionGraph",
    "Trace",
    "assert_callback_conforms",
    "assert_hook_conforms",
    "first_difference",
    "format_diff",
    "keras_model",
    "normalize",
    "run_callback_hook",
    "run_fit",
    "run_hook_callback",
    "run_session",
]
