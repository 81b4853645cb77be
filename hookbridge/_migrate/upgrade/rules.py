"""hookbridge's rules, applied to a file's syntax tree before TensorFlow's own upgrader runs.

TensorFlow's ``tf_upgrade_v2`` (its rename tables and its ``ast_edits`` engine) does the bulk of a
stage-0 rewrite. Its tables are right for TF 2.0 and know nothing of what happened after it; some
of its rewrites change what the code computes or move a name to where it will not import:

* hooks: TF 2.15's tables rewrite ``tf.train.LoggingTensorHook`` to ``tf.estimator.LoggingTensorHook``,
  which stops importing on TF >= 2.16 (no ``tf.estimator``); ``tf.compat.v1.train`` has every
  hook class on every TF 2.
* canned Estimators: TF1's ``tf.estimator.DNNClassifier`` is the V1 class; in TF 2 that spelling
  is the V2 class (another loss reduction, Keras optimizers whose slots have other names: the
  ``model_dir`` no longer continues). TF 2.15's tables add ``loss_reduction=SUM`` and keep the V2
  class; TF 2.21's leave the name. Both change the model: the V1 class is ``tf.compat.v1.estimator``.
* the tables of TF >= 2.16 dropped the rows of what left TensorFlow (``tf.layers``, the
  ``tf.estimator`` family, ``tf.contrib.tpu``'s Estimator classes, TF1 ``tf.summary`` ops): the
  same tree would upgrade differently on 2.15 and on 2.21. The rows here make the result the same
  on both.
* what ``tf_upgrade_v2`` reports as "cannot be converted" though it has a home: ``tf.flags`` /
  ``tf.app`` (absl), ``tf.contrib.layers`` (``tf_slim.layers``, the same code moved out of
  TensorFlow: same epsilon, same variable names), ``shape[i].value`` (``dimension_value``).

Each rule names its old spelling (a dotted name rooted at ``tf``, the module's alias of
``tensorflow``), its new one and why. :func:`apply` rewrites a ``pasta`` tree in place and returns
what it did; :func:`needed_imports` tells which imports the new spellings need.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Final

from hookbridge._migrate.scan.catalog import CANNED_ESTIMATORS
from hookbridge._migrate.scan.spellings import V1_TRAIN_NAMES


@dataclass(frozen=True)
class Rule:
    """``old`` (a dotted name, or a prefix ending in ``.``) is rewritten to ``new``."""

    old: str
    new: str
    why: str


_HOOK_WHY = "hooks live in tf.compat.v1.train on every TF 2 (tf.estimator is gone from TF 2.16)"
_CANNED_WHY = (
    "TF1's tf.estimator.{name} is the V1 class; in TF 2 that spelling is the V2 class (another "
    "loss reduction and optimizer slots): the V1 class keeps the model and its model_dir"
)
_DROPPED_WHY = "the V1 home of a name TensorFlow's own upgrader maps only up to TF 2.15"
_TPU: Final = ("InputPipelineConfig", "RunConfig", "TPUConfig", "TPUEstimator", "TPUEstimatorSpec")
_EARLY_STOPPING: Final = (
    "make_early_stopping_hook",
    "stop_if_higher_hook",
    "stop_if_lower_hook",
    "stop_if_no_decrease_hook",
    "stop_if_no_increase_hook",
)


def _rules() -> tuple[Rule, ...]:
    rules = []
    for name in sorted(V1_TRAIN_NAMES):
        for home in ("tf.train", "tf.estimator", "tf.compat.v1.estimator"):
            rules.append(Rule(f"{home}.{name}", f"tf.compat.v1.train.{name}", _HOOK_WHY))
    for name in sorted(CANNED_ESTIMATORS):
        why = _CANNED_WHY.format(name=name)
        rules.append(Rule(f"tf.estimator.{name}", f"tf.compat.v1.estimator.{name}", why))
    for name in _TPU:
        for home in ("tf.contrib.tpu", "tf.estimator.tpu"):
            rules.append(Rule(f"{home}.{name}", f"tf.compat.v1.estimator.tpu.{name}", _DROPPED_WHY))
    for name in _EARLY_STOPPING:
        rules.append(
            Rule(
                f"tf.contrib.estimator.{name}",
                f"tf.compat.v1.estimator.experimental.{name}",
                _DROPPED_WHY,
            )
        )
    for name in ("KMeans", "dnn_logit_fn_builder", "linear_logit_fn_builder"):
        rules.append(
            Rule(
                f"tf.estimator.experimental.{name}",
                f"tf.compat.v1.estimator.experimental.{name}",
                _DROPPED_WHY,
            )
        )
    for name in ("audio", "histogram", "image", "scalar", "text", "merge_all", "merge"):
        rules.append(
            Rule(
                f"tf.summary.{name}",
                f"tf.compat.v1.summary.{name}",
                "TF1 summary ops (graph collections) are tf.compat.v1.summary; TF 2's "
                "tf.summary writes nothing without a default writer and a step",
            )
        )
    absl = "tf.flags and tf.app were absl's, and are gone from TF 2"
    rules += [
        Rule("tf.estimator.inputs.", "tf.compat.v1.estimator.inputs.", _DROPPED_WHY),
        Rule("tf.estimator.tpu.experimental.", "tf.compat.v1.estimator.tpu.experimental.", _DROPPED_WHY),
        Rule("tf.layers.", "tf.compat.v1.layers.", _DROPPED_WHY),
        Rule("tf.app.flags", "absl.flags", absl),
        Rule("tf.flags", "absl.flags", absl),
        Rule("tf.compat.v1.flags", "absl.flags", absl),
        Rule("tf.compat.v1.app.flags", "absl.flags", absl),
        Rule(
            "tf.contrib.slim",
            "tf_slim",
            "tf.contrib.slim moved out of TensorFlow as tf-slim (pip install tf-slim)",
        ),
    ]
    return tuple(rules)


RULES: Final = _rules()
_EXACT: Final = {r.old: r for r in RULES if not r.old.endswith(".")}
_PREFIXES: Final = tuple(r for r in RULES if r.old.endswith("."))
#: tf.contrib.layers names TensorFlow's upgrader converts itself (initializers, regularizers).
_CONTRIB_LAYERS_TF_HANDLES: Final = frozenset(
    {
        "l1_regularizer",
        "l2_regularizer",
        "xavier_initializer",
        "xavier_initializer_conv2d",
        "variance_scaling_initializer",
        "sparse_column_with_hash_bucket",
    }
)
_SLIM_WHY = (
    "tf.contrib.layers moved out of TensorFlow as tf-slim (pip install tf-slim): the same code, "
    "epsilon and variable names (tf.keras layers differ in both)"
)


def lookup(name: str) -> Rule | None:
    """The rule for a dotted name (``tf.layers.dense``), or None."""
    rule = _EXACT.get(name)
    if rule is not None:
        return rule
    for candidate in _PREFIXES:
        if name.startswith(candidate.old):
            return Rule(name, candidate.new + name[len(candidate.old) :], candidate.why)
    if name.startswith("tf.contrib.layers."):
        rest = name[len("tf.contrib.layers.") :]
        if rest and rest.split(".")[0] not in _CONTRIB_LAYERS_TF_HANDLES:
            return Rule(name, "tf_slim.layers." + rest, _SLIM_WHY)
    return None


@dataclass(frozen=True)
class Change:
    """One rewrite made in a file: where, from what, to what, and why."""

    line: int
    old: str
    new: str
    why: str


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for an Attribute chain rooted at a Name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _name_node(name: str, like: ast.AST) -> ast.AST:
    parts = name.split(".")
    node: ast.AST = ast.Name(id=parts[0], ctx=ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    node.ctx = getattr(like, "ctx", ast.Load())
    return ast.copy_location(node, like)


def _is_dimension_value(node: ast.Attribute) -> bool:
    """``<x>.shape[i].value`` or ``<x>.get_shape()[i].value``: a TensorShape Dimension's value."""
    sub = node.value
    if node.attr != "value" or not isinstance(sub, ast.Subscript):
        return False
    base = sub.value
    if isinstance(base, ast.Attribute) and base.attr == "shape":
        return True
    return (
        isinstance(base, ast.Call)
        and isinstance(base.func, ast.Attribute)
        and base.func.attr == "get_shape"
        and not base.args
    )


