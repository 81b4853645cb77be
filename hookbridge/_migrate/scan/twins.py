"""What ``hookbridge.keras_twin`` does with a canned Estimator, read from its constructor call.

``keras_twin`` (hookbridge/_migrate/canned.py) builds the Keras model of ``DNN*``, ``Linear*``
and ``DNNLinearCombined*`` Estimators from **numeric columns only**: it raises ``ValueError`` on
any other feature column (categorical, bucketized, crossed, embedding, indicator, ...), on a
numeric column with a ``normalizer_fn`` or a shape of more than one dimension, and on
``weight_column``, ``label_vocabulary`` and ``batch_norm=True``. :func:`twin_verdict` reads the
columns the call is given as far as the syntax tree goes (names followed to what is assigned to
them, lists, tuples and ``+``): what it refuses, where the columns are known; ``unknown`` where
they are not (a parameter, a value a function returns at run time).
"""

from __future__ import annotations

import ast

from hookbridge._migrate.scan import catalog
from hookbridge._migrate.scan.classes import last_name
from hookbridge._migrate.scan.modules import ModuleInfo

#: The arguments holding feature columns, with their positional index, per canned family.
_COLUMN_ARGUMENTS = {
    "DNNLinearCombined": {"linear_feature_columns": 1, "dnn_feature_columns": 3},
    "DNN": {"feature_columns": 1},
    "Linear": {"feature_columns": 0},
}
#: Constructor arguments keras_twin refuses when given (not None / not False).
_REFUSED_ARGUMENTS = ("weight_column", "label_vocabulary", "batch_norm")
_DEPTH = 5


def twin_verdict(module: ModuleInfo, call: ast.Call, scopes: tuple, kind: str) -> str:
    """The canned row's detail for an Estimator ``keras_twin`` builds (``kind``: the class)."""
    family = next(p for p in _COLUMN_ARGUMENTS if kind.startswith(p))
    refused: list[str] = []
    unknown: list[str] = []
    numeric = 0
    for keyword, index in _COLUMN_ARGUMENTS[family].items():
        value = _argument(call, keyword, index)
        if value is None:
            continue
        for found in _columns(module, scopes, value, 0):
            if found is None:
                unknown.append(f"{keyword}={_text(value)}")
            elif found == "numeric_column":
                numeric += 1
            else:
                refused.append(found)
    for keyword in _REFUSED_ARGUMENTS:
        given = _argument(call, keyword, None)
        if given is not None and not (
            isinstance(given, ast.Constant) and given.value in (None, False)
        ):
            refused.append(f"{keyword}=")
    if refused:
        return (
            f"a canned Estimator: keras_twin refuses: {', '.join(dict.fromkeys(refused))} "
            "(keras_twin(estimator) raises ValueError; it builds numeric feature columns only): "
            "write its Keras model by hand and map the Estimator's checkpoint with restore_checkpoint(model, "
            "model_dir, 'auto'); its hooks go to fit"
        )
    if unknown:
        return (
            "a canned Estimator: keras_twin builds numeric columns only and raises ValueError on "
            "any other (categorical, bucketized, crossed, embedding, indicator); its columns "
            f"here are unknown ({', '.join(dict.fromkeys(unknown))}: the syntax tree cannot "
            "tell them): try keras_twin(estimator), which names what it cannot build; its hooks "
            "go to fit"
        )
    return f"{catalog.CANNED_NEEDS} ({numeric} numeric columns)"


def _columns(module: ModuleInfo, scopes: tuple, node: ast.AST, depth: int):
    """Per column: ``numeric_column``, what keras_twin refuses (``bucketized_column``,
    ``numeric_column with normalizer_fn``), or None (unknown)."""
    if depth > _DEPTH:
        yield None
    elif isinstance(node, (ast.List, ast.Tuple)):
        for element in node.elts:
            yield from _columns(module, scopes, element, depth + 1)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _columns(module, scopes, node.left, depth + 1)
        yield from _columns(module, scopes, node.right, depth + 1)
    elif isinstance(node, ast.Name):
        value, where = module.binding_in(scopes, node.id)
        if value is None:
            yield None
        else:
            yield from _columns(module, where, value, depth + 1)
    elif isinstance(node, ast.Call):
        name = last_name(module.qualify(node.func))
        if name == "numeric_column":
            yield _numeric(node)
        elif "_column" in name or name.startswith("shared_embedding"):
            yield f"{name} ({_key(node)})" if _key(node) else name
        else:
            yield None
    else:
        yield None


def _numeric(node: ast.Call) -> str:
    normalizer = _argument(node, "normalizer_fn", 4)
    if normalizer is not None and not (
        isinstance(normalizer, ast.Constant) and normalizer.value is None
    ):
        return f"numeric_column with normalizer_fn ({_key(node)})"
    shape = _argument(node, "shape", 1)
    if isinstance(shape, (ast.Tuple, ast.List)) and len(shape.elts) > 1:
        return f"numeric_column of shape {_text(shape)} ({_key(node)})"
    return "numeric_column"


def _key(node: ast.Call) -> str:
    first = node.args[0] if node.args else _argument(node, "key", None)
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return _text(first) if first is not None else ""


def _argument(call: ast.Call, keyword: str, index: int | None) -> ast.AST | None:
    for k in call.keywords:
        if k.arg == keyword:
            return k.value
    if index is not None and len(call.args) > index:
        if not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
            return call.args[index]
    return None


def _text(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."
