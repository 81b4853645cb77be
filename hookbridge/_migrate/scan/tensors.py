"""The tensors a hook's argument names, resolved as far as the syntax tree can resolve them.

``LoggingTensorHook({"loss": "loss:0"})`` names its tensor in a string; real code also writes
``LoggingTensorHook(tensors=_TENSORS_TO_LOG)`` with the names in a module constant
(``dict((x, x) for x in ["learning_rate", ...])``) and ``LoggingTensorHook({"total_loss":
total_loss})`` with a tensor *object* of the TF1 model graph. :func:`resolve` follows names to
the values assigned to them (in the enclosing functions, then the module), list, tuple and dict
displays, ``dict(...)`` calls and simple comprehensions over a list of names, and says for each
leaf:

- a string: the tensor name, whose status the bridge's graph decides
  (:func:`catalog.tensor_status`);
- a tensor object computed in the TF1 code (``total_loss``, ``tf.reduce_mean(x)``): it belongs to
  the model graph, which ``fit`` does not have (``needs-tensor``);
- anything else (a parameter, a value from another module or computed at run time): the tree
  cannot tell, so ``unverified``, never ``conforms``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from hookbridge._migrate.scan import catalog
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.modules import ModuleInfo

_DEPTH = 6
_GLOBAL_STEP = frozenset({"get_global_step", "get_or_create_global_step"})


class Leaf(NamedTuple):
    """One tensor an argument names: where it is written, its label and its status."""

    node: ast.AST
    label: str
    bridged: catalog.Bridged


def resolve(
    module: ModuleInfo, scopes: tuple[ast.AST, ...], node: ast.AST | None, bridge_graph: bool
) -> Iterator[Leaf]:
    """Every tensor ``node`` (a hook's tensor argument) names.

    Args:
        module: the module the hook is constructed in.
        scopes: the scopes around the construction (for names bound in enclosing functions).
        node: the argument.
        bridge_graph: True when the hook is built in HookCallback's hooks callable (tensor
            objects there come from the bridge's graph, not the model's).
    """
    if node is not None:
        yield from _resolve(module, scopes, node, bridge_graph, None, 0)


def _resolve(
    module, scopes, node, bridge_graph, via: ast.Name | None, depth: int
) -> Iterator[Leaf]:
    """``via``: the name in the hook's argument that led here (leaves are reported on its line,
    where the hook is built)."""
    at = via or node
    if depth > _DEPTH:
        yield _unverified(at, _label(via, node), "names nested too deep to follow")
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            yield Leaf(at, repr(node.value), catalog.tensor_status(node.value))
        elif node.value is not None:
            yield _unverified(at, _text(node), "not a tensor name")
        return
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            yield from _resolve(module, scopes, element, bridge_graph, via, depth + 1)
        return
    if isinstance(node, ast.Dict):
        for value in node.values:
            yield from _resolve(module, scopes, value, bridge_graph, via, depth + 1)
        return
    if isinstance(node, ast.Name):
        value, where_bound = module.binding_in(scopes, node.id)
        if value is None and not _is_parameter(scopes, node.id):
            imported = _imported(module, module.qualify(node))
            if imported is not None:  # a constant of another scanned module
                other, value = imported
                yield from _resolve(other, (), value, bridge_graph, via or node, depth + 1)
                return
        if value is None:
            where = (
                "a parameter of the function"
                if _is_parameter(scopes, node.id)
                else "not assigned in this module"
            )
            why = f"{node.id} is {where}: the tree cannot tell its tensors"
            yield _unverified(at, node.id, why)
            return
        yield from _resolve(module, where_bound, value, bridge_graph, via or node, depth + 1)
        return
    names = _comprehension_names(node)
    if names is not None:
        yield from _resolve(module, scopes, names, bridge_graph, via, depth + 1)
        return
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in catalog.BY_NAME_METHODS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):  # graph.get_tensor_by_name("g_loss:0"): that name
        yield Leaf(at, repr(node.args[0].value), catalog.tensor_status(node.args[0].value))
        return
    if isinstance(node, ast.Call) and _is_dict_call(node) and not node.args:
        for k in node.keywords:
            if k.arg is not None:
                yield from _resolve(module, scopes, k.value, bridge_graph, via, depth + 1)
        return
    if isinstance(node, ast.Attribute):  # constants.NAMES, constants a scanned module
        imported = _imported(module, module.qualify(node))
        if imported is not None:
            other, value = imported
            yield from _resolve(other, (), value, bridge_graph, via or node, depth + 1)
            return
    yield _object(node, via, scopes, bridge_graph, module)


def _imported(module: ModuleInfo, qualified: str | None) -> tuple[ModuleInfo, ast.AST] | None:
    """A module-level value of another scanned module, by qualified name, else None."""
    if not qualified or "." not in qualified:
        return None
    name, _, attr = qualified.rpartition(".")
    other = module.project.get(name)
    if other is None or other is module:
        return None
    value = other.binding((), attr)
    return (other, value) if value is not None else None


def _label(via: ast.Name | None, node: ast.AST) -> str:
    return via.id if via is not None else _text(node)


def _object(node, via, scopes, bridge_graph, module: ModuleInfo) -> Leaf:
    label = _label(via, node)
    at = via or node
    is_step = isinstance(node, ast.Call) and _last(module.qualify(node.func)) in _GLOBAL_STEP
    if bridge_graph:
        if is_step:
            step = catalog.BRIDGE_TENSORS["global_step"]
            return Leaf(at, label, catalog.Bridged(f.CONFORMS, step))
        return _unverified(
            at, label, "a tensor object built on the bridge's graph: the tree cannot tell which"
        )
    if not scopes:
        return _unverified(at, label, "a value computed at import time: the tree cannot tell")
    model_fn = _model_fn(scopes)
    if model_fn is None:
        return _unverified(
            at,
            label,
            f"a tensor object built in {getattr(scopes[-1], 'name', 'a lambda')}, not a model_fn: "
            "the tree cannot tell which graph it belongs to",
        )
    if is_step:
        return Leaf(
            at,
            label,
            catalog.Bridged(
                f.NEEDS_TENSOR,
                f"{label} is the global step object of the TF1 model graph: fit has no model graph",
                "build the hook in HookCallback's hooks callable: there "
                "tf.compat.v1.train.get_global_step() is the bridge's global step",
            ),
        )
    return Leaf(
        at,
        label,
        catalog.Bridged(
            f.NEEDS_TENSOR,
            f"{label} is a tensor object of the TF1 model graph (computed in {model_fn}): it "
            "does not exist in fit",
            f"log it from Keras as a metric (or log value) named e.g. '{_key(label)}', and "
            f"name '{_key(label)}:0' in the hook, built in HookCallback's hooks callable",
        ),
    )


def _model_fn(scopes: tuple[ast.AST, ...]) -> str | None:
    """The enclosing function that builds the TF1 model graph (a ``model_fn``: it takes
    ``features`` or ``mode``, or is named so), else None."""
    for scope in reversed(scopes):
        args = getattr(scope, "args", None)
        if not isinstance(args, ast.arguments):
            continue
        names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        name = getattr(scope, "name", "")
        if names & {"features", "mode"} or "model_fn" in name:
            return name or "a lambda"
    return None


def _unverified(node: ast.AST, label: str, why: str) -> Leaf:
    return Leaf(
        node,
        label,
        catalog.Bridged(
            f.UNVERIFIED,
            why,
            "write the tensor names as strings the scan can read, or check the hook with "
            "hookbridge check",
        ),
    )


def _comprehension_names(node: ast.AST) -> ast.AST | None:
    """The list a ``dict((x, x) for x in L)`` / ``{x: x for x in L}`` / ``[x for x in L]``
    takes its names from (identity comprehensions only), else None."""
    if isinstance(node, ast.Call) and _is_dict_call(node) and len(node.args) == 1:
        node = node.args[0]
        if not isinstance(node, (ast.GeneratorExp, ast.ListComp)):
            return None
        pair = node.elt
        if not (isinstance(pair, ast.Tuple) and len(pair.elts) == 2):
            return None
        value = pair.elts[1]
    elif isinstance(node, ast.DictComp):
        value = node.value
    elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        value = node.elt
    else:
        return None
    if len(node.generators) != 1 or node.generators[0].ifs or node.generators[0].is_async:
        return None
    target = node.generators[0].target
    if isinstance(target, ast.Name) and isinstance(value, ast.Name) and value.id == target.id:
        return node.generators[0].iter
    return None


def _is_dict_call(node: ast.Call) -> bool:
    return isinstance(node.func, ast.Name) and node.func.id == "dict"


def _is_parameter(scopes: tuple[ast.AST, ...], name: str) -> bool:
    for scope in scopes:
        args = getattr(scope, "args", None)
        if isinstance(args, ast.arguments):
            every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
            if any(a is not None and a.arg == name for a in every):
                return True
    return False


def _last(qualified: str | None) -> str:
    return qualified.rsplit(".", 1)[-1] if qualified else ""


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(label: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in label).strip("_")
    return cleaned or "value"
