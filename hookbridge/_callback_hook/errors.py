"""Errors raised by CallbackHook, each naming what was received and how to fix it."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any


class UnsupportedModelAttributeError(AttributeError):
    """A Keras callback reached for a model attribute a TF1 graph cannot provide.

    Subclasses ``AttributeError`` so ``hasattr(model, name)`` stays ``False`` as Keras expects.
    """

    def __init__(self, callback: str, owner: str, attribute: str, hint: str = "") -> None:
        self.callback = callback
        self.attribute = attribute
        message = (
            f"Keras callback {callback} accessed `{owner}.{attribute}`, which CallbackHook does "
            f"not provide: the model it sees is a proxy for a TF1 graph, not a Keras model."
        )
        if hint:
            message += " " + hint
        super().__init__(message)


def accessing_callback(callbacks: Sequence[Any]) -> str:
    """The name of the callback whose code is running (for error messages): the model and its
    optimizer are shared by every callback, as in Keras, so the caller is found on the stack."""
    frame = inspect.currentframe()
    ids = {id(cb) for cb in callbacks}
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in ids:
            return type(owner).__name__
        frame = frame.f_back
    return " / ".join(dict.fromkeys(type(cb).__name__ for cb in callbacks)) or "(none)"