def has_main(tree: ast.Module) -> bool:
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main"
        for n in tree.body
    )


class _Rewriter(ast.NodeVisitor):
    """One walk: dotted names by :data:`RULES`, ``tf.app.run``, ``shape[i].value``."""

    def __init__(self, tf_alias: str, root: str, module_main: bool, replace) -> None:
        self.tf_alias = tf_alias
        self.root = root
        self.module_main = module_main
        self.replace = replace
        self.changes: list[Change] = []
        self.parents: list[ast.AST] = []

    def generic_visit(self, node: ast.AST) -> None:
        self.parents.append(node)
        super().generic_visit(node)
        self.parents.pop()

    def visit_Call(self, node: ast.Call) -> None:
        name = self._canonical(dotted(node.func))
        if name in ("tf.app.run", "tf.compat.v1.app.run"):
            new = _name_node("absl.app.run", node.func)  # absl.app.run needs main
            self.replace(node, node.func, new)
            if not node.args and not node.keywords and self.module_main:
                node.args.append(ast.Name(id="main", ctx=ast.Load()))
            self.changes.append(
                Change(
                    node.lineno,
                    name,
                    "absl.app.run(main)" if node.args else "absl.app.run",
                    "tf.app was absl's, and is gone from TF 2",
                )
            )
            for arg in [*node.args, *node.keywords]:
                self.visit(arg)
            return
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_dimension_value(node):
            parent = self.parents[-1]
            call = ast.Call(
                func=_name_node(self._spelled("tf.compat.v1.dimension_value"), node),
                args=[node.value],
                keywords=[],
            )
            ast.copy_location(call, node)
            self.replace(parent, node, call)
            self.changes.append(
                Change(
                    node.lineno,
                    "<dim>.value",
                    "tf.compat.v1.dimension_value(<dim>)",
                    "a TF 2 TensorShape dimension is an int (or None), not a Dimension: "
                    "dimension_value reads both",
                )
            )
            self.visit(node.value)
            return
        name = self._canonical(dotted(node))
        rule = lookup(name) if name else None
        if rule is None:
            self.generic_visit(node)
            return
        new = self._spelled(rule.new)
        if new is None:
            self.generic_visit(node)
            return
        self.replace(self.parents[-1], node, _name_node(new, node))
        self.changes.append(Change(node.lineno, rule.old, rule.new, rule.why))

    def _canonical(self, name: str | None) -> str | None:
        """``tf.…`` as written under ``import tensorflow as tf``, whatever the module's alias."""
        if not name:
            return None
        head, _, rest = name.partition(".")
        if head != self.tf_alias:
            return None
        return f"{self.root}.{rest}" if rest else self.root

    def _spelled(self, name: str) -> str | None:
        """``name`` (canonical) spelled through the module's alias, or None when it cannot be."""
        if not name.startswith("tf."):
            return name
        if name == self.root or name.startswith(self.root + "."):
            return self.tf_alias + name[len(self.root) :]
        return None


