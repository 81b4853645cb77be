"""Which files a scan reads, and the project's modules by dotted name.

:func:`discover` lists the ``.py`` files of a tree; :func:`read` parses and walks those whose
text may hold a finding (:mod:`hookbridge._migrate.scan.prefilter`), in three stages, and only
syntax-checks the others; :class:`Project` finds any module by name, parsing a file that was
not read the first time a module takes a constant from it.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from hookbridge._migrate.scan import findings, prefilter
from hookbridge._migrate.scan.classes import Classes
from hookbridge._migrate.scan.findings import Finding
from hookbridge._migrate.scan.flow import Functions
from hookbridge._migrate.scan.modules import ModuleInfo, module_name
from hookbridge._migrate.scan.walk import parse

#: Folders never scanned: hidden ones, caches, virtual environments and build output.
SKIPPED_DIRS: Final = frozenset(
    {"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"}
)


def discover(root: Path, exclude: Iterable[str] = ()) -> list[Path]:
    """Every ``.py`` file under ``root`` (or ``root`` itself), sorted.

    Skips SKIPPED_DIRS, hidden folders, and what an ``exclude`` glob matches: a folder or file
    whose path relative to ``root`` (POSIX separators) or whose name matches (``tests``,
    ``third_party``, ``*/testdata/*``, ``*_test.py``).
    """
    if root.is_file():
        return [root]
    patterns = tuple(exclude)

    def excluded(rel: str, name: str) -> bool:
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p) for p in patterns)

    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in SKIPPED_DIRS and not excluded(prefix + d, d)
        )
        found += [
            Path(folder, name)
            for name in sorted(files)
            if name.endswith(".py") and not excluded(prefix + name, name)
        ]
    return found


class Project:
    """Every scanned module by dotted name (a later file of the same name wins).

    A file the scan did not need to read (:mod:`hookbridge._migrate.scan.prefilter`) is parsed
    and walked the first time it is asked for: a module read takes a constant from it.
    """

    def __init__(self) -> None:
        self._modules: dict[str, ModuleInfo | tuple[Path, Path, bytes]] = {}

    def add(self, info: ModuleInfo) -> None:
        self._modules[info.module] = info
        info.project = self

    def add_unread(self, path: Path, rel: Path, source: bytes) -> None:
        self._modules[module_name(rel)] = (path, rel, source)

    def get(self, name: str) -> ModuleInfo | None:
        found = self._modules.get(name)
        if found is None or isinstance(found, ModuleInfo):
            return found
        try:
            info = parse(*found)
        except (SyntaxError, ValueError):
            self._modules.pop(name)
            return None
        self.add(info)
        return info

    def find(self, name: str) -> ModuleInfo | None:
        """:meth:`get`, or the one module whose dotted name ends ``name`` (imported under a
        longer path than the scanned root gives it: ``official.r1.wide_deep.census_dataset``
        in a scan of ``wide_deep/``); None when none or several do."""
        found = self.get(name)
        if found is not None:
            return found
        parts = name.split(".")
        tails = [m for m in self._modules if parts[-len(m.split(".")) :] == m.split(".")]
        return self.get(tails[0]) if len(tails) == 1 else None

    def naming(self, word: str) -> list[ModuleInfo]:
        """Every module whose text holds ``word`` (unread ones parsed now), by dotted name."""
        encoded = word.encode()
        out = []
        for name in sorted(self._modules):
            found = self._modules[name]
            if isinstance(found, ModuleInfo):
                out.append(found)  # read: its calls are at hand, a cheap look
            elif encoded in found[2]:
                info = self.get(name)
                if info is not None:
                    out.append(info)
        return out


def read(
    root: Path, exclude: Iterable[str] = ()
) -> tuple[list[Path], list[ModuleInfo], list[Finding]]:
    """Every file under ``root`` (see :func:`discover`), the modules read (in the files' order,
    all sharing one :class:`Project`), and a parse-error finding per file that does not parse.

    Stages: the files whose text holds a name the analysis reacts to; then those naming a
    scanned hook or callback class; then those naming a function that builds one. The others
    cannot hold a finding (see :mod:`hookbridge._migrate.scan.prefilter`): they are only
    syntax-checked.
    """
    base = root.parent if root.is_file() else root
    files = discover(root, exclude)
    sources = [(file, file.relative_to(base), file.read_bytes()) for file in files]
    errors: list[Finding] = []
    done: dict[int, ModuleInfo] = {}  # by position in `files`

    def read_file(index: int) -> None:
        file, rel, source = sources[index]
        try:
            done[index] = parse(file, rel, source)
        except (SyntaxError, ValueError) as e:
            errors.append(_parse_error(rel.as_posix(), e))

    unread: dict[int, frozenset[bytes]] = {}
    for index, (_, rel, source) in enumerate(sources):
        names = prefilter.words_if_unneeded(source, rel.as_posix())
        if names is None:
            read_file(index)
        else:
            unread[index] = names
    for stage in ("classes", "factories"):
        classes = Classes(done[i] for i in sorted(done))
        found = classes.hooks.keys() | classes.callbacks.keys()
        if stage == "classes":  # a call of one is a row; other classes' calls are not
            wanted = {classes.by_qualname[name].name.encode() for name in found}
        else:
            wanted = {
                function.rsplit(".", 1)[-1].encode()
                for function, cls in classes.built_by.items()
                if cls.qualname in found
            }
        for index in [i for i, names in unread.items() if not names.isdisjoint(wanted)]:
            del unread[index]
            read_file(index)
    # Files naming a function that builds hooks or passes tensors to one (a wrapper of
    # hooks_helper.get_train_hooks, read in turn), until there are no more.
    hook_names = Classes(done.values()).relevant_names
    while unread:
        functions = Functions({m.module: m for m in done.values()})
        written = frozenset().union(*unread.values())  # only a name written there matters
        among = frozenset(n for n in functions.names if n.encode() in written)
        wanted = {name.encode() for name in functions.hook_functions(hook_names, among)}
        more = [i for i, names in unread.items() if not names.isdisjoint(wanted)]
        if not more:
            break
        for index in more:
            del unread[index]
            read_file(index)
    for index in list(unread):
        file, _, source = sources[index]
        if not prefilter.parses(source, str(file)):
            del unread[index]
            read_file(index)  # ast.parse decides: a parse error, or a module like any other

    project = Project()
    for index, (file, rel, source) in enumerate(sources):
        if index in done:
            project.add(done[index])
        elif index in unread:
            project.add_unread(file, rel, source)
    return files, [done[i] for i in sorted(done)], errors


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
