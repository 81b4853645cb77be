"""The feature columns a canned Estimator is given, read from the syntax tree (nothing imported).

A canned Estimator's columns are rarely written in its call: tensorflow/models' census job
builds them in ``census_dataset.build_model_columns()`` (``wide_columns = base_columns +
crossed_columns``; ``return wide_columns, deep_columns``), and ``build_estimator`` gets that
function as a parameter, ``model_column_fn``, from a caller in a third module, to unpack its
result (``wide_columns, deep_columns = model_column_fn()``). :class:`Reader` follows such names
as far as the tree goes: assignments (the last one written before the use), tuple unpacking,
``+``, ``+=``, ``append``/``extend``, list comprehensions, ``list(...)``, indexing, imports
(also under a longer path than the scanned root), the values a scanned function returns, and a
parameter's value at every scanned call of its function (also a function passed as an argument
and called through the parameter it lands in). Where the tree cannot tell, the column is
*unknown* with the reason; where paths disagree (two callers, two ``return``), too: never a
guess. Which columns the twin builds: :mod:`hookbridge._migrate.twins.kinds`.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import NamedTuple, Union

from hookbridge._migrate.scan.classes import is_tf, last_name
from hookbridge._migrate.scan.flow import Forwarded, argument, argument_for
from hookbridge._migrate.scan.modules import Call, ModuleInfo
from hookbridge._migrate.twins import kinds

_DEPTH = 24
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
#: Arguments of a column function holding other columns (or raw keys): (keyword, position).
_SOURCES = {
    "bucketized_column": ("source_column", 0),
    "embedding_column": ("categorical_column", 0),
    "indicator_column": ("categorical_column", 0),
    "weighted_categorical_column": ("categorical_column", 0),
    "crossed_column": ("keys", 0),
}
_MUTATORS = frozenset({"append", "extend", "insert"})


@dataclasses.dataclass(frozen=True)
class Column:
    """One feature column of a canned Estimator's row (``hookbridge scan``, JSON ``columns``).

    Attributes:
        argument: the constructor argument it is given in (``dnn_feature_columns``).
        type: the ``tf.feature_column`` function that makes it (``embedding_column``); ``""``
            when unknown.
        key: the feature key(s) it reads (``occupation``, ``education x occupation``), or the
            source text the tree could not follow.
        builds: whether ``keras_twin`` builds it; None when the tree cannot tell.
        reason: why it is refused or unknown (``""`` when it is built).
        where: ``path:line`` of the call making it (or of what could not be followed).
    """

    argument: str
    type: str
    key: str
    builds: bool | None
    reason: str
    where: str


class _At(NamedTuple):
    m: ModuleInfo
    scopes: tuple
    node: ast.AST
    #: The calls whose arguments the parameters of the functions around ``node`` hold:
    #: ((id(function), (module, Call, the caller's env)), ...), innermost first. A value read
    #: inside a function reached through a call (``_vocabulary("education", ...)``) takes that
    #: call's arguments, not those of every call of the function.
    env: tuple = ()


class _Unknown(NamedTuple):
    where: str
    text: str
    reason: str


class _Either(NamedTuple):
    """Values that differ by path: one list per branch (two callers, two ``return``)."""

    what: str  # "the callers at a.py:3, b.py:9" / "build's return statements (lines 4, 7)"
    branches: tuple[tuple, ...]


_Item = Union[_At, _Unknown, _Either]


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 48 else text[:45] + "..."


def _unknown(at: _At, reason: str) -> _Unknown:
    return _Unknown(f"{at.m.path}:{getattr(at.node, 'lineno', 1)}", _text(at.node), reason)


def column_function(m: ModuleInfo, node: ast.Call) -> str | None:
    """The qualified name of a feature-column function ``node`` calls, else None."""
    qualified = m.qualify(node.func)
    last = last_name(qualified)
    if not is_tf(qualified):
        return None
    if last.endswith(("_column", "_columns")) or last.startswith("sequence_"):
        return qualified
    return qualified if last in kinds.SUPPORTED_FUNCTIONS else None


class Reader:
    """Reads feature columns across a scanned project (one per canned row)."""

    def __init__(self) -> None:
        self._active: set[tuple[int, str]] = set()

    def columns(self, m: ModuleInfo, scopes: tuple, node: ast.AST, name: str) -> list[Column]:
        """The columns ``node`` (given as argument ``name``) holds, in order."""
        return [
            dataclasses.replace(c, argument=name) for c in self._columns(_At(m, scopes, node), 0)
        ]

    # ------------------------------------------------------------------ columns
    def _columns(self, at: _At, depth: int) -> Iterator[Column]:
        for item in self._values(at, depth):
            if isinstance(item, _Unknown):
                yield Column("", "", item.text, None, item.reason, item.where)
            elif isinstance(item, _Either):
                yield from self._either(item, depth)
            else:
                yield from self._read(item, depth)

    def _read(self, at: _At, depth: int) -> Iterator[Column]:
        m, scopes, node = at[:3]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for element in node.elts:
                value = element.value if isinstance(element, ast.Starred) else element
                yield from self._columns(at._replace(node=value), depth + 1)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self._columns(at._replace(node=node.left), depth + 1)
            yield from self._columns(at._replace(node=node.right), depth + 1)
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            yield from self._comprehension(at, depth)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call):
            yield from self._describe(at._replace(node=node.value), depth, node.slice.value)
        elif isinstance(node, ast.Call) and column_function(m, node):
            yield from self._describe(at, depth)
        elif isinstance(node, ast.Constant) and node.value is None:
            return  # feature_columns=None: none
        else:
            what = "a function" if isinstance(node, _SCOPES) else "a value"
            yield Column(
                "", "", _text(node) if not isinstance(node, _SCOPES) else node.__class__.__name__,
                None, f"{what} the tree cannot read as feature columns",
                f"{m.path}:{getattr(node, 'lineno', 1)}",
            )

    def _either(self, item: _Either, depth: int) -> Iterator[Column]:
        found = [[c for i in branch for c in self._items(i, depth)] for branch in item.branches]
        shapes = {tuple((c.type, c.key, c.builds) for c in branch) for branch in found}
        if len(shapes) == 1:
            yield from found[0]
            return
        where = found[0][0].where if found[0] else ""
        yield Column(
            "", "", "", None, f"{item.what} give different columns: the tree cannot tell which",
            where,
        )

    def _items(self, item: _Item, depth: int) -> Iterator[Column]:
        if isinstance(item, _Unknown):
            yield Column("", "", item.text, None, item.reason, item.where)
        elif isinstance(item, _Either):
            yield from self._either(item, depth + 1)
        else:
            yield from self._read(item, depth + 1)

    def _comprehension(self, at: _At, depth: int) -> Iterator[Column]:
        m, scopes, node = at[:3]
        where = f"{m.path}:{node.lineno}"
        if len(node.generators) != 1 or node.generators[0].ifs:
            yield Column("", "", _text(node), None, "a comprehension with several loops or "
                         "conditions: the tree cannot count its columns", where)
            return
        loop = node.generators[0]
        elt = node.elt
        if not (isinstance(elt, ast.Call) and column_function(m, elt)):
            yield Column("", "", _text(node), None, "a comprehension of calls the tree does "
                         "not read as feature columns", where)
            return
        keys = self._constants(at._replace(node=loop.iter), depth + 1)
        first = argument(elt, "key", 0)
        if (
            keys is not None
            and isinstance(loop.target, ast.Name)
            and isinstance(first, ast.Name)
            and first.id == loop.target.id
        ):
            for key in keys:
                for column in self._describe(at._replace(node=elt), depth):
                    yield dataclasses.replace(column, key=key)
            return
        for column in self._describe(at._replace(node=elt), depth):
            yield dataclasses.replace(
                column, key=f"one per {_text(loop.target)} in {_text(loop.iter)}"
            )

    def _constants(self, at: _At, depth: int) -> list[str] | None:
        """The strings a literal list names (through names), else None."""
        out: list[str] = []
        for item in self._values(at, depth):
            if not isinstance(item, _At) or not isinstance(item.node, (ast.List, ast.Tuple)):
                return None
            for element in item.node.elts:
                if not (isinstance(element, ast.Constant) and isinstance(element.value, str)):
                    return None
                out.append(element.value)
        return out

    def _describe(self, at: _At, depth: int, index: object = None) -> Iterator[Column]:
        m, scopes, node = at[:3]
        qualified = column_function(m, node) or ""
        function = last_name(qualified)
        reason = kinds.refusal(function, contrib=".contrib." in f".{qualified}.")
        where = f"{m.path}:{node.lineno}"
        if function in kinds.LIST_FUNCTIONS:  # one column per categorical column given
            given = argument(node, "categorical_columns", 0)
            sources = list(self._columns(at._replace(node=given), depth + 1)) if given else []
            for position, source in enumerate(sources):
                if index is None or index == position:
                    yield self._over(function, [source], reason, where, source.key)
            return
        spec = _SOURCES.get(function)
        if spec is None:
            key = argument(node, "key", 0)
            text = self._string(at._replace(node=key), depth) if key is not None else "?"
            yield Column("", function, text, not reason, reason, where)
            return
        given = argument(node, *spec)
        sources: list[Column] = []
        if given is not None:
            elements = [given]
            if function == "crossed_column" and isinstance(given, (ast.List, ast.Tuple)):
                elements = list(given.elts)
            for element in elements:
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    sources.append(Column("", "key", element.value, True, "", where))
                else:
                    sources += self._columns(at._replace(node=element), depth + 1)
        key = " x ".join(s.key for s in sources) or "?"
        yield self._over(function, sources, reason, where, key)

    @staticmethod
    def _over(function: str, sources: list[Column], reason: str, where: str, key: str):
        """A column over others: refused when one is, unknown when one is unknown."""
        if not reason:
            for source in sources:
                if source.builds is False:
                    reason = f"over {source.type} ({source.key}): {source.reason}"
                    return Column("", function, key, False, reason, where)
            for source in sources:
                if source.builds is None:
                    reason = f"its column {source.key} is unknown ({source.reason})"
                    return Column("", function, key, None, reason, where)
        return Column("", function, key, not reason, reason, where)

    def _string(self, at: _At, depth: int) -> str:
        for item in self._values(at, depth + 1):
            if isinstance(item, _At) and isinstance(item.node, ast.Constant):
                return str(item.node.value)
            break
        return _text(at.node)

    # ------------------------------------------------------------------ values
    def _values(self, at: _At, depth: int) -> Iterator[_Item]:
        """What ``at`` evaluates to, followed through names, calls and indexing."""
        m, scopes, node = at[:3]
        if depth > _DEPTH:
            yield _unknown(at, "nested too deep to follow")
        elif isinstance(node, ast.Name):
            yield from self._name(at, depth)
        elif isinstance(node, ast.Attribute):
            found = self._imported(m, m.qualify(node))
            if not found:
                yield _unknown(at, f"{_text(node)} is not a name of the scanned tree")
            for value in found:
                yield from self._values(value, depth + 1)
        elif isinstance(node, ast.Subscript):
            index = node.slice
            if not (isinstance(index, ast.Constant) and isinstance(index.value, int)):
                yield _unknown(at, "an index the tree cannot read")
                return
            bases = list(self._values(at._replace(node=node.value), depth + 1))
            if len(bases) == 1:
                yield self._pick(bases[0], index.value, depth)
            else:  # x = [..]; x += [..]; x[0]
                yield _unknown(at, "an index into a value built in several steps")
        elif isinstance(node, ast.Call) and not column_function(m, node):
            yield from self._call(at, depth)
        else:
            yield at  # lists, +, comprehensions, column calls, constants, functions

    def _pick(self, base: _Item, index: int, depth: int) -> _Item:
        if isinstance(base, _Unknown):
            return base
        if isinstance(base, _Either):
            return base._replace(
                branches=tuple(
                    (self._pick(b[0], index, depth),)
                    if len(b) == 1
                    else (_Unknown("", "", "an index into a value built in several steps"),)
                    for b in base.branches
                )
            )
        m, scopes, node = base[:3]
        if isinstance(node, (ast.List, ast.Tuple)):
            elements = node.elts
            if len(elements) > index and not any(
                isinstance(e, ast.Starred) for e in elements[: index + 1]
            ):
                found = list(self._values(base._replace(node=elements[index]), depth + 1))
                return found[0] if len(found) == 1 else _Either("", (tuple(found),))
        if isinstance(node, ast.Call) and last_name(column_function(m, node)) in (
            kinds.LIST_FUNCTIONS
        ):
            pick = ast.Subscript(node, ast.Constant(index), ast.Load())
            return base._replace(node=ast.copy_location(pick, node))
        return _unknown(base, f"item {index} of a value the tree cannot index")

    def _name(self, at: _At, depth: int) -> Iterator[_Item]:
        m, scopes, node = at[:3]
        values, where, parameter = _binding(m, scopes, node.id, node.lineno)
        if values:
            for value in values:
                if id(value) in m.augmented and not isinstance(m.augmented[id(value)].op, ast.Add):
                    yield _unknown(at._replace(node=value), "changed by an operator other than +=")
                    continue
                yield from self._values(_At(m, where, value, at.env), depth + 1)
            end = node.lineno if where == scopes else None
            yield from self._mutations(at._replace(scopes=where), node.id, (values[0].lineno, end), depth)
        elif parameter is not None:
            yield from self._parameter(at._replace(scopes=where), parameter, node.id, depth)
        else:
            qualified = m.qualify(node)
            found = self._imported(m, qualified)
            if not found and qualified and qualified != node.id:
                yield _unknown(at, f"{node.id} comes from {qualified}, outside the scanned tree")
            elif not found:
                yield _unknown(at, f"{node.id} is not assigned in the scanned tree")
            for value in found:
                yield from self._values(value, depth + 1)

    def _mutations(self, at: _At, name: str, lines: tuple, depth: int) -> Iterator[_Item]:
        """``name.append(x)`` / ``extend(xs)`` after its last assignment (and before the use,
        in the same scope)."""
        start, end = lines
        m, where = at.m, at.scopes
        for call in sorted(m.calls, key=lambda c: (c.node.lineno, c.node.col_offset)):
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
                if func.attr == "extend":
                    yield from self._values(at._replace(node=value), depth + 1)
                else:
                    yield at._replace(node=ast.copy_location(ast.List([value], ast.Load()), value))

    def _imported(self, m: ModuleInfo, qualified: str | None) -> list[_At]:
        """A module-level name of another scanned module (its assignments), else ``[]``."""
        if not qualified or "." not in qualified:
            return []
        name, _, attr = qualified.rpartition(".")
        find = getattr(m.project, "find", None)
        other = find(name) if find is not None else m.project.get(name)
        if other is None or other is m:
            return []
        values, where, _ = _binding(other, (), attr, None)
        return [_At(other, where, value) for value in values]

    def _call(self, at: _At, depth: int) -> Iterator[_Item]:
        m, scopes, node = at[:3]
        func = node.func
        if (
            isinstance(func, ast.Name)
            and func.id in ("list", "tuple")
            and len(node.args) == 1
            and not _binding(m, scopes, func.id, None)[0]
        ):
            yield from self._values(at._replace(node=node.args[0]), depth + 1)
            return
        if _is_partial(m, node):
            yield at  # a function value: calling it is read by _returned
            return
        for item in self._values(at._replace(node=func), depth + 1):
            yield self._returned(item, at, depth)

    def _returned(self, item: _Item, at: _At, depth: int) -> _Item:
        """What the call ``at`` of the function ``item`` returns."""
        if isinstance(item, _Unknown):
            return _unknown(at, f"calls {item.text}: {item.reason}")
        if isinstance(item, _Either):
            branches = tuple(tuple([self._returned(i, at, depth) for i in b]) for b in item.branches)
            return item._replace(branches=branches)
        m, scopes, fn, env = item
        call = Call(at.node, at.scopes)
        if _is_partial(m, fn) and not isinstance(fn.args[0], ast.Starred):
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
            return found[0] if len(found) == 1 else _Either("", (tuple(found),))
        if not isinstance(fn, _SCOPES):
            return _unknown(at, f"calls {_text(fn)}, which the tree does not read as a function")
        inner_env = ((id(fn), (at.m, call, at.env)), *env)
        if isinstance(fn, ast.Lambda):
            values = [fn.body]
        else:
            values = m.returned.get(id(fn), [])
        if not values:
            return _unknown(at, f"{fn.name} returns nothing the tree can read")
        branches = tuple(
            tuple(self._values(_At(m, (*scopes, fn), value, inner_env), depth + 1))
            for value in values
        )
        if len(branches) == 1 and len(branches[0]) == 1:
            return branches[0][0]
        if len(branches) == 1:
            return _Either("", branches)
        lines = ", ".join(str(v.lineno) for v in sorted(values, key=lambda v: v.lineno))
        return _Either(f"the return statements of {fn.name} (lines {lines})", branches)

    def _parameter(self, at: _At, fn: ast.AST, name: str, depth: int) -> Iterator[_Item]:
        """A parameter's value: what the call that led here gives it (``at.env``), else what
        each scanned call of its function gives it."""
        key = (id(fn), name)
        bound = dict(at.env).get(id(fn))
        if bound is None and (isinstance(fn, ast.Lambda) or key in self._active):
            yield _unknown(at, f"{name} is a parameter the tree does not follow")
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
                if given is None and _default(fn, name) is not None:
                    value = _default(fn, name)
                    branches.append(tuple(self._values(at._replace(node=value), depth + 1)))
                elif given is None or isinstance(given, Forwarded):
                    how = "passes it on through **kwargs" if given else "does not give it"
                    reason = f"{name}: the call of {fn.name} at {site} {how}"
                    branches.append((_unknown(at, reason),))
                else:
                    found = self._values(_At(cm, call.scopes, given, env), depth + 1)
                    branches.append(tuple(found))
                sites.append(site)
        finally:
            self._active.discard(key)
        if not branches:
            yield _unknown(
                at,
                f"{name} is a parameter of {fn.name}, and no call of {fn.name} in the scanned "
                "tree gives it",
            )
        elif len(branches) == 1:
            yield from branches[0]
        else:
            yield _Either(f"the calls of {fn.name} at {', '.join(sites)}", tuple(branches))

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
                        and _last(value) == fn.name
                        and self._is(other, call.scopes, value, fn, depth)
                    ):
                        continue
                    for target in self._values(_At(other, call.scopes, func), depth + 1):
                        if isinstance(target, _At) and isinstance(target.node, _SCOPES[:2]):
                            env = ((id(target.node), (other, call, ())),)
                            for inner_module, inner in _through(target, index, keyword):
                                yield inner_module, inner, env

    def _is(self, m, scopes, node, fn, depth) -> bool:
        return any(
            isinstance(item, _At) and item.node is fn
            for item in self._values(_At(m, scopes, node), depth + 1)
        )


def _is_partial(m: ModuleInfo, node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and last_name(m.qualify(node.func)) == "partial"
        and bool(node.args)
    )


def _default(fn: ast.AST, name: str) -> ast.AST | None:
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


def _last(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _through(target: _At, index: int | None, keyword: str | None):
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


def _binding(m: ModuleInfo, scopes: tuple, name: str, line: int | None):
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
        if scope is not None and _is_parameter(scope, name):
            return [], scopes[:depth], scope
    return [], (), None


def _is_parameter(scope: ast.AST, name: str) -> bool:
    args = getattr(scope, "args", None)
    if not isinstance(args, ast.arguments):
        return False
    every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
    return any(a is not None and a.arg == name for a in every)
