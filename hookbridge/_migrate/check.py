"""``hookbridge check MODULE:ATTR``: the conformance kit on a user's hook or callback factory.

``ATTR`` names a zero-argument callable (a function or a class) returning a ``SessionRunHook``
(or a list of them), or with ``--callback`` a Keras callback (or a list). Three modes:

* default: the hook natively (``MonitoredSession``) and under ``HookCallback`` in ``fit``
  (:func:`hookbridge._conform.conform.hook_traces`); with ``--callback`` the callback in ``fit``
  and under ``CallbackHook`` (:func:`~hookbridge._conform.conform.callback_traces`). The command
  prints ``conforms`` or the two traces side by side.
* ``--replaced-by CALLBACK``: the hook under ``HookCallback`` and the callback natively, in the
  same ``fit``; what they do is compared (:mod:`hookbridge._conform.replacement`): ``replaces``
  or where they differ.
* ``--model MODULE:ATTR``: the run is ``fit`` on the user's model and data instead of check's
  scripted one (:mod:`hookbridge._conform.model_run`, or the replacement's training).

Exit status: 0 conforms (replaces), 1 does not, 2 bad input (module not found, attribute missing
or not callable, factory returning the wrong kind of object or failing natively), 3 unknown
(both worlds failed the same way, or something could not be compared).

Only the named modules are imported (and TensorFlow with the kit, when the check runs).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from typing import Any, TextIO

from hookbridge._migrate.targets import (
    CheckInputError,
    GuardedFactory,
    last_line,
    resolve,
)

__all__ = ["CheckInputError", "CheckRequest", "main", "resolve", "run_check"]

CONFORMS, DIFFERS, BAD_INPUT, UNKNOWN = 0, 1, 2, 3
#: The run when the user gives neither --steps nor --steps-per-epoch: 2 epochs of 3 steps.
DEFAULT_STEPS_PER_EPOCH = 3


@dataclasses.dataclass
class CheckRequest:
    """What to check and how: the parsed command line (``None``: the default)."""

    target: str
    steps: int | None = None
    steps_per_epoch: int | None = None
    callback: bool = False
    fmt: str = "text"
    replaced_by: str | None = None
    model: str | None = None

    def shape(self) -> tuple[int, int]:
        """``(steps, steps_per_epoch)``: what the user gave, the rest adapted to it.

        Neither: 2 epochs of :data:`DEFAULT_STEPS_PER_EPOCH`. Only ``--steps-per-epoch K``: 2
        epochs of K. Only ``--steps N``: the fewest epochs, at least two, that divide N (10: 2
        of 5; 9: 3 of 3), or one epoch of N when none does (a prime, or 2).

        Raises:
            CheckInputError: a value below 1, or both given and N not a multiple of K.
        """
        steps, spe = self.steps, self.steps_per_epoch
        for flag, value in (("--steps", steps), ("--steps-per-epoch", spe)):
            if value is not None and value < 1:
                raise CheckInputError(f"{flag} must be at least 1, received {value}.")
        if steps is None:
            spe = spe or DEFAULT_STEPS_PER_EPOCH
            return 2 * spe, spe
        if spe is None:
            epochs = next((e for e in range(2, steps) if steps % e == 0), 1)
            return steps, steps // epochs
        if steps % spe:
            lower, upper = steps - steps % spe, steps - steps % spe + spe
            raise CheckInputError(
                f"--steps {steps} must be a multiple of --steps-per-epoch {spe} (Keras runs "
                f"whole epochs): use --steps {upper}" + (f" or {lower}" if lower else "")
                + ", or drop --steps-per-epoch to let check choose it."
            )
        return steps, spe


@dataclasses.dataclass
class CheckResult:
    """The outcome of one check: the two traces and where they first differ."""

    request: CheckRequest
    native: list
    bridged: list
    first_difference: int | None
    diff: str | None
    #: Both worlds ended with the same failure (the check could not run the hook through).
    same_failure: str | None = None

    @property
    def conforms(self) -> bool:
        """Whether the native and bridged traces are equal (and the run did not fail)."""
        return self.first_difference is None and self.same_failure is None

    @property
    def status(self) -> int:
        """The exit status: :data:`CONFORMS`, :data:`DIFFERS` or :data:`UNKNOWN`."""
        if self.same_failure is not None:
            return UNKNOWN
        return CONFORMS if self.first_difference is None else DIFFERS


@dataclasses.dataclass
class ReplacementResult:
    """The outcome of ``check HOOK --replaced-by CALLBACK``."""

    request: CheckRequest
    replacement: Any  # hookbridge._conform.replacement.Replacement

    @property
    def status(self) -> int:
        """:data:`DIFFERS` if anything differs, else :data:`UNKNOWN` if anything could not be
        compared, else :data:`CONFORMS`."""
        if self.replacement.differences:
            return DIFFERS
        return UNKNOWN if self.replacement.unknown else CONFORMS


#: What check's graphs hold (docs/conformance.md says the same): a hook naming anything else
#: fails in both worlds.
DEFAULT_GRAPH = (
    "natively (MonitoredSession): global_step, loss:0 (the batch loss, in the LOSSES "
    "collection), dense/kernel, dense/bias, learning_rate; under HookCallback: global_step, "
    "loss:0, running_mean/loss:0, the weight mirrors model/000/kernel, model/001/bias"
)


def _factory(target: str, callback: bool) -> GuardedFactory:
    return GuardedFactory(resolve(target), target, callback)


def _training(request: CheckRequest, steps: int, spe: int) -> Callable[[], Any]:
    from hookbridge._conform import replacement

    if request.model is None:
        return replacement.default_training(steps, spe)
    model = resolve(request.model)
    if hasattr(model, "fit") and not isinstance(model, type):
        raise CheckInputError(
            f"--model {request.model} is a model instance: name a zero-argument function "
            "returning a new compiled model (and its data) on every call, as check trains one "
            "per world."
        )
    make = replacement.user_training(model, steps, spe, request.model)

    def guarded() -> Any:
        try:
            return make()
        except ValueError as e:
            raise CheckInputError(str(e)) from e
        except Exception as e:
            raise CheckInputError(f"--model {request.model} raised {last_line(e)}") from e

    return guarded


def run_check(request: CheckRequest) -> CheckResult | ReplacementResult:
    """Resolves the target(s) and runs the kit on them.

    Raises:
        CheckInputError: bad target, options, or a factory that fails natively.
    """
    steps, spe = request.shape()
    if request.callback and (request.model or request.replaced_by):
        raise CheckInputError(
            "--callback checks a callback under CallbackHook in a MonitoredSession: "
            "--model and --replaced-by apply to hooks."
        )
    factory = _factory(request.target, request.callback)
    if request.replaced_by is not None:
        return _run_replacement(request, factory, steps, spe)
    from hookbridge._conform import conform
    from hookbridge._conform.trace import first_difference, format_diff

    try:
        if request.model is not None:
            from hookbridge._conform.model_run import hook_traces_on_model

            traces = hook_traces_on_model(factory, _training(request, steps, spe), steps)
        else:
            run = conform.callback_traces if request.callback else conform.hook_traces
            traces = run(factory, steps=steps, steps_per_epoch=spe)
    except CheckInputError:
        raise
    except Exception as e:  # reported as one line, never a traceback
        raise CheckInputError(
            factory.problem or f"the check could not run {request.target}: {last_line(e)}"
        ) from e
    if factory.problem:
        raise CheckInputError(factory.problem)
    bridge = "CallbackHook" if request.callback else "HookCallback"
    index = first_difference(traces.native, traces.bridged)
    diff = (
        None
        if index is None
        else format_diff(traces.native, traces.bridged, expected_name="native", actual_name=bridge)
    )
    same = _same_failure(traces, request)
    return CheckResult(request, traces.native, traces.bridged, index, diff, same)


def _same_failure(traces: Any, request: CheckRequest) -> str | None:
    """Why both worlds failed alike (the same events, then the same kind of error), or None."""
    from hookbridge._conform.trace import first_difference

    native, bridged = traces.native_error, traces.bridged_error
    if native is None or bridged is None:
        return None
    if first_difference(traces.native[:-1], traces.bridged[:-1]) is not None:
        return None
    # TF's "refers to a Tensor which does not exist" natively; the bridge's MissingTensorError
    # (a KeyError) or TF's own message, depending on where the name was looked up.
    missing = "does not exist" in str(native) and (
        isinstance(bridged, KeyError) or "does not exist" in str(bridged)
    )
    if type(native) is not type(bridged) and not missing:
        return None
    text = (
        f"it fails the same way natively and under the bridge: natively {_one_line(native)}; "
        f"under the bridge {_one_line(bridged)}"
    )
    if missing:
        where = (
            "the graph built for --model (the global step and one float scalar per Keras log "
            "key: loss and each compiled metric)"
            if request.model
            else f"either graph check builds ({DEFAULT_GRAPH})"
        )
        text += (
            f". The tensor is in neither: {where}. This is check's setup, not a divergence: "
            "pass --model MODULE:ATTR (a function returning your compiled model and its data) "
            "to run the hook on your model's log tensors, or --replaced-by to prove a callback."
        )
    return text


def _one_line(e: BaseException) -> str:
    message = str(e).strip().splitlines()
    return f"{type(e).__name__}: {message[0] if message else ''}".rstrip(": ")


def _run_replacement(
    request: CheckRequest, hooks: GuardedFactory, steps: int, spe: int
) -> ReplacementResult:
    from hookbridge._conform.replacement import compare_replacement

    callbacks = _factory(request.replaced_by or "", True)
    try:
        result = compare_replacement(hooks, callbacks, _training(request, steps, spe))
    except CheckInputError:
        raise
    except Exception as e:  # reported as one line, never a traceback
        problem = hooks.problem or callbacks.problem
        raise CheckInputError(
            problem or f"the check could not run {request.target}: {last_line(e)}"
        ) from e
    if hooks.problem or callbacks.problem:
        raise CheckInputError(hooks.problem or callbacks.problem or "")
    return ReplacementResult(request, result)


# ---------------------------------------------------------------------------------- output
def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no NaN/inf
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _describe(request: CheckRequest) -> str:
    kind = "callback" if request.callback else "hook"
    steps, spe = request.shape()
    model = f", on {request.model}" if request.model else ""
    return f"{request.target} ({kind}, {steps} steps, {spe} per epoch{model})"


_VERDICT = {CONFORMS: "replaces", DIFFERS: "does NOT replace", UNKNOWN: "cannot tell"}


def _report_replacement(result: ReplacementResult, out: TextIO) -> None:
    request, r = result.request, result.replacement
    steps, spe = request.shape()
    if request.fmt == "json":
        payload = {
            "target": request.target,
            "replaced_by": request.replaced_by,
            "model": request.model,
            "steps": steps,
            "steps_per_epoch": spe,
            "replaces": result.status == CONFORMS,
            "status": _VERDICT[result.status],
            "differences": r.differences,
            "unknown": r.unknown,
            "compared": r.compared,
            "hook": {"logs": r.hook.logs, "ignored": r.hook.ignored,
                     "files": sorted(r.hook.outputs),
                     "stopped_at": r.hook.stopped_at, "error": r.hook.error},
            "callback": {"logs": r.callback.logs, "ignored": r.callback.ignored,
                         "files": sorted(r.callback.outputs),
                         "stopped_at": r.callback.stopped_at, "error": r.callback.error},
        }
        out.write(json.dumps(_jsonable(payload), indent=2) + "\n")
        return
    model = f", on {request.model}" if request.model else ""
    out.write(
        f"{request.target} replaced by {request.replaced_by} ({steps} steps, {spe} per epoch"
        f"{model}): {_VERDICT[result.status]}\n"
    )
    for title, lines in (("differs", r.differences), ("not compared", r.unknown)):
        if lines:
            out.write(f"  {title}:\n" + "".join(f"    - {line}\n" for line in lines))
    out.write("  compared: " + "; ".join(r.compared) + "\n")


def report(result: CheckResult | ReplacementResult, out: TextIO) -> None:
    """Writes ``result`` in the request's format."""
    if isinstance(result, ReplacementResult):
        _report_replacement(result, out)
        return
    request = result.request
    steps, spe = request.shape()
    if request.fmt == "json":
        payload = {
            "target": request.target,
            "direction": "callback" if request.callback else "hook",
            "model": request.model,
            "steps": steps,
            "steps_per_epoch": spe,
            "conforms": result.conforms,
            "status": {CONFORMS: "conforms", DIFFERS: "differs", UNKNOWN: "unknown"}[
                result.status
            ],
            "same_failure": result.same_failure,
            "first_difference": result.first_difference,
            "native": _jsonable(result.native),
            "bridged": _jsonable(result.bridged),
            "diff": result.diff,
        }
        out.write(json.dumps(payload, indent=2) + "\n")
        return
    native, bridged = (
        ("Keras fit", "CallbackHook in MonitoredSession")
        if request.callback
        else ("MonitoredSession", "HookCallback in Keras fit")
    )
    if result.same_failure is not None:
        out.write(f"{_describe(request)}: cannot tell\n  {result.same_failure}\n")
    elif result.conforms:
        out.write(
            f"{_describe(request)}: conforms\n"
            f"  {native} and {bridged} gave the same {len(result.native)} events.\n"
        )
    else:
        out.write(f"{_describe(request)}: does NOT conform\n{result.diff}\n")


def main(request: CheckRequest, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Runs ``hookbridge check``; returns its exit status (0 conforms, 1 differs, 2 bad input,
    3 unknown)."""
    try:
        result = run_check(request)
    except CheckInputError as e:
        err.write(f"hookbridge check: error: {e}\n")
        if request.fmt == "json":
            out.write(json.dumps({"target": request.target, "error": str(e)}, indent=2) + "\n")
        return BAD_INPUT
    report(result, out)
    return result.status
