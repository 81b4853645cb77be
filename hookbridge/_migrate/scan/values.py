"""Following a value through a scanned project's syntax tree (for :mod:`.columns`).

:class:`Values` evaluates an expression as far as the tree goes: a name to its last assignment
before the use (``+=``, ``append``/``extend`` and tuple unpacking included), an attribute or
name to a module-level value of another scanned module (also imported under a longer path), a
call of a scanned function to what it returns, a parameter to what the call that led there
gives it (:attr:`At.env`) or else to what every scanned call of its function gives it (a
function passed as an argument included: ``run_loop(build_estimator_fn=build_estimator)``, then
``build_estimator_fn(...)`` inside), ``functools.partial``, ``list(...)`` and indexing. The
result is values the caller reads (lists, ``+``, comprehensions, feature-column calls), and
:class:`Unknown` with the reason where the tree cannot tell; values that differ by path (two
callers, two ``return``) come as one :class:`Either`, never as a guess.

Names, attributes and indexing are read here; calls and parameters in :mod:`.calls`; dicts and
loops over literals in :mod:`.containers`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hookbridge._migrate.scan.calls import Calls
from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.containers import Containers
from hookbridge._migrate.scan.items import (
    DEPTH,
    At,
    Either,
    Item,
    Unknown,
    column_function,
    short_text,
    unknown,
)
from hookbridge._migrate.scan.modules import ModuleInfo
from hookbridge._migrate.scan.scopes import binding, parent_map
from hookbridge._migrate.twins import kinds

#: List methods that add to a list of columns.
_MUTATORS = frozenset({"append", "extend", "insert"})
#: Statements whose body may run or not, or many times.
_CONTROL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)


class Values(Calls, Containers):
    """Evaluates expressions across a scanned project (see the module's docstring): names,
    attributes and indexing here; calls and parameters in :class:`Calls`; dicts and loops over
    literals in :class:`Containers`."""

    def __init__(self) -> None:
        super().__init__()
        self._parents: dict[tuple[int, int], dict[int, ast.AST]] = {}

    def _values(self, at: At, depth: int) -> Iterator[Item]:
        """What ``at`` evaluates to, followed through names, calls and indexing."""
        m, node = at.m, at.node
        if depth > DEPTH:
            yield unknown(at, "nested too deep to follow")
        elif isinstance(node, ast.Name):
            yield from self._name(at, depth)
        elif isinstance(node, ast.Attribute):
            found = self._imported(m, m.qualify(node))
            if not found:
                reason = self._missing(m, m.qualify(node))
                yield unknown(at, reason or f"{short_text(node)} is not a name of the scanned tree")
            for value in found:
                yield from self._values(value, depth + 1)
        elif isinstance(node, ast.Subscript):
            index = node.slice
            key = self._constant(at._replace(node=index), depth)
            if isinstance(key, str):  # vocab["education"]
                yield from self._lookup(at._replace(node=node.value), key, depth)
                return
            if not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
                yield unknown(at, "an index the tree cannot read")
                return
            bases = list(self._values(at._replace(node=node.value), depth + 1))
            if len(bases) == 1:
                yield self._pick(bases[0], index.value, depth)
            else:  # x = [..]; x += [..]; x[0]
                yield unknown(at, "an index into a value built in several steps")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "values"
            and not node.args
        ):  # *numeric.values(): a dict's values, in order
            pairs = self._dict_items(at._replace(node=node.func.value), depth)
            if pairs is None:
                yield unknown(at, "the values of a dict the tree cannot read")
            for _, value in pairs or ():
                yield from self._values(value, depth + 1)
        elif isinstance(node, ast.Call) and not column_function(m, node):
            yield from self._call(at, depth)
        else:
            yield at  # lists, +, comprehensions, column calls, constants, functions

    def _pick(self, base: Item, index: int, depth: int) -> Item:
        if isinstance(base, Unknown):
            return base
        if isinstance(base, Either):
            return base._replace(
                branches=tuple(
                    (self._pick(b[0], index, depth),)
                    if len(b) == 1
                    else (Unknown("", "", "an index into a value built in several steps"),)
                    for b in base.branches
                )
            )
        m, node = base.m, base.node
        if isinstance(node, (ast.List, ast.Tuple)):
            elements = node.elts
            if len(elements) > index and not any(
                isinstance(e, ast.Starred) for e in elements[: index + 1]
            ):
                found = list(self._values(base._replace(node=elements[index]), depth + 1))
                return found[0] if len(found) == 1 else Either("", (tuple(found),))
        if isinstance(node, ast.Call) and last_name(column_function(m, node)) in (
            kinds.LIST_FUNCTIONS
        ):
            pick = ast.Subscript(node, ast.Constant(index), ast.Load())
            return base._replace(node=ast.copy_location(pick, node))
        return unknown(base, f"item {index} of a value the tree cannot index")

    def _name(self, at: At, depth: int) -> Iterator[Item]:
        m, scopes, node = at[:3]
        local = dict(at.local).get(node.id)
        if local is not None:  # a comprehension's name, bound to this item
            yield from self._values(local, depth + 1)
            return
        values, where, parameter = binding(m, scopes, node.id, node.lineno)
        if values:
            here = At(m, where, values[0], at.env)
            items = list(self._values(here, depth + 1))
            control = self._control(here)
            if control is not None:  # it may not run: the value before it is the other path
                before = ast.copy_location(ast.Name(node.id, ast.Load()), values[0])
                without = tuple(self._name(here._replace(node=before), depth + 1))
                items = [_optional(node.id, control, tuple(items), without)]
            steps = [(value, [here._replace(node=value)]) for value in values[1:]]
            end = node.lineno if where == scopes else None
            steps += self._mutations(here, node.id, (values[0].lineno, end))
            steps.sort(key=lambda step: (step[0].lineno, step[0].col_offset))
            for value, parts in steps:
                if id(value) in m.augmented and not isinstance(m.augmented[id(value)].op, ast.Add):
                    items.append(
                        unknown(here._replace(node=value), "changed by an operator other than +=")
                    )
                    continue
                more = [i for part in parts for i in self._values(part, depth + 1)]
                control = self._control(here._replace(node=value))
                if control is None:
                    items += more
                elif (
                    isinstance(control, (ast.For, ast.AsyncFor))
                    and len(parts) == 1
                    and (
                        isinstance(parts[0].node, ast.List)
                        and self._control(here._replace(node=control)) is None
                    )
                ):  # for k in KEYS: columns.append(fc.numeric_column(k)): one per item
                    loop = ast.comprehension(control.target, control.iter, [], 0)
                    each = ast.copy_location(ast.ListComp(parts[0].node.elts[0], [loop]), value)
                    items.append(parts[0]._replace(node=each))
                elif isinstance(control, (ast.For, ast.AsyncFor, ast.While)):
                    items.append(
                        unknown(
                            here._replace(node=value),
                            f"changed in the loop at line {control.lineno}: the tree cannot count its columns",
                        )
                    )
                else:
                    what = (
                        f"under the {control.__class__.__name__.lower()} at line {control.lineno}"
                    )
                    items.append(Either(what, (tuple(more),), maybe=True))
            yield from items
        elif parameter is not None:
            yield from self._parameter(at._replace(scopes=where), parameter, node.id, depth)
        else:
            qualified = m.qualify(node)
            found = self._imported(m, qualified)
            missing = self._missing(m, qualified) if not found else None
            if missing:
                yield unknown(at, missing)
            elif not found and qualified and qualified != node.id:
                yield unknown(at, f"{node.id} comes from {qualified}, outside the scanned tree")
            elif not found:
                yield unknown(at, f"{node.id} is not assigned in the scanned tree")
            for value in found:
                yield from self._values(value, depth + 1)

    def _mutations(self, here: At, name: str, lines: tuple) -> list[tuple[ast.AST, list[At]]]:
        """``name.append(x)`` / ``extend(xs)`` after its last assignment (and before the use,
        in the same scope): (the call, what it adds: ``[x]`` / ``xs``)."""
        start, end = lines
        m, where = here.m, here.scopes
        out = []
        for call in m.calls:
            func = call.node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in _MUTATORS
                and isinstance(func.value, ast.Name)
                and func.value.id == name
                and call.scopes == where
                and call.node.lineno >= start
                and (end is None or call.node.lineno < end)
                and call.node.args
            ):
                value = call.node.args[-1]
                if func.attr != "extend":
                    value = ast.copy_location(ast.List([value], ast.Load()), value)
                out.append((call.node, [here._replace(node=value)]))
        return out

    def _control(self, at: At) -> ast.AST | None:
        """The innermost ``if``/``for``/``while``/``try``/``match`` around ``at.node`` in its
        scope (None: it runs whenever the scope does)."""
        scope = at.scopes[-1] if at.scopes else None
        key = (id(at.m), id(scope))
        parents = self._parents.get(key)
        if parents is None:
            parents = self._parents[key] = parent_map(at.m.tree if scope is None else scope)
        node = at.node
        if id(node) not in parents and isinstance(node, ast.Subscript):
            node = node.value  # a, b = f(): f()[0] is made by the walk, f() is in the tree
        parent = parents.get(id(node))
        while parent is not None:
            if isinstance(parent, _CONTROL):
                return parent
            parent = parents.get(id(parent))
        return None

    def _imported(self, m: ModuleInfo, qualified: str | None) -> list[At]:
        """A module-level name of another scanned module (its assignments), else ``[]``."""
        if not qualified or "." not in qualified:
            return []
        name, _, attr = qualified.rpartition(".")
        find = getattr(m.project, "find", None)
        other = find(name) if find is not None else m.project.get(name)
        if other is None or other is m:
            return []
        values, where, _ = binding(other, (), attr, None)
        return [At(other, where, value) for value in values]

    def _missing(self, m: ModuleInfo, qualified: str | None) -> str | None:
        """Why ``module.attr`` is not found when ``module`` IS scanned: it has no such name."""
        if not qualified or "." not in qualified:
            return None
        name, _, attr = qualified.rpartition(".")
        find = getattr(m.project, "find", None)
        other = find(name) if find is not None else m.project.get(name)
        if other is None or other is m:
            return None
        if binding(other, (), attr, None)[0] or any(
            getattr(node, "name", None) == attr for node in other.tree.body
        ):
            return None
        functions = [
            node.name
            for node in other.tree.body
            if isinstance(node, ast.FunctionDef) and "column" in ast.unparse(node)
        ]
        have = f"; its functions using columns: {', '.join(functions)}" if functions else ""
        return f"{name} ({other.path}) is scanned but has no name {attr}{have}"


def _optional(name: str, control: ast.AST, taken: tuple, skipped: tuple) -> Either:
    """Values on two paths: a statement under ``control`` runs, or not."""
    what = (
        f"{name}, changed under the {control.__class__.__name__.lower()} at line {control.lineno}"
    )
    return Either(f"the two paths of {what},", (taken, skipped))
