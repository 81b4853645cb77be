"""What :mod:`.values` evaluates an expression to: :class:`At` (a node, where it is read, and
the calls and comprehension items it is read under), :class:`Unknown` (with the reason) and
:class:`Either` (values that differ by path)."""

from __future__ import annotations

import ast
from typing import NamedTuple

from hookbridge._migrate.scan.classes import is_tf, last_name
from hookbridge._migrate.scan.modules import ModuleInfo
from hookbridge._migrate.twins import kinds

DEPTH = 24


class At(NamedTuple):
    m: ModuleInfo
    scopes: tuple
    node: ast.AST
    #: The calls whose arguments the parameters of the functions around ``node`` hold:
    #: ((id(function), (module, Call, the caller's env)), ...), innermost first. A value read
    #: inside a function reached through a call (``_vocabulary("education", ...)``) takes that
    #: call's arguments, not those of every call of the function.
    env: tuple = ()
    #: Names a comprehension binds while its element is read: ((name, At of the value), ...)
    #: (``{name: fc.numeric_column(name) for name in NUMERIC}["age"]``).
    local: tuple = ()


class Unknown(NamedTuple):
    where: str
    text: str
    reason: str


class Either(NamedTuple):
    """Values that differ by path: one list per branch (two callers, two ``return``)."""

    what: str  # "the callers at a.py:3, b.py:9" / "build's return statements (lines 4, 7)"
    branches: tuple[tuple, ...]
    #: True: one branch, values added only when a statement runs (``if flag: cols.append(c)``);
    #: ``what`` says which ("under the if at line 10").
    maybe: bool = False


Item = At | Unknown | Either


def short_text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 48 else text[:45] + "..."


def unknown(at: At, reason: str) -> Unknown:
    return Unknown(f"{at.m.path}:{getattr(at.node, 'lineno', 1)}", short_text(at.node), reason)


def column_function(m: ModuleInfo, node: ast.Call) -> str | None:
    """The qualified name of a feature-column function ``node`` calls, else None."""
    qualified = m.qualify(node.func)
    last = last_name(qualified)
    if not is_tf(qualified):
        return None
    if last.endswith(("_column", "_columns")) or last.startswith("sequence_"):
        return qualified
    return qualified if last in kinds.SUPPORTED_FUNCTIONS else None
