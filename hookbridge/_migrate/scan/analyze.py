"""The scan's analysis: from parsed modules to findings (by syntax tree only).

Pass 1 (:class:`~hookbridge._migrate.scan.classes.Classes`) decides which classes are
``SessionRunHook`` subclasses and which are Keras ``Callback`` subclasses, and finds the
zero-argument functions that build them. Pass 2 (:class:`ModuleScan`) goes over each module's
calls (collected by the one walk of :mod:`hookbridge._migrate.scan.walk`, not by walking the
tree again): it marks where entry points receive hooks and callbacks
(:mod:`hookbridge._migrate.scan.entries`), then classifies every call (a hook constructed, a
callback, an entry point), reads the tensors hooks name (:mod:`hookbridge._migrate.scan.tensors`)
and lists spellings TensorFlow removed.
"""

from __future__ import annotations

import ast

from hookbridge._migrate.scan import catalog, spellings
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.classes import (
    Classes,
    check_action,
    display,
    is_keras_callback_path,
    is_tf,
    last_name,
    root_name,
)
from hookbridge._migrate.scan.entries import name_of
from hookbridge._migrate.scan.flow import Functions
from hookbridge._migrate.scan.modules import Call, ModuleInfo
from hookbridge._migrate.scan.tensor_rows import TensorRows
from hookbridge._migrate.scan.verdicts import Links


