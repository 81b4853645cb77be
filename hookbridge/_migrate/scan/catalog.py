"""What the scan knows about TF1 and Keras names: bridge status, entry points, bridge tensors.

The status of a built-in hook or callback comes from the conformance results the test suite
writes on each stack into the package data ``hookbridge/data/conformance/*.json``: one copy, which
the suite compares its runs with and ``HOOKBRIDGE_UPDATE_RESULTS=1`` rewrites. Only what those
results cannot say (hooks the suite cannot run at all, removed TF modules) is written here, with
the reason.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Final, NamedTuple

from hookbridge._migrate.scan import findings as f

RESULTS_PACKAGE_DIR: Final = "data/conformance"

#: Top-level modules whose names are TensorFlow's or Keras's.
TF_ROOTS: Final = frozenset({"tensorflow", "keras", "tf_keras", "tensorflow_estimator"})

#: Built-in hooks the bridge cannot run, and why (beyond what the results record).
UNSUPPORTED_HOOKS: Final = {
    "InMemoryEvaluatorHook": (
        "it evaluates an Estimator in-process: there is no Estimator under Keras fit; "
        "pass validation_data to fit (or a HookCallback to model.evaluate) instead"
    ),
    **{
        name: (
            "it reads the event files an Estimator's evaluate() writes (estimator.eval_dir()) "
            "and needs the Estimator; in fit use keras.callbacks.EarlyStopping on a val_ metric"
        )
        for name in (
            "make_early_stopping_hook",
            "stop_if_higher_hook",
            "stop_if_lower_hook",
            "stop_if_no_increase_hook",
            "stop_if_no_decrease_hook",
        )
    },
    **{
        name: (
            "tfdbg v1 hooks wrap the session of the model's graph; under the bridge they would "
            "debug only the bridge's graph; use tf.debugging.experimental.enable_dump_debug_info"
        )
        for name in ("LocalCLIDebugHook", "DumpingDebugHook", "TensorBoardDebugHook")
    },
}
V1_TENSORBOARD_REASON: Final = (
    "the graph-mode (v1) TensorBoard class needs a Keras model: CallbackHook refuses it; use "
    "tf.keras.callbacks.TensorBoard built outside `with graph.as_default()`"
)
CONTRIB_REASON: Final = (
    "tf.contrib was removed in TensorFlow 2.0: it does not run natively either; replace it with "
    "its TF 2 counterpart first"
)

#: Hooks hookbridge ships (``hookbridge.hooks``), written for the bridge and tested under it.
HOOKBRIDGE_HOOKS: Final = frozenset({"ProgressBarHook", "HistorySaverHook"})

#: Constructors that are TF1 training entry points, with what the migration does with them.
ENTRY_POINTS: Final = {
    "MonitoredSession": "a TF1 training loop: in Keras, model.fit with HookCallback(hooks)",
    "SingularMonitoredSession": "a TF1 training loop: in Keras, model.fit with HookCallback(hooks)",
    "MonitoredTrainingSession": (
        "a TF1 training loop; it also adds StepCounterHook, SummarySaverHook and "
        "CheckpointSaverHook from its arguments: in fit, pass those hooks explicitly"
    ),
    "Estimator": (
        "an Estimator: model_fn becomes a Keras model; Estimator.train also added NanTensorHook, "
        "LoggingTensorHook, StepCounterHook, SummarySaverHook and CheckpointSaverHook"
    ),
    "EstimatorSpec": "model_fn's hooks: training hooks go to fit, evaluation hooks to evaluate",
    "TrainSpec": "train_and_evaluate's training hooks: they go to fit",
    "EvalSpec": "train_and_evaluate's evaluation hooks: they go to evaluate",
    "train_and_evaluate": "fit(validation_data=...) with HookCallback for the training hooks",
    "model_to_estimator": "a Keras model run as an Estimator: run it with fit instead",
    "HookCallback": "hookbridge: these hooks already run inside Keras",
    "CallbackHook": "hookbridge: these Keras callbacks already run inside the TF1 loop",
    "estimator_hooks": (
        "hookbridge: the hooks Estimator.train added unasked (CheckpointSaverHook, "
        "SummarySaverHook, StepCounterHook, LoggingTensorHook, NanTensorHook), built for "
        "HookCallback, with these hooks where Estimator placed them"
    ),
}
#: Canned Estimators: entry points too.
CANNED_ESTIMATORS: Final = frozenset(
    {
        "BaselineClassifier",
        "BaselineEstimator",
        "BaselineRegressor",
        "BoostedTreesClassifier",
        "BoostedTreesRegressor",
        "DNNClassifier",
        "DNNEstimator",
        "DNNLinearCombinedClassifier",
        "DNNLinearCombinedEstimator",
        "DNNLinearCombinedRegressor",
        "DNNRegressor",
        "LinearClassifier",
        "LinearEstimator",
        "LinearRegressor",
    }
)

#: Keyword arguments holding hooks, per entry point; positional index where the API has one.
HOOK_ARGUMENTS: Final = {
    "MonitoredSession": {"hooks": 1},
    "SingularMonitoredSession": {"hooks": 0},
    "MonitoredTrainingSession": {"hooks": None, "chief_only_hooks": None},
    "EstimatorSpec": {
        "training_hooks": None,
        "training_chief_hooks": None,
        "evaluation_hooks": None,
        "prediction_hooks": None,
    },
    "TrainSpec": {"hooks": 2},
    "EvalSpec": {"hooks": 3},
    "HookCallback": {"hooks": 0},
    "estimator_hooks": {"hooks": None},
    "train": {"hooks": 1},
    "evaluate": {"hooks": 2},
    "predict": {"hooks": 2},
}
CALLBACK_ARGUMENTS: Final = {"CallbackHook": {"callbacks": 0}}

#: Methods whose string argument names a tensor, an op or a collection of the default graph.
BY_NAME_METHODS: Final = frozenset(
    {"get_tensor_by_name", "get_operation_by_name", "as_graph_element"}
)
COLLECTION_METHODS: Final = frozenset({"get_collection", "get_collection_ref"})


class Bridged(NamedTuple):
    """A name's bridge status: status, detail and action."""

    status: str
    detail: str
    action: str = ""


