"""The hook lists HookCallback takes: a list, one hook, or a callable returning them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import tensorflow as tf

SessionRunHook = tf.compat.v1.train.SessionRunHook

HooksArg = Sequence[SessionRunHook] | Callable[[], Iterable[SessionRunHook]]


def check_hooks(hooks: Any, where: str, name: str = "hooks") -> list:
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Iterable):
        raise TypeError(
            f"HookCallback expected a list of tf.compat.v1.train.SessionRunHook{where}, "
            f"received {hooks!r} of type {type(hooks).__name__}."
        )
    hooks = list(hooks)
    for i, hook in enumerate(hooks):
        if not isinstance(hook, SessionRunHook):
            raise TypeError(
                f"HookCallback: {name}[{i}] = {hook!r} (type {type(hook).__name__}) is not a "
                "tf.compat.v1.train.SessionRunHook. Pass SessionRunHook instances; to wrap a "
                "Keras callback in the other direction use hookbridge.CallbackHook."
            )
    return hooks


def hook_factory(hooks: Any, what: str) -> tuple[Callable[[], list], list]:
    """A zero-argument callable returning the checked hooks of ``hooks`` (a list, one hook, a
    callable returning them, or None), and the list itself when it is one (else empty)."""
    if hooks is None and what != "hooks":  # an optional argument left out
        return list, []
    if callable(hooks) and not isinstance(hooks, SessionRunHook):
        factory = hooks
        return (lambda: check_hooks(factory(), f" from the {what} callable", what)), []
    if isinstance(hooks, SessionRunHook):
        hooks = [hooks]
    checked = check_hooks(hooks, "" if what == "hooks" else f" as {what}", what)
    return (lambda: list(checked)), list(checked)
