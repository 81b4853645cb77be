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
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.containers import Containers
from hookbridge._migrate.scan.flow import Forwarded, argument_for
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
from hookbridge._migrate.scan.modules import Call, ModuleInfo
from hookbridge._migrate.scan.scopes import (
    SCOPES,
    binding,
    default_of,
    is_partial,
    last_written,
    parent_map,
)
from hookbridge._migrate.twins import kinds

#: List methods that add to a list of columns.
_MUTATORS = frozenset({"append", "extend", "insert"})
#: Statements whose body may run or not, or many times.
_CONTROL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)


class Values(Containers):
    """Evaluates expressions across a scanned project (see the module's docstring)."""

    def __init__(self) -> None:
        self._active: set[tuple[int, str]] = set()
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
                yield unknown(at, f"{short_text(node)} is not a name of the scanned tree")
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
            if not found and qualified and qualified != node.id:
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

    def _call(self, at: At, depth: int) -> Iterator[Item]:
        m, scopes, node = at[:3]
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("list", "tuple")
            and len(node.args) == 1
            and not binding(m, scopes, func.id, None)[0]
        ):
            yield from self._values(at._replace(node=node.args[0]), depth + 1)
            return
        if is_partial(m, node):
            yield at  # a function value: calling it is read by _returned
            return
        for item in self._values(at._replace(node=func), depth + 1):
            yield self._returned(item, at, depth)

    def _returned(self, item: Item, at: At, depth: int) -> Item:
        """What the call ``at`` of the function ``item`` returns."""
        if isinstance(item, Unknown):
            return unknown(at, f"calls {item.text}: {item.reason}")
        if isinstance(item, Either):
            branches = tuple(
                tuple([self._returned(i, at, depth) for i in b]) for b in item.branches
            )
            return item._replace(branches=branches)
        m, scopes, fn, env = item[:4]
        call = Call(at.node, at.scopes)
        if is_partial(m, fn) and not isinstance(fn.args[0], ast.Starred):
            # functools.partial(build_model_columns, dataset=...)(): the function, given the
            # partial's arguments (when the call adds none)
            bound = ast.copy_location(ast.Call(fn.args[0], fn.args[1:], fn.keywords), fn)
            inner = item._replace(node=bound)
            if at.node.args or at.node.keywords:
                inner = inner._replace(env=())
            found = [
                self._returned(i, inner, depth + 1)
                for i in self._values(item._replace(node=fn.args[0]), depth + 1)
            ]
            return found[0] if len(found) == 1 else Either("", (tuple(found),))
        if not isinstance(fn, SCOPES):
            return unknown(
                at, f"calls {short_text(fn)}, which the tree does not read as a function"
            )
        inner_env = ((id(fn), (at.m, call, at.env)), *env)
        values = [fn.body] if isinstance(fn, ast.Lambda) else m.returned.get(id(fn), [])
        if not values:
            return unknown(at, f"{fn.name} returns nothing the tree can read")
        branches = tuple(
            tuple(self._values(At(m, (*scopes, fn), value, inner_env), depth + 1))
            for value in values
        )
        if len(branches) == 1 and len(branches[0]) == 1:
            return branches[0][0]
        if len(branches) == 1:
            return Either("", branches)
        lines = ", ".join(str(v.lineno) for v in sorted(values, key=lambda v: v.lineno))
        return Either(f"the return statements of {fn.name} (lines {lines})", branches)

    def _parameter(self, at: At, fn: ast.AST, name: str, depth: int) -> Iterator[Item]:
        """A parameter's value: what the call that led here gives it (``at.env``), else what
        each scanned call of its function gives it."""
        key = (id(fn), name)
        bound = dict(at.env).get(id(fn))
        if bound is None and (isinstance(fn, ast.Lambda) or key in self._active):
            yield unknown(at, f"{name} is a parameter the tree does not follow")
            return
        self._active.add(key)
        try:
            if bound is not None:
                calls = [bound]
            else:
                calls = sorted(
                    self._call_sites(at.m, fn, depth),
                    key=lambda s: (s[0].path, s[1].node.lineno, s[1].node.col_offset),
                )
            branches, sites = [], []
            for cm, call, env in calls:
                given = argument_for(call.node, fn, name)
                site = f"{cm.path}:{call.node.lineno}"
                if given is None and default_of(fn, name) is not None:
                    value = default_of(fn, name)
                    branches.append(tuple(self._values(at._replace(node=value), depth + 1)))
                elif given is None or isinstance(given, Forwarded):
                    how = "passes it on through **kwargs" if given else "does not give it"
                    reason = f"{name}: the call of {fn.name} at {site} {how}"
                    branches.append((unknown(at, reason),))
                else:
                    found = self._values(At(cm, call.scopes, given, env), depth + 1)
                    branches.append(tuple(found))
                sites.append(site)
        finally:
            self._active.discard(key)
        if not branches:
            yield unknown(
                at,
                f"{name} is a parameter of {fn.name}, and no call of {fn.name} in the scanned "
                "tree gives it",
            )
        elif len(branches) == 1:
            yield from branches[0]
        else:
            yield Either(f"the calls of {fn.name} at {', '.join(sites)}", tuple(branches))

    def _call_sites(self, m: ModuleInfo, fn: ast.AST, depth: int):
        """The calls of ``fn`` in the scanned tree, each with the env its arguments are read
        in: by its name, and through a parameter of a scanned function it is passed to
        (``run_loop(build_estimator_fn=build_estimator)``, then ``build_estimator_fn(...)``
        inside ``run_loop``, whose parameters hold that call's arguments)."""
        naming = getattr(m.project, "naming", None)
        modules = naming(fn.name) if naming is not None else [m]
        for other in modules:
            for call in other.calls:
                node = call.node
                func = node.func
                written = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if written == fn.name and self._is(other, call.scopes, func, fn, depth):
                    yield other, call, ()
                given = [(a, i, None) for i, a in enumerate(node.args)]
                given += [(k.value, None, k.arg) for k in node.keywords if k.arg]
                for value, index, keyword in given:
                    if not (
                        isinstance(value, (ast.Name, ast.Attribute))
                        and last_written(value) == fn.name
                        and self._is(other, call.scopes, value, fn, depth)
                    ):
                        continue
                    for target in self._values(At(other, call.scopes, func), depth + 1):
                        if isinstance(target, At) and isinstance(target.node, SCOPES[:2]):
                            env = ((id(target.node), (other, call, ())),)
                            for inner_module, inner in _through(target, index, keyword):
                                yield inner_module, inner, env

    def _is(self, m, scopes, node, fn, depth) -> bool:
        return any(
            isinstance(item, At) and item.node is fn
            for item in self._values(At(m, scopes, node), depth + 1)
        )


def _optional(name: str, control: ast.AST, taken: tuple, skipped: tuple) -> Either:
    """Values on two paths: a statement under ``control`` runs, or not."""
    what = (
        f"{name}, changed under the {control.__class__.__name__.lower()} at line {control.lineno}"
    )
    return Either(f"the two paths of {what},", (taken, skipped))


def _through(target: At, index: int | None, keyword: str | None):
    """The calls, inside the function ``target``, of its parameter at ``index``/``keyword``."""
    g = target.node
    positional = [a.arg for a in g.args.posonlyargs + g.args.args]
    named = set(positional) | {a.arg for a in g.args.kwonlyargs}
    name = keyword if keyword in named else None
    if name is None and index is not None and index < len(positional):
        name = positional[index]
    if name is None:
        return
    for call in target.m.calls:
        func = call.node.func
        if isinstance(func, ast.Name) and func.id == name and g in call.scopes:
            yield target.m, call
