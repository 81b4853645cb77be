"""The scan's analysis: from parsed modules to findings (by syntax tree only).

Two passes over the parsed modules: the first decides which classes are ``SessionRunHook``
subclasses and which are Keras ``Callback`` subclasses (through any depth of inheritance, across
modules); the second classifies every call (a hook constructed, a callback, a training entry
point) and reads the tensors hooks reference by name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

from hookbridge._migrate.scan import catalog
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.modules import ClassInfo, ModuleInfo

_HOOK_BASE = "SessionRunHook"
_CALLBACK_BASE = "Callback"
_ESTIMATOR_METHODS = ("train", "evaluate", "predict")
#: Entry points whose hook arguments are counted, not taken as hook positions: the hooks of
#: ``hookbridge.estimator_hooks(hooks=...)`` already run under the HookCallback around it.
_COUNTED_ONLY = frozenset({"estimator_hooks"})
#: Built-in hooks whose arguments may name tensors: {name: (positional index, keyword)}.
_TENSOR_ARGS = {
    "LoggingTensorHook": (0, "tensors"),
    "NanTensorHook": (0, "loss_tensor"),
    "FinalOpsHook": (0, "final_ops"),
}


def _root(qualified: str | None) -> str:
    return qualified.split(".")[0] if qualified else ""


def _last(qualified: str | None) -> str:
    return qualified.rsplit(".", 1)[-1] if qualified else ""


def _is_tf(qualified: str | None) -> bool:
    return _root(qualified) in catalog.TF_ROOTS


def _is_keras_callback_path(qualified: str | None) -> bool:
    return _is_tf(qualified) and "callbacks" in qualified.split(".")[:-1]


class Classes:
    """Which scanned classes are hooks and which are Keras callbacks (pass 1)."""

    def __init__(self, modules: Iterable[ModuleInfo]) -> None:
        self.by_qualname: dict[str, ClassInfo] = {}
        self.by_name: dict[str, list[ClassInfo]] = {}
        for module in modules:
            for cls in module.classes.values():
                self.by_qualname[cls.qualname] = cls
                self.by_name.setdefault(cls.name, []).append(cls)
        self.hooks = self._closure(self._is_hook_base)
        self.callbacks = self._closure(self._is_callback_base)

    def resolve(self, qualified: str | None) -> ClassInfo | None:
        """The scanned class a qualified name denotes (by import path, else by unique name)."""
        if not qualified:
            return None
        if qualified in self.by_qualname:
            return self.by_qualname[qualified]
        if _is_tf(qualified):
            return None
        same_name = self.by_name.get(_last(qualified), [])
        return same_name[0] if len(same_name) == 1 else None

    @staticmethod
    def _is_hook_base(base: str) -> bool:
        last = _last(base)
        if _is_tf(base) and (last == _HOOK_BASE or last in catalog.known_names("hook")):
            return True
        return _root(base) == "hookbridge" and last in catalog.HOOKBRIDGE_HOOKS

    @staticmethod
    def _is_callback_base(base: str) -> bool:
        return _is_keras_callback_path(base)

    def _closure(self, is_base) -> dict[str, ClassInfo]:
        found: dict[str, ClassInfo] = {}
        changed = True
        while changed:
            changed = False
            for cls in self.by_qualname.values():
                if cls.qualname in found:
                    continue
                for base in cls.bases:
                    parent = self.resolve(base)
                    if is_base(base) or (parent is not None and parent.qualname in found):
                        found[cls.qualname] = cls
                        changed = True
                        break
        return found

    def base_description(self, cls: ClassInfo) -> str:
        for base in cls.bases:
            parent = self.resolve(base)
            if parent is not None:
                return f"subclass of {parent.name} ({parent.module.path}:{parent.node.lineno})"
            if base:
                return f"subclass of {_last(base)}"
        return "subclass"

    def needs_arguments(self, cls: ClassInfo) -> bool:
        """Whether constructing ``cls`` needs arguments (its own or a scanned parent's __init__)."""
        seen: set[str] = set()
        current: ClassInfo | None = cls
        while current is not None and current.qualname not in seen:
            seen.add(current.qualname)
            needs = current.init_needs_arguments()
            if needs is not None:
                return needs
            parents = [self.resolve(b) for b in current.bases]
            scanned = [p for p in parents if p is not None]
            if not scanned:  # inherits a built-in __init__: SessionRunHook/Callback take none
                return any(_last(b) not in (_HOOK_BASE, _CALLBACK_BASE) for b in current.bases)
            current = scanned[0]
        return False


def check_action(classes: Classes, cls: ClassInfo, callback: bool) -> str:
    """The ``hookbridge check`` command for a scanned hook or callback class."""
    flag = "--callback " if callback else ""
    target = f"{cls.module.module}:{cls.name}"
    if classes.needs_arguments(cls):
        return (
            f"hookbridge check {flag}{cls.module.module}:<factory> (a zero-argument function "
            f"returning {cls.name}(...): its constructor needs arguments)"
        )
    return f"hookbridge check {flag}{target}"


class ModuleScan:
    """Pass 2 over one module: every finding in it."""

    def __init__(self, module: ModuleInfo, classes: Classes) -> None:
        self.m = module
        self.classes = classes
        self.out: list[f.Finding] = []
        self._seen: set[tuple[int, str, str]] = set()
        self.hook_positions: set[int] = set()
        self.callback_positions: set[int] = set()
        self.native_callbacks: set[int] = set()
        self.tensor_scopes: list[ast.AST] = []
        self.estimator_vars: set[str] = set()
        self._pending_callbacks: list[tuple[ast.Call | None, f.Finding]] = []

    def run(self) -> list[f.Finding]:
        self._find_estimator_variables()
        self._mark_positions()
        self._report_classes()
        for node in ast.walk(self.m.tree):
            if isinstance(node, ast.Call):
                self._classify_call(node)
        for scope in self.tensor_scopes:
            self._scan_tensor_references(scope)
        self._emit_callbacks()
        return self.out

    # -------------------------------------------------------------------------- helpers
    def _add(self, node: ast.AST, kind: str, name: str, bridged: catalog.Bridged) -> None:
        line = getattr(node, "lineno", 1)
        key = (line, kind, name)
        if key in self._seen:
            return
        self._seen.add(key)
        self.out.append(
            f.Finding(self.m.path, line, kind, name, bridged.status, bridged.detail, bridged.action)
        )

    def _find_estimator_variables(self) -> None:
        for node in ast.walk(self.m.tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                last = _last(self.m.qualify(node.value.func))
                if last == "Estimator" or last in catalog.CANNED_ESTIMATORS:
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            self.estimator_vars.add(target.id)
                        elif isinstance(target, ast.Attribute):
                            self.estimator_vars.add(target.attr)

    def _entry_kind(self, call: ast.Call) -> str | None:
        """The entry-point key of a call (``Estimator``, ``train``, ...), else None."""
        qualified = self.m.qualify(call.func)
        last = _last(qualified)
        if (_is_tf(qualified) or _root(qualified) == "hookbridge") and (
            last in catalog.ENTRY_POINTS or last in catalog.CANNED_ESTIMATORS
        ):
            return "Estimator" if last in catalog.CANNED_ESTIMATORS else last
        if isinstance(call.func, ast.Attribute) and call.func.attr in _ESTIMATOR_METHODS:
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

    def _argument(self, call: ast.Call, keyword: str, index: int | None) -> ast.AST | None:
        for k in call.keywords:
            if k.arg == keyword:
                return k.value
        if (
            index is not None
            and len(call.args) > index
            and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1])
        ):
            return call.args[index]
        return None

    @staticmethod
    def _elements(node: ast.AST | None) -> list[ast.AST]:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return list(node.elts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return ModuleScan._elements(node.left) + ModuleScan._elements(node.right)
        if isinstance(node, ast.ListComp):
            return [node.elt]
        return []

    def _mark_positions(self) -> None:
        for node in ast.walk(self.m.tree):
            if not isinstance(node, ast.Call):
                continue
            kind = self._entry_kind(node)
            for keyword, index in catalog.HOOK_ARGUMENTS.get(kind or "", {}).items():
                if kind in _COUNTED_ONLY:
                    continue
                if kind in _ESTIMATOR_METHODS and self._receiver(node) not in self.estimator_vars:
                    index = None  # positional hooks only on a known Estimator (not model.predict)
                value = self._argument(node, keyword, index)
                for element in self._elements(value):
                    if isinstance(element, ast.Call):
                        self.hook_positions.add(id(element))
                if kind == "HookCallback" and value is not None:
                    self._add_factory_scope(value)
            for keyword, index in catalog.CALLBACK_ARGUMENTS.get(kind or "", {}).items():
                for element in self._elements(self._argument(node, keyword, index)):
                    self.callback_positions.add(id(element))
            if kind is None:
                for k in node.keywords:
                    if k.arg == "callbacks":
                        self.native_callbacks.update(id(n) for n in ast.walk(k.value))

    def _add_factory_scope(self, value: ast.AST) -> None:
        """The hooks callable given to HookCallback: it builds hooks on the bridge's graph."""
        if isinstance(value, ast.Lambda):
            self.tensor_scopes.append(value.body)
        elif isinstance(value, ast.Name) and value.id in self.m.functions:
            self.tensor_scopes.append(self.m.functions[value.id])

    # -------------------------------------------------------------------------- classes
    def _report_classes(self) -> None:
        for cls in self.m.classes.values():
            if cls.qualname in self.classes.hooks:
                self._add(
                    cls.node,
                    f.HOOK_CLASS,
                    cls.name,
                    catalog.Bridged(
                        f.CUSTOM,
                        f"a hook, {self.classes.base_description(cls)}; overrides "
                        + (", ".join(_overrides(cls.node)) or "nothing"),
                        check_action(self.classes, cls, callback=False),
                    ),
                )
                self.tensor_scopes.append(cls.node)
            elif cls.qualname in self.classes.callbacks:
                finding = f.Finding(
                    self.m.path,
                    cls.node.lineno,
                    f.CALLBACK_CLASS,
                    cls.name,
                    f.CUSTOM,
                    f"a Keras callback, {self.classes.base_description(cls)}",
                    check_action(self.classes, cls, callback=True),
                )
                self._pending_callbacks.append((None, finding))

    # -------------------------------------------------------------------------- calls
    def _classify_call(self, call: ast.Call) -> None:
        qualified = self.m.qualify(call.func)
        last = _last(qualified)
        kind = self._entry_kind(call)
        if kind is not None:
            self._add_entry(call, kind)
            return
        if (_is_tf(qualified) or _root(qualified) == "hookbridge") and self._classify_builtin(
            call, qualified, last
        ):
            return
        cls = self.classes.resolve(qualified)
        if cls is not None and cls.qualname in self.classes.hooks:
            self._add(
                call,
                f.HOOK,
                cls.name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"custom hook, defined at {cls.module.path}:{cls.node.lineno}",
                    check_action(self.classes, cls, callback=False),
                ),
            )
        elif cls is not None and cls.qualname in self.classes.callbacks:
            self._defer_callback(
                call,
                cls.name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"custom Keras callback, defined at {cls.module.path}:{cls.node.lineno}",
                    check_action(self.classes, cls, callback=True),
                ),
            )
        elif id(call) in self.hook_positions and cls is None:
            name = ast.unparse(call.func)
            self._add(
                call,
                f.HOOK,
                name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"a hook defined outside the scanned code ({qualified or name})",
                    "hookbridge check MODULE:FACTORY (a zero-argument function returning it)",
                ),
            )
        elif id(call) in self.callback_positions and cls is None:
            self._defer_callback(
                call,
                ast.unparse(call.func),
                catalog.Bridged(
                    f.CUSTOM,
                    f"a callback defined outside the scanned code ({qualified})",
                    "hookbridge check --callback MODULE:FACTORY",
                ),
            )

    def _classify_builtin(self, call: ast.Call, qualified: str, last: str) -> bool:
        if ".contrib." in f"{qualified}." and (
            last.endswith("Hook") or id(call) in self.hook_positions
        ):
            self._add(call, f.HOOK, last, catalog.Bridged(f.UNSUPPORTED, catalog.CONTRIB_REASON))
            return True
        if _is_keras_callback_path(qualified):
            if last == "TensorBoard" and ".compat.v1." in qualified:
                self._defer_callback(
                    call, last, catalog.Bridged(f.UNSUPPORTED, catalog.V1_TENSORBOARD_REASON)
                )
                return True
            if last in catalog.known_names("callback"):
                self._defer_callback(call, last, catalog.builtin_status("callback", last))
                return True
            return False
        is_hook = (
            last in catalog.known_names("hook")
            or last in catalog.UNSUPPORTED_HOOKS
            or (_root(qualified) == "hookbridge" and last in catalog.HOOKBRIDGE_HOOKS)
        )
        if not is_hook:
            return False
        self._add(call, f.HOOK, last, catalog.builtin_status("hook", last))
        self._tensor_arguments(call, last)
        return True

    def _defer_callback(self, call: ast.Call, name: str, bridged: catalog.Bridged) -> None:
        finding = f.Finding(
            self.m.path,
            call.lineno,
            f.CALLBACK,
            name,
            bridged.status,
            bridged.detail,
            bridged.action,
        )
        self._pending_callbacks.append((call, finding))

    def _emit_callbacks(self) -> None:
        """Keras callbacks count where they run in TF1 code: in CallbackHook, or a TF1 module."""
        tf1_module = any(x.kind in (f.ENTRY, f.HOOK, f.HOOK_CLASS) for x in self.out)
        for call, finding in self._pending_callbacks:
            in_callback_hook = call is not None and id(call) in self.callback_positions
            native = call is not None and id(call) in self.native_callbacks
            if in_callback_hook or (tf1_module and not native):
                key = (finding.line, finding.kind, finding.name)
                if key not in self._seen:
                    self._seen.add(key)
                    self.out.append(finding)

    def _add_entry(self, call: ast.Call, kind: str) -> None:
        counts = []
        for keyword, index in catalog.HOOK_ARGUMENTS.get(kind, {}).items():
            if kind in _ESTIMATOR_METHODS and self._receiver(call) not in self.estimator_vars:
                index = None
            value = self._argument(call, keyword, index)
            if value is None:
                continue
            elements = self._elements(value)
            counts.append(
                f"{keyword}: {len(elements)}"
                if elements or isinstance(value, ast.List)
                else f"{keyword}: {ast.unparse(value)}"
            )
        what = catalog.ENTRY_POINTS.get(kind) or (
            f"Estimator.{kind}: its hooks go to Keras "
            + {"train": "fit", "evaluate": "evaluate", "predict": "predict"}[kind]
            + " in a HookCallback"
        )
        detail = what + (f" ({'; '.join(counts)})" if counts else "")
        self._add(call, f.ENTRY, ast.unparse(call.func), catalog.Bridged(f.ENTRY_POINT, detail))

    # -------------------------------------------------------------------------- tensors
    def _tensor_arguments(self, call: ast.Call, last: str) -> None:
        if last not in _TENSOR_ARGS:
            return
        index, keyword = _TENSOR_ARGS[last]
        value = self._argument(call, keyword, index)
        for node, name in _strings(value):
            self._add(node, f.TENSOR, repr(name), catalog.tensor_status(name))

    def _scan_tensor_references(self, scope: ast.AST) -> None:
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call):
                continue
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            last = _last(self.m.qualify(node.func)) or attr
            first = node.args[0] if node.args else None
            if attr in catalog.BY_NAME_METHODS and isinstance(first, ast.Constant):
                if isinstance(first.value, str):
                    self._add(node, f.TENSOR, repr(first.value), catalog.tensor_status(first.value))
            elif last in catalog.COLLECTION_METHODS and first is not None:
                name = _collection_name(first)
                if name is not None:
                    self._add(
                        node, f.TENSOR, f"collection {name!r}", catalog.collection_status(name)
                    )
            elif last == "SessionRunArgs" and first is not None:
                for sub, name in _strings(first):
                    self._add(sub, f.TENSOR, repr(name), catalog.tensor_status(name))
            elif last in _TENSOR_ARGS:
                self._tensor_arguments(node, last)


def _overrides(node: ast.ClassDef) -> list[str]:
    methods = ("begin", "after_create_session", "before_run", "after_run", "end")
    defined = {
        item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    return [m for m in methods if m in defined]


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


def _collection_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and node.attr in catalog.GRAPH_KEYS:
        return catalog.GRAPH_KEYS[node.attr]
    return None
