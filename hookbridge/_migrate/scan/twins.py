"""What ``hookbridge.keras_twin`` does with a canned Estimator, read from its constructor call.

``keras_twin`` builds the Keras model of ``DNN*``, ``Linear*`` and ``DNNLinearCombined*``
Estimators (``tf.estimator``'s V2 classes and ``tf.compat.v1.estimator``'s V1 ones) over the
feature columns of :data:`hookbridge._migrate.twins.kinds.SUPPORTED_COLUMNS`, and refuses any
other column and the arguments of :data:`~hookbridge._migrate.twins.kinds.UNSUPPORTED_ARGUMENTS`.
:func:`twin_verdict` says, per row, which class it is, each column's type and whether the twin
builds it (:mod:`hookbridge._migrate.scan.columns` reads them, across modules), and what to do.
"""

from __future__ import annotations

import ast
import dataclasses

from hookbridge._migrate.scan.columns import Column, Reader
from hookbridge._migrate.scan.flow import argument
from hookbridge._migrate.scan.modules import ModuleInfo
from hookbridge._migrate.twins import kinds

#: The arguments holding feature columns, with their positional index, per canned family.
_COLUMN_ARGUMENTS = {
    "DNNLinearCombined": {"linear_feature_columns": 1, "dnn_feature_columns": 3},
    "DNN": {"feature_columns": 1},
    "Linear": {"feature_columns": 0},
}
_NEXT = (
    "restore_checkpoint(twin, model_dir, 'auto') continues from its checkpoints; its hooks go "
    "to fit"
)


def twin_verdict(
    module: ModuleInfo, call: ast.Call, scopes: tuple, kind: str
) -> tuple[str, tuple[Column, ...]]:
    """The canned row's detail and its columns, for an Estimator class ``keras_twin`` builds
    (``kind``: the class name as written, ``DNNClassifier`` or ``DNNClassifierV2``)."""
    base = kind.removesuffix("V2")
    family = next(p for p in _COLUMN_ARGUMENTS if base.startswith(p))
    name, version = _version(module.qualify(call.func) or "", kind)
    reader = Reader()
    columns: list[Column] = []
    for keyword, index in _COLUMN_ARGUMENTS[family].items():
        given = reader.given(module, scopes, call, keyword, index)
        if keyword.startswith("dnn") or family == "DNN":  # the input layer: dense columns only
            given = [
                dataclasses.replace(c, builds=False, reason=kinds.DNN_INPUT_REASON)
                if c.builds and c.type not in kinds.DENSE_FUNCTIONS
                else c
                for c in given
            ]
        columns += given
    arguments = [
        f"{keyword}={ast.unparse(given)[:40]}"
        for keyword in kinds.UNSUPPORTED_ARGUMENTS
        if (given := argument(call, keyword, None)) is not None
        and not (isinstance(given, ast.Constant) and given.value in (None, False))
    ]
    refused = [c for c in columns if c.builds is False]
    unknown = [c for c in columns if c.builds is None]
    built = [c for c in columns if c.builds]
    head = f"a canned Estimator, {version}"
    if refused or arguments:
        what = [f"{_count(refused)}: {_list(refused)}"] if refused else []
        what += [f"{', '.join(arguments)} (an argument it does not build)"] if arguments else []
        text = (
            f"{head}: keras_twin refuses {'; and '.join(what)}"
            + (f"; it builds {_count(built)} ({_summary(built)})" if built else "")
            + (f"; {_count(unknown)} unknown: {_list(unknown)}" if unknown else "")
            + ". keras_twin raises ValueError naming them: rewrite them as columns it builds, "
            "or write the Keras model by hand and map the Estimator's checkpoint with "
            "restore_checkpoint(model, model_dir, 'auto'); its hooks go to fit"
        )
    elif unknown:
        text = (
            f"{head}: keras_twin builds {_count(built)} ({_summary(built)}); "
            f"{_count(unknown)} unknown: {_list(unknown)}. keras_twin names what it cannot "
            f"build: try {_how(name)}; {_NEXT}"
        )
    else:
        text = (
            f"{head}: keras_twin builds its Keras model ({_count(built)}: "
            f"{_summary(built) or 'none'}): {_how(name)}; {_NEXT}"
        )
    return text, tuple(columns)


def _version(qualified: str, kind: str) -> tuple[str, str]:
    """The class keras_twin's string form takes, and which class the spelling makes."""
    base = kind.removesuffix("V2")
    parts = qualified.split(".")
    if kind.endswith("V2"):
        return kind, f"V2 ({kind})"
    if "v1" in parts or (parts[0] == "tensorflow_estimator" and "canned" in parts):
        return base, f"V1 ({base} of tf.compat.v1.estimator)"
    if parts[:2] in (["tensorflow", "estimator"], ["tensorflow_estimator", "estimator"]):
        return f"{base}V2", f"V2 ({base}V2: tf.estimator on TF 2; the V1 class on TF 1.x)"
    return base, f"V1 or V2 (the tree cannot tell from {qualified or 'its name'})"


def _how(name: str) -> str:
    return (
        f"hookbridge.keras_twin(estimator) on TF 2.15, or keras_twin({name!r}, <its constructor "
        "arguments>) on any stack"
    )


def _count(columns: list[Column]) -> str:
    return f"{len(columns)} feature column{'s' if len(columns) != 1 else ''}"


def _summary(columns: list[Column]) -> str:
    """Per argument, per type in order of appearance: ``type (key, key)``."""
    parts = []
    for argument_name in dict.fromkeys(c.argument for c in columns):
        by_type: dict[str, list[str]] = {}
        for c in columns:
            if c.argument == argument_name:
                by_type.setdefault(c.type, []).append(c.key)
        text = ", ".join(f"{t} ({', '.join(keys)})" for t, keys in by_type.items())
        parts.append(f"{argument_name}: {text}")
    return "; ".join(parts)


def _list(columns: list[Column]) -> str:
    return "; ".join(
        f"{c.argument}: {c.type or 'column'} ({c.key}) at {c.where}: {c.reason}"
        if c.type
        else f"{c.argument}: {c.key} at {c.where}: {c.reason}"
        for c in columns
    )
