"""Where hooks and callbacks enter a TF1 job, and where they run after the migration.

:class:`EntryPoints` holds what pass 2 (:class:`hookbridge._migrate.scan.analyze.ModuleScan`)
learns about one module's entry points before it classifies calls: which calls are entry points
(``Estimator``, ``TPUEstimatorSpec``, ``estimator.train``, ...), which calls sit in their hook
and callback arguments (following ``hooks=name`` to the list assigned to ``name``), where each
goes (``training_hooks -> fit``), which callables are ``HookCallback``'s hooks callables (built on
the bridge's graph), and which ``fit(callbacks=...)`` are graph-mode ``tf.keras``.
"""

from __future__ import annotations

import ast

from hookbridge._migrate.scan import catalog, spellings
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.classes import is_tf, is_tpu, last_name, root_name
from hookbridge._migrate.scan.flow import argument
from hookbridge._migrate.scan.modules import Call, ModuleInfo
from hookbridge._migrate.scan.twins import twin_verdict
from hookbridge._migrate.scan.walk import dotted

ESTIMATOR_METHODS = ("train", "evaluate", "predict")
_KERAS_METHODS = frozenset(
    {"fit", "evaluate", "predict", "fit_generator", "evaluate_generator", "predict_generator"}
)
#: Entry points whose hook arguments are counted, not taken as hook positions: the hooks of
#: ``hookbridge.estimator_hooks(hooks=...)`` already run under the HookCallback around it.
_COUNTED_ONLY = frozenset({"estimator_hooks"})


