"""What ``hookbridge scan`` reports: findings, their statuses, and the exit code they give."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Final

#: Bridge statuses, in report order.
CONFORMS: Final = "conforms"
CUSTOM: Final = "custom"
NEEDS_TENSOR: Final = "needs-tensor"
UNVERIFIED: Final = "unverified"
UNSUPPORTED: Final = "unsupported"
ENTRY_POINT: Final = "entry-point"
PARSE_ERROR: Final = "parse-error"
STATUSES: Final = (
    CONFORMS,
    CUSTOM,
    NEEDS_TENSOR,
    UNVERIFIED,
    UNSUPPORTED,
    ENTRY_POINT,
    PARSE_ERROR,
)

#: Exit codes of ``hookbridge scan`` (docs/scan.md): the highest that applies.
EXIT_OK: Final = 0  # every hook and callback conforms (entry points are only listed)
EXIT_ATTENTION: Final = 1  # custom code to check, tensors to expose, or unverified built-ins
EXIT_USAGE: Final = 2  # bad arguments or a path that does not exist (argparse's convention)
EXIT_UNSUPPORTED: Final = 3  # something the bridge cannot run: replace it first
EXIT_PARSE_ERROR: Final = 4  # a file could not be parsed (e.g. Python 2 syntax): not scanned

_EXIT_BY_STATUS: Final = {
    CUSTOM: EXIT_ATTENTION,
    NEEDS_TENSOR: EXIT_ATTENTION,
    UNVERIFIED: EXIT_ATTENTION,
    UNSUPPORTED: EXIT_UNSUPPORTED,
    PARSE_ERROR: EXIT_PARSE_ERROR,
}

#: Finding kinds.
HOOK_CLASS: Final = "hook-class"  # a SessionRunHook subclass defined in the scanned code
HOOK: Final = "hook"  # a hook constructed (built-in or custom)
CALLBACK_CLASS: Final = "callback-class"  # a Keras Callback subclass in TF1 code
CALLBACK: Final = "callback"  # a Keras callback constructed in TF1 code
TENSOR: Final = "tensor"  # a tensor, op or collection referenced by name inside a hook
ENTRY: Final = "entry-point"  # MonitoredSession, Estimator, EstimatorSpec, train(hooks=...)
FILE: Final = "file"


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
    """

    path: str
    line: int
    kind: str
    name: str
    status: str
    detail: str
    action: str = ""

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


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

    def exit_code(self) -> int:
        """The exit code a CI job reads: the highest that applies (see the ``EXIT_*`` names)."""
        return max((_EXIT_BY_STATUS.get(f.status, EXIT_OK) for f in self.findings), default=0)
