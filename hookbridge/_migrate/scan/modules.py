"""What the scan knows of one module: :class:`ModuleInfo`, filled by the one walk of its syntax
tree (:mod:`hookbridge._migrate.scan.walk`), and the resolution of names through it.

Names are resolved through the imports (``import tensorflow.compat.v1 as tf``, ``from
tensorflow.estimator import LoggingTensorHook``, relative imports, ``v1 = tf.compat.v1``), so a
call's *qualified name* (``tensorflow.compat.v1.train.LoggingTensorHook``) says where it comes
from; :meth:`ModuleInfo.binding` finds the value last assigned to a name in the scopes around a
use.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import NamedTuple, Protocol


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
                return needs_arguments(item.args, method=True)
        return None


def needs_arguments(args: ast.arguments, method: bool = False) -> bool:
    """Whether a signature has required arguments (``self`` not counted for a method)."""
    positional = args.posonlyargs + args.args
    required = len(positional) - len(args.defaults) - (1 if method else 0)
    return required > 0 or any(d is None for d in args.kw_defaults)


class Call(NamedTuple):
    """A call in the module and the scopes around it (classes, functions, lambdas; outermost
    first)."""

    node: ast.Call
    scopes: tuple[ast.AST, ...]


class Modules(Protocol):
    """Modules by dotted name (:class:`hookbridge._migrate.scan.project.Project`)."""

    def get(self, name: str, /) -> ModuleInfo | None: ...


@dataclasses.dataclass
class ModuleInfo:
    """One parsed file, and what its one walk collected."""

    path: str  # relative to the scanned root, POSIX separators
    module: str  # dotted module name, relative to the scanned root
    tree: ast.Module
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    classes: dict[str, ClassInfo] = dataclasses.field(default_factory=dict)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = dataclasses.field(
        default_factory=dict
    )
    calls: list[Call] = dataclasses.field(default_factory=list)
    #: name -> values assigned to it, per scope (``None``: the module), last written first.
    bindings: dict[tuple[int | None, str], list[ast.AST]] = dataclasses.field(
        default_factory=dict
    )
    #: (line, raw dotted name) of names mentioning ``estimator``/``contrib``, and imports of them.
    dotted: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    #: (line, imported module path) of every import statement.
    imports: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    #: ``return f(...)`` in a top-level function: (the call, the function).
    returns: list[tuple[ast.Call, ast.FunctionDef | ast.AsyncFunctionDef]] = dataclasses.field(
        default_factory=list
    )
    #: id(function) -> the values its ``return`` statements give.
    returned: dict[int, list[ast.AST]] = dataclasses.field(default_factory=dict)
    #: ``x = f(...)`` / ``self.x = f(...)``: (the target's last name, the call).
    call_assignments: list[tuple[str, ast.Call]] = dataclasses.field(default_factory=list)
    #: ``a, b = f()``: name -> ``f()[i]`` (a synthetic Subscript), per scope, last written first
    #: (kept apart from :attr:`bindings`: only the feature-column reader follows them).
    unpacked: dict[tuple[int | None, str], list[ast.Subscript]] = dataclasses.field(
        default_factory=dict
    )
    #: id(value) -> the ``x += value`` (AugAssign) it is the right side of, for the values
    #: :attr:`bindings` records.
    augmented: dict[int, ast.AugAssign] = dataclasses.field(default_factory=dict)
    #: True when the module turns TF's eager execution off (graph-mode tf.keras).
    graph_mode: bool = False
    #: Every scanned module by dotted name (shared; set by the scan once all are read).
    project: Modules = dataclasses.field(default_factory=dict, repr=False)

    def qualify(self, node: ast.AST) -> str | None:
        """The dotted, import-resolved name of a ``Name``/``Attribute`` chain, else None.

        A call in the chain keeps its parentheses (``contrib.tpu().TPUEstimator``).
        """
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id in self.classes or node.id in self.functions:
                return f"{self.module}.{node.id}"
            return node.id
        if isinstance(node, ast.Attribute):
            base = self.qualify(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            base = self.qualify(node.func)
            return f"{base}()" if base else None
        return None

    def binding(self, scopes: tuple[ast.AST, ...], name: str) -> ast.AST | None:
        """The value last assigned to ``name`` in the innermost scope that assigns it."""
        return self.binding_in(scopes, name)[0]

    def binding_in(
        self, scopes: tuple[ast.AST, ...], name: str
    ) -> tuple[ast.AST | None, tuple[ast.AST, ...]]:
        """:meth:`binding`, and the scopes around the assignment (``()``: the module's)."""
        for depth in range(len(scopes), -1, -1):
            scope = scopes[depth - 1] if depth else None
            values = self.bindings.get((None if scope is None else id(scope), name))
            if values:
                return values[0], scopes[:depth]  # recorded last first
            if scope is not None and is_parameter(scope, name):
                return None, scopes[:depth]
        return None, ()


def is_parameter(scope: ast.AST, name: str) -> bool:
    """Whether ``name`` is a parameter of the function (or lambda) ``scope``."""
    args = getattr(scope, "args", None)
    if not isinstance(args, ast.arguments):
        return False
    every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
    return any(a is not None and a.arg == name for a in every)


def module_name(rel: Path) -> str:
    """``trainer/hooks.py`` -> ``trainer.hooks``; ``trainer/__init__.py`` -> ``trainer``."""
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)
