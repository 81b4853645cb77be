"""A hook's verdict is the worst of its parts.

A hook row alone says whether the bridge runs the hook's class (``LoggingTensorHook``
conforms); what the hook is given decides whether it runs in ``fit``: the tensors, summary op or
Saver it reads (its ``tensor`` rows), for a scanned hook class the tensors its methods read,
and for a function that builds hooks (``hooks_helper.get_train_hooks(...)``) every hook it
builds. :class:`Links` records those parts while the modules are analysed (they may be in other
modules); :func:`combine` then gives each hook row the worst status of itself and its parts,
saying which parts decided it, so the table, the per-entry-point summary and the exit code
agree with the tensor rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.findings import Finding

#: The order of badness within one exit code: a removed spelling first (stage 0 of the
#: migration: the code must import), then a tensor fit will not have, then what the tree cannot
#: decide, then custom code to check.
_RANK = {
    f.CONFORMS: 0,
    f.ENTRY_POINT: 0,
    f.CUSTOM: 1,
    f.UNVERIFIED: 2,
    f.NEEDS_TENSOR: 3,
    f.REMOVED_API: 4,
    f.UNSUPPORTED: 5,
    f.PARSE_ERROR: 6,
}

Key = tuple[str, int, str, str]  # (path, line, kind, name): one row (rows are unique by it)


def key(x: Finding) -> Key:
    return (x.path, x.line, x.kind, x.name)


def worse(a: str, b: str) -> bool:
    """Whether status ``a`` is worse than ``b`` (by exit code, then by :data:`_RANK`)."""
    return (f.exit_code_of(a), _RANK[a]) > (f.exit_code_of(b), _RANK[b])


@dataclasses.dataclass
class Links:
    """The parts of hook rows, recorded by every module's analysis (keys of rows)."""

    #: a hook row -> rows it reads (its tensor rows; tensors its callers pass it).
    parts: dict[Key, list[Key]] = dataclasses.field(default_factory=dict)
    #: a hook row -> the scanned hook class it constructs (qualname).
    uses: dict[Key, str] = dataclasses.field(default_factory=dict)
    #: a hook class (qualname) -> its row and the tensor rows of its methods.
    class_rows: dict[str, Key] = dataclasses.field(default_factory=dict)
    class_parts: dict[str, list[Key]] = dataclasses.field(default_factory=dict)
    #: a function (id of its node) -> the hook rows built in it, and the functions it calls.
    built_in: dict[int, list[Key]] = dataclasses.field(default_factory=dict)
    calls: dict[int, set[int]] = dataclasses.field(default_factory=dict)
    #: a row of a call of scanned functions building hooks -> those functions (ids).
    factories: dict[Key, list[int]] = dataclasses.field(default_factory=dict)
    #: rows of what one call gives a function's parameter, and of a parameter itself: a part
    #: of the hook it reaches, not of what another call of the function builds.
    given: set[Key] = dataclasses.field(default_factory=set)

    def add_part(self, hook: Key, part: Key) -> None:
        at = self.parts.setdefault(hook, [])
        if part not in at:
            at.append(part)


def combine(rows: Iterable[Finding], links: Links) -> list[Finding]:
    """Every row, each hook and hook-class row with the worst status of itself and its parts."""
    rows = list(rows)
    by_key = {key(x): x for x in rows}
    memo: dict[Key, list[Finding]] = {}

    def function_parts(function: int, seen: set[int]) -> list[Finding]:
        if function in seen:
            return []
        seen.add(function)
        out = [
            x
            for k in links.built_in.get(function, [])
            for x in [by_key[k], *parts_of(k)]
            if key(x) not in links.given
        ]
        for called in links.calls.get(function, ()):
            out += function_parts(called, seen)
        return out

    def parts_of(k: Key) -> list[Finding]:
        """Rows whose status bears on row ``k`` (not ``k`` itself)."""
        if k in memo:
            return memo[k]
        memo[k] = []  # a cycle contributes nothing more
        out = [by_key[p] for p in links.parts.get(k, []) if p in by_key]
        cls = links.uses.get(k)
        if cls is not None:
            row = links.class_rows.get(cls)
            out += [by_key[row]] if row in by_key and row != k else []
            out += [by_key[p] for p in links.class_parts.get(cls, []) if p in by_key]
        seen: set[int] = set()
        for function in links.factories.get(k, []):
            out += function_parts(function, seen)
        memo[k] = [x for x in out if key(x) != k]
        return memo[k]

    out = []
    for x in rows:
        if x.kind in (f.HOOK, f.HOOK_CLASS):
            x = _verdict(x, parts_of(key(x)), factory=key(x) in links.factories)
        out.append(x)
    return out


def _verdict(row: Finding, parts: list[Finding], factory: bool) -> Finding:
    """``row`` with the worst status of itself and ``parts``; a call of functions building hooks
    takes the worst of what they build (its own status: none of them seen)."""
    unique = {key(p): p for p in parts}
    parts = sorted(unique.values(), key=lambda p: (p.path, p.line, p.name))
    if factory and not parts:
        return dataclasses.replace(row, detail=f"{row.detail}: none the scan can see")
    if factory and parts:
        status = f.CONFORMS
        for p in parts:
            if worse(p.status, status):
                status = p.status
        listed = ", ".join(f"{p.name} {p.status} ({p.path}:{p.line})" for p in parts)
        worst = [p for p in parts if p.status == status and p.kind != f.HOOK] or [
            p for p in parts if p.status == status
        ]
        return dataclasses.replace(
            row,
            status=status,
            detail=f"{row.detail}: {listed}",
            action=worst[0].action if status != f.CONFORMS else "",
        )
    bad = [p for p in parts if worse(p.status, f.CONFORMS)]
    if not bad:
        return row
    status = row.status
    for p in bad:
        if worse(p.status, status):
            status = p.status
    listed = ", ".join(f"{p.name} {p.status} ({p.path}:{p.line})" for p in bad)
    if status == row.status:  # what it reads is worth knowing all the same
        return dataclasses.replace(row, detail=f"{row.detail}; what it reads: {listed}")
    action = next(p for p in bad if p.status == status).action
    if row.action:
        action = f"{action}; then {row.action}" if action else row.action
    return dataclasses.replace(
        row,
        status=status,
        detail=f"{row.detail}; as given here: {status}, from what it reads: {listed}",
        action=action,
    )
