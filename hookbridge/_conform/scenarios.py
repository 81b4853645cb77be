"""Scenarios: one description of a training run, expressible in both worlds.

A :class:`HookScenario` scripts ``SessionRunHook``s (run natively in a ``MonitoredSession`` and
under :class:`hookbridge.HookCallback` in Keras ``fit``); a :class:`CallbackScenario` scripts Keras
callbacks (run natively in ``fit`` and under :class:`hookbridge.CallbackHook` in a
``MonitoredSession``). Steps are counted from 0: step ``i`` is the ``i``-th ``MonitoredSession.run``
or the ``i``-th Keras batch of the whole ``fit``. The loss of step ``i`` is
``losses[i % len(losses)]`` in both worlds (Keras repeats its data every epoch).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

#: Where a scripted hook can raise or request a stop.
HookMethod = Literal["begin", "after_create_session", "before_run", "after_run", "end"]
#: Where a scripted callback can raise or set ``model.stop_training``.
CallbackMethod = Literal[
    "train_begin", "epoch_begin", "batch_begin", "batch_end", "epoch_end", "train_end"
]
#: What a scripted hook or callback raises: a plain error (:class:`ScenarioError`), or one of the
#: two exceptions TF1 treats as the end of input.
ErrorKind = Literal["error", "out_of_range", "stop_iteration"]
#: The fetch structures a recording hook can request (see :data:`FETCH_KINDS`).
FetchKind = Literal[
    "none", "gs", "loss", "name", "op", "dict", "list", "tuple", "nested", "namedtuple"
]
FETCH_KINDS: tuple[str, ...] = (
    "none",
    "gs",
    "loss",
    "name",
    "op",
    "dict",
    "list",
    "tuple",
    "nested",
    "namedtuple",
)

#: Batch losses both worlds can produce exactly (the Keras model predicts 0, y = sqrt(loss)).
EXACT_LOSSES: tuple[float, ...] = (0.25, 1.0, 2.25, 4.0, 6.25, 9.0)


class ScenarioError(Exception):
    """The error a scripted hook or callback raises when told to (``error="error"``)."""


@dataclasses.dataclass(frozen=True)
class HookSpec:
    """What one recording hook does besides recording.

    Attributes:
        fetch: the structure its ``before_run`` requests (global step, loss, by name, an op,
            dicts/lists/tuples/namedtuples of them).
        feed: if set, ``before_run`` feeds the ``loss`` tensor with ``feed + step`` (the fetched
            loss must then be that value in both worlds; two feeding hooks conflict).
        stop_in, stop_at: call ``run_context.request_stop()`` in ``before_run``/``after_run`` of
            step ``stop_at``.
        raise_in, raise_at, error: raise ``error`` in that method (at step ``raise_at`` for the
            per-step methods).
    """

    fetch: str = "gs"
    feed: float | None = None
    stop_in: str | None = None
    stop_at: int = 0
    raise_in: str | None = None
    raise_at: int = 0
    error: str = "error"


@dataclasses.dataclass(frozen=True)
class CallbackSpec:
    """What one recording callback does besides recording.

    Attributes:
        stop_in, stop_at: set ``model.stop_training = True`` in that method; ``stop_at`` is the
            global step for batch methods, the epoch for epoch methods (ignored for train_begin).
        raise_in, raise_at, error: raise ``error`` in that method, indexed the same way.
    """

    stop_in: str | None = None
    stop_at: int = 0
    raise_in: str | None = None
    raise_at: int = 0
    error: str = "error"


@dataclasses.dataclass(frozen=True)
class _Run:
    epochs: int = 1
    steps_per_epoch: int = 3
    losses: tuple[float, ...] = (1.0,)
    end_of_input: int | None = None

    def __post_init__(self) -> None:
        if self.end_of_input is not None and self.epochs != 1:
            raise ValueError(
                "end_of_input needs epochs=1: Keras restarts finite data every epoch, so input "
                "can only run out (mid-run, as in TF1) in a single pass over a generator."
            )
        if self.epochs < 1 or self.steps_per_epoch < 1 or not self.losses:
            raise ValueError(f"invalid scenario: {self!r}")

    @property
    def steps(self) -> int:
        """How many steps the caller asks for (``epochs * steps_per_epoch``)."""
        return self.epochs * self.steps_per_epoch

    def loss(self, step: int) -> float:
        """The batch loss of ``step`` in both worlds."""
        return self.losses[step % len(self.losses)]


@dataclasses.dataclass(frozen=True)
class HookScenario(_Run):
    """Recording hooks (one per spec, named ``h0``, ``h1``, ...) over a scripted run.

    ``end_of_input=n``: the input ends after ``n`` steps (a one-shot dataset in TF1, a generator
    in Keras); the caller would otherwise run ``steps`` steps.
    """

    hooks: tuple[HookSpec, ...] = (HookSpec(),)


@dataclasses.dataclass(frozen=True)
class CallbackScenario(_Run):
    """Recording callbacks (named ``c0``, ``c1``, ...) over a scripted run."""

    callbacks: tuple[CallbackSpec, ...] = (CallbackSpec(),)