@functools.lru_cache(maxsize=1)
def load_results() -> tuple[dict, ...]:
    """The conformance results shipped with the package, one dict per stack, sorted by stack."""
    folder = resources.files("hookbridge").joinpath(RESULTS_PACKAGE_DIR)
    loaded = [
        json.loads(entry.read_text()) for entry in folder.iterdir() if entry.name.endswith(".json")
    ]
    return tuple(sorted(loaded, key=lambda r: r["stack"]))


def known_names(kind: str) -> frozenset[str]:
    """Names of ``kind`` (``hook`` / ``callback``) that any stack's results mention."""
    return frozenset(
        v["name"] for r in load_results() for v in r["results"].values() if v["kind"] == kind
    )


def builtin_status(kind: str, name: str) -> Bridged:
    """The bridge status of a built-in hook or Keras callback, from the results of every stack.

    Args:
        kind: ``"hook"`` (under HookCallback in fit) or ``"callback"`` (under CallbackHook).
        name: the class (or function) name.
    """
    if kind == "hook" and name in UNSUPPORTED_HOOKS:
        return Bridged(f.UNSUPPORTED, UNSUPPORTED_HOOKS[name])
    if kind == "hook" and name in HOOKBRIDGE_HOOKS:
        return Bridged(f.CONFORMS, "hookbridge's own hook, written for HookCallback")
    entries = {
        r["stack"]: r["results"][f"{kind}:{name}"]
        for r in load_results()
        if f"{kind}:{name}" in r["results"]
    }
    where = "in fit (HookCallback)" if kind == "hook" else "in MonitoredSession (CallbackHook)"
    refused = [e["note"] for e in entries.values() if e["status"] == "refused"]
    if refused:
        return Bridged(f.UNSUPPORTED, refused[0])
    passed = [stack for stack, e in entries.items() if e["status"] == "passed"]
    others = {stack: e for stack, e in entries.items() if e["status"] != "passed"}
    if passed and not others:
        return Bridged(f.CONFORMS, f"conforms {where} on {', '.join(passed)}")
    if not entries:
        detail = "not in the conformance results of any stack"
    else:
        detail = "; ".join(
            f"{e['status']} on {stack}" + (f" ({e['note']})" if e["note"] else "")
            for stack, e in others.items()
        )
        if passed:
            detail = f"conforms {where} on {', '.join(passed)}; {detail}"
    return Bridged(f.UNVERIFIED, detail, "")


