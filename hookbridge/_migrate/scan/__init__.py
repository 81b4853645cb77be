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

from hookbridge._migrate.scan import findings, prefilter
from hookbridge._migrate.scan.analyze import Classes, ModuleScan
from hookbridge._migrate.scan.findings import Finding, ScanResult
from hookbridge._migrate.scan.modules import ModuleInfo, Project, discover, parse

__all__ = ["Finding", "ScanResult", "scan"]


def scan(path: str | Path, exclude: Iterable[str] = ()) -> ScanResult:
    """Scans a file or a directory tree of Python files.

    Args:
        path: a ``.py`` file or a folder (hidden folders, ``__pycache__``, virtual environments
            and ``build``/``dist`` are skipped).
        exclude: glob patterns of folders or files to skip, matched against the path relative
            to ``path`` and against the name (``tests``, ``third_party``, ``*_test.py``).

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
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _scan(root, exclude)
    finally:
        if enabled:
            gc.enable()


def _scan(root: Path, exclude: Iterable[str]) -> ScanResult:
    base = root.parent if root.is_file() else root
    files = discover(root, exclude)
    sources = [(file, file.relative_to(base), file.read_bytes()) for file in files]
    out: list[Finding] = []
    read: dict[int, ModuleInfo] = {}  # by position in `files`: modules keep the walk's order

    def read_file(index: int) -> None:
        file, rel, source = sources[index]
        try:
            read[index] = parse(file, rel, source)
        except (SyntaxError, ValueError) as e:
            out.append(_parse_error(rel.as_posix(), e))

    # Stages (hookbridge/_migrate/scan/prefilter.py): the files whose text holds a name the
    # analysis reacts to; then those naming a scanned hook or callback class; then those naming
    # a function that builds one. The rest cannot hold a finding: they are only syntax-checked.
    unread: dict[int, frozenset[bytes]] = {}
    for index, (_, _, source) in enumerate(sources):
        names = prefilter.words_if_unneeded(source)
        if names is None:
            read_file(index)
        else:
            unread[index] = names
    for stage in ("classes", "factories"):
        classes = Classes(read[i] for i in sorted(read))
        if stage == "classes":
            wanted = {name.encode() for name in classes.by_name}
        else:
            wanted = {key.rsplit(".", 1)[-1].encode() for key in classes.built_by}
        for index in [i for i, names in unread.items() if not names.isdisjoint(wanted)]:
            del unread[index]
            read_file(index)
    for index in list(unread):
        file, _, source = sources[index]
        if not prefilter.parses(source, str(file)):
            del unread[index]
            read_file(index)  # ast.parse decides: a parse error, or a module like any other

    modules = [read[i] for i in sorted(read)]
    project = Project()
    for index, (file, rel, source) in enumerate(sources):
        if index in read:
            project.add(read[index])
        elif index in unread:
            project.add_unread(file, rel, source)
    classes = Classes(modules)
    # Eager execution turned off anywhere makes tf.keras fit graph-mode in the TF1 modules.
    graph_mode = any(m.graph_mode for m in modules)
    for module in modules:
        tf1 = module.graph_mode or (
            graph_mode
            and any(name.startswith("tensorflow.compat.v1") for _, name in module.imports)
        )
        out += ModuleScan(module, classes, graph_mode=tf1).run()
    out.sort(key=lambda x: (x.path, x.line, x.kind, x.name))
    return ScanResult(root=str(root), files=len(files), findings=tuple(out))


def _parse_error(rel: str, error: Exception) -> Finding:
    line = getattr(error, "lineno", None) or 1
    message = getattr(error, "msg", None) or str(error)
    return Finding(
        rel,
        line,
        findings.FILE,
        rel,
        findings.PARSE_ERROR,
        f"not parsed, not scanned: {message}",
        "port it to Python 3 syntax (TF 2 needs Python 3), then scan again",
    )
