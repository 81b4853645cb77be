"""``hookbridge scan PATH``: an inventory of a TF1 codebase's hooks, read by syntax tree only.

Nothing scanned is imported or run (and TensorFlow is not imported either): each file is parsed
with :mod:`ast`, names are resolved through its imports, and every ``SessionRunHook`` subclass,
hook constructed, training entry point (``MonitoredSession``, ``Estimator``, ``TPUEstimator``,
``(TPU)EstimatorSpec``, ``train/evaluate/predict(hooks=...)``), Keras callback in TF1 code (in
``CallbackHook`` or a graph-mode ``fit``), tensor named inside a hook and TensorFlow spelling
that no longer imports is reported with its status (see :mod:`hookbridge._migrate.scan.findings`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from pathlib import Path

from hookbridge._migrate.scan.analyze import Classes, ModuleScan
from hookbridge._migrate.scan.findings import Finding, ScanResult
from hookbridge._migrate.scan.flow import Functions
from hookbridge._migrate.scan.project import read
from hookbridge._migrate.scan.stage0 import rows as stage0_rows
from hookbridge._migrate.scan.verdicts import Links, combine

__all__ = ["Finding", "ScanResult", "scan"]


def scan(path: str | Path, exclude: Iterable[str] = (), stage0: bool = False) -> ScanResult:
    """Scans a file or a directory tree of Python files.

    Args:
        path: a ``.py`` file or a folder (hidden folders, ``__pycache__``, virtual environments
            and ``build``/``dist`` are skipped).
        exclude: glob patterns of folders or files to skip, matched against the path relative
            to ``path`` and against the name (``tests``, ``third_party``, ``*_test.py``).
        stage0: report only stage 0 instead: every TF1-only name ``hookbridge upgrade`` would
            rewrite, with its replacement (:mod:`hookbridge._migrate.scan.stage0`; imports
            TensorFlow when a file mentions it), and the files that do not parse.

    Returns:
        The findings, sorted by file and line, and the number of files read.

    Raises:
        FileNotFoundError: when ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{str(path)!r} does not exist: give a .py file or a folder.")
    # Every syntax tree stays alive until the last module is analysed: with the cyclic garbage
    # collector on, its full collections walk them again and again (3.5x the CPU time on the
    # 116 files of tensorflow_estimator). The scan makes no garbage cycles worth collecting.
    if stage0:
        files, found = stage0_rows(root, exclude)
        found.sort(key=lambda x: (x.path, x.line, x.kind, x.name))
        return ScanResult(root=str(root), files=files, findings=tuple(found))
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan(root, exclude)
    finally:
        if enabled:
            gc.enable()


def _scan(root: Path, exclude: Iterable[str]) -> ScanResult:
    files, modules, out = read(root, exclude)
    classes = Classes(modules)
    functions = Functions({m.module: m for m in modules})
    links = Links()
    # Eager execution turned off anywhere makes tf.keras fit graph-mode in the TF1 modules.
    graph_mode = any(m.graph_mode for m in modules)
    for module in modules:
        tf1 = module.graph_mode or (
            graph_mode
            and any(name.startswith("tensorflow.compat.v1") for _, name in module.imports)
        )
        out += ModuleScan(module, classes, tf1, functions, links).run()
    out = combine(out, links)  # a hook's verdict: the worst of its parts, wherever they are
    out.sort(key=lambda x: (x.path, x.line, x.kind, x.name))
    return ScanResult(root=str(root), files=len(files), findings=tuple(out))