class EntryPoints:
    """One module's entry points and the hook and callback positions they define."""

    def __init__(self, module: ModuleInfo, graph_mode: bool = False) -> None:
        self.m = module
        self.graph_mode = graph_mode
        self.out: list[f.Finding] = []
        self._seen: set[tuple[int, str, str]] = set()
        #: (line, spelling) of the removed spellings a hook's or entry point's row carries.
        self.carried: set[tuple[int, str]] = set()
        self.hook_positions: dict[int, str] = {}  # id(call) -> the entry it is passed to
        self.callback_positions: dict[int, str] = {}
        self.fit_callbacks: dict[int, str] = {}  # in a graph-mode tf.keras fit
        self.native_callbacks: set[int] = set()
        self.tensor_scopes: set[int] = set()  # hook classes, HookCallback hooks callables
        #: id(hooks callable) -> the log_names its HookCallback exposes as tensors.
        self.factory_scopes: dict[int, frozenset[str]] = {}
        self.estimator_vars = {
            name
            for name, call in module.call_assignments
            if self._is_estimator(module.qualify(call.func))
        }

    def _add(
        self,
        node: ast.AST,
        kind: str,
        name: str,
        bridged: catalog.Bridged,
        entry: str = "",
        columns: tuple = (),
    ) -> tuple[str, int, str, str]:
        """Adds a row (once per line, kind and name); returns its key (path, line, kind,
        name)."""
        line = getattr(node, "lineno", 1)
        key = (line, kind, name)
        if key in self._seen:
            return (self.m.path, line, kind, name)
        self._seen.add(key)
        self.out.append(
            f.Finding(
                self.m.path,
                line,
                kind,
                name,
                bridged.status,
                bridged.detail,
                bridged.action,
                entry,
                columns,
            )
        )
        return (self.m.path, line, kind, name)

    @staticmethod
    def _is_estimator(qualified: str | None) -> bool:
        last = last_name(qualified)
        return (
            last in catalog.ESTIMATOR_CLASSES and (is_tf(qualified) or is_tpu(qualified))
        ) or (last in catalog.CANNED_ESTIMATORS and is_tf(qualified))

    def _entry_kind(self, call: ast.Call) -> str | None:
        """The entry-point key of a call (``Estimator``, ``train``, ...), else None."""
        qualified = self.m.qualify(call.func)
        last = last_name(qualified)
        if is_tpu(qualified):
            return last
        if (
            (is_tf(qualified) or root_name(qualified) == "hookbridge")
            and (last in catalog.ENTRY_POINTS or last in catalog.CANNED_ESTIMATORS)
            and last != "RunConfig"  # only a TPU RunConfig is listed (iterations_per_loop)
        ):
            return last
        if isinstance(call.func, ast.Attribute) and call.func.attr in ESTIMATOR_METHODS:
            has_hooks = any(k.arg == "hooks" for k in call.keywords)
            if has_hooks or self._receiver(call) in self.estimator_vars:
                return call.func.attr
        return None

    @staticmethod
    def _receiver(call: ast.Call) -> str:
        if not isinstance(call.func, ast.Attribute):
            return ""
        value = call.func.value
        if isinstance(value, ast.Name):
            return value.id
        if isinstance(value, ast.Attribute):
            return value.attr
        return ""

    def _elements(self, node: ast.AST | None, scopes: tuple[ast.AST, ...], depth: int = 0):
        """The elements of a list of hooks (or callbacks), following names to their values."""
        if node is None or depth > 4:
            return []
        if isinstance(node, ast.Call):  # hooks=make_hooks(): the lists a scanned function returns
            return self._returned(node, scopes, depth) or [node]
        if isinstance(node, ast.Name):
            value = self.m.binding(scopes, node.id)
            if isinstance(value, ast.Call):
                return self._returned(value, scopes, depth) or [value]
            return self._elements(value, scopes, depth + 1) if value is not None else []
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for element in node.elts:
                if isinstance(element, ast.Name):
                    value = self.m.binding(scopes, element.id)
                    out.append(value if isinstance(value, ast.Call) else element)
                else:
                    out.append(element)
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._elements(node.left, scopes, depth + 1) + self._elements(
                node.right, scopes, depth + 1
            )
        if isinstance(node, ast.ListComp):
            return [node.elt]
        return []

    def _returned(self, call: ast.Call, scopes: tuple[ast.AST, ...], depth: int) -> list:
        """The elements of the lists a function of this module returns, when ``call`` calls
        one (``[]`` otherwise)."""
        if not isinstance(call.func, ast.Name):
            return []
        function = self.m.binding(scopes, call.func.id)
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return []
        out = []
        for value in self.m.returned.get(id(function), []):
            if isinstance(value, (ast.List, ast.Tuple, ast.BinOp, ast.Name)):
                out += self._elements(value, (*scopes, function), depth + 1)
        return out

    def _entry_label(self, call: ast.Call, keyword: str, kind: str) -> str:
        destination = catalog.DESTINATIONS.get(keyword) or catalog.DESTINATION_BY_ENTRY.get(
            kind, "fit"
        )
        return f"{self.m.path}:{call.lineno} {name_of(call.func)}: {keyword} -> {destination}"

    def _mark(self, call: Call, kind: str | None) -> None:
        node = call.node
        if kind is None:
            self._mark_native(call)
            return
        for keyword, index in catalog.HOOK_ARGUMENTS.get(kind, {}).items():
            if kind in _COUNTED_ONLY:
                continue
            if kind in ESTIMATOR_METHODS and self._receiver(node) not in self.estimator_vars:
                index = None  # positional hooks only on a known Estimator (not model.predict)
            value = argument(node, keyword, index)
            label = self._entry_label(node, keyword, kind)
            for element in self._elements(value, call.scopes):
                if isinstance(element, ast.Call):
                    self.hook_positions.setdefault(id(element), label)
            if kind == "HookCallback" and value is not None:
                logged = argument(node, "log_names", None)
                names = frozenset(
                    e.value
                    for e in getattr(logged, "elts", [])
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )
                self._add_factory_scope(value, call.scopes, names)
        for keyword, index in catalog.CALLBACK_ARGUMENTS.get(kind, {}).items():
            label = self._entry_label(node, keyword, kind)
            for element in self._elements(argument(node, keyword, index), call.scopes):
                self.callback_positions.setdefault(id(element), label)

    def _mark_native(self, call: Call) -> None:
        node = call.node
        for k in node.keywords:
            if k.arg != "callbacks":
                continue
            graph_fit = (
                self.graph_mode
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _KERAS_METHODS
            )
            elements = self._elements(k.value, call.scopes)
            if graph_fit:
                label = f"{self.m.path}:{node.lineno} {name_of(node.func)}: callbacks -> fit"
                for element in elements:
                    self.fit_callbacks.setdefault(id(element), label)
                self._add(
                    node,
                    f.ENTRY,
                    name_of(node.func),
                    catalog.Bridged(
                        f.ENTRY_POINT,
                        "a graph-mode tf.keras "
                        f"{node.func.attr} (eager execution is disabled): in TF 2 it runs "
                        "eagerly (Keras 3 cannot run graph mode; tf_keras can); its callbacks "
                        f"stay native Keras callbacks (callbacks: {len(elements)})",
                    ),
                )
            self.native_callbacks.update(id(n) for n in elements)
            self.native_callbacks.update(id(n) for n in ast.walk(k.value))

    def _add_factory_scope(
        self, value: ast.AST, scopes: tuple[ast.AST, ...], logged: frozenset[str]
    ) -> None:
        """The hooks callable given to HookCallback: it builds hooks on the bridge's graph."""
        if isinstance(value, ast.Lambda):
            target = value
            body = value.body  # lambda: make_hooks(...): make_hooks builds on the bridge's graph
            if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
                called = self.m.binding(scopes, body.func.id)
                if isinstance(called, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.tensor_scopes.add(id(called))
                    self.factory_scopes[id(called)] = logged
        elif isinstance(value, ast.Name):
            target = self.m.binding(scopes, value.id)
            if not isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return
        else:
            return
        self.tensor_scopes.add(id(target))
        self.factory_scopes[id(target)] = logged

    def _add_entry(self, call: Call, kind: str) -> None:
        node = call.node
        counts = []
        for keyword, index in catalog.HOOK_ARGUMENTS.get(kind, {}).items():
            if kind in ESTIMATOR_METHODS and self._receiver(node) not in self.estimator_vars:
                index = None
            value = argument(node, keyword, index)
            if value is None:
                continue
            elements = self._elements(value, call.scopes)
            counts.append(
                f"{keyword}: {len(elements)}"
                if elements or isinstance(value, ast.List)
                else f"{keyword}: {ast.unparse(value)}"
            )
        if kind == "TPUEstimatorSpec" and any(k.arg == "scaffold_fn" for k in node.keywords):
            counts.append(
                "scaffold_fn: its init_fn (a warm start from a checkpoint) becomes "
                "hookbridge.restore_checkpoint or HookCallback(scaffold=...)"
            )
        status = f.ENTRY_POINT
        columns: tuple = ()
        if kind in catalog.CANNED_ESTIMATORS:
            base = kind.removesuffix("V2")
            what = catalog.CANNED_BY_HAND
            if base in catalog.KERAS_TWINS:
                what, columns = twin_verdict(self.m, node, call.scopes, kind)
            if kind.startswith("BoostedTrees"):
                status, what = f.UNSUPPORTED, catalog.BOOSTED_TREES_REASON
        else:
            what = catalog.ENTRY_POINTS.get(kind) or (
                f"Estimator.{kind}: its hooks go to Keras "
                + {"train": "fit", "evaluate": "evaluate", "predict": "predict"}[kind]
                + " in a HookCallback"
            )
        detail = what + (f" ({'; '.join(counts)})" if counts else "")
        action = ""
        gone = spellings.removed(self.m.qualify(node.func))
        if gone is not None:  # one row: the entry point, carrying its removed spelling
            spelling, replacement = gone
            self.carried.add((node.lineno, spelling))
            why, _, action = replacement.partition(": ")
            detail = f"{name_of(node.func)} does not import on TF >= 2.16 ({why}); {detail}"
            status = f.REMOVED_API if status == f.ENTRY_POINT else status
        self._add(
            node, f.ENTRY, name_of(node.func), catalog.Bridged(status, detail, action), "", columns
        )


def name_of(node: ast.AST) -> str:
    """The source of a callee: a dotted name read directly, anything else unparsed."""
    return dotted(node) or ast.unparse(node)
