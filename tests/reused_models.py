"""Compiled test models reused across tests, as if built afresh: their traced functions kept.

Most of a small test's time is Keras tracing ``train_function`` on its first ``fit`` (0.35-0.5 s
alone, 1-2 s under CI's contention, against 0.1 s for a fit after it). Tests that build the same
model the same way (``conftest.make_model(..., reuse=True)``) get one model per build key, handed
back at the next test in the state a fresh build has: its initial weights, its optimizer's
variables at their initial values (the step at 0), the global random seed set again. Its
optimizer is built with the model (its slots exist before the first step; natively they appear
at the first step: no hook sees them, ``model.weights`` holds none of them).

A test asking for several models of one key gets several models. A model is handed out only
where its built state is certain; otherwise it is dropped and the test gets a fresh model:
- the model changed in a way a reset cannot undo: compiled again (another optimizer object),
  an optimizer that grew variables (slots a fresh one does not have yet), a layer or the model
  made (non-)trainable, ``run_eagerly`` switched, a checkpoint restored into it by an assignment
  map (hookbridge remembers the map for the model's way back).
A test that does something else to its model that outlives the test (a monkeypatched method, a
new attribute Keras reads) must not pass ``reuse=True``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from hookbridge._migrate.assignment import restored_pairs

keras = tf.keras


class _Entry:
    def __init__(self, model: Any, seed: int):
        self.model, self.seed, self.in_use = model, seed, True
        self.optimizer = model.optimizer
        self.weights = model.get_weights()
        self.optimizer_variables = list(model.optimizer.variables)
        self.optimizer_values = [v.numpy() for v in self.optimizer_variables]
        # Keras 2.15 and tf_keras keep the learning rate's variable out of optimizer.variables
        # (Keras 3 holds it there): a scheduler callback of an earlier test assigned it.
        self.rate = model.optimizer.learning_rate
        self.rate_value = self.rate.numpy() if hasattr(self.rate, "assign") else None
        self.shape = self._shape()

    def _shape(self) -> tuple:
        model = self.model
        return (
            model.trainable,
            tuple(layer.trainable for layer in model.layers),
            bool(model.run_eagerly),
        )

    def restore(self) -> bool:
        """Puts the model back in its built state; False where that cannot be certain."""
        model = self.model
        if (
            model.optimizer is not self.optimizer
            or [id(v) for v in model.optimizer.variables] != [id(v) for v in self.optimizer_variables]
            or self._shape() != self.shape
            or restored_pairs(model) is not None
            or self.rate_value is None
            or model.optimizer.learning_rate is not self.rate
        ):
            return False
        keras.utils.set_random_seed(self.seed)
        model.set_weights(self.weights)
        for variable, value in zip(self.optimizer_variables, self.optimizer_values):
            variable.assign(value)
        self.rate.assign(self.rate_value)
        model.stop_training = False
        self.in_use = True
        return True


_POOLS: dict[tuple, list[_Entry]] = {}


def reused(key: tuple, seed: int, build: Callable[[], Any]) -> Any:
    """A model of ``key`` no test holds now, reset to what ``build()`` returns (``build`` sets
    the seed itself); a new one (kept for later tests) where every one of them is held."""
    pool = _POOLS.setdefault(key, [])
    for entry in [e for e in pool if not e.in_use]:
        if entry.restore():
            return entry.model
        pool.remove(entry)
    model = build()
    # Its slots now, so that their initial values are part of the built state (Keras 2 and
    # tf_keras create SGD's even without momentum, at the first step); a hook sees
    # ``model.weights``, which holds none of the optimizer's variables either way.
    model.optimizer.build(model.trainable_variables)
    pool.append(_Entry(model, seed))
    return model


def release_all() -> None:
    """After each test: every reused model is free for the next one."""
    for pool in _POOLS.values():
        for entry in pool:
            entry.in_use = False
