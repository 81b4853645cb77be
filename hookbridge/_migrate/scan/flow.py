"""Functions of the scanned code that build hooks, and where their arguments go.

Real TF1 code builds its hooks in helper functions: tensorflow/models' ``hooks_helper``
takes ``get_train_hooks(names, **kwargs)``, looks each name up in a dict of functions and calls
it with the same ``**kwargs``; ``get_logging_tensor_hook(tensors_to_log=None, **kwargs)`` gives
``tensors_to_log`` to ``LoggingTensorHook(tensors=...)``. :class:`Functions` resolves a call to
the scanned functions it may call (by import path, a local ``def``, or a dict of functions
indexed or ``.get()``-ed), and tells which parameters of a function reach a built-in hook's
tensor argument (its *sinks*), through keyword arguments, positions and ``**kwargs`` passed on:
a caller's ``get_train_hooks(..., tensors_to_log=TENSORS)`` then has its ``TENSORS`` read where
it is written. By syntax tree only; functions of modules the scan did not read are not followed
(a function that builds a built-in hook names it, so its module is always read).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from hookbridge._migrate.scan import tensors
from hookbridge._migrate.scan.classes import is_tf, last_name
from hookbridge._migrate.scan.modules import Call, ModuleInfo

#: Built-in hooks whose arguments hold tensors, a summary op or a Saver:
#: {name: (positional index, keyword, what the argument holds)}.
TENSOR_ARGS = {
    "LoggingTensorHook": (0, "tensors", tensors.TENSOR),
    "NanTensorHook": (0, "loss_tensor", tensors.TENSOR),
    "FinalOpsHook": (0, "final_ops", tensors.TENSOR),
    "SummarySaverHook": (5, "summary_op", tensors.SUMMARY),
    "CheckpointSaverHook": (3, "saver", tensors.SAVER),
}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = tuple[ModuleInfo, ast.FunctionDef]


class Sink(NamedTuple):
    """Where a parameter's value ends: a built-in hook's tensor argument."""

    hook: str  # LoggingTensorHook
    keyword: str  # tensors
    path: str  # of the hook's construction
    line: int
    what: str  # tensors.TENSOR / SUMMARY / SAVER


class Forwarded(NamedTuple):
    """A call passes on the ``**name`` of the function it is in."""

    name: str


def argument(call: ast.Call, keyword: str, index: int | None) -> ast.AST | None:
    """The argument given as ``keyword``, or at position ``index`` (None: not given)."""
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


def argument_for(call: ast.Call, function: ast.FunctionDef, name: str):
    """What ``call`` gives ``function``'s parameter (or ``**kwargs`` key) ``name``: a node, a
    :class:`Forwarded` ``**kwargs`` of the caller, or None."""
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    given = argument(call, name, positional.index(name) if name in positional else None)
    if given is not None:
        return given
    for k in call.keywords:
        if k.arg is None and isinstance(k.value, ast.Name):
            return Forwarded(k.value.id)
    return None


class Functions:
    """Scanned functions: what a call may call, and the sinks of each (memoized per scan)."""

    def __init__(self, modules: dict[str, ModuleInfo]) -> None:
        self._modules = modules  # the modules read, by dotted name
        #: Names of the functions defined in them (a call of another name calls none of them,
        #: except through a dict of functions: ``HOOKS[name](...)``, ``hook_fn(...)``).
        self.names = frozenset(name for m in modules.values() for name in m.functions)
        #: Modules by their last name: ``from official.r1.utils.logs import hooks_helper`` in a
        #: tree scanned from ``official/`` (modules ``r1.utils.logs.hooks_helper``).
        self._by_last: dict[str, list[ModuleInfo]] = {}
        for module in modules.values():
            self._by_last.setdefault(module.module.rsplit(".", 1)[-1], []).append(module)
        self._calls: dict[int, dict[int, list[Call]]] = {}
        self._sinks: dict[int, dict[str, list[Sink]]] = {}
        self._active: set[int] = set()

    # ----------------------------------------------------------------- calls
    def may_call(self, module: ModuleInfo, call: Call) -> bool:
        """A cheap test before :meth:`callee`: False when the call cannot reach a scanned
        function (its name is none of theirs, nor bound in a function around it)."""
        func = call.node.func
        kind = func.__class__
        if kind is ast.Attribute:
            return func.attr in self.names
        if kind is ast.Name:
            return func.id in self.names or any(
                (id(scope), func.id) in module.bindings for scope in call.scopes
            )
        return kind is ast.Subscript

    def callee(self, module: ModuleInfo, node: ast.Call, scopes: tuple) -> list[Function]:
        """The scanned functions ``node`` may call."""
        func = node.func
        if isinstance(func, ast.Subscript):  # HOOKS[name](...)
            return self._table(module, func.value, scopes)
        if isinstance(func, ast.Name):
            bound = module.binding(scopes, func.id)
            if isinstance(bound, _FUNCTIONS):
                return [(module, bound)]
            if isinstance(bound, ast.Subscript):  # hook_fn = HOOKS[name]
                return self._table(module, bound.value, scopes)
            if (  # hook_fn = HOOKS.get(name)
                isinstance(bound, ast.Call)
                and isinstance(bound.func, ast.Attribute)
                and bound.func.attr == "get"
            ):
                return self._table(module, bound.func.value, scopes)
            if bound is not None:
                return []
        return self._by_name(module.qualify(func))

    def _by_name(self, qualified: str | None) -> list[Function]:
        if not qualified or "." not in qualified:
            return []
        name, _, attr = qualified.rpartition(".")
        module = self._modules.get(name)
        if module is None:  # imported under a longer path than the scanned root gives it
            found = [
                m
                for m in self._by_last.get(name.rsplit(".", 1)[-1], ())
                if name.endswith("." + m.module)
            ]
            module = found[0] if len(found) == 1 else None
        function = module.functions.get(attr) if module is not None else None
        return [(module, function)] if function is not None else []

    def _table(self, module: ModuleInfo, table: ast.AST, scopes: tuple) -> list[Function]:
        """The functions a dict of functions holds (``HOOKS = {"name": make_hook, ...}``)."""
        value = module.binding(scopes, table.id) if isinstance(table, ast.Name) else None
        if not isinstance(value, ast.Dict):
            return []
        out = []
        for item in value.values:
            if isinstance(item, ast.Name) and item.id in module.functions:
                out.append((module, module.functions[item.id]))
            elif isinstance(item, (ast.Name, ast.Attribute)):
                out += self._by_name(module.qualify(item))
        return out

    def calls_in(self, module: ModuleInfo, function: ast.AST) -> list[Call]:
        """The calls inside ``function`` (nested functions included)."""
        index = self._calls.get(id(module))
        if index is None:
            index = self._calls[id(module)] = {}
            for call in module.calls:
                for scope in call.scopes:
                    if isinstance(scope, _FUNCTIONS):
                        index.setdefault(id(scope), []).append(call)
        return index.get(id(function), [])

    def reachable(self, module: ModuleInfo, function: ast.AST) -> dict[int, set[int]]:
        """Every function ``function`` calls, directly or not: {id(function): ids it calls}."""
        out: dict[int, set[int]] = {}
        todo = [(module, function)]
        while todo:
            m, fn = todo.pop()
            if id(fn) in out:
                continue
            called = [
                g
                for c in self.calls_in(m, fn)
                if self.may_call(m, c)
                for g in self.callee(m, c.node, c.scopes)
            ]
            out[id(fn)] = {id(g) for _, g in called}
            todo += called
        return out

    def hook_functions(self, hook_names: frozenset[str], among: frozenset[str]) -> set[str]:
        """Names, of those in ``among``, of the top-level functions that may build a hook or
        pass what reaches one's tensor argument: a call of one may give a row (the scan reads
        the files naming them). By names only, so a superset: a function calling something
        named ``...Hook``, in ``hook_names`` or a hook taking tensors, or a function so found,
        or calling through a dict of functions (``REGISTRY.get(name)(...)``)."""
        if not among:
            return set()
        called: dict[str, set[str]] = {}  # function name -> last names it calls
        found: set[str] = set()
        seeds = hook_names | TENSOR_ARGS.keys()
        for module in self._modules.values():
            functions, bindings = module.functions, module.bindings
            for call in module.calls:
                scopes = call.scopes
                if not scopes or functions.get(getattr(scopes[0], "name", "")) is not scopes[0]:
                    continue
                name = scopes[0].name
                func = call.node.func
                kind = func.__class__
                last = func.attr if kind is ast.Attribute else getattr(func, "id", "")
                if last.endswith("Hook") or last in seeds or kind is ast.Subscript:
                    found.add(name)
                elif kind is ast.Name and any((id(s), last) in bindings for s in scopes):
                    found.add(name)  # a function held in a local name: REGISTRY.get(key)
                else:
                    called.setdefault(name, set()).add(last)
        grown = True
        while grown:
            grown = False
            for name, names in called.items():
                if name not in found and not names.isdisjoint(found):
                    found.add(name)
                    grown = True
        return found & among

    # ----------------------------------------------------------------- sinks
    def sinks(self, module: ModuleInfo, function: ast.FunctionDef) -> dict[str, list[Sink]]:
        """{parameter or ``**kwargs`` key: the hook arguments its value reaches}."""
        key = id(function)
        if key in self._sinks:
            return self._sinks[key]
        if key in self._active:  # recursion: what the outer call finds is enough
            return {}
        self._active.add(key)
        out: dict[str, list[Sink]] = {}
        named = {a.arg for a in function.args.posonlyargs + function.args.args}
        named |= {a.arg for a in function.args.kwonlyargs}
        kwargs = function.args.kwarg.arg if function.args.kwarg else None
        for call in self.calls_in(module, function):
            node = call.node
            func = node.func
            written = func.attr if func.__class__ is ast.Attribute else getattr(func, "id", "")
            qualified = module.qualify(func) if written in TENSOR_ARGS else None
            last = last_name(qualified)
            if is_tf(qualified) and last in TENSOR_ARGS:
                index, keyword, what = TENSOR_ARGS[last]
                sink = Sink(last, keyword, module.path, node.lineno, what)
                for fn, name in self._parameters(
                    module, call, argument(node, keyword, index), what
                ):
                    if fn is function:
                        out.setdefault(name, []).append(sink)
                continue
            if not self.may_call(module, call):
                continue
            for other, called in self.callee(module, node, call.scopes):
                for name, found in self.sinks(other, called).items():
                    given = argument_for(node, called, name)
                    if isinstance(given, Forwarded):
                        if given.name == kwargs and name not in named:
                            out.setdefault(name, []).extend(found)
                    elif given is not None:
                        for fn, param in self._parameters(module, call, given, found[0].what):
                            if fn is function:
                                out.setdefault(param, []).extend(found)
        self._active.discard(key)
        self._sinks[key] = {
            name: sorted(set(found), key=lambda s: (s.path, s.line)) for name, found in out.items()
        }
        return self._sinks[key]

    @staticmethod
    def _parameters(module: ModuleInfo, call: Call, value: ast.AST | None, what: str):
        """Names of parameters of the functions around ``call`` that ``value`` may come from,
        with the function: ``(function node, name)``."""
        found: list[tuple[ast.AST, str]] = []
        for _ in tensors.resolve(module, call.scopes, value, False, what, found):
            pass
        return found
