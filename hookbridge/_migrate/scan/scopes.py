"""Where names are bound in one module's scopes, read from the syntax tree (for :mod:`.values`).

:func:`binding` finds the assignments a use of a name reads (the last one written before it in
the innermost scope that assigns it, with the ``+=`` on top; tuple unpacking included);
:func:`parent_map` maps a scope's nodes to their parents, to tell what runs under an ``if`` or a
loop; the others read a function's parameters and ``functools.partial``.
"""

from __future__ import annotations

import ast

from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.modules import ModuleInfo, is_parameter

#: Nodes that open a scope (their bodies are other scopes').
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def parent_map(scope: ast.AST) -> dict[int, ast.AST]:
    """id(node) -> its parent, for the nodes of one scope (not inside nested scopes)."""
    out: dict[int, ast.AST] = {}
    body = scope.body if isinstance(getattr(scope, "body", None), list) else []
    stack = [(child, scope) for child in body]
    while stack:
        node, parent = stack.pop()
        out[id(node)] = parent
        if isinstance(node, (*SCOPES, ast.ClassDef)):
            continue
        stack += [(child, node) for child in ast.iter_child_nodes(node)]
    return out


def is_partial(m: ModuleInfo, node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and last_name(m.qualify(node.func)) == "partial"
        and bool(node.args)
    )


def default_of(fn: ast.AST, name: str) -> ast.AST | None:
    args = getattr(fn, "args", None)
    if not isinstance(args, ast.arguments):
        return None
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults):
        if arg.arg == name:
            return default
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if arg.arg == name and default is not None:
            return default
    return None


def last_written(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def binding(m: ModuleInfo, scopes: tuple, name: str, line: int | None):
    """(values, scopes of the assignment, parameter scope): the last assignment of ``name``
    before ``line`` in the innermost scope that assigns it, with the ``+=`` on top of it."""
    for depth in range(len(scopes), -1, -1):
        scope = scopes[depth - 1] if depth else None
        key = (None if scope is None else id(scope), name)
        candidates = m.bindings.get(key, []) + m.unpacked.get(key, [])
        if depth == len(scopes) and line is not None:  # used where it is assigned
            candidates = [v for v in candidates if v.lineno < line]
        if candidates:
            candidates.sort(key=lambda v: (v.lineno, v.col_offset), reverse=True)
            chain = []
            for value in candidates:
                chain.append(value)
                if id(value) not in m.augmented:
                    break
            return chain[::-1], scopes[:depth], None
        if scope is not None and is_parameter(scope, name):
            return [], scopes[:depth], scope
    return [], (), None
