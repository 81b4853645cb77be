"""The global step hooks see under HookCallback: ``optimizer.iterations``, read only when needed.

TF1 has one global step variable; under ``fit`` it is ``model.optimizer.iterations``. Reading that
Keras variable costs 20-100 µs, more than a whole idle hook step, so :class:`GlobalStep` reads it
only when its value may differ from what the bridge can predict:

* a Keras step of one batch advances it by one: predicted, no read, when Keras's own
  ``train_step`` drives Keras's own optimizer. Otherwise it is read after every step: the
  optimizer may skip the increment (Keras 3 ``LossScaleOptimizer`` on non-finite gradients,
  gradient accumulation), or a custom ``train_step`` (or optimizer class) may apply gradients on
  some steps only (manual accumulation: 0, 1, 1, 2);
* an execution of several batches (``steps_per_execution=k``) is read after it ran: Keras's
  batch numbers do not say how many steps ran (Keras 3 reports ``k`` for the epoch's last,
  shorter execution), and one read per ``k`` steps is cheap;
* Python code assigns it (another callback, user code, a thread): ``assign``/``assign_add``/
  ``assign_sub`` of that variable object are watched while a run is active and mark the value
  stale, so the next read by a hook reads the variable;
* a Keras step that began and never ended (on an input of unknown length, an epoch's last
  call finds the end of the data: ``on_train_batch_begin`` without its ``_end``): Keras 2.11+'s
  and Keras 3's optimizers may have counted it (their ``iterations.assign_add`` waits for
  nothing, so Keras's executor may run it in the call that had no batch; the legacy Keras and
  TF1 optimizers, and the census twin's, do not). Read at the next epoch start, with no
  warning: it is Keras's own count. The hooks' ``end()`` right after it sees the step after the
  last step taken, as natively (``tests/conformance/test_semantics.py``);
* anything else (a checkpoint restored into it, another worker): seen at the next epoch start,
  where the value is read again (docs/limits.md). If that read finds another value than the
  predicted one, with no watched write since the last read, the prediction was wrong: a warning
  says so, and the run reads the variable after every step from then on;
* a hook assigning the bridge graph's global step through the bridge's session: the session
  writes the new value to ``iterations`` (:meth:`write`), see ``session.py``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

_WATCHED_METHODS = ("assign", "assign_add", "assign_sub")


class _Watch:
    """Instance-level wrappers of a variable's assign methods that notify listeners."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _by_variable: ClassVar[dict[int, _Watch]] = {}

    def __init__(self, variable: Any) -> None:
        self.variable = variable
        self.listeners: list[Callable[[], None]] = []
        self.saved: dict[str, Any] = {}
        for name in _WATCHED_METHODS:
            original = getattr(variable, name, None)
            if original is None:
                continue
            if name in vars(variable):
                self.saved[name] = vars(variable)[name]
            setattr(variable, name, self._wrap(original))

    def _wrap(self, original: Callable) -> Callable:
        listeners = self.listeners

        def watched(*args: Any, **kwargs: Any) -> Any:
            # Notified after the write: a reader between a notification and the write would
            # clear the mark and keep the old value until the next epoch.
            try:
                return original(*args, **kwargs)
            finally:
                for notify in tuple(listeners):
                    notify()

        return watched

    def restore(self) -> None:
        for name in _WATCHED_METHODS:
            if name in self.saved:
                setattr(self.variable, name, self.saved[name])
            else:
                vars(self.variable).pop(name, None)

    @classmethod
    def add(cls, variable: Any, listener: Callable[[], None]) -> None:
        with cls._lock:
            watch = cls._by_variable.get(id(variable))
            if watch is None:
                watch = cls._by_variable[id(variable)] = cls(variable)
            watch.listeners.append(listener)

    @classmethod
    def remove(cls, variable: Any, listener: Callable[[], None]) -> None:
        with cls._lock:
            watch = cls._by_variable.get(id(variable))
            if watch is None or listener not in watch.listeners:
                return
            watch.listeners.remove(listener)
            if not watch.listeners:
                del cls._by_variable[id(variable)]
                watch.restore()


def _watchable(variable: Any) -> bool:
    try:
        vars(variable)
    except TypeError:
        return False
    return callable(getattr(variable, "assign", None))


