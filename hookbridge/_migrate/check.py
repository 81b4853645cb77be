"""``hookbridge check MODULE:ATTR``: the conformance kit on a user's hook or callback factory.

``ATTR`` names a zero-argument callable (a function or a class) returning a ``SessionRunHook``
(or a list of them), or with ``--callback`` a Keras callback (or a list). The kit runs it natively
and under the bridge (:func:`hookbridge._conform.conform.hook_traces` /
:func:`~hookbridge._conform.conform.callback_traces`) and the command prints ``conforms`` or the two
traces side by side. Exit status: 0 conforms, 1 does not, 2 bad input (module not found, attribute
missing or not callable, factory returning the wrong kind of object or failing natively).

Only the named module is imported (and TensorFlow with the kit, when the check runs).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import math
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

CONFORMS, DIFFERS, BAD_INPUT = 0, 1, 2


class CheckInputError(Exception):
    """The target of ``hookbridge check`` cannot be checked (exit status 2)."""


@dataclasses.dataclass
class CheckRequest:
    """What to check and how: the parsed command line."""

    target: str
    steps: int = 6
    steps_per_epoch: int | None = 3
    callback: bool = False
    fmt: str = "text"


# ------------------------------------------------------------------------------ the target
def _import_module(module: str) -> Any:
    """Imports ``module`` (a dotted name, or a ``.py`` file path) and nothing else."""
    if module.endswith(".py") or os.sep in module or "/" in module:
        if not os.path.isfile(module):
            raise CheckInputError(f"module file not found: {module!r}.")
        name = os.path.splitext(os.path.basename(module))[0]
        spec = importlib.util.spec_from_file_location(name, module)
        if spec is None or spec.loader is None:
            raise CheckInputError(f"cannot load {module!r} as a Python module.")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[name] = loaded
        _exec_module(module, lambda: spec.loader.exec_module(loaded))  # type: ignore[union-attr]
        return loaded
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m`: modules of the current directory
    holder: list[Any] = []
    _exec_module(module, lambda: holder.append(importlib.import_module(module)))
    return holder[0]


def _exec_module(module: str, load: Callable[[], None]) -> None:
    try:
        load()
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise CheckInputError(
                f"module not found: {module!r} (searched the current directory and sys.path; "
                "run from your project's root, or set PYTHONPATH)."
            ) from e
        raise CheckInputError(f"importing {module!r} failed: {_last_line(e)}") from e
    except Exception as e:
        raise CheckInputError(f"importing {module!r} failed: {_last_line(e)}") from e


def _last_line(e: BaseException) -> str:
    return traceback.format_exception_only(type(e), e)[-1].strip()


def resolve(target: str) -> Callable[[], Any]:
    """The factory ``MODULE:ATTR`` names (``ATTR`` may be dotted: ``Class.factory``).

    ``MODULE:CALL`` with a call expression (``hooks:LossHook("loss:0", threshold=0.5)``) is
    evaluated in the module's namespace on every call: a factory for hooks that take arguments.
    """
    call = target.find("(")
    head = target if call < 0 else target[:call]
    module, sep, attr = head.rpartition(":")
    if not sep or not module or not attr:
        raise CheckInputError(
            f"expected MODULE:ATTR (e.g. my_project.hooks:make_loss_hook), received {target!r}."
        )
    if call >= 0:
        return _expression_factory(module, attr + target[call:])
    obj: Any = _import_module(module)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CheckInputError(f"module {module!r} has no attribute {attr!r}.")
        obj = getattr(obj, part)
    if _is_instance_to_check(obj):
        raise CheckInputError(
            f"{target} is a {type(obj).__name__} instance, not a factory: name a class or a "
            "zero-argument function returning a new hook (callback) on every call, e.g. "
            "`def make_hook(): return MyHook(every_n_iter=2)` (the check builds one per world)."
        )
    if not callable(obj):
        raise CheckInputError(
            f"{target} is not callable (it is a {type(obj).__name__}): name a class or a "
            "zero-argument function returning a new hook (callback) on every call."
        )
    return obj


def _expression_factory(module: str, expression: str) -> Callable[[], Any]:
    try:
        code = compile(expression, f"<hookbridge check {expression}>", "eval")
    except SyntaxError as e:
        raise CheckInputError(f"{expression!r} is not a Python call expression: {e.msg}.") from e
    namespace = vars(_import_module(module))
    # The user's own expression, evaluated as `python -c` would: once per world.
    return lambda: eval(code, namespace)


def _is_instance_to_check(obj: Any) -> bool:
    return not isinstance(obj, type) and (_is_hook(obj) or _is_callback(obj))


def _is_hook(obj: Any) -> bool:
    return any(c.__name__ == "SessionRunHook" for c in type(obj).__mro__)


def _is_callback(obj: Any) -> bool:
    return hasattr(obj, "set_model") and hasattr(obj, "on_train_batch_end")


# ------------------------------------------------------------------------------- the check
class _GuardedFactory:
    """Calls the user's factory, remembering a wrong result kind or a native failure."""

    def __init__(self, factory: Callable[[], Any], target: str, callback: bool) -> None:
        self.factory, self.target, self.callback = factory, target, callback
        self.calls = 0
        self.problem: str | None = None

    def __call__(self) -> Any:
        self.calls += 1
        try:
            made = self.factory()
        except Exception as e:
            if self.calls == 1:  # natively: the factory itself is broken
                self.problem = f"the factory {self.target} raised {_last_line(e)}"
            raise
        for item in made if isinstance(made, (list, tuple)) else [made]:
            self._check_kind(item)
        return made

    def _check_kind(self, item: Any) -> None:
        if self.callback and not _is_callback(item):
            want = "a Keras callback"
            hint = (
                "drop --callback to check a hook"
                if _is_hook(item)
                else "it must return a keras.callbacks.Callback (or a list of them)"
            )
        elif not self.callback and not _is_hook(item):
            want = "a SessionRunHook"
            hint = (
                "add --callback to check a Keras callback"
                if _is_callback(item)
                else "it must return a tf.compat.v1.train.SessionRunHook (or a list of them)"
            )
        else:
            return
        self.problem = f"{self.target} returned {type(item).__name__}, not {want}: {hint}."
        raise CheckInputError(self.problem)