#: What a module's alias can stand for, and the canonical prefix its names are read under.
ROOTS: Final = {"tensorflow": "tf", "tensorflow.compat.v1": "tf.compat.v1"}


def tensorflow_alias(tree: ast.Module) -> tuple[str, str] | None:
    """``(alias, canonical root)`` for the module's top-level ``import tensorflow as tf``
    (``("tf", "tf")``) or ``import tensorflow.compat.v1 as tf`` (``("tf", "tf.compat.v1")``)."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ROOTS and (alias.asname or alias.name == "tensorflow"):
                    return alias.asname or "tensorflow", ROOTS[alias.name]
    return None


def apply(tree: ast.Module, replace) -> list[Change]:
    """Rewrites ``tree`` (a ``pasta`` tree) in place; ``replace(parent, old, new)`` swaps a child."""
    found = tensorflow_alias(tree)
    if found is None:
        return []
    rewriter = _Rewriter(*found, has_main(tree), replace)
    rewriter.visit(tree)
    return rewriter.changes


#: The imports a rewritten module needs, by the top-level name its new spellings use.
IMPORTS: Final = {"absl.app": "import absl.app", "absl.flags": "import absl.flags", "tf_slim": "import tf_slim"}


def needed_imports(source: str) -> list[str]:
    """The import lines of :data:`IMPORTS` that ``source`` uses and does not import yet."""
    if not any(module + "." in source for module in IMPORTS):
        return []
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.asname is None)
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = dotted(node)
            if name:
                for module in IMPORTS:
                    if name == module or name.startswith(module + "."):
                        used.add(module)
    return [IMPORTS[m] for m in sorted(used) if m not in imported]