class GlobalStep:
    """The one owner of the global step's value during a run (see the module docstring).

    Nothing else counts steps: per Keras step ``BridgeRun`` calls :meth:`before_step` (which
    fixes :attr:`pre`, the value the step's run fetches) and :meth:`after_step` (which advances
    :attr:`value`, or reads the variable when the advance cannot be predicted); the session
    reads :attr:`pre` (stale fetches) and :meth:`current`.

    Args:
        variable: ``model.optimizer.iterations`` (None without an optimizer: the step then
            counts Keras steps from ``start``).
        read: reads ``variable`` as an int (one variable read).
        write: assigns an int to ``variable`` (in the right context for the Keras flavour).
        may_skip: a step may advance ``variable`` by other than one: read after every step.
        start: the value when ``variable`` is None.
    """

    __slots__ = (
        "_checking",
        "_open",
        "_read",
        "_read_value",
        "_watching",
        "_write",
        "dirty",
        "may_skip",
        "pre",
        "value",
        "variable",
    )

    def __init__(
        self,
        variable: Any,
        read: Callable[[], int | None],
        write: Callable[[int], None],
        *,
        may_skip: bool = False,
        start: int = 0,
    ) -> None:
        self.variable = variable
        self._read = read
        self._write = write
        self.may_skip = may_skip
        self.value = start
        self.pre = start  # the value before the current Keras step (the "stale" fetch)
        self.dirty = variable is not None
        self._watching = False
        self._read_value = start  # the value the variable had at the last read
        self._checking = False  # whether the next read checks the predicted value
        self._open = False  # a Keras step began and has not ended

    # -- lifecycle ----------------------------------------------------------------------------
    def watch(self) -> None:
        """Starts watching Python writes to the variable (until :meth:`unwatch`)."""
        if self.variable is not None and not self._watching and _watchable(self.variable):
            _Watch.add(self.variable, self._mark)
            self._watching = True

    def unwatch(self) -> None:
        if self._watching:
            self._watching = False
            _Watch.remove(self.variable, self._mark)

    def _mark(self) -> None:
        self._checking = False  # the next read sees a write, not a wrong prediction
        self.dirty = True

    def verify(self) -> None:
        """Reads the variable at the next use (an epoch start): what no watch sees. When steps
        were predicted since the last read, that read also checks the prediction, unless a step
        began and never ended (Keras's call that found the end of the data, which Keras's
        optimizer may have counted: no prediction to check)."""
        if self.variable is not None:
            self._checking = not self._open and not self.dirty and self.value != self._read_value
            self.dirty = True
        self._open = False

    # -- per Keras step -----------------------------------------------------------------------
    def before_step(self) -> None:
        """Before a Keras step: :attr:`pre` is the value as the step starts."""
        if self.dirty:
            self.refresh()
        self.pre = self.value
        self._open = True

    def after_step(self, batches: int) -> None:
        """After a Keras step that Keras reports as covering ``batches`` batches: the variable's
        new value, predicted for one batch (no read) and read otherwise (see the module
        docstring); without a variable, counted (at most ``batches``)."""
        self._open = False
        if self.dirty or self.may_skip or batches != 1:
            if self.variable is not None:
                self.refresh()
                return
        self.value += batches

    # -- values -------------------------------------------------------------------------------
    def current(self) -> int:
        """The global step now (read from the variable only if it may have changed)."""
        if self.dirty:
            self.refresh()
        return self.value

    def refresh(self) -> None:
        self.dirty = False
        got = self._read()
        if got is not None:
            if self._checking:
                self._checking = False
                if got != self.value:
                    self._mispredicted(got)
            self.value = self._read_value = got

    def _mispredicted(self, got: int) -> None:
        """The steps predicted since the last read were wrong: read after every step from now."""
        self.may_skip = True
        warnings.warn(
            f"HookCallback: optimizer.iterations is {got} where the bridge counted "
            f"{self.value} (one per Keras step since it read {self._read_value}): the steps "
            "did not advance it by one each (an optimizer or train step applying gradients on "
            "some steps only) or something wrote it unseen (a checkpoint restored into it). "
            "The hooks read the counted values until now; from here on the bridge reads "
            "optimizer.iterations after every step (one variable read each). See docs/limits.md.",
            stacklevel=2,
        )

    def write(self, value: int) -> None:
        """Sets the variable (and the value hooks see) to ``value``: a hook assigned the step."""
        value = int(np.asarray(value))
        if self.variable is not None:
            self._write(value)
        self.value = self._read_value = value
        self.dirty = False
