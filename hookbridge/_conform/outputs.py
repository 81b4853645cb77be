"""What a training run left behind, read back with real readers, and where two runs differ.

:func:`read_outputs` turns a run's folder into comparable records: TensorFlow checkpoints (every
variable, read with ``tf.train.load_checkpoint``), event files (what every summary holds per
tag and step, read with TensorBoard's ``EventAccumulator``: :mod:`hookbridge._conform.events`;
one record per folder, as their file names hold a time and a host), CSV files (cells, numbers as numbers), other text files (lines),
and other files (their bytes). :func:`compare_outputs` says where two such reads differ, and what
it could not compare (a binary file whose bytes differ, a graph in an event file, may still be
equivalent: "unknown", never "same").
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import re
from typing import Any

import numpy as np

from hookbridge._conform.events import Opaque, read_events

#: Relative tolerance for numbers read back from files (float32 round-off of the same value).
RTOL = 1e-5
_CKPT_DATA = re.compile(r"^(?P<prefix>.+)\.data-\d{5}-of-\d{5}$")
#: Lines of a ``checkpoint`` state file that hold a time (they differ between any two runs).
_TIMESTAMP_LINE = re.compile(r"^\s*(all_model_checkpoint_timestamps|last_preserved_timestamp)")


@dataclasses.dataclass
class Output:
    """One thing a run wrote: ``kind`` (checkpoint, events, csv, text, bytes) and its content."""

    kind: str
    content: Any


def read_outputs(root: str, replace: dict[str, str] | None = None) -> dict[str, Output]:
    """Everything under ``root``, keyed by path relative to it (checkpoints by prefix, event
    files by folder: ``<folder>/events.out.tfevents.*``; :mod:`hookbridge._conform.events` reads
    what each summary holds).

    Args:
        root: the run's folder.
        replace: strings to replace in text content (the run's own folder, which differs
            between runs, by a placeholder).
    """
    replace = replace or {}
    files = sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )
    outputs: dict[str, Output] = {}
    checkpoints = {m.group("prefix") for f in files if (m := _CKPT_DATA.match(f))}
    event_dirs = {os.path.dirname(f) for f in files if "tfevents" in os.path.basename(f)}
    for prefix in sorted(checkpoints):
        try:
            outputs[prefix] = Output("checkpoint", _read_checkpoint(os.path.join(root, prefix)))
        except Exception as e:  # noqa: BLE001 - a checkpoint TF cannot read is not compared
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            outputs[prefix] = Output(
                "unread", f"a checkpoint TensorFlow cannot read ({type(e).__name__}: {first})"
            )
    for folder in sorted(event_dirs):
        key = os.path.join(folder, "events.out.tfevents.*")
        try:
            outputs[key] = Output("events", read_events(os.path.join(root, folder)))
        except ImportError:  # TF >= 2.21 does not bring tensorboard
            outputs[key] = Output("unread", "event files: install tensorboard to read them")
    for name in files:
        base = os.path.basename(name)
        index_of_checkpoint = name.endswith(".index") and name[: -len(".index")] in checkpoints
        if "tfevents" in base or _CKPT_DATA.match(name) or index_of_checkpoint:
            continue
        outputs[name] = _read_file(os.path.join(root, name), base, replace)
    return outputs


def _read_checkpoint(prefix: str) -> dict[str, Any]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {
        name: reader.get_tensor(name)
        for name in sorted(reader.get_variable_to_shape_map())
        if not name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")
    }


def _read_file(path: str, base: str, replace: dict[str, str]) -> Output:
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return Output("bytes", data)
    for old, new in replace.items():
        text = text.replace(old, new)
    if base == "checkpoint":  # TF's checkpoint state: paths and times
        lines = [line for line in text.splitlines() if not _TIMESTAMP_LINE.match(line)]
        return Output("text", lines)
    if base.endswith(".csv"):
        rows = [[_number(cell) for cell in row] for row in csv.reader(text.splitlines())]
        return Output("csv", rows)
    return Output("text", text.splitlines())


def _number(cell: str) -> Any:
    try:
        return int(cell)
    except ValueError:
        try:
            return float(cell)
        except ValueError:
            return cell


def same_value(a: Any, b: Any) -> bool:
    """Whether two read-back values are equal (numbers within :data:`RTOL`, NaN equal NaN,
    :class:`~hookbridge._conform.events.Opaque` contents by their bytes)."""
    if isinstance(a, Opaque) or isinstance(b, Opaque):
        return a == b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        if a.dtype.kind in "fc":
            return bool(np.allclose(a, b, rtol=RTOL, atol=0.0, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=RTOL, abs_tol=0.0)
    return a == b


def compare_outputs(
    left: dict[str, Output], right: dict[str, Output], *, left_name: str, right_name: str
) -> tuple[list[str], list[str], list[str]]:
    """Where two runs' outputs differ.

    Returns:
        ``(differences, unknown, same)``: one line per difference, per file that could not be
        compared (binary, bytes differ), per file found equal.
    """
    differences: list[str] = []
    unknown: list[str] = []
    same: list[str] = []
    for name in sorted(set(left) | set(right)):
        a, b = left.get(name), right.get(name)
        if a is None or b is None:
            who = left_name if b is None else right_name
            kind = (a or b).kind  # type: ignore[union-attr]
            differences.append(f"{name} ({kind}): written only by {who}")
            continue
        if "unread" in (a.kind, b.kind):  # one side could not be read: nothing to compare
            unknown.append(f"{name}: {(a if a.kind == 'unread' else b).content}")
            continue
        if a.kind != b.kind:
            differences.append(f"{name}: a {a.kind} file from {left_name}, {b.kind} from {right_name}")
            continue
        if a.kind == "bytes":
            (same if a.content == b.content else unknown).append(
                name if a.content == b.content else f"{name}: binary, bytes differ (not read)"
            )
            continue
        undecided: list[str] = []
        found = _content_differences(a, b, left_name, right_name, undecided)
        differences += [f"{name} ({a.kind}): {line}" for line in found]
        unknown += [
            f"{name} ({a.kind}): {line} (not decoded: cannot tell whether they are equivalent)"
            for line in undecided
        ]
        if not found and not undecided:
            same.append(name)
    return differences, unknown, same


def _masked(value: Any) -> Any:
    """``value`` with every :class:`Opaque` part the same placeholder."""
    if isinstance(value, Opaque):
        return "<not decoded>"
    if isinstance(value, (list, tuple)):
        return [_masked(v) for v in value]
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    return value


def _content_differences(
    a: Output, b: Output, left_name: str, right_name: str, unknown: list[str]
) -> list[str]:
    """Where two reads of one file differ; what only :class:`Opaque` parts could tell goes to
    ``unknown``."""
    if a.kind in ("checkpoint", "events"):
        lines = []
        for key in sorted(set(a.content) | set(b.content)):
            if key not in b.content:
                lines.append(f"{key} only from {left_name}")
            elif key not in a.content:
                lines.append(f"{key} only from {right_name}")
            elif not same_value(a.content[key], b.content[key]):
                lines.append(
                    f"{key}: {_first_difference(a.content[key], b.content[key], left_name, right_name)}"
                )
                if same_value(_masked(a.content[key]), _masked(b.content[key])):
                    unknown.append(lines.pop())  # only content check does not decode differs
        return lines
    rows_a, rows_b = a.content, b.content
    for i in range(max(len(rows_a), len(rows_b))):
        ra = rows_a[i] if i < len(rows_a) else "(no line)"
        rb = rows_b[i] if i < len(rows_b) else "(no line)"
        if not same_value(ra, rb):
            return [
                f"first difference at line {i + 1}: {left_name} {ra!r}, {right_name} {rb!r} "
                f"({len(rows_a)} lines vs {len(rows_b)})"
            ]
    return []


def _first_difference(a: Any, b: Any, left_name: str, right_name: str) -> str:
    """Where two values differ; for two series of ``(step, value)``, the first step."""
    series = all(
        isinstance(v, list) and all(isinstance(x, tuple) and len(x) == 2 for x in v) for v in (a, b)
    )
    if series:
        steps_a, steps_b = [x[0] for x in a], [x[0] for x in b]
        if steps_a != steps_b:
            return f"steps {left_name} {_short(steps_a)}, {right_name} {_short(steps_b)}"
        for (step, va), (_, vb) in zip(a, b):
            if not same_value(va, vb):
                return f"at step {step}: {left_name} {_short(va)}, {right_name} {_short(vb)}"
    return f"{left_name} {_short(a)}, {right_name} {_short(b)}"


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
