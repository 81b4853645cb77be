"""What a driver of the callbacks other than ``fit`` (``CallbackLoop``) tells HookCallback.

Exact batch values. Keras's logs carry each metric's value over the epoch so far, and HookCallback derives the last
batch's value from the metric's own state (``_hook_callback/batch_values.py``). A custom loop
(``CallbackLoop``) holds the batch's own values before it reduces them, and the model's compiled
metrics (if any) never saw them: it publishes them here for its model, for the time of
``on_train_batch_end``, and HookCallback takes them as they are.

The run it drives. ``fit``'s validation calls ``on_test_*`` on the callbacks of the training
run, and HookCallback tells it from a standalone ``evaluate`` by finding ``fit`` on the call
stack (its training hooks go on, no evaluation run begins). A custom loop is no ``fit`` frame: it
declares the run it drives for its model, on its thread, for as long as the run lasts
(:func:`driving`), and HookCallback takes it as ``fit``. Neither side imports the other.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

#: id(model) -> the values of its step. Empty unless a custom loop is ending a step: HookCallback
#: tests it before asking for its model (Keras 3's ``Callback.model`` costs ~0.3 µs per step).
CURRENT: dict[int, Mapping[str, float]] = {}


@contextlib.contextmanager
def publishing(model: Any, values: Mapping[str, float]) -> Iterator[None]:
    """Makes ``values`` the exact batch values of ``model``'s step while the block runs."""
    CURRENT[id(model)] = values
    try:
        yield
    finally:
        CURRENT.pop(id(model), None)


def current(model: Any) -> Mapping[str, float] | None:
    """The exact batch values published for ``model``'s current step, if any."""
    return CURRENT.get(id(model)) if CURRENT else None


#: id(model) -> the thread ident of the custom loop driving a training run of that model.
DRIVEN: dict[int, int] = {}


@contextlib.contextmanager
def driving(model: Any) -> Iterator[None]:
    """Declares a training run of ``model`` driven on this thread while the block runs."""
    key, previous = id(model), DRIVEN.get(id(model))
    DRIVEN[key] = threading.get_ident()
    try:
        yield
    finally:
        if previous is None:
            DRIVEN.pop(key, None)
        else:
            DRIVEN[key] = previous


def driven(model: Any) -> bool:
    """Whether a custom loop drives a training run of ``model`` on this thread."""
    return DRIVEN.get(id(model)) == threading.get_ident() if DRIVEN else False
