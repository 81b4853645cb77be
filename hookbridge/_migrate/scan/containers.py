"""Dicts and loops over literals, for :class:`hookbridge._migrate.scan.values.Values`.

census builds its columns in dict comprehensions (``numeric = {name: fc.numeric_column(name) for
name in NUMERIC}``) and reads them back by key (``vocab["education"]``, ``*numeric.values()``,
``indicator_column(vocab[name]) for name in (...)``): :class:`Containers` lists a dict literal's
or a dict comprehension's items and a comprehension's steps over a literal, each with the names
the loop binds (:attr:`At.local`), so each item is read with its own key.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hookbridge._migrate.scan.items import At, Item, unknown


class Containers:
    """Mixin of :class:`~hookbridge._migrate.scan.values.Values` (which gives ``_values``)."""

    def _values(self, at: At, depth: int) -> Iterator[Item]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _constant(self, at: At, depth: int) -> object:
        """The constant ``at`` evaluates to (through names), else None."""
        found = list(self._values(at, depth + 1))
        if len(found) == 1 and isinstance(found[0], At) and isinstance(found[0].node, ast.Constant):
            return found[0].node.value
        return None

    def _lookup(self, at: At, key: str, depth: int) -> Iterator[Item]:
        """``at[key]``: the value under ``key`` of the dict ``at`` evaluates to."""
        pairs = self._dict_items(at, depth)
        if pairs is None:
            yield unknown(at, f"[{key!r}] of a dict the tree cannot read")
            return
        for name, value in pairs:
            written = self._constant(name, depth)
            if written is None:
                yield unknown(name, f"a key the tree cannot read, looking up {key!r}")
                return
            if written == key:
                yield from self._values(value, depth + 1)
                return
        yield unknown(at, f"no key {key!r} in that dict")

    def _dict_items(self, at: At, depth: int) -> list[tuple[At, At]] | None:
        """(key, value) of the dict ``at`` evaluates to: a literal, or a comprehension over a
        literal (each item with the names it binds); None when the tree cannot list them."""
        found = list(self._values(at, depth + 1))
        if len(found) != 1 or not isinstance(found[0], At):
            return None
        base = found[0]
        node = base.node
        if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
            return [
                (base._replace(node=k), base._replace(node=v))
                for k, v in zip(node.keys, node.values)
            ]
        if isinstance(node, ast.DictComp) and len(node.generators) == 1:
            bound = self.iterations(base, node.generators[0], depth)
            if bound is None:
                return None
            return [
                (
                    base._replace(node=node.key, local=base.local + b),
                    base._replace(node=node.value, local=base.local + b),
                )
                for b in bound
            ]
        return None

    def iterations(self, at: At, loop: ast.comprehension, depth: int) -> list[tuple] | None:
        """What a comprehension's loop binds at each step (``((name, At), ...)`` per item),
        when it runs over a literal list, tuple, set or dict (``.items()`` too) without
        conditions; else None."""
        if loop.ifs or loop.is_async:
            return None
        iterated = loop.iter
        pairs = (
            isinstance(iterated, ast.Call)
            and isinstance(iterated.func, ast.Attribute)
            and iterated.func.attr == "items"
            and not iterated.args
        )
        if pairs:
            items = self._dict_items(at._replace(node=iterated.func.value), depth)
            elements = items
        else:
            found = list(self._values(at._replace(node=iterated), depth + 1))
            if len(found) != 1 or not isinstance(found[0], At):
                return None
            base = found[0]
            node = base.node
            if isinstance(node, ast.Dict):
                items = self._dict_items(base, depth)
                elements = [(k,) for k, _ in items] if items is not None else None
            elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and not any(
                isinstance(e, ast.Starred) for e in node.elts
            ):
                elements = [(base._replace(node=e),) for e in node.elts]
            else:
                return None
        if elements is None:
            return None
        out = []
        for element in elements:
            bound = _bind(loop.target, element)
            if bound is None:
                return None
            out.append(bound)
        return out


def _bind(target: ast.AST, element: tuple) -> tuple | None:
    """A loop target's names bound to one item (a value, or a dict's (key, value))."""
    if len(element) == 2:
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            if all(isinstance(t, ast.Name) for t in target.elts):
                return tuple((t.id, e) for t, e in zip(target.elts, element))
        return None
    (value,) = element
    if isinstance(target, ast.Name):
        return ((target.id, value),)
    if (
        isinstance(target, ast.Tuple)
        and isinstance(value.node, ast.Tuple)
        and len(target.elts) == len(value.node.elts)
        and all(isinstance(t, ast.Name) for t in target.elts)
    ):
        return tuple((t.id, value._replace(node=e)) for t, e in zip(target.elts, value.node.elts))
    return None
