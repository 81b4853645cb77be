"""Errors raised by CallbackHook, each naming what was received and how to fix it."""

from __future__ import annotations


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
