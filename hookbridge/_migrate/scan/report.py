"""Rendering a scan: ``table`` (terminal), ``json`` (machines), ``markdown`` (PR comments)."""

from __future__ import annotations

import json

from hookbridge._migrate.scan.findings import STAGES, STATUSES, Finding, ScanResult

FORMATS = ("table", "json", "markdown")
_COLUMNS = ("location", "kind", "name", "status", "detail")


def render(result: ScanResult, fmt: str) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        return _json(result)
    if fmt == "markdown":
        return _markdown(result)
    if fmt == "table":
        return _table(result)
    raise ValueError(f"hookbridge scan: unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")


def _row(x: Finding) -> tuple[str, ...]:
    detail = x.detail + (f" -> {x.action}" if x.action else "")
    return (f"{x.path}:{x.line}", x.kind, x.name, x.status, detail)


def _summary(result: ScanResult) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in result.counts().items() if n)
    return (
        f"{len(result.findings)} findings in {result.files} files"
        + (f": {counts}" if counts else "")
        + f". Exit code {result.exit_code()}."
    )


def _stage_lines(result: ScanResult) -> list[str]:
    lines = []
    for name, counts in result.stages().items():
        text = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing"
        lines.append(f"  stage {name}: {text}  ({STAGES[name]})")
    return lines


def _where(x: Finding) -> str:
    return x.entry.split(": ", 1)[1] if ": " in x.entry else ""


def _entry_lines(result: ScanResult) -> list[str]:
    lines = []
    for entry, members in result.by_entry().items():
        lines.append(f"  {entry or '(not passed to an entry point the scan can see)'}")
        lines += [f"    {x.path}:{x.line}  {x.name}  {x.status}  {_where(x)}" for x in members]
    return lines


def _table(result: ScanResult) -> str:
    rows = [_row(x) for x in result.findings]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(_COLUMNS[:-1])]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(_COLUMNS, widths + [0])).rstrip()]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1])
    by_entry = _entry_lines(result)
    if by_entry:
        lines += ["", "Hooks and callbacks by entry point (where each runs after the migration):"]
        lines += by_entry
    lines += ["", "Per migration stage (docs/migration.md):", *_stage_lines(result)]
    lines += ["", "Summary: " + _summary(result)]
    return "\n".join(lines) + "\n"


def _markdown(result: ScanResult) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        f"# hookbridge scan: `{result.root}`",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "|" + "---|" * len(_COLUMNS),
    ]
    for x in result.findings:
        location, kind, name, status, detail = _row(x)
        lines.append(f"| `{location}` | {kind} | `{cell(name)}` | **{status}** | {cell(detail)} |")
    by_entry = result.by_entry()
    if by_entry:
        lines += ["", "## By entry point", ""]
        for entry, members in by_entry.items():
            lines.append(f"- `{cell(entry)}`" if entry else "- not passed to an entry point")
            lines += [
                f"  - `{x.path}:{x.line}` `{cell(x.name)}` **{x.status}** {cell(_where(x))}"
                for x in members
            ]
    lines += ["", "| stage | findings |", "|---|---|"]
    for name, counts in result.stages().items():
        text = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing"
        lines.append(f"| {name}: {STAGES[name]} | {text} |")
    lines += ["", "| status | count |", "|---|---|"]
    lines += [f"| {status} | {n} |" for status, n in result.counts().items()]
    lines += ["", _summary(result)]
    return "\n".join(lines) + "\n"


def _json(result: ScanResult) -> str:
    data = {
        "root": result.root,
        "files": result.files,
        "findings": [x.as_dict() for x in result.findings],
        "summary": result.counts(),
        "stages": result.stages(),
        "by_entry": {e: [f"{x.path}:{x.line}" for x in xs] for e, xs in result.by_entry().items()},
        "statuses": list(STATUSES),
        "exit_code": result.exit_code(),
    }
    return json.dumps(data, indent=1) + "\n"
