"""``assert_hook_conforms`` / ``assert_callback_conforms``: the validator for users' own code.

Each runs the user's hook (callback) twice, natively and under the bridge, recording every call
it receives (the instance's own methods are wrapped, so its type, ``isinstance`` checks and
behaviour are untouched), and raises ``AssertionError`` with both traces side by side at the first
event that differs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._conform.runners import (
    SessionGraph,
    callback_hook,
    drive_fit,
    drive_hook_callback,
    drive_loop,
    drive_session,
)
from hookbridge._conform.scenarios import EXACT_LOSSES, _Run
from hookbridge._conform.trace import Trace, first_difference, format_diff, normalize
from hookbridge._lifecycle import CALLBACK_TRAIN_EVENTS, HOOK_EVENTS

SessionRunHook = tf.compat.v1.train.SessionRunHook
_HOOK_METHODS = HOOK_EVENTS
_CALLBACK_METHODS = CALLBACK_TRAIN_EVENTS


@dataclasses.dataclass
class Conformance:
    """The native and bridged traces of one scenario (equal when the code conforms)."""

    native: Trace
    bridged: Trace
    #: The exception that ended each run, if one did (its message, beyond the trace's type).
    native_error: BaseException | None = None
    bridged_error: BaseException | None = None

    @property
    def conforms(self) -> bool:
        """Whether the two traces are equal, event by event."""
        return first_difference(self.native, self.bridged) is None


def _describe_fetches(fetches: Any) -> Any:
    if isinstance(fetches, (tf.Tensor, tf.Variable)) or hasattr(fetches, "dtype"):
        return f"<tensor {getattr(fetches.dtype, 'name', fetches.dtype)}>"
    if isinstance(fetches, tf.Operation):
        return "<op>"
    if isinstance(fetches, dict):
        return {str(k): _describe_fetches(v) for k, v in sorted(fetches.items(), key=str)}
    if isinstance(fetches, (list, tuple)):
        return (
            type(fetches)(_describe_fetches(v) for v in fetches)
            if not hasattr(fetches, "_fields")
            else (type(fetches).__name__,) + tuple(_describe_fetches(v) for v in fetches)
        )
    return normalize(fetches)


def _describe_request(request: Any) -> Any:
    if request is None:
        return None
    options = getattr(request, "options", None)
    return {
        "fetches": _describe_fetches(request.fetches),
        "feeds": len(request.feed_dict or {}),
        "trace_level": int(options.trace_level) if options is not None else 0,
    }


def _record(
    trace: Trace,
    actor: str,
    method: str,
    original: Callable[..., Any],
    describe: Callable[..., tuple],
) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = original(*args, **kwargs)
        except BaseException as e:
            trace.append((actor, method, "raised", type(e).__name__))
            raise
        if "logs" in kwargs:
            args = args + (kwargs["logs"],) if args else (kwargs["logs"],)
        trace.append((actor, method) + describe(args, result))
        return result

    _tfcompat.copy_keras_default_marker(original, wrapper)
    return wrapper


def _instrument_hook(hook: Any, actor: str, trace: Trace) -> Any:
    if not isinstance(hook, SessionRunHook):
        raise TypeError(
            f"assert_hook_conforms: make_hook returned {hook!r} (type {type(hook).__name__}); "
            "it must return a tf.compat.v1.train.SessionRunHook or a list of them."
        )
    steps = {"before_run": -1, "after_run": -1}

    def describe(method: str) -> Callable[..., tuple]:
        def d(args: tuple, result: Any) -> tuple:
            if method == "before_run":
                steps[method] += 1
                return (steps[method], _describe_request(result))
            if method == "after_run":
                steps[method] += 1
                context, values = args
                return (steps[method], normalize(values.results), bool(context.stop_requested))
            return ()

        return d

    for method in _HOOK_METHODS:
        if getattr(type(hook), method) is getattr(SessionRunHook, method):
            continue  # a no-op: HookCallback does not call it, nothing to observe
        setattr(
            hook, method, _record(trace, actor, method, getattr(hook, method), describe(method))
        )
    return hook


def _instrument_callback(callback: Any, actor: str, trace: Trace) -> Any:
    def describe(method: str) -> Callable[..., tuple]:
        def d(args: tuple, result: Any) -> tuple:
            index = args[:1] if method not in ("on_train_begin", "on_train_end") else ()
            logs = (
                args[1]
                if len(args) > 1
                else (args[0] if method == "on_train_end" and args else None)
            )
            if method.endswith("_begin"):
                logs = None
            model = getattr(callback, "model", None)
            stop = bool(getattr(model, "stop_training", False)) if model is not None else None
            detail = index + ((normalize(dict(logs)),) if logs is not None else ())
            return detail + (stop,)

        return d

    for method in _CALLBACK_METHODS:
        original = getattr(callback, method)
        if getattr(original, "_is_default", False):
            continue
        setattr(callback, method, _record(trace, actor, method, original, describe(method)))
    return callback


def _as_list(made: Any) -> list[Any]:
    return list(made) if isinstance(made, (list, tuple)) else [made]


def _run_shape(steps: int, steps_per_epoch: int | None, losses: Sequence[float] | None) -> _Run:
    spe = steps_per_epoch or steps
    if steps < 1 or steps % spe:
        raise ValueError(
            f"steps={steps} must be a positive multiple of steps_per_epoch={spe} (Keras runs "
            "whole epochs)."
        )
    losses = (
        tuple(losses) if losses else tuple(EXACT_LOSSES[i % len(EXACT_LOSSES)] for i in range(spe))
    )
    if len(losses) != spe:
        raise ValueError(f"losses needs one value per step of an epoch ({spe}), got {len(losses)}.")
    return _Run(epochs=steps // spe, steps_per_epoch=spe, losses=losses)


def _compare(native: Trace, bridged: Trace, what: str, bridge: str) -> Conformance:
    if native != bridged:
        raise AssertionError(
            f"{what} behaves differently under {bridge} than natively.\n"
            + format_diff(native, bridged, expected_name="native", actual_name=bridge)
        )
    return Conformance(native, bridged)


def assert_hook_conforms(
    make_hook: Callable[[], Any],
    *,
    steps: int,
    steps_per_epoch: int | None = None,
    losses: Sequence[float] | None = None,
    loop: bool = False,
) -> Conformance:
    """Checks that a hook sees the same calls under ``HookCallback`` as in ``MonitoredSession``.

    ``make_hook()`` is called twice, once per world, while that world's graph is the default
    graph (build tensors there: the global step and a float scalar ``loss`` tensor exist in both).
    The native run is a ``MonitoredSession`` whose train op increments the global step and whose
    ``loss`` is fed the batch loss; the bridged run a Keras ``fit`` of ``steps`` batches with the
    same batch losses. Recorded for every method the hook overrides: the order of calls, what
    ``before_run`` requested (fetch structure, number of feeds, trace level), the normalized
    results ``after_run`` received and whether a stop had been requested, and any exception.

    Args:
        make_hook: zero-argument callable returning a ``SessionRunHook`` or a list of them.
        steps: steps to run (fewer if the hook stops): a multiple of ``steps_per_epoch``.
        steps_per_epoch: Keras batches per epoch; default ``steps`` (one epoch).
        losses: the batch loss of each step of an epoch; default from ``EXACT_LOSSES``.
        loop: run ``HookCallback`` in a ``CallbackLoop`` custom training loop (a
            ``GradientTape`` step on the same batches) instead of ``fit``.

    Returns:
        Conformance: both (equal) traces, for further assertions.

    Raises:
        AssertionError: at the first differing event, with both traces side by side.

    Example:
        >>> assert_hook_conforms(
        ...     lambda: tf.compat.v1.train.StopAtStepHook(last_step=3), steps=5)
    """
    traces = hook_traces(
        make_hook, steps=steps, steps_per_epoch=steps_per_epoch, losses=losses, loop=loop
    )
    bridge = "HookCallback in a CallbackLoop" if loop else "HookCallback"
    return _compare(traces.native, traces.bridged, "The hook", bridge)


def hook_traces(
    make_hook: Callable[[], Any],
    *,
    steps: int,
    steps_per_epoch: int | None = None,
    losses: Sequence[float] | None = None,
    loop: bool = False,
) -> Conformance:
    """The two traces :func:`assert_hook_conforms` compares, without asserting (same arguments).

    Raises:
        TypeError: ``make_hook`` returned something that is not a ``SessionRunHook``.
        ValueError: ``steps``, ``steps_per_epoch`` or ``losses`` do not describe whole epochs.
    """
    run = _run_shape(steps, steps_per_epoch, losses)
    return _both(*_hook_worlds(make_hook, run, loop))


_World = Callable[[Trace, list[BaseException]], Any]


def _hook_worlds(make_hook: Callable[[], Any], run: _Run, loop: bool) -> tuple[_World, _World]:
    """:func:`hook_traces`'s two runs, (native, bridged): each fills the trace and error list it
    is given."""

    def hooks(trace: Trace) -> list[Any]:
        made = _as_list(make_hook())
        return [_instrument_hook(h, f"{type(h).__name__}[{i}]", trace) for i, h in enumerate(made)]

    def native(trace: Trace, errors: list[BaseException]) -> None:
        drive_session(lambda g: hooks(trace), run, trace, errors=errors)

    def bridged(trace: Trace, errors: list[BaseException]) -> None:
        drive = drive_loop if loop else drive_fit
        drive_hook_callback(lambda: hooks(trace), drive, run, trace, errors=errors)

    return native, bridged


def _both(
    native: Callable[[Trace, list[BaseException]], Any],
    bridged: Callable[[Trace, list[BaseException]], Any],
) -> Conformance:
    """The native world run, then the bridged one, each given a trace and an error list of its
    own to fill."""
    traces: tuple[Trace, Trace] = ([], [])
    errors: tuple[list[BaseException], list[BaseException]] = ([], [])
    native(traces[0], errors[0])
    bridged(traces[1], errors[1])
    return Conformance(*traces, _last(errors[0]), _last(errors[1]))


def _last(errors: list[BaseException]) -> BaseException | None:
    return errors[-1] if errors else None


def assert_callback_conforms(
    make_callback: Callable[[], Any],
    *,
    steps: int,
    steps_per_epoch: int | None = None,
    losses: Sequence[float] | None = None,
    loop: bool = False,
    **callback_hook_kwargs: Any,
) -> Conformance:
    """Checks that a callback sees the same calls under ``CallbackHook`` as in Keras ``fit``.

    The native run is ``fit`` on a one-weight model with learning rate 0 whose batch losses are
    ``losses``; the bridged run a ``MonitoredSession`` with ``CallbackHook(callbacks,
    logs={"loss": "loss"}, steps_per_epoch=..., learning_rate=<a 0.0 variable>)`` whose loss
    tensor is fed the same values. Recorded for every method the callback overrides: order,
    epoch/batch index, normalized logs, ``model.stop_training`` after the call, and exceptions.

    Args:
        make_callback: zero-argument callable returning a Keras callback or a list of them
            (called once per world).
        steps: steps to run: a multiple of ``steps_per_epoch``.
        steps_per_epoch: batches per epoch; default ``steps``.
        losses: the batch loss of each step of an epoch; default from ``EXACT_LOSSES``.
        loop: run the callback in a ``CallbackLoop`` custom training loop (a ``GradientTape``
            step on the same batches) instead of ``CallbackHook`` in a ``MonitoredSession``.
        **callback_hook_kwargs: passed to ``CallbackHook`` (e.g. ``validation_fn``); not with
            ``loop=True``.

    Returns:
        Conformance: both (equal) traces.

    Raises:
        AssertionError: at the first differing event, with both traces side by side.
    """
    traces = callback_traces(
        make_callback,
        steps=steps,
        steps_per_epoch=steps_per_epoch,
        losses=losses,
        loop=loop,
        **callback_hook_kwargs,
    )
    bridge = "CallbackLoop" if loop else "CallbackHook"
    return _compare(traces.native, traces.bridged, "The callback", bridge)


def callback_traces(
    make_callback: Callable[[], Any],
    *,
    steps: int,
    steps_per_epoch: int | None = None,
    losses: Sequence[float] | None = None,
    loop: bool = False,
    **callback_hook_kwargs: Any,
) -> Conformance:
    """The two traces :func:`assert_callback_conforms` compares, without asserting.

    Raises:
        ValueError: ``steps``, ``steps_per_epoch`` or ``losses`` do not describe whole epochs,
            or ``CallbackHook`` arguments were given with ``loop=True``.
    """
    run = _run_shape(steps, steps_per_epoch, losses)
    if loop and callback_hook_kwargs:
        raise ValueError(
            f"callback_traces(loop=True) runs no CallbackHook: drop {sorted(callback_hook_kwargs)}"
            " (they configure CallbackHook), or pass loop=False."
        )
    return _both(*_callback_worlds(make_callback, run, loop, **callback_hook_kwargs))


def _callback_worlds(
    make_callback: Callable[[], Any], run: _Run, loop: bool, **callback_hook_kwargs: Any
) -> tuple[_World, _World]:
    """:func:`callback_traces`'s two runs, (native, bridged): each fills the trace and error
    list it is given."""

    def callbacks(trace: Trace) -> list[Any]:
        made = _as_list(make_callback())
        return [
            _instrument_callback(c, f"{type(c).__name__}[{i}]", trace) for i, c in enumerate(made)
        ]

    def native(trace: Trace, errors: list[BaseException]) -> None:
        drive_fit(callbacks(trace), run, trace, errors=errors)

    def bridged(trace: Trace, errors: list[BaseException]) -> None:
        # Built before the session's graph, as a user builds them (inside a graph, tf_keras
        # returns its graph-mode classes, which CallbackHook refuses).
        made = callbacks(trace)
        if loop:
            drive_loop(made, run, trace, errors=errors)
            return

        def hooks(g: SessionGraph) -> list[Any]:
            return [callback_hook(made, run, **callback_hook_kwargs)]

        drive_session(hooks, run, trace, errors=errors)

    return native, bridged
