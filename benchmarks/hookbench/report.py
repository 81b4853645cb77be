"""The targets and the results table.

Every target is a ratio of two cases measured in the same run (interleaved, same process), so the
machine's drift between runs cancels: a case is judged against what a user would run instead.
Verdicts compare each case's fastest epoch (``Timings.low_us``); the median over repeats of
ratios paired within a repeat is printed beside it as a second view.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
from typing import NamedTuple

import keras
import tensorflow as tf

import hookbridge

from .timing import Timings


class Check(NamedTuple):
    """One row: ``case`` against ``reference``; ``kind`` is ``"ratio"`` (fastest-epoch ratio
    <= limit), ``"per_hook"`` ((case - reference) / extra hooks <= limit µs) or ``"report"``."""

    case: str
    reference: str | None
    kind: str
    limit: float | None
    target: str


CHECKS = [
    Check("bare", None, "report", None, "reference"),
    Check("keras_noop", "bare", "report", None, "- (what Keras charges any batch callback)"),
    # End-to-end 2 % targets on a ~1 ms step cannot be decided on this machine (issue 24): the
    # per-call targets of idle_1 and nan are percall.py's; here they are reported.
    Check("idle_1", "keras_noop", "report", None, "- (per call: percall.py)"),
    Check("idle_1", "bare", "report", None, "-"),
    Check("keras_nan", "bare", "report", None, "-"),
    Check("nan", "keras_nan", "report", None, "- (per call: percall.py, <= 2.0x)"),
    Check("nan", "bare", "report", None, "-"),
    Check("keras_equiv", "bare", "report", None, "-"),
    Check("standard", "keras_equiv", "ratio", 1.00, "<= 1.00x keras_equiv"),
    Check("standard", "bare", "report", None, "-"),
    Check("idle_10", "idle_1", "per_hook", None, "- (9 extra hooks: noisy)"),
    Check("idle_100", "idle_1", "per_hook", 5.0, "<= 5 µs per extra hook"),
    Check("wide_bare", "bare", "report", None, "-"),
    Check("wide_standard", "wide_bare", "report", None, "-"),
    Check("cnn_bare", None, "report", None, "reference (realistic model)"),
    Check("cnn_keras_noop", "cnn_bare", "report", None, "-"),
    Check("cnn_standard", "cnn_bare", "report", None, "-"),
    Check("cnn_standard", "cnn_keras_noop", "report", None, "-"),
    Check("cnn_keras_equiv", "cnn_bare", "report", None, "-"),
    Check("cnn_standard", "cnn_keras_equiv", "ratio", 1.00, "<= 1.00x cnn_keras_equiv"),
    Check("ms_bare", None, "report", None, "reference (TF1)"),
    Check("ms_nan_hook", "ms_bare", "report", None, "- (one fetch per step, native)"),
    Check("ms_standard", "ms_bare", "report", None, "- (the standard set, native TF1)"),
    Check("ms_tf1_equiv", "ms_bare", "report", None, "- (the four jobs by hand, native TF1)"),
    Check("ms_callback_hook", "ms_tf1_equiv", "ratio", 1.05, "<= 1.05x ms_tf1_equiv"),
    Check("ms_callback_hook", "ms_nan_hook", "report", None, "-"),
    Check("ms_callback_hook", "ms_bare", "report", None, "-"),
    Check("ms_callback_hook_epoch", "ms_bare", "report", None, "- (no per-batch listener)"),
]
HOOK_COUNTS = {"idle_1": 1, "idle_10": 10, "idle_100": 100}


def checks_for(ran: dict) -> list[Check]:
    """The rows whose case and reference both ran."""
    return [c for c in CHECKS if c.case in ran and (c.reference is None or c.reference in ran)]


def references(names: set[str]) -> set[str]:
    """The cases ``names`` are compared with (so ``--only`` runs them too)."""
    return {c.reference for c in CHECKS if c.case in names and c.reference}


def _row(timings: Timings, check: Check, verdicts: bool) -> tuple[tuple, bool]:
    name, ref, kind, limit, target = check
    low = timings.low_us
    every = timings.all_us(name)
    med = timings.repeat_medians_us
    if ref is None:
        at_min, paired, value = "1.00", "1.00", 1.0
    elif kind == "per_hook":
        n = HOOK_COUNTS[name] - HOOK_COUNTS[ref]
        value = (low(name) - low(ref)) / n
        at_min = f"{value:+.2f} µs/extra hook vs {ref}"
        paired = f"{statistics.median((a - b) / n for a, b in zip(med(name), med(ref))):+.2f}"
    else:
        value = low(name) / low(ref)
        at_min = f"{value:.3f}x {ref} ({low(name) - low(ref):+.0f} µs)"
        paired = f"{statistics.median(a / b for a, b in zip(med(name), med(ref))):.3f}x"
    ok = True
    if limit is None:
        result = ""
    elif not verdicts:
        result = "ran"
    else:
        ok = value <= limit
        result = "PASS" if ok else "MISS"
    row = (
        name,
        f"{low(name):.0f}",
        f"{statistics.median(every):.0f}",
        f"{min(every):.0f}–{max(every):.0f}",
        at_min,
        paired,
        target,
        result,
    )
    return row, ok


def table(timings: Timings, verdicts: bool, checks: list[Check]) -> tuple[str, bool]:
    """The results table in Markdown, and whether every target was met."""
    rows, all_pass = [], True
    for check in checks:
        row, ok = _row(timings, check, verdicts)
        rows.append(row)
        all_pass &= ok
    head = (
        "case",
        "µs/step (fastest epoch)",
        "median",
        "min–max",
        "vs reference (fastest epochs)",
        "median paired",
        "target",
        "result",
    )
    widths = [max(len(str(r[i])) for r in [*rows, head]) for i in range(len(head))]

    def line(r: tuple) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out), all_pass


def machine() -> str:
    """One line naming the machine and the versions measured."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    version = getattr(hookbridge, "__version__", "dev")
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, "
        f"{os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"TF {tf.__version__}, Keras {keras.__version__}, hookbridge {version}"
    )
