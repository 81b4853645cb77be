"""Exact batch values handed to HookCallback by a driver of the callbacks that has them.

Keras's logs carry each metric's value over the epoch so far, and HookCallback derives the last
batch's value from the metric's own state (``_hook_callback/batch_values.py``). A custom loop
(``CallbackLoop``) holds the batch's own values before it reduces them, and the model's compiled
metrics (if any) never saw them: it publishes them here for its model, for the time of
``on_train_batch_end``, and HookCallback takes them as they are. Neither side imports the other.
"""

from __future__ import annotations

import contextlib
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
