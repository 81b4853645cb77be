"""What ``hookbridge scan`` reports: findings, their statuses, and the exit code they give."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Final

#: Bridge statuses, in report order.
CONFORMS: Final = "conforms"
CUSTOM: Final = "custom"
NEEDS_TENSOR: Final = "needs-tensor"
REMOVED_API: Final = "removed-api"
UNVERIFIED: Final = "unverified"
UNSUPPORTED: Final = "unsupported"
ENTRY_POINT: Final = "entry-point"
PARSE_ERROR: Final = "parse-error"
STATUSES: Final = (
    CONFORMS,
    CUSTOM,
    NEEDS_TENSOR,
    REMOVED_API,
    UNVERIFIED,
    UNSUPPORTED,
    ENTRY_POINT,
    PARSE_ERROR,
)

#: Exit codes of ``hookbridge scan`` (docs/scan.md): the highest that applies.
EXIT_OK: Final = 0  # every hook and callback conforms (entry points are only listed)
EXIT_ATTENTION: Final = 1  # custom code to check, tensors to expose, removed APIs, unverified
#: What the syntax tree cannot decide (a tensor held in a variable the tree cannot resolve, a
#: built-in without measured results) is never ``conforms``: it exits with this code.
EXIT_UNVERIFIED: Final = EXIT_ATTENTION
EXIT_USAGE: Final = 2  # bad arguments or a path that does not exist (argparse's convention)
EXIT_UNSUPPORTED: Final = 3  # something the bridge cannot run: replace it first
EXIT_PARSE_ERROR: Final = 4  # a file could not be parsed (e.g. Python 2 syntax): not scanned

_EXIT_BY_STATUS: Final = {
    CUSTOM: EXIT_ATTENTION,
    NEEDS_TENSOR: EXIT_ATTENTION,
    REMOVED_API: EXIT_ATTENTION,
    UNVERIFIED: EXIT_UNVERIFIED,
    UNSUPPORTED: EXIT_UNSUPPORTED,
    PARSE_ERROR: EXIT_PARSE_ERROR,
}



def exit_code_of(status: str) -> int:
    """The exit code one finding of ``status`` gives (see the ``EXIT_*`` names)."""
    return _EXIT_BY_STATUS.get(status, EXIT_OK)


#: Finding kinds.
HOOK_CLASS: Final = "hook-class"  # a SessionRunHook subclass defined in the scanned code
HOOK: Final = "hook"  # a hook constructed (built-in or custom)
CALLBACK_CLASS: Final = "callback-class"  # a Keras Callback subclass in TF1 code
CALLBACK: Final = "callback"  # a Keras callback constructed in TF1 code
TENSOR: Final = "tensor"  # a tensor, op or collection referenced by name inside a hook
ENTRY: Final = "entry-point"  # MonitoredSession, Estimator, EstimatorSpec, train(hooks=...)
SPELLING: Final = "spelling"  # a TensorFlow name that no longer imports (tf.estimator, tf.contrib)
FILE: Final = "file"
#: A TF1-only name ``hookbridge upgrade`` rewrites (``scan --stage0``; docs/upgrade.md).
TF1_NAME: Final = "tf1-name"

#: The migration stages of docs/migration.md, and which findings each one deals with.
STAGES: Final = {
    "0 imports": "make the code import on TF >= 2.16: removed APIs, files that do not parse",
    "1 callbacks": "Keras callbacks in TF1 code (CallbackHook, graph-mode fit)",
    "2 fit": "the model in Keras fit: entry points, hooks and their tensors under HookCallback",
}


def stage(finding: Finding) -> str:
    """The migration stage (a key of :data:`STAGES`) a finding belongs to."""
    if finding.status in (REMOVED_API, PARSE_ERROR) or finding.kind == TF1_NAME:
        return "0 imports"
    if finding.kind in (CALLBACK, CALLBACK_CLASS):
        return "1 callbacks"
    return "2 fit"


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing the scan found.

    Attributes:
        path: the file, relative to the scanned root (POSIX separators).
        line: 1-based line number.
        kind: one of the kinds above (``hook``, ``tensor``, ...).
        name: what it is (``LoggingTensorHook``, ``tf.estimator.Estimator``, ``'loss:0'``).
        status: the bridge status (one of :data:`STATUSES`).
        detail: why: stacks it conforms on, the reason it is unsupported, the missing tensor.
        action: what to do next, or ``""``.
        entry: for a hook or callback, the entry point it is passed to, the argument, and where
            it runs after the migration (``trainer/task.py:17 estimator.train: hooks -> fit``),
            else ``""``.
        columns: for a canned Estimator's row, its feature columns (each a
            :class:`hookbridge._migrate.scan.columns.Column`: argument, type, key, whether
            ``keras_twin`` builds it, the reason, where it is made), else ``()``.
    """

    path: str
    line: int
    kind: str
    name: str
    status: str
    detail: str
    action: str = ""
    entry: str = ""
    columns: tuple = ()

    def as_dict(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["columns"] = list(data["columns"])  # as JSON gives it back
        return data


@dataclasses.dataclass(frozen=True)
class ScanResult:
    """Every finding of a scan, sorted by file and line, and the number of files read."""

    root: str
    files: int
    findings: tuple[Finding, ...]

    def counts(self) -> dict[str, int]:
        """Findings per status, in :data:`STATUSES` order (zero counts included)."""
        counter = Counter(f.status for f in self.findings)
        return {status: counter.get(status, 0) for status in STATUSES}

    def stages(self) -> dict[str, dict[str, int]]:
        """Per migration stage (:data:`STAGES`), its findings per status (non-zero only)."""
        out: dict[str, dict[str, int]] = {name: {} for name in STAGES}
        for x in self.findings:
            counts = out[stage(x)]
            counts[x.status] = counts.get(x.status, 0) + 1
        return {name: {s: c[s] for s in STATUSES if s in c} for name, c in out.items()}

    def by_entry(self) -> dict[str, list[Finding]]:
        """Hooks and callbacks grouped by the entry-point call they are passed to (one group per
        call: an EstimatorSpec's training, evaluation and prediction hooks together; ``""``:
        none the scan can see), entry points in file and line order."""
        groups: dict[str, list[Finding]] = {}
        for x in self.findings:
            if x.kind in (HOOK, CALLBACK):
                groups.setdefault(x.entry.split(": ", 1)[0], []).append(x)
        return dict(sorted(groups.items(), key=lambda kv: (kv[0] == "", _entry_key(kv[0]))))

    def exit_code(self) -> int:
        """The exit code a CI job reads: the highest that applies (see the ``EXIT_*`` names)."""
        return max((_EXIT_BY_STATUS.get(f.status, EXIT_OK) for f in self.findings), default=0)


def _entry_key(entry: str) -> tuple[str, int, str]:
    location = entry.split(" ", 1)[0]
    path, _, line = location.rpartition(":")
    return (path, int(line) if line.isdigit() else 0, entry)
