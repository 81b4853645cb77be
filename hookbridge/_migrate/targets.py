"""The targets of ``hookbridge check``: ``MODULE:ATTR`` resolved to a factory, importing only
``MODULE``, and the factory guarded so a wrong kind of object or a native failure is bad input."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any


class CheckInputError(Exception):
    """The target of ``hookbridge check`` cannot be checked (exit status 2)."""


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
        raise CheckInputError(f"importing {module!r} failed: {last_line(e)}") from e
    except Exception as e:
        raise CheckInputError(f"importing {module!r} failed: {last_line(e)}") from e


def last_line(e: BaseException) -> str:
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


class GuardedFactory:
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
                self.problem = f"the factory {self.target} raised {last_line(e)}"
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


