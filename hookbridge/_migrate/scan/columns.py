"""The feature columns a canned Estimator is given, read from the syntax tree (nothing imported).

A canned Estimator's columns are rarely written in its call: tensorflow/models' census job
builds them in ``census_dataset.build_model_columns()`` (``wide_columns = base_columns +
crossed_columns``; ``return wide_columns, deep_columns``), and ``build_estimator`` gets that
function as a parameter, ``model_column_fn``, from a caller in a third module, to unpack its
result (``wide_columns, deep_columns = model_column_fn()``). :class:`Reader` follows such names
as far as the tree goes (:mod:`hookbridge._migrate.scan.values`: assignments, unpacking, ``+=``,
``append``, imports, returns, parameters at the call that led there) and reads the lists it
finds (literals, ``+``, comprehensions) into columns: each one's type, key and whether the twin
builds it (:mod:`hookbridge._migrate.twins.kinds`), a column over another refused or unknown
being refused or unknown in turn. Where the tree cannot tell, the column is *unknown* with the
reason; where paths disagree (two callers, two ``return``), too: never a guess.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator

from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.flow import argument
from hookbridge._migrate.scan.items import (
    At,
    Either,
    Item,
    Unknown,
    column_function,
    short_text,
)
from hookbridge._migrate.scan.modules import ModuleInfo
from hookbridge._migrate.scan.scopes import SCOPES
from hookbridge._migrate.scan.values import Values
from hookbridge._migrate.twins import kinds

#: Arguments of a column function holding other columns (or raw keys): (keyword, position).
_SOURCES = {
    "bucketized_column": ("source_column", 0),
    "embedding_column": ("categorical_column", 0),
    "indicator_column": ("categorical_column", 0),
    "weighted_categorical_column": ("categorical_column", 0),
    "crossed_column": ("keys", 0),
}


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


class Reader(Values):
    """Reads feature columns across a scanned project (one per canned row)."""

    def columns(self, m: ModuleInfo, scopes: tuple, node: ast.AST, name: str) -> list[Column]:
        """The columns ``node`` (given as argument ``name``) holds, in order."""
        return [
            dataclasses.replace(c, argument=name) for c in self._columns(At(m, scopes, node), 0)
        ]

    def given(
        self, m: ModuleInfo, scopes: tuple, call: ast.Call, keyword: str, index: int | None
    ) -> list[Column]:
        """The columns ``call`` gives as ``keyword`` (or at position ``index``), also through a
        ``**dict`` the tree reads (``**columns.estimator_arguments()`` returning a dict
        literal); unknown where a ``*args`` or ``**kwargs`` may hold them."""
        value = argument(call, keyword, index)
        if value is not None:
            return self.columns(m, scopes, value, keyword)
        where = f"{m.path}:{call.lineno}"
        if index is not None and any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            text = short_text(next(a for a in call.args if isinstance(a, ast.Starred)))
            reason = f"may be in {text}: the tree cannot tell"
            return [Column(keyword, "", text, None, reason, where)]
        for starred in (k.value for k in call.keywords if k.arg is None):
            items = list(self._values(At(m, scopes, starred), 0))
            found = items[0] if len(items) == 1 else None
            if not (
                isinstance(found, At)
                and isinstance(found.node, ast.Dict)
                and all(isinstance(k, ast.Constant) for k in found.node.keys)
            ):
                text = f"**{short_text(starred)}"
                reason = f"may be in {text}, a dict the tree cannot read"
                return [Column(keyword, "", text, None, reason, where)]
            for key, item in zip(found.node.keys, found.node.values):
                if key.value == keyword:
                    columns = self._columns(found._replace(node=item), 0)
                    return [dataclasses.replace(c, argument=keyword) for c in columns]
        return []

    # ------------------------------------------------------------------ columns
    def _columns(self, at: At, depth: int) -> Iterator[Column]:
        for item in self._values(at, depth):
            if isinstance(item, Unknown):
                yield Column("", "", item.text, None, item.reason, item.where)
            elif isinstance(item, Either):
                yield from self._either(item, depth)
            else:
                yield from self._read(item, depth)

    def _read(self, at: At, depth: int) -> Iterator[Column]:
        m, node = at.m, at.node
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
            what = "a function" if isinstance(node, SCOPES) else "a value"
            yield Column(
                "",
                "",
                short_text(node) if not isinstance(node, SCOPES) else node.__class__.__name__,
                None,
                f"{what} the tree cannot read as feature columns",
                f"{m.path}:{getattr(node, 'lineno', 1)}",
            )

    def _either(self, item: Either, depth: int) -> Iterator[Column]:
        found = [[c for i in branch for c in self._items(i, depth)] for branch in item.branches]
        if item.maybe:  # columns added only on one path: each says when
            for column in found[0]:
                yield dataclasses.replace(column, where=f"{column.where} (only {item.what})")
            return
        shapes = {tuple((c.type, c.key, c.builds) for c in branch) for branch in found}
        if len(shapes) == 1:
            yield from found[0]
            return
        where = found[0][0].where if found[0] else ""
        yield Column(
            "",
            "",
            "",
            None,
            f"{item.what} give different columns: the tree cannot tell which",
            where,
        )

    def _items(self, item: Item, depth: int) -> Iterator[Column]:
        if isinstance(item, Unknown):
            yield Column("", "", item.text, None, item.reason, item.where)
        elif isinstance(item, Either):
            yield from self._either(item, depth + 1)
        else:
            yield from self._read(item, depth + 1)

    def _comprehension(self, at: At, depth: int) -> Iterator[Column]:
        m, node = at.m, at.node
        where = f"{m.path}:{node.lineno}"
        if len(node.generators) != 1 or node.generators[0].ifs:
            yield Column(
                "",
                "",
                short_text(node),
                None,
                "a comprehension with several loops or "
                "conditions: the tree cannot count its columns",
                where,
            )
            return
        loop = node.generators[0]
        elt = node.elt
        bound = self.iterations(at, loop, depth)
        if bound is not None:  # a literal to loop over: each item's columns, exactly
            for names in bound:
                yield from self._columns(at._replace(node=elt, local=at.local + names), depth + 1)
            return
        if not (isinstance(elt, ast.Call) and column_function(m, elt)):
            yield Column(
                "",
                "",
                short_text(node),
                None,
                "a comprehension of calls the tree does not read as feature columns",
                where,
            )
            return
        for column in self._describe(at._replace(node=elt), depth):
            yield dataclasses.replace(
                column, key=f"one per {short_text(loop.target)} in {short_text(loop.iter)}"
            )

    def _describe(self, at: At, depth: int, index: object = None) -> Iterator[Column]:
        m, node = at.m, at.node
        qualified = column_function(m, node) or ""
        function = last_name(qualified)
        reason = kinds.refusal(function, contrib=".contrib." in f".{qualified}.")
        if function in kinds.CHECKPOINT_ARGUMENT and not reason:
            given = argument(node, "ckpt_to_load_from", kinds.CHECKPOINT_ARGUMENT[function])
            if given is not None and not (isinstance(given, ast.Constant) and given.value is None):
                reason = kinds.CHECKPOINT_REASON
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

    def _string(self, at: At, depth: int) -> str:
        for item in self._values(at, depth + 1):
            if isinstance(item, At) and isinstance(item.node, ast.Constant):
                return str(item.node.value)
            break
        return short_text(at.node)

    # ------------------------------------------------------------------ values
