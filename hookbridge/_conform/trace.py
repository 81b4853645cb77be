"""Traces: normalized event lists, and the readable side-by-side diff of two of them."""

from __future__ import annotations

import collections.abc
import hashlib
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

    Integers (numpy or Python) become ``int``, floats are rounded to 4 digits, a serialized
    ``Summary`` (what a summary op returns) or ``Event`` becomes what it contains (see
    :func:`decode_summary`), other ``bytes`` become ``"<bytes>"``, arrays become nested lists,
    mappings become dicts with sorted keys, namedtuples ``(type name, fields...)``; ``None`` stays
    ``None``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (bytes, np.bytes_)):
        decoded = decode_summary(bytes(value))
        return "<bytes>" if decoded is None else decoded
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isnan(f) else round(f, _FLOAT_DIGITS)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SOU":
            return normalize(value.tolist()) if value.dtype.kind == "S" else "<bytes>"
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


def decode_summary(data: bytes) -> tuple | None:
    """What a serialized ``tf.compat.v1.Summary`` (or ``Event``) holds, or None if it is not one.

    A summary becomes ``("Summary", ((tag, value), ...))``: a scalar's ``simple_value`` rounded
    to 4 digits, a tensor summary's value as a (nested) list (a text summary's strings decoded),
    a histogram as ``("histo", num, min, max, sum, sum_squares, limits, counts)``, an image as
    ``("image", height, width, "sha256:...")`` of its encoded bytes (audio likewise). An event becomes ``("Event", step, summary)``. So two
    traces differ when their summaries hold different values, not only when they have a summary.
    """
    if not data:
        return None
    for kind in (_summary_class(), _event_class()):
        try:
            proto = kind.FromString(data)
        except Exception:  # noqa: BLE001, S112 - not a message of this kind
            continue
        if proto.SerializeToString(deterministic=True) != data:
            continue  # parsed with unknown fields or by accident: not this kind
        if kind is _event_class():
            if not proto.HasField("summary"):
                continue
            return ("Event", int(proto.step), _summary_values(proto.summary))
        if proto.value:
            return _summary_values(proto)
    return None


def _summary_values(summary: Any) -> tuple:
    return ("Summary", tuple((v.tag, _summary_value(v)) for v in summary.value))


def _summary_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return normalize(float(value.simple_value))
    if kind == "tensor":
        import tensorflow as tf

        array = tf.make_ndarray(value.tensor)
        if array.dtype.kind in "OS":  # a text summary: its strings (other bytes by digest)
            return normalize(np.vectorize(_text, otypes=[object])(array).tolist())
        return normalize(array)
    if kind == "histo":
        h = value.histo
        return normalize(
            ("histo", int(h.num), h.min, h.max, h.sum, h.sum_squares, tuple(h.bucket_limit),
             tuple(h.bucket))
        )
    if kind in ("image", "audio"):
        media = getattr(value, kind)
        data = media.encoded_image_string if kind == "image" else media.encoded_audio_string
        size = (media.height, media.width) if kind == "image" else (media.sample_rate,)
        return (kind, *normalize(size), _digest(data))
    return f"<{kind}>"


def _text(data: Any) -> str:
    if isinstance(data, bytes):
        try:
            return data.decode()
        except UnicodeDecodeError:
            return _digest(data)
    return str(data)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


def _summary_class() -> Any:
    import tensorflow as tf

    return tf.compat.v1.Summary


def _event_class() -> Any:
    import tensorflow as tf

    return tf.compat.v1.Event


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