class ModuleScan(TensorRows):
    """Pass 2 over one module: every finding in it."""

    def __init__(
        self,
        module: ModuleInfo,
        classes: Classes,
        graph_mode: bool = False,
        functions: Functions | None = None,
        links: Links | None = None,
    ) -> None:
        super().__init__(module, graph_mode)
        self.classes = classes
        self.functions = functions or Functions({module.module: module})
        self.links = links if links is not None else Links()
        self._pending_callbacks: list[tuple[ast.Call | None, f.Finding]] = []

    def run(self) -> list[f.Finding]:
        # Most calls (len(x), tf.reduce_mean(...)) cannot be anything the scan reports: a call
        # is looked at only when its last name may be (or it is passed where hooks go).
        names = self.classes.relevant_names
        functions = self.functions.names
        calls, passing = [], []
        for call in self.m.calls:
            func = call.node.func
            last = func.attr if func.__class__ is ast.Attribute else getattr(func, "id", "")
            if last in names or last.endswith("Hook") or call.node.keywords:
                calls.append(call)
            if (last in functions or func.__class__ is ast.Subscript) and (
                call.node.args or call.node.keywords
            ):
                passing.append(call)  # may give a scanned function what reaches a hook
        kinds: dict[int, str] = {}
        for call in calls:
            kind = self._entry_kind(call.node)
            if kind is not None:
                kinds[id(call.node)] = kind
            self._mark(call, kind)
        self._report_classes()
        self._custom_loop_jobs()  # before the calls' rows: a RunTrainOpsHook row is this one
        looked_at = {id(call.node) for call in calls}
        positions = self.hook_positions.keys() | self.callback_positions.keys()
        for call in self.m.calls:
            node_id = id(call.node)
            kind = kinds.get(node_id)
            if kind is not None:
                self._add_entry(call, kind)
            elif node_id in looked_at or node_id in positions:
                self._classify_call(call)
        for call in passing:
            self._passed_to_functions(call)
        if self.tensor_scopes:
            for call in calls:  # the tensor reads are among the calls looked at
                if any(id(s) in self.tensor_scopes for s in call.scopes):
                    self._scan_tensor_reference(call)
        self._spellings()
        self._emit_callbacks()
        return self.out

    def _custom_loop_jobs(self) -> None:
        """What fit cannot hold (several train ops): pointed to a custom loop (CallbackLoop)."""
        per_scope: dict[int, list[ast.Call]] = {}
        for call in self.m.calls:
            func = call.node.func
            last = func.attr if func.__class__ is ast.Attribute else getattr(func, "id", "")
            if last in catalog.CUSTOM_LOOP_NAMES:
                status = f.UNSUPPORTED if last.endswith("Hook") else f.ENTRY_POINT
                kind = f.HOOK if last.endswith("Hook") else f.ENTRY
                self._built(
                    call,
                    kind,
                    name_of(func),
                    catalog.Bridged(
                        status,
                        f"{last} runs train ops itself: {catalog.CUSTOM_LOOP_REASON}",
                        catalog.CUSTOM_LOOP_ACTION,
                    ),
                )
            elif last in catalog.TRAIN_OP_METHODS and func.__class__ is ast.Attribute:
                scope = call.scopes[-1] if call.scopes else self.m.tree
                per_scope.setdefault(id(scope), []).append(call.node)
        for nodes in per_scope.values():
            nodes.sort(key=lambda n: n.lineno)
            if len(nodes) > 1:
                self._add(
                    nodes[0],
                    f.ENTRY,
                    "several train ops",
                    catalog.Bridged(
                        f.ENTRY_POINT,
                        f"{len(nodes)} train ops (minimize calls, lines "
                        f"{', '.join(str(n.lineno) for n in nodes)}): "
                        + catalog.CUSTOM_LOOP_REASON,
                        catalog.CUSTOM_LOOP_ACTION,
                    ),
                )

    # -------------------------------------------------------------------------- classes
    def _report_classes(self) -> None:
        for cls in self.m.classes.values():
            if cls.qualname in self.classes.hooks:
                row = self._add(
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
                self.links.class_rows[cls.qualname] = row
                self.links.uses[row] = cls.qualname
                self.tensor_scopes.add(id(cls.node))
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
    def _classify_call(self, call: Call) -> None:
        node = call.node
        qualified = self.m.qualify(node.func)
        last = last_name(qualified)
        entry = self.hook_positions.get(id(node), "")
        if (is_tf(qualified) or root_name(qualified) == "hookbridge") and self._classify_builtin(
            call, qualified, last
        ):
            return
        cls = self.classes.resolve(qualified)
        factory = self.classes.built_by.get(qualified or "")
        if cls is None and factory is not None and factory.qualname in self.classes.hooks:
            row = self._built(
                call,
                f.HOOK,
                factory.name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"custom hook built by {last_name(qualified)}(), defined at "
                    f"{factory.module.path}:{factory.node.lineno}",
                    check_action(self.classes, factory, callback=False),
                ),
                entry,
            )
            self.links.uses[row] = factory.qualname
        elif cls is not None and cls.qualname in self.classes.hooks:
            row = self._built(
                call,
                f.HOOK,
                cls.name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"custom hook, defined at {cls.module.path}:{cls.node.lineno}",
                    check_action(self.classes, cls, callback=False),
                ),
                entry,
            )
            self.links.uses[row] = cls.qualname
        elif cls is not None and cls.qualname in self.classes.callbacks:
            self._defer_callback(
                node,
                cls.name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"custom Keras callback, defined at {cls.module.path}:{cls.node.lineno}",
                    check_action(self.classes, cls, callback=True),
                ),
            )
        elif id(node) in self.hook_positions and cls is None and self._factory_row(call, entry):
            return
        elif id(node) in self.hook_positions and cls is None:
            name = name_of(node.func)
            self._add(
                node,
                f.HOOK,
                name,
                catalog.Bridged(
                    f.CUSTOM,
                    f"a hook defined outside the scanned code ({qualified or name})",
                    "hookbridge check MODULE:FACTORY (a zero-argument function returning it)",
                ),
                entry,
            )
        elif id(node) in self.callback_positions and cls is None:
            self._defer_callback(
                node,
                name_of(node.func),
                catalog.Bridged(
                    f.CUSTOM,
                    f"a callback defined outside the scanned code ({qualified})",
                    "hookbridge check --callback MODULE:FACTORY",
                ),
            )

    def _classify_builtin(self, call: Call, qualified: str, last: str) -> bool:
        node = call.node
        entry = self.hook_positions.get(id(node), "")
        if ".contrib." in f"{qualified}." and (
            last.endswith("Hook") or id(node) in self.hook_positions
        ):
            self._built(
                call, f.HOOK, last, catalog.Bridged(f.UNSUPPORTED, catalog.CONTRIB_REASON), entry
            )
            gone = spellings.removed(qualified)
            if gone is not None:
                self.carried.add((node.lineno, gone[0]))
            return True
        if is_keras_callback_path(qualified):
            if last == "TensorBoard" and ".compat.v1." in qualified and id(node) not in (
                self.fit_callbacks
            ):
                self._defer_callback(
                    node, last, catalog.Bridged(f.UNSUPPORTED, catalog.V1_TENSORBOARD_REASON)
                )
                return True
            if id(node) in self.fit_callbacks:
                self._defer_callback(node, last, _fit_callback_status(last))
                return True
            if last in catalog.known_names("callback"):
                self._defer_callback(node, last, catalog.builtin_status("callback", last))
                return True
            return False
        is_hook = (
            last in catalog.known_names("hook")
            or last in catalog.KNOWN_HOOKS
            or (root_name(qualified) == "hookbridge" and last in catalog.HOOKBRIDGE_HOOKS)
        )
        if not is_hook:
            return False
        bridged = catalog.builtin_status("hook", last)
        gone = spellings.removed(qualified)
        if gone is not None:
            spelling, replacement = gone
            self.carried.add((node.lineno, spelling))
            bridged = catalog.Bridged(
                f.REMOVED_API,
                f"{display(spelling)} does not import on TF >= 2.16; {bridged.status} as a "
                f"hook: {bridged.detail}",
                replacement.split(": ", 1)[-1],
            )
        row = self._built(call, f.HOOK, last, bridged, entry)
        self._tensor_arguments(call, last, row)
        return True

    def _defer_callback(self, node: ast.Call, name: str, bridged: catalog.Bridged) -> None:
        entry = self.callback_positions.get(id(node)) or self.fit_callbacks.get(id(node), "")
        finding = f.Finding(
            self.m.path,
            node.lineno,
            f.CALLBACK,
            name,
            bridged.status,
            bridged.detail,
            bridged.action,
            entry,
        )
        self._pending_callbacks.append((node, finding))

    def _emit_callbacks(self) -> None:
        """Keras callbacks count where they run in TF1 code: in CallbackHook, in a graph-mode
        fit, or in a TF1 module (not passed to a native Keras fit)."""
        tf1_module = any(x.kind in (f.ENTRY, f.HOOK, f.HOOK_CLASS) for x in self.out)
        for call, finding in self._pending_callbacks:
            in_tf1 = call is not None and (
                id(call) in self.callback_positions or id(call) in self.fit_callbacks
            )
            native = call is not None and id(call) in self.native_callbacks
            if in_tf1 or (tf1_module and not native):
                key = (finding.line, finding.kind, finding.name)
                if key not in self._seen:
                    self._seen.add(key)
                    self.out.append(finding)

    # -------------------------------------------------------------------------- spellings
    def _spellings(self) -> None:
        for line, name, bridged in spellings.rows(self.m, self.carried):
            self._add(_Line(line), f.SPELLING, name, bridged)


class _Line:
    """A stand-in node carrying only a line number."""

    def __init__(self, lineno: int) -> None:
        self.lineno = lineno


def _fit_callback_status(name: str) -> catalog.Bridged:
    if name in catalog.known_names("callback"):
        return catalog.Bridged(
            f.CONFORMS,
            "a built-in Keras callback in a graph-mode tf.keras fit: it stays a native "
            "callback of fit when fit runs eagerly; no bridge involved",
        )
    return catalog.Bridged(
        f.UNVERIFIED,
        "a Keras callback in a graph-mode tf.keras fit that the conformance results do not list",
        "run the fit eagerly and compare what the callback logs and writes with the graph-mode run",
    )


def _overrides(node: ast.ClassDef) -> list[str]:
    methods = ("begin", "after_create_session", "before_run", "after_run", "end")
    defined = {
        item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    return [m for m in methods if m in defined]
