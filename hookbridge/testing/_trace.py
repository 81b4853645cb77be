"""Traces: normalized event lists, and the readable side-by-side diff of two of them."""

from __future__ import annotations

import collections.abc
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: One event: ``(actor, method, *details)``, e.g. ``("h0", "after_run", 2, {"gs": 2}, False, 3)``.
Event = tuple[Any, ...]
#: A whole run: the events of every recorder in call order, then ``("runner", "outcome", ...)``.
Trace = list[Event]

_FLOAT_DIGITS = 4


def normalize(value: Any) -> Any:
    """A comparable, printable form of fetched results or logs.

    Integers (numpy or Python) become ``int``, floats are rounded to 4 digits, ``bytes`` (e.g.
    serialized summaries) become ``"<bytes>"``, arrays become nested lists, mappings become dicts
    with sorted keys, namedtuples ``(type name, fields...)``; ``None`` stays ``None``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (bytes, np.bytes_)):
        return "<bytes>"
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isnan(f) else round(f, _FLOAT_DIGITS)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SOU":
            return "<bytes>"
        return normalize(value.tolist())
    if isinstance(value, collections.abc.Mapping):
        return {str(k): normalize(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__,) + tuple(normalize(v) for v in value)
    if isinstance(value, tuple):
        return tuple(normalize(v) for v in value)
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return f"<{type(value).__name__}>"


def first_difference(a: Sequence[Event], b: Sequence[Event]) -> int | None:
    """Index of the first event where ``a`` and ``b`` differ (``None`` if equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if not _same(x, y):
            return i
    if len(a) != len(b):
        return min(len(a), len(b))
    return None


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True  # NaN == NaN for traces
    if isinstance(x, (tuple, list)) and isinstance(y, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(map(_same, x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return x == y


def format_diff(
    expected: Sequence[Event],
    actual: Sequence[Event],
    *,
    expected_name: str = "native",
    actual_name: str = "bridged",
    context: int = 6,
) -> str:
    """The two traces side by side around their first difference, marked with ``>>``."""
    i = first_difference(expected, actual)
    if i is None:
        return "traces are equal"
    lo, hi = max(0, i - context), min(max(len(expected), len(actual)), i + context + 1)
    left = [_fmt(e) for e in expected]
    right = [_fmt(e) for e in actual]
    width = max([len(expected_name)] + [len(s) for s in left[lo:hi]] + [8])
    width = min(width, 70)
    lines = [
        (
            f"first difference at event {i}: {expected_name} has "
            f"{left[i] if i < len(left) else '(nothing: trace ended)'}, {actual_name} has "
            f"{right[i] if i < len(right) else '(nothing: trace ended)'}"
        ),
        "",
        f"     {'#':>3}  {expected_name:<{width}}  {actual_name}",
    ]
    if lo:
        lines.append(f"     {'...':>3}")
    for j in range(lo, hi):
        mark = ">>" if j == i else ("!=" if j > i and _differs(left, right, j) else "  ")
        lhs = left[j] if j < len(left) else "-"
        rhs = right[j] if j < len(right) else "-"
        lines.append(f"  {mark} {j:>3}  {_clip(lhs, width):<{width}}  {rhs}")
    if hi < max(len(left), len(right)):
        lines.append(f"     {'...':>3}  ({len(left)} events vs {len(right)} events)")
    return "\n".join(lines)


def _differs(left: list, right: list, j: int) -> bool:
    return (left[j] if j < len(left) else None) != (right[j] if j < len(right) else None)


def _fmt(event: Event) -> str:
    return " ".join(repr(x) if not isinstance(x, str) else x for x in event)


def _clip(s: str, width: int) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"
