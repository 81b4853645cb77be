"""Reading a codebase for the scan: files, their syntax trees, imports and classes (never imported).

Every file is parsed with :func:`ast.parse` from its bytes; nothing is imported or executed.
Names are resolved through each module's imports (``import tensorflow.compat.v1 as tf``,
``from tensorflow.estimator import LoggingTensorHook``, relative imports), so a call's
*qualified name* (``tensorflow.compat.v1.train.LoggingTensorHook``) says where it comes from.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

#: Folders never scanned: hidden ones, caches, virtual environments and build output.
SKIPPED_DIRS: Final = frozenset(
    {"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"}
)


#: Roots of module paths an assignment may alias (``v1 = tf.compat.v1``).
IMPORTED_ROOTS: Final = frozenset(
    {"tensorflow", "keras", "tf_keras", "tensorflow_estimator", "hookbridge"}
)


@dataclasses.dataclass
class ClassInfo:
    """A class defined in the scanned code."""

    name: str
    qualname: str  # module.Name
    module: ModuleInfo
    node: ast.ClassDef
    bases: list[str]  # qualified base names ("" when not resolvable)

    def init_needs_arguments(self) -> bool | None:
        """Whether ``__init__`` (defined in this class) has required arguments; None if absent."""
        for item in self.node.body:
            if (
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and item.name == "__init__"
            ):
                args = item.args
                positional = args.posonlyargs + args.args
                required = len(positional) - len(args.defaults) - 1  # minus self
                kw_required = sum(d is None for d in args.kw_defaults)
                return required > 0 or kw_required > 0
        return None


@dataclasses.dataclass
class ModuleInfo:
    """One parsed file."""

    path: str  # relative to the scanned root, POSIX separators
    module: str  # dotted module name, relative to the scanned root
    tree: ast.Module
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    classes: dict[str, ClassInfo] = dataclasses.field(default_factory=dict)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = dataclasses.field(
        default_factory=dict
    )

    def qualify(self, node: ast.AST) -> str | None:
        """The dotted, import-resolved name of a ``Name``/``Attribute`` chain, else None."""
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in self.classes or node.id in self.functions:
                return f"{self.module}.{node.id}"
            return node.id
        if isinstance(node, ast.Attribute):
            base = self.qualify(node.value)
            return f"{base}.{node.attr}" if base else None
        return None


def discover(root: Path) -> list[Path]:
    """Every ``.py`` file under ``root`` (or ``root`` itself), sorted, skipping SKIPPED_DIRS."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        found += [Path(folder, name) for name in sorted(files) if name.endswith(".py")]
    return found


def module_name(rel: Path) -> str:
    """``trainer/hooks.py`` -> ``trainer.hooks``; ``trainer/__init__.py`` -> ``trainer``."""
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def parse(path: Path, rel: Path) -> ModuleInfo:
    """Parses one file (raises SyntaxError/ValueError when it cannot be parsed)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    info = ModuleInfo(path=rel.as_posix(), module=module_name(rel), tree=tree)
    is_package = rel.name == "__init__.py"
    for node in _top_level(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    info.aliases[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    info.aliases[root] = root
        elif isinstance(node, ast.ImportFrom):
            base = _import_base(info.module, is_package, node)
            for alias in node.names:
                info.aliases[alias.asname or alias.name] = f"{base}.{alias.name}".lstrip(".")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            info.functions.setdefault(node.name, node)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name not in info.classes:
            info.classes[node.name] = ClassInfo(
                name=node.name,
                qualname=f"{info.module}.{node.name}",
                module=info,
                node=node,
                bases=[],
            )
    _assigned_aliases(info)
    for cls in info.classes.values():
        cls.bases = [info.qualify(b) or "" for b in cls.node.bases]
    return info


def _assigned_aliases(info: ModuleInfo) -> None:
    """``v1 = tf.compat.v1`` / ``train = tf.train``: names bound to a module path of an import."""
    for node in ast.walk(info.tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, (ast.Name, ast.Attribute))
            and node.targets[0].id not in info.aliases
        ):
            qualified = info.qualify(node.value)
            if (
                qualified
                and qualified.split(".")[0] in IMPORTED_ROOTS
                and qualified != node.targets[0].id
            ):
                info.aliases[node.targets[0].id] = qualified


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Module-level statements, including those under ``if``/``try`` (guarded imports)."""
    stack = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            children = node.body + node.orelse + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                children += handler.body
            stack += reversed(children)


def _import_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])
