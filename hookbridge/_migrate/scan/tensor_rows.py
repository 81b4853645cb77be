"""The rows of what hooks read: tensors, summary ops and Savers, and the parts they are of.

:class:`TensorRows` is the part of pass 2 (:class:`hookbridge._migrate.scan.analyze.ModuleScan`)
that lists what a hook is given to read (a built-in hook's tensor argument, the tensor reads in a
hook class's methods, what a caller gives a function whose parameter reaches a hook's tensor
argument) and records, in :class:`~hookbridge._migrate.scan.verdicts.Links`, which hook each row
is a part of: a hook's verdict is the worst of its parts (verdicts.combine).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from hookbridge._migrate.scan import bridge_graph, catalog, tensors
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.entries import EntryPoints, name_of
from hookbridge._migrate.scan.flow import (
    TENSOR_ARGS,
    Forwarded,
    Functions,
    argument,
    argument_for,
)
from hookbridge._migrate.scan.modules import Call
from hookbridge._migrate.scan.verdicts import Key, Links, key


class TensorRows(EntryPoints):
    """What hooks read, as rows linked to the hooks they are parts of."""

    functions: Functions
    links: Links

    def _built(
        self, call: Call, kind: str, name: str, bridged: catalog.Bridged, entry: str = ""
    ) -> Key:
        """A hook row for ``call``, recorded as built in the functions around it."""
        row = self._add(call.node, kind, name, bridged, entry)
        if kind == f.HOOK:
            for scope in call.scopes:
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.links.built_in.setdefault(id(scope), []).append(row)
        return row

    def _tensor_arguments(self, call: Call, last: str, row: Key) -> None:
        if last not in TENSOR_ARGS:
            return
        index, keyword, what = TENSOR_ARGS[last]
        value = argument(call.node, keyword, index)
        on_bridge = any(id(s) in self.factory_scopes for s in call.scopes)
        for leaf in tensors.resolve(self.m, call.scopes, value, on_bridge, what, []):
            name = leaf.label[1:-1] if leaf.label[:1] in "'\"" else ""
            bridged = self._logged(call, name, leaf.bridged)
            part = self._add(leaf.node, f.TENSOR, leaf.label, bridged)
            self.links.add_part(row, part)
            if leaf.parameter:
                self.links.given.add(part)

    def _factory_row(self, call: Call, entry: str) -> bool:
        """A call of scanned functions that build hooks, passed where hooks go
        (``hooks=hooks_helper.get_train_hooks(...)``): one row, whose verdict is the worst of
        the hooks they build (verdicts.combine)."""
        targets = self.functions.callee(self.m, call.node, call.scopes)
        if not targets:
            return False
        where = ", ".join(f"{fn.name}() at {m.path}:{fn.lineno}" for m, fn in targets)
        row = self._add(
            call.node,
            f.HOOK,
            name_of(call.node.func),
            catalog.Bridged(
                f.UNVERIFIED,
                f"hooks built by {where}",
                "write the hooks where the scan can see them, or check each with hookbridge check",
            ),
            entry,
        )
        self.links.factories[row] = [id(fn) for _, fn in targets]
        for module, fn in targets:
            for function, called in self.functions.reachable(module, fn).items():
                self.links.calls.setdefault(function, set()).update(called)
        return True

    def _passed_to_functions(self, call: Call) -> None:
        """Tensors given to a scanned function whose parameter reaches a built-in hook's tensor
        argument (``get_train_hooks(names, tensors_to_log=TENSORS)``): rows where they are
        written, parts of that hook (and of the call's own row)."""
        node = call.node
        targets = self.functions.callee(self.m, node, call.scopes)
        own = (self.m.path, node.lineno, f.HOOK, name_of(node.func))
        on_bridge = any(id(s) in self.factory_scopes for s in call.scopes)
        for module, fn in targets:
            for param, sinks in self.functions.sinks(module, fn).items():
                given = argument_for(node, fn, param)
                if given is None or isinstance(given, Forwarded):
                    continue  # a **kwargs passed on: the enclosing function's callers say
                reaches = ", ".join(f"{s.hook}({s.keyword}=) at {s.path}:{s.line}" for s in sinks)
                via = f"passed as {param}= to {fn.name}() ({module.path}:{fn.lineno}), which gives it to {reaches}"
                params: list = []
                for leaf in tensors.resolve(
                    self.m, call.scopes, given, on_bridge, sinks[0].what, params
                ):
                    bridged = leaf.bridged._replace(detail=f"{via}: {leaf.bridged.detail}")
                    part = self._add(leaf.node, f.TENSOR, leaf.label, bridged)
                    self.links.given.add(part)
                    for s in sinks:
                        self.links.add_part((s.path, s.line, f.HOOK, s.hook), part)
                    self.links.add_part(own, part)

    def _logged(self, call: Call, name: str, bridged: catalog.Bridged) -> catalog.Bridged:
        """A tensor the HookCallback around this hooks callable exposes with ``log_names``."""
        # running_mean/<key>: the bridge makes it for every log key it makes <key> for.
        base = bridge_graph.base_name(name).removeprefix(bridge_graph.RUNNING_MEAN)
        if bridged.status != f.NEEDS_TENSOR or not base:
            return bridged
        for scope in call.scopes:
            if base in self.factory_scopes.get(id(scope), ()):
                return catalog.Bridged(
                    f.CONFORMS,
                    f"a Keras log value: HookCallback(log_names=[..., '{base}']) puts it on the "
                    "bridge's graph",
                )
        return bridged

    def _scan_tensor_reference(self, call: Call) -> None:
        before = len(self.out)
        self._tensor_reference(call)
        if len(self.out) == before:
            return
        for scope in call.scopes:  # a read in a hook class's method: a part of the class
            cls = self.m.classes.get(getattr(scope, "name", ""))
            if isinstance(scope, ast.ClassDef) and cls is not None and cls.node is scope:
                parts = self.links.class_parts.setdefault(cls.qualname, [])
                parts += [key(x) for x in self.out[before:]]

    def _tensor_reference(self, call: Call) -> None:
        node = call.node
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        last = last_name(self.m.qualify(node.func)) or attr
        first = node.args[0] if node.args else None
        if attr in catalog.BY_NAME_METHODS and isinstance(first, ast.Constant):
            if isinstance(first.value, str):
                bridged = self._logged(call, first.value, bridge_graph.tensor_status(first.value))
                self._add(node, f.TENSOR, repr(first.value), bridged)
        elif last in catalog.COLLECTION_METHODS and first is not None:
            name = _collectionname_of(first)
            if name is not None:
                self._add(
                    node, f.TENSOR, f"collection {name!r}", bridge_graph.collection_status(name)
                )
        elif last == "SessionRunArgs" and first is not None:
            for sub, name in _strings(first):
                bridged = self._logged(call, name, bridge_graph.tensor_status(name))
                self._add(sub, f.TENSOR, repr(name), bridged)


def _strings(node: ast.AST | None) -> Iterator[tuple[ast.AST, str]]:
    """String constants in a fetch structure: a string, a list/tuple of them, a dict's values."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node, node.value
    elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            yield from _strings(element)
    elif isinstance(node, ast.Dict):
        for value in node.values:
            yield from _strings(value)


def _collectionname_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and node.attr in bridge_graph.GRAPH_KEYS:
        return bridge_graph.GRAPH_KEYS[node.attr]
    return None