@dataclasses.dataclass
class CheckResult:
    """The outcome of one check: the two traces and where they first differ."""

    request: CheckRequest
    native: list
    bridged: list
    first_difference: int | None
    diff: str | None

    @property
    def conforms(self) -> bool:
        """Whether the native and bridged traces are equal."""
        return self.first_difference is None


def run_check(request: CheckRequest) -> CheckResult:
    """Resolves the target and runs the kit on it.

    Raises:
        CheckInputError: bad target, options, or a factory that fails natively.
    """
    if request.steps < 1:
        raise CheckInputError(f"--steps must be at least 1, received {request.steps}.")
    spe = request.steps_per_epoch or request.steps
    if spe < 1 or request.steps % spe:
        raise CheckInputError(
            f"--steps {request.steps} must be a positive multiple of --steps-per-epoch {spe} "
            "(Keras runs whole epochs)."
        )
    factory = _GuardedFactory(resolve(request.target), request.target, request.callback)
    from hookbridge._conform import conform
    from hookbridge._conform.trace import first_difference, format_diff

    run = conform.callback_traces if request.callback else conform.hook_traces
    try:
        traces = run(factory, steps=request.steps, steps_per_epoch=spe)
    except CheckInputError:
        raise
    except Exception as e:  # reported as one line, never a traceback
        raise CheckInputError(
            factory.problem or f"the check could not run {request.target}: {_last_line(e)}"
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
    return CheckResult(request, traces.native, traces.bridged, index, diff)


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
    spe = request.steps_per_epoch or request.steps
    return f"{request.target} ({kind}, {request.steps} steps, {spe} per epoch)"


def report(result: CheckResult, out: TextIO) -> None:
    """Writes ``result`` in the request's format."""
    request = result.request
    if request.fmt == "json":
        payload = {
            "target": request.target,
            "direction": "callback" if request.callback else "hook",
            "steps": request.steps,
            "steps_per_epoch": request.steps_per_epoch or request.steps,
            "conforms": result.conforms,
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
    if result.conforms:
        out.write(
            f"{_describe(request)}: conforms\n"
            f"  {native} and {bridged} gave the same {len(result.native)} events.\n"
        )
    else:
        out.write(f"{_describe(request)}: does NOT conform\n{result.diff}\n")


def main(request: CheckRequest, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Runs ``hookbridge check``; returns its exit status (0 conforms, 1 differs, 2 bad input)."""
    try:
        result = run_check(request)
    except CheckInputError as e:
        err.write(f"hookbridge check: error: {e}\n")
        if request.fmt == "json":
            out.write(json.dumps({"target": request.target, "error": str(e)}, indent=2) + "\n")
        return BAD_INPUT
    report(result, out)
    return CONFORMS if result.conforms else DIFFERS
