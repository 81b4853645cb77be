"""The tensors a hook's argument names, resolved as far as the syntax tree can resolve them.

``LoggingTensorHook({"loss": "loss:0"})`` names its tensor in a string; real code also writes
``LoggingTensorHook(tensors=_TENSORS_TO_LOG)`` with the names in a module constant
(``dict((x, x) for x in ["learning_rate", ...])``) and ``LoggingTensorHook({"total_loss":
total_loss})`` with a tensor *object* of the TF1 model graph. :func:`resolve` follows names to
the values assigned to them (in the enclosing functions, then the module), list, tuple and dict
displays, ``dict(...)`` calls and simple comprehensions over a list of names, and says for each
leaf:

- a string: the tensor name, whose status the bridge's graph decides
  (:func:`bridge_graph.tensor_status`);
- a tensor object computed in the TF1 code (``total_loss``, ``tf.reduce_mean(x)``): it belongs to
  the model graph, which ``fit`` does not have (``needs-tensor``);
- anything else (a parameter, a value from another module or computed at run time): the tree
  cannot tell, so ``unverified``, never ``conforms``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from hookbridge._migrate.scan import bridge_graph, catalog
from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.modules import ModuleInfo

_DEPTH = 6
_GLOBAL_STEP = frozenset({"get_global_step", "get_or_create_global_step"})
#: What a hook's argument holds, by the argument: its wording in the rows.
TENSOR, SUMMARY, SAVER = "tensor", "summary op", "Saver"


class Leaf(NamedTuple):
    """One tensor an argument names: where it is written, its label and its status."""

    node: ast.AST
    label: str
    bridged: catalog.Bridged
    #: a parameter of the function around the hook: what its callers give it decides
    parameter: bool = False


class _Context(NamedTuple):
    on_bridge: bool  # built in HookCallback's hooks callable
    what: str  # TENSOR, SUMMARY or SAVER
    params: list[tuple[ast.AST, str]] | None  # parameters reached: (their function, name)
    active: list[int]  # the assigned values being followed (x = f(x) reads x's earlier value)


def resolve(
    module: ModuleInfo,
    scopes: tuple[ast.AST, ...],
    node: ast.AST | None,
    on_bridge: bool,
    what: str = TENSOR,
    params: list[tuple[ast.AST, str]] | None = None,
) -> Iterator[Leaf]:
    """Every tensor ``node`` (a hook's tensor argument) names.

    Args:
        module: the module the hook is constructed in.
        scopes: the scopes around the construction (for names bound in enclosing functions).
        node: the argument.
        on_bridge: True when the hook is built in HookCallback's hooks callable (tensor
            objects there come from the bridge's graph, not the model's).
        what: what the argument holds (:data:`TENSOR`, :data:`SUMMARY`, :data:`SAVER`).
        params: when given, each parameter of an enclosing function the argument's value may
            come from is appended (``(function node, name)``), also one the function reassigns
            (``if names is None: names = DEFAULT``): its callers decide those values.
    """
    if node is not None:
        yield from _resolve(module, scopes, node, _Context(on_bridge, what, params, []), None, 0)


def _resolve(
    module, scopes, node, ctx: _Context, via: ast.Name | None, depth: int
) -> Iterator[Leaf]:
    """``via``: the name in the hook's argument that led here (leaves are reported on its line,
    where the hook is built)."""
    at = via or node
    if depth > _DEPTH:
        yield _unverified(at, _label(via, node), "names nested too deep to follow")
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            yield Leaf(at, repr(node.value), bridge_graph.tensor_status(node.value))
        elif node.value is not None:
            yield _unverified(at, _text(node), f"not a {ctx.what}")
        return
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for element in node.elts:
            yield from _resolve(module, scopes, element, ctx, via, depth + 1)
        return
    if isinstance(node, ast.Dict):
        for value in node.values:
            yield from _resolve(module, scopes, value, ctx, via, depth + 1)
        return
    if isinstance(node, ast.Name):
        value, where_bound = module.binding_in(scopes, node.id)
        parameter = _parameter_scope(where_bound, node.id)
        if value is not None and id(value) in ctx.active:  # x = {... for v in x.items()}
            if parameter is None:
                yield _unverified(at, node.id, f"{node.id} is computed from itself")
                return
            value = None  # the parameter's value, before the assignment
        if parameter is not None and ctx.params is not None:
            ctx.params.append((parameter, node.id))
        if value is None and parameter is None:
            imported = _imported(module, module.qualify(node))
            if imported is not None:  # a constant of another scanned module
                other, value = imported
                yield from _resolve(other, (), value, ctx, via or node, depth + 1)
                return
        if value is None:
            where = (
                f"a parameter of {getattr(parameter, 'name', 'the function')}"
                if parameter is not None
                else "not assigned in this module"
            )
            why = f"{node.id} is {where}: the tree cannot tell its {ctx.what}s"
            if parameter is not None and ctx.params is not None:
                why += " (what the scanned callers pass is listed where they pass it)"
            yield _unverified(at, node.id, why)._replace(parameter=parameter is not None)
            return
        ctx.active.append(id(value))
        yield from _resolve(module, where_bound, value, ctx, via or node, depth + 1)
        ctx.active.pop()
        return
    if isinstance(node, ast.BoolOp):  # names or DEFAULT: either
        for value in node.values:
            yield from _resolve(module, scopes, value, ctx, via, depth + 1)
        return
    if isinstance(node, ast.IfExp):
        for value in (node.body, node.orelse):
            yield from _resolve(module, scopes, value, ctx, via, depth + 1)
        return
    names = _comprehension_names(node)
    if names is not None:
        yield from _resolve(module, scopes, names, ctx, via, depth + 1)
        return
    derived = _derived_from(node)
    if derived is not None:  # {k: v.format(...) for k, v in names.items()}
        source, how = derived
        for leaf in _resolve(module, scopes, source, ctx, via, depth + 1):
            if how in ("same", "format") or leaf.label[:1] not in "'\"":
                yield leaf  # a format keeps a name without fields; an object stays what it is
            else:
                yield _unverified(
                    leaf.node,
                    leaf.label,
                    f"computed at run time from {leaf.label} ({_text(node)}): the tree cannot "
                    "tell the name",
                )
        return
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in catalog.BY_NAME_METHODS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):  # graph.get_tensor_by_name("g_loss:0"): that name
        name = node.args[0].value
        yield Leaf(at, repr(name), bridge_graph.tensor_status(name))
        return
    if isinstance(node, ast.Call) and _is_dict_call(node) and not node.args:
        for k in node.keywords:
            if k.arg is not None:
                yield from _resolve(module, scopes, k.value, ctx, via, depth + 1)
        return
    if isinstance(node, ast.Attribute):  # constants.NAMES, constants a scanned module
        imported = _imported(module, module.qualify(node))
        if imported is not None:
            other, value = imported
            yield from _resolve(other, (), value, ctx, via or node, depth + 1)
            return
    yield _object(node, via, scopes, ctx, module)


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


def _object(node, via, scopes, ctx: _Context, module: ModuleInfo) -> Leaf:
    label = _label(via, node)
    at = via or node
    is_step = isinstance(node, ast.Call) and _last(module.qualify(node.func)) in _GLOBAL_STEP
    what = ctx.what if ctx.what != TENSOR else "tensor object"
    if ctx.on_bridge:
        if is_step:
            step = bridge_graph.BRIDGE_TENSORS["global_step"]
            return Leaf(at, label, catalog.Bridged(f.CONFORMS, step))
        return _unverified(
            at, label, f"a {what} built on the bridge's graph: the tree cannot tell which"
        )
    if not scopes:
        return _unverified(at, label, "a value computed at import time: the tree cannot tell")
    model_fn = _model_fn(scopes)
    if model_fn is None:
        return _unverified(
            at,
            label,
            f"a {what} built in {getattr(scopes[-1], 'name', 'a lambda')}, not a model_fn: "
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
    return Leaf(at, label, _of_model_graph(label, model_fn, ctx.what))


def _of_model_graph(label: str, model_fn: str, what: str) -> catalog.Bridged:
    """An object of the TF1 model graph given to a hook: what becomes of it in fit (measured
    under HookCallback on keras3, tests/test_scan_verdicts.py)."""
    if what == SAVER:
        return catalog.Bridged(
            f.NEEDS_TENSOR,
            f"{label} is a Saver of the TF1 model graph (built in {model_fn}): fit has no model "
            "graph, so it cannot save the model's variables (HookCallback refuses it with a "
            "ValueError before writing anything; natively, on another graph, it writes that "
            "graph's variables into model.ckpt-N_temp/ folders)",
            "leave saver= out and build the CheckpointSaverHook in HookCallback's hooks callable "
            "(its default Saver saves the bridge's global step and weight mirrors), or use "
            "hookbridge.estimator_hooks",
        )
    if what == SUMMARY:
        return catalog.Bridged(
            f.NEEDS_TENSOR,
            f"{label} is a summary op of the TF1 model graph (built in {model_fn}): it does not "
            "exist in fit (under HookCallback the hook's run raises ValueError: not an element "
            "of this graph)",
            "log the value from Keras (a metric, written by keras.callbacks.TensorBoard), or "
            "build the summary op in HookCallback's hooks callable from the bridge's tensors "
            "('loss:0', one per Keras log value)",
        )
    return catalog.Bridged(
        f.NEEDS_TENSOR,
        f"{label} is a tensor object of the TF1 model graph (computed in {model_fn}): it "
        "does not exist in fit",
        f"log it from Keras as a metric (or log value) named e.g. '{_key(label)}', and "
        f"name '{_key(label)}:0' in the hook, built in HookCallback's hooks callable",
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


def _parameter_scope(where_bound: tuple[ast.AST, ...], name: str) -> ast.AST | None:
    """The function whose parameter ``name`` is, where the name was looked up, else None."""
    if not where_bound:
        return None
    args = getattr(where_bound[-1], "args", None)
    if isinstance(args, ast.arguments):
        every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
        if any(a is not None and a.arg == name for a in every):
            return where_bound[-1]
    return None


def _derived_from(node: ast.AST) -> tuple[ast.AST, str] | None:
    """``(names, how)`` when ``node`` computes its names from another collection's:
    ``{k: v.format(...) for k, v in names.items()}`` (how ``format``), ``[x for x in names]``
    (``same``), any other expression of the loop variable (``computed``); else None."""
    if not isinstance(node, (ast.DictComp, ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return None
    if len(node.generators) != 1 or node.generators[0].is_async:
        return None
    generator = node.generators[0]
    source, target = generator.iter, generator.target
    value = node.value if isinstance(node, ast.DictComp) else node.elt
    if (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Attribute)
        and source.func.attr in ("items", "values")
        and not source.args
    ):
        if source.func.attr == "items":
            if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                return None
            target = target.elts[1]
        source = source.func.value
    if not isinstance(target, ast.Name):
        return None
    if isinstance(value, ast.Name) and value.id == target.id:
        return source, "same"
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "format"
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == target.id
    ):
        return source, "format"
    return source, "computed"


def _last(qualified: str | None) -> str:
    return qualified.rsplit(".", 1)[-1] if qualified else ""


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(label: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in label).strip("_")
    return cleaned or "value"