# ----------------------------------------------------------------------- the bridge's graph
#: Tensors and collections HookCallback's graph always has (hookbridge/_hook_callback/graph.py).
BRIDGE_TENSORS: Final = {
    "loss": "the bridge's batch loss (Keras's loss of the step just run)",
    "global_step": "the bridge's global step (model.optimizer.iterations)",
}
BRIDGE_SCOPES: Final = {
    "running_mean/": "Keras's running mean of a log value over the epoch",
    "model/": "a mirror of a Keras weight (model/NNN/<name>)",
}
BRIDGE_COLLECTIONS: Final = {
    "losses": "holds the bridge's loss",
    "global_step": "holds the bridge's global step",
    "variables": "the global step and the weight mirrors",
    "trainable_variables": "the weight mirrors",
    "summaries": "the summaries your hooks callable builds on the bridge's graph",
}
#: tf.compat.v1.GraphKeys attributes, by collection name.
GRAPH_KEYS: Final = {
    "LOSSES": "losses",
    "GLOBAL_STEP": "global_step",
    "GLOBAL_VARIABLES": "variables",
    "TRAINABLE_VARIABLES": "trainable_variables",
    "SUMMARIES": "summaries",
    "UPDATE_OPS": "update_ops",
    "REGULARIZATION_LOSSES": "regularization_losses",
    "MODEL_VARIABLES": "model_variables",
    "LOCAL_VARIABLES": "local_variables",
    "METRIC_VARIABLES": "metric_variables",
    "TRAIN_OP": "train_op",
    "SAVERS": "savers",
    "READY_OP": "ready_op",
    "INIT_OP": "init_op",
}


def tensor_status(name: str) -> Bridged:
    """Whether the bridge's graph has the tensor or op ``name``, and how to expose it if not."""
    base = name.removeprefix("^")
    base = base.rsplit(":", 1)[0] if ":" in base else base
    if base in BRIDGE_TENSORS:
        return Bridged(f.CONFORMS, BRIDGE_TENSORS[base])
    for scope, what in BRIDGE_SCOPES.items():
        if base.startswith(scope):
            return Bridged(f.CONFORMS, what)
    if base == "outputs":
        return Bridged(f.CONFORMS, "the batch's predictions (under predict only)")
    if "/" not in base:
        return Bridged(
            f.NEEDS_TENSOR,
            f"the bridge's graph has '{base}:0' only if Keras logs a value named '{base}'",
            f"compile the Keras model with a metric named '{base}', or pass "
            f"HookCallback(log_names=['{base}']) for a log key the bridge does not infer",
        )
    key = base.strip("/").replace("/", "_")
    return Bridged(
        f.NEEDS_TENSOR,
        f"'{base}' is an op of the TF1 model graph; the bridge's graph holds no model ops "
        "(only loss, the global step, one tensor per Keras log value, weight mirrors)",
        f"compute it in Keras as a scalar metric (or log value) named e.g. '{key}' and read "
        f"'{key}:0' in the hook",
    )


def collection_status(name: str) -> Bridged:
    """Whether the bridge's graph fills the collection ``name``."""
    if name in BRIDGE_COLLECTIONS:
        return Bridged(f.CONFORMS, BRIDGE_COLLECTIONS[name])
    return Bridged(
        f.NEEDS_TENSOR,
        f"the bridge's graph fills only the {', '.join(sorted(BRIDGE_COLLECTIONS))} "
        f"collections, not '{name}'",
        "read the value from a Keras log tensor instead (a metric), or add to the collection "
        "in the hooks callable, which runs with the bridge's graph as the default graph",
    )
