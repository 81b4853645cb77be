"""Calls and parameters, for :class:`hookbridge._migrate.scan.values.Values`.

A call of a scanned function evaluates to what the function returns (each ``return``: values that
differ by path come as one :class:`Either`), through ``functools.partial`` and ``list(...)``. A
parameter evaluates to what the call that led there gives it (:attr:`At.env`), or else to what
every scanned call of its function gives it, a function passed as an argument included
(``run_loop(build_estimator_fn=build_estimator)``, then ``build_estimator_fn(...)`` inside).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hookbridge._migrate.scan.flow import Forwarded, argument_for
from hookbridge._migrate.scan.items import At, Either, Item, Unknown, short_text, unknown
from hookbridge._migrate.scan.modules import Call, ModuleInfo
from hookbridge._migrate.scan.scopes import (
    SCOPES,
    binding,
    default_of,
    is_partial,
    last_written,
)


class Calls:
    """Mixin of :class:`~hookbridge._migrate.scan.values.Values` (which gives ``_values``)."""

    def __init__(self) -> None:
        super().__init__()
        self._active: set[tuple[int, str]] = set()  # parameters being followed (no cycles)

    def _values(self, at: At, depth: int) -> Iterator[Item]:  # pragma: no cover - overridden
        raise NotImplementedError

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
