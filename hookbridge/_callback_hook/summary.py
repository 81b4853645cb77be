"""``model.summary()`` under CallbackHook: the graph's variables in Keras's table.

One row per variable (``name (dtype)``, its shape, its parameter count) where Keras has one per
layer, and Keras's totals: ``Total`` / ``Trainable`` / ``Non-trainable params`` with their memory
size, plus Keras 3's ``Optimizer params`` (the global step, a variable learning rate and the TF1
optimizer's own variables, as Keras 3 counts its iterations, learning rate and slots). Keras 3's
layout (a box table, handed whole to ``print_fn``) or tf_keras / Keras 2's (ruled lines, one
``print_fn`` call per line), by the stack of the callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def count(variables: Sequence[Any]) -> int:
    """Number of scalars in ``variables`` (fully defined shapes)."""
    return int(sum(np.prod(v.shape.as_list(), dtype=np.int64) for v in variables))


def _bytes(variables: Sequence[Any]) -> int:
    return int(
        sum(np.prod(v.shape.as_list(), dtype=np.int64) * v.dtype.base_dtype.size for v in variables)
    )


def _readable(size: float, units: tuple[str, ...]) -> str:
    """As Keras's ``readable_memory_size`` (1024 steps, two decimals)."""
    for unit in units:
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} {units[-1]}"


def render(
    *,
    keras3: bool,
    variables: Sequence[Any],
    trainable: set[int],
    optimizer_variables: Sequence[Any],
    line_length: int | None,
    show_trainable: bool,
    print_fn: Callable[..., Any] | None,
) -> None:
    """Prints the summary (see the module docstring) with ``print_fn`` (default ``print``)."""
    header = ["Variable (dtype)", "Shape", "Param #"]
    if show_trainable:
        header.append("Trainable")
    rows = []
    for v in variables:
        row = [
            f"{v.op.name} ({v.dtype.base_dtype.name})",
            str(tuple(v.shape.as_list())),
            str(count([v])),
        ]
        if show_trainable:
            row.append("Y" if id(v) in trainable else "N")
        rows.append(row)
    train = [v for v in variables if id(v) in trainable]
    frozen = [v for v in variables if id(v) not in trainable]
    units = (
        ("B", "KB", "MB", "GB", "TB", "PB") if keras3 else ("Byte", "KB", "MB", "GB", "TB", "PB")
    )
    totals = [("Total", [*variables, *optimizer_variables] if keras3 else list(variables))]
    totals += [("Trainable", train), ("Non-trainable", frozen)]
    if keras3 and optimizer_variables:
        totals.append(("Optimizer", list(optimizer_variables)))
    total_lines = [
        f"{label} params: {count(vs)} ({_readable(_bytes(vs), units)})" for label, vs in totals
    ]
    if keras3:
        text = _keras3_table(header, rows, line_length)
        text += "".join(f" {line}\n" for line in total_lines)
        (print_fn or _print_whole)(text)
    else:
        for line in _keras2_lines(header, rows, line_length, total_lines):
            (print_fn or print)(line)


def _print_whole(text: str) -> None:
    print(text, end="")


def _keras3_table(header: list[str], rows: list[list[str]], line_length: int | None) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    if line_length:  # spread the extra width over the first column, as a wider table
        widths[0] = max(widths[0], line_length - sum(widths[1:]) - 3 * len(widths) - 1)
    else:
        widths = [max(w, d) for w, d in zip(widths, [31, 22, 13, 9])]

    def line(cells: list[str], bar: str) -> str:
        out = []
        for i, (cell, w) in enumerate(zip(cells, widths)):
            numeric = i == 2
            out.append(f" {cell.rjust(w) if numeric else cell.ljust(w)} ")
        return bar + bar.join(out) + bar + "\n"

    def rule(left: str, mid: str, right: str, fill: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + right + "\n"

    text = 'Model: "graph"\n' + rule("┏", "┳", "┓", "━") + line(header, "┃")
    text += rule("┡", "╇", "┩", "━")
    for row in rows:
        text += line(row, "│")
    return text + rule("└", "┴", "┘", "─")


def _keras2_lines(
    header: list[str], rows: list[list[str]], line_length: int | None, totals: list[str]
) -> list[str]:
    length = line_length or 65
    fractions = [0.45, 0.85, 1.0] if len(header) == 3 else [0.4, 0.7, 0.85, 1.0]
    stops = [int(length * f) for f in fractions]

    def line(cells: list[str]) -> str:
        text = ""
        for cell, stop in zip(cells, stops):
            text = (text + " " + cell)[:stop].ljust(stop)
        return text

    out = ['Model: "graph"', "_" * length, line(header), "=" * length]
    out += [line(r) for r in rows]
    out += ["=" * length, *totals, "_" * length]
    return out
