"""How a case is timed.

A run trains ``1 + epochs`` epochs of ``steps`` steps in one ``fit`` (or one
``MonitoredSession``); every epoch but the first is timed on its own. An epoch's seconds over its
steps is the per-step cost: the slope of cumulative time over steps inside one long run, so fixed
costs (the iterator, the bridge's side graph and session, hooks' ``begin``/``end``, the first
epoch's tracing and first summaries) fall outside the timing without a second, shorter run.
While a run is timed the garbage collector is frozen and disabled, as ``timeit`` does. Repeats are
interleaved: every repeat runs all cases in a freshly shuffled order, so load from elsewhere on the
machine hits all cases alike.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable

#: The clock epochs are timed with (``bench.py --clock cpu`` switches to ``time.process_time``).
CLOCK: Callable[[], float] = time.perf_counter


def use_clock(name: str) -> None:
    """``"wall"`` (perf_counter, the default) or ``"cpu"`` (the process's CPU time)."""
    global CLOCK
    CLOCK = time.process_time if name == "cpu" else time.perf_counter


@contextlib.contextmanager
def timed():
    """Runs its block as ``timeit`` runs a timing: the garbage collector is run, its survivors
    frozen, and collection disabled meanwhile, so a full collection of TF's and Keras's millions
    of objects (tens of ms) lands in no case's timing by chance."""
    gc.collect()
    gc.freeze()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()


class Timings:
    """Per-step costs per case: ``samples[case][r]`` = µs/step of each timed epoch of repeat r."""

    def __init__(self) -> None:
        self.samples: dict[str, list[list[float]]] = {}

    def add(self, case: str, steps: int, epoch_seconds: list[float]) -> None:
        """Records one run: its first epoch is dropped (untimed), the rest become µs/step."""
        per_step = [t / steps * 1e6 for t in epoch_seconds[1:]]
        self.samples.setdefault(case, []).append(per_step)

    def all_us(self, case: str) -> list[float]:
        return [x for repeat in self.samples[case] for x in repeat]

    def repeat_medians_us(self, case: str) -> list[float]:
        """One figure per repeat (the median of its epochs), for ratios paired within a repeat."""
        return [statistics.median(r) for r in self.samples[case]]

    def low_us(self, case: str) -> float:
        """The fastest epoch, µs/step: interference from the rest of the machine only ever
        slows an epoch down, so the fastest is the least disturbed (``timeit``'s reasoning)."""
        return min(self.all_us(case))


def measure(
    cases: dict,
    steps: int,
    epochs: int,
    repeats: int,
    own_sizes: bool = True,
    seed: int = 0,
    warm_up: bool = True,
) -> Timings:
    """Runs every case ``repeats`` times, interleaved in a shuffled order per repeat.

    With ``own_sizes``, a case with its own ``steps`` / ``epochs`` (the realistic CNN, whose step
    is 10–50× the MLP's) uses them instead of the benchmark's (the short mode passes False).
    Without ``warm_up`` (the short mode: its timings mean nothing) no untimed run comes first.
    """
    rng = random.Random(seed)
    timings = Timings()

    def sizes(case) -> tuple[int, int]:
        if not own_sizes:
            return steps, epochs
        return case.steps or steps, case.epochs or epochs

    if warm_up:
        for case in cases.values():  # tracing, imports, first writers
            case.run(min(sizes(case)[0], 50), 2)
    for r in range(repeats):
        order = list(cases.values())
        rng.shuffle(order)
        for case in order:
            n, e = sizes(case)
            timings.add(case.name, n, case.run(n, 1 + e))
        print(
            f"  repeat {r + 1}/{repeats} done (load {os.getloadavg()[0]:.2f})",
            file=sys.stderr,
            flush=True,
        )
    return timings
