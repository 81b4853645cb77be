"""A tree's stage-0 rewrite, shown as a diff or written as one transaction.

:func:`plan` reads every Python file under a path (never importing it) and computes each file's
new text in memory. :func:`write` applies a plan so that the tree is either entirely upgraded or
left as it was: the originals and the plan's patch go first into a backup directory (written
under a temporary name, renamed when complete), each new text is written beside its file and
renamed over it, and any failure puts back every file already replaced before re-raising.
"""

from __future__ import annotations

import difflib
import io
import os
import shutil
import tempfile
import time
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hookbridge._migrate.upgrade import engine

#: Where ``write`` keeps the originals and the patch, inside the upgraded directory.
BACKUP_DIR = ".hookbridge-upgrade"
#: Directories never walked: version control, virtual environments, caches, our backups.
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


@dataclass
class Plan:
    """Every file's rewrite under ``root`` (a directory, or the file itself)."""

    root: Path
    files: list[engine.FileResult] = field(default_factory=list)

    @property
    def changed(self) -> list[engine.FileResult]:
        return [f for f in self.files if f.changed]

    @property
    def left(self) -> list[tuple[engine.FileResult, engine.Finding]]:
        """What the rewrite could not do (``ERROR`` findings), file by file."""
        return [(f, x) for f in self.files for x in f.findings if x.severity == "ERROR"]

    def relative(self, result: engine.FileResult) -> str:
        base = self.root if self.root.is_dir() else self.root.parent
        return Path(result.path).relative_to(base).as_posix()

    def diff(self) -> str:
        """A unified diff of every change, applicable with ``git apply`` or ``patch -p1``."""
        chunks = []
        for result in self.changed:
            name = self.relative(result)
            chunks.extend(
                difflib.unified_diff(
                    result.source.splitlines(keepends=True),
                    result.text.splitlines(keepends=True),
                    f"a/{name}",
                    f"b/{name}",
                )
            )
        return "".join(chunks)


def _python_files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(
            d for d in subdirs if not d.startswith(".") and d not in _SKIP_DIRS
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory, name)


def _read(path: Path) -> tuple[str, str]:
    """The file's text as written (no newline translation) and its encoding."""
    raw = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding), encoding


def plan(root: str | os.PathLike, *, model_fn: bool = False) -> Plan:
    """The rewrite of every ``.py`` file under ``root``, in memory (with ``model_fn``, the
    ``--model-fn`` rules too: :mod:`.model_fn_rules`).

    Raises:
        FileNotFoundError: ``root`` does not exist.
    """
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"hookbridge upgrade: {root} does not exist")
    result = Plan(root)
    for path in _python_files(root):
        try:
            source, _ = _read(path)
        except (UnicodeDecodeError, SyntaxError, LookupError) as error:
            skipped = engine.FileResult(str(path), "")
            skipped.findings.append(engine.Finding(0, "ERROR", f"not read: {error}"))
            result.files.append(skipped)
            continue
        result.files.append(engine.upgrade_source(source, str(path), model_fn=model_fn))
    return result


def _write_text(path: Path, text: str, encoding: str, mode: int) -> None:
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, mode)


def write(planned: Plan, backup_root: str | os.PathLike | None = None) -> Path | None:
    """Applies ``planned``: every changed file is upgraded, or none is.

    Args:
        planned: from :func:`plan` (its texts are rewritten only if the files did not change
            since: a file edited in between fails the write, and nothing is written).
        backup_root: where the backup directory goes; default ``<root>/.hookbridge-upgrade``.

    Returns:
        The backup directory (``originals/`` and ``upgrade.patch``), or None when nothing
        changed.

    Raises:
        RuntimeError: a file changed since the plan; OSError: a write failed (every file
            already replaced was put back first).
    """
    changed = planned.changed
    if not changed:
        return None
    base = planned.root if planned.root.is_dir() else planned.root.parent
    backup_root = Path(backup_root) if backup_root else base / BACKUP_DIR
    backup_root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    staging = Path(tempfile.mkdtemp(prefix=f".{stamp}-", dir=backup_root))
    encodings = {}
    for result in changed:
        path = Path(result.path)
        current, encodings[result.path] = _read(path)
        if current != result.source:
            shutil.rmtree(staging)
            raise RuntimeError(
                f"hookbridge upgrade: {path} changed since it was read; nothing was written. "
                "Run the upgrade again."
            )
        copy = staging / "originals" / planned.relative(result)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    (staging / "upgrade.patch").write_text(planned.diff(), encoding="utf-8")
    backup = backup_root / stamp
    suffix = 1
    while backup.exists():
        suffix += 1
        backup = backup_root / f"{stamp}-{suffix}"
    staging.rename(backup)  # the backup is complete before any file is touched

    replaced: list[engine.FileResult] = []
    try:
        for result in changed:
            path = Path(result.path)
            temporary = path.with_name(f".{path.name}.hookbridge-upgrade.tmp")
            try:
                _write_text(temporary, result.text, encodings[result.path], path.stat().st_mode)
                os.replace(temporary, path)
            finally:
                if temporary.exists():
                    temporary.unlink()
            replaced.append(result)
    except BaseException:
        for result in replaced:
            shutil.copy2(backup / "originals" / planned.relative(result), result.path)
        raise
    return backup
