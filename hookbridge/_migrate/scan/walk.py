"""The one walk of a module's syntax tree: parsing a file into a :class:`ModuleInfo`.

Every file is parsed with :func:`ast.parse` from its bytes; nothing is imported or executed. One
walk of each tree (:class:`_Walker`) collects what the analysis needs: imports, classes,
functions, assignments, every call with the scopes around it, and the dotted names that may be
spellings TensorFlow removed. The analysis reads those lists, never the tree again.
"""

from __future__ import annotations

import ast
import operator
from pathlib import Path
from typing import Final

from hookbridge._migrate.scan.modules import Call, ClassInfo, ModuleInfo, module_name

#: Roots of module paths an assignment may alias (``v1 = tf.compat.v1``).
IMPORTED_ROOTS: Final = frozenset(
    {"tensorflow", "keras", "tf_keras", "tensorflow_estimator", "hookbridge"}
)

#: Calls that turn TF's eager execution off (graph-mode tf.keras ``fit`` in the TF1 modules).
EAGER_OFF: Final = frozenset({"disable_eager_execution", "disable_v2_behavior"})

#: Components that make a dotted name worth keeping for the spelling check.
_SPELLING_PARTS: Final = ("estimator", "contrib")

#: Fields that never hold a node with a call below it (names, contexts, operators, constants).
_NOT_NODES: Final = frozenset(
    {"ctx", "op", "ops", "id", "attr", "name", "arg", "module", "level", "asname", "names"}
    | {"kind", "type_comment", "is_async", "conversion", "type_ignores", "kwd_attrs", "rest"}
)
#: What the walk does at a node, by type (:class:`_Walker`); any other type: visit its children.
_LEAF, _CALL, _ATTRIBUTE, _ASSIGN, _RETURN, _ANNOTATED, _IMPORT, _CLASS, _FUNCTION, _LAMBDA = (
    object() for _ in range(10)
)
_TAGS: dict[type, object] = {
    **dict.fromkeys((ast.Name, ast.Constant, ast.Pass, ast.Break, ast.Continue), _LEAF),
    **dict.fromkeys((type(None), int, str, ast.MatchSingleton), _LEAF),
    ast.Call: _CALL,
    ast.Attribute: _ATTRIBUTE,
    ast.Assign: _ASSIGN,
    ast.Return: _RETURN,
    ast.AnnAssign: _ANNOTATED,
    ast.AugAssign: _ANNOTATED,
    ast.Import: _IMPORT,
    ast.ImportFrom: _IMPORT,
    ast.ClassDef: _CLASS,
    ast.FunctionDef: _FUNCTION,
    ast.AsyncFunctionDef: _FUNCTION,
    ast.Lambda: _LAMBDA,
}
#: Per node type, how to read the fields that may hold nodes: one field's name, or a getter
#: of several (a tuple); filled as types are met.
_CHILDREN: dict[type, str | operator.attrgetter] = {}


def _children(kind: type) -> str | operator.attrgetter | None:
    """How to read a node type's fields that may hold nodes (cached); None when it has none
    (the type becomes a leaf)."""
    fields = ()
    if issubclass(kind, ast.AST):
        fields = tuple(f for f in kind._fields if f not in _NOT_NODES)
    if not fields:
        _TAGS[kind] = _LEAF
        return None
    spec = fields[0] if len(fields) == 1 else operator.attrgetter(*fields)
    _CHILDREN[kind] = spec
    return spec


for _kind in (ast.AnnAssign, ast.AugAssign):  # the walk reads these through the getter
    _CHILDREN[_kind] = operator.attrgetter(*(f for f in _kind._fields if f not in _NOT_NODES))


def parse(path: Path, rel: Path, source: bytes | None = None) -> ModuleInfo:
    """Parses one file (``source``: its bytes, else read) and walks it once (raises
    SyntaxError/ValueError when it cannot be parsed)."""
    tree = ast.parse(path.read_bytes() if source is None else source, filename=str(path))
    info = ModuleInfo(path=rel.as_posix(), module=module_name(rel), tree=tree)
    _Walker(info, is_package=rel.name == "__init__.py").walk()
    for cls in info.classes.values():
        cls.bases = [info.qualify(b) or "" for b in cls.node.bases]
    return info


class _Walker:
    """The one walk of a module's tree.

    Each scope (the module, a class body, a function or lambda body) is walked with a stack of
    nodes; a nested scope is queued and walked after with the scopes around it. A scope's
    statements are visited last first, so its bindings are recorded in reverse source order
    (:meth:`ModuleInfo.binding` reads the first).
    """

    def __init__(self, info: ModuleInfo, is_package: bool) -> None:
        self.info = info
        self.is_package = is_package
        self.assigned: list[ast.Assign] = []

    def walk(self) -> None:
        info = self.info
        calls = info.calls
        pending: list[tuple[list, tuple[ast.AST, ...]]] = [(list(info.tree.body), ())]
        tags, children = _TAGS, _CHILDREN
        while pending:
            stack, scopes = pending.pop()
            pop, push = stack.pop, stack.append
            while stack:
                node = pop()
                kind = node.__class__
                tag = tags.get(kind)
                if tag is None:  # every other node: its children are visited
                    spec = children.get(kind)
                    if spec is None:
                        spec = _children(kind)
                        if spec is None:
                            continue
                    if spec.__class__ is str:
                        value = getattr(node, spec)
                        if value.__class__ is list:
                            stack += value
                        else:
                            push(value)
                    else:
                        for value in spec(node):
                            if value.__class__ is list:
                                stack += value
                            else:
                                push(value)
                elif tag is _LEAF:
                    continue
                elif tag is _CALL:
                    calls.append(Call(node, scopes))
                    func = node.func
                    if func.__class__ is ast.Attribute and func.attr in EAGER_OFF:
                        info.graph_mode = True
                    push(func)
                    stack += node.args
                    stack += node.keywords
                elif tag is _ATTRIBUTE:
                    # tf.estimator.X / tf.contrib.tpu.X (the outermost of such a chain)
                    value = node.value
                    if value.__class__ is ast.Attribute and (
                        value.attr in _SPELLING_PARTS
                        or (
                            value.value.__class__ is ast.Attribute
                            and value.value.attr in _SPELLING_PARTS
                        )
                    ):
                        text = dotted(node)
                        if text is not None:
                            info.dotted.append((node.lineno, text))
                            continue  # the chain is read whole; nothing below it is a call
                    push(value)
                elif tag is _ASSIGN:
                    self._assign(node, scopes)
                    stack += node.targets
                    push(node.value)
                elif tag is _RETURN:
                    value = node.value
                    if value is not None:
                        if len(scopes) == 1 and value.__class__ is ast.Call:
                            info.returns.append((value, scopes[0]))
                        if scopes:
                            info.returned.setdefault(id(scopes[-1]), []).append(value)
                        push(value)
                elif tag is _ANNOTATED:  # x: T = v, x += v
                    if node.target.__class__ is ast.Name and node.value is not None:
                        key = (id(scopes[-1]) if scopes else None, node.target.id)
                        info.bindings.setdefault(key, []).append(node.value)
                        if kind is ast.AugAssign:
                            info.augmented[id(node.value)] = node
                    for value in children[kind](node):
                        push(value)
                elif tag is _IMPORT:
                    self._import(node)
                elif tag is _CLASS:
                    info.classes[node.name] = ClassInfo(
                        node.name, f"{info.module}.{node.name}", info, node, []
                    )
                    stack += node.decorator_list + node.bases + node.keywords
                    pending.append((list(node.body), (*scopes, node)))
                elif tag is _FUNCTION:
                    if not scopes:
                        info.functions[node.name] = node
                    key = (id(scopes[-1]) if scopes else None, node.name)
                    info.bindings.setdefault(key, []).append(node)
                    args = node.args
                    stack += node.decorator_list + args.defaults
                    stack += [d for d in args.kw_defaults if d is not None]
                    pending.append((list(node.body), (*scopes, node)))
                else:  # a lambda
                    stack += node.args.defaults
                    pending.append(([node.body], (*scopes, node)))
        self.assigned.sort(key=lambda n: n.lineno)
        for node in self.assigned:
            self._alias(node)

    def _assign(self, node: ast.Assign, scopes: tuple[ast.AST, ...]) -> None:
        info = self.info
        scope = id(scopes[-1]) if scopes else None
        value = node.value
        for target in node.targets:
            if target.__class__ is ast.Name:
                info.bindings.setdefault((scope, target.id), []).append(value)
            elif target.__class__ is ast.Tuple and value.__class__ is ast.Tuple:
                if len(target.elts) == len(value.elts):  # a, b = x, y
                    for name, item in zip(target.elts, value.elts):
                        if name.__class__ is ast.Name:
                            info.bindings.setdefault((scope, name.id), []).append(item)
            elif target.__class__ in (ast.Tuple, ast.List):  # a, b = f(): a is f()[0]
                for index, name in enumerate(target.elts):
                    if name.__class__ is ast.Starred:
                        break
                    if name.__class__ is ast.Name:
                        item = ast.Subscript(value, ast.Constant(index), ast.Load())
                        ast.copy_location(item, value)
                        info.unpacked.setdefault((scope, name.id), []).append(item)
        if value.__class__ is ast.Call:
            for target in node.targets:
                if target.__class__ is ast.Name:
                    info.call_assignments.append((target.id, value))
                elif target.__class__ is ast.Attribute:
                    info.call_assignments.append((target.attr, value))
        elif len(node.targets) == 1 and node.targets[0].__class__ is ast.Name:
            if isinstance(value, (ast.Name, ast.Attribute)):
                self.assigned.append(node)

    def _alias(self, node: ast.Assign) -> None:
        """``v1 = tf.compat.v1`` / ``train = tf.train``: names bound to a module path."""
        info = self.info
        name = node.targets[0].id
        if name in info.aliases:
            return
        qualified = info.qualify(node.value)
        if qualified and qualified.split(".")[0] in IMPORTED_ROOTS and qualified != name:
            info.aliases[name] = qualified

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Statements are visited last first: the first binding recorded is the last written
        (the module's own scope is walked before any function's)."""
        info = self.info
        bind = info.aliases.setdefault
        if isinstance(node, ast.Import):
            for alias in node.names:
                info.imports.append((node.lineno, alias.name))
                if alias.asname:
                    bind(alias.asname, alias.name)
                else:
                    root = alias.name.split(".")[0]
                    bind(root, root)
            return
        base = _import_base(info.module, self.is_package, node)
        for alias in node.names:
            full = f"{base}.{alias.name}".lstrip(".")
            info.imports.append((node.lineno, full))
            bind(alias.asname or alias.name, full)


def dotted(node: ast.AST) -> str | None:
    parts = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _import_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if module else []
    if not is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])
