"""What the scan knows about TF1 and Keras names: bridge status, entry points, bridge tensors.

The status of a built-in hook or callback comes from the conformance results the test suite
writes on each stack into the package data ``hookbridge/data/conformance/*.json``: one copy, which
the suite compares its runs with and ``HOOKBRIDGE_UPDATE_RESULTS=1`` rewrites: a hook or callback
without a measured result is ``unverified``, never ``conforms``. What is written here is about
names, not behaviour: which modules TensorFlow removed, which names are entry points.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Final, NamedTuple

from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.twins import arguments

RESULTS_PACKAGE_DIR: Final = "data/conformance"

#: Top-level modules whose names are TensorFlow's or Keras's.
TF_ROOTS: Final = frozenset({"tensorflow", "keras", "tf_keras", "tensorflow_estimator"})

#: TF and tensorflow-estimator hooks the scan recognises by name besides those the conformance
#: results list. Names only: their status comes from the results (none: ``unverified``).
KNOWN_HOOKS: Final = frozenset(
    {
        "InMemoryEvaluatorHook",
        "make_early_stopping_hook",
        "stop_if_higher_hook",
        "stop_if_lower_hook",
        "stop_if_no_increase_hook",
        "stop_if_no_decrease_hook",
        "LocalCLIDebugHook",
        "DumpingDebugHook",
        "TensorBoardDebugHook",
    }
)
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
    "TPUEstimator": (
        "a TPUEstimator: model_fn becomes a Keras model trained with fit (under TPUStrategy on "
        "TPUs); TPUEstimator.train also added the Estimator's hooks (see Estimator)"
    ),
    "TPUEstimatorSpec": (
        "model_fn's hooks on TPU: training hooks go to fit, evaluation hooks to evaluate, "
        "prediction hooks to predict"
    ),
    "RunConfig": (
        "a TPU RunConfig: iterations_per_loop becomes fit(steps_per_execution=...); its "
        "checkpoint and summary settings go to hookbridge.estimator_hooks"
    ),
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
#: What ``fit`` cannot hold: one train step per batch is all it runs. Code with several train
#: ops (a GAN's alternating steps, tensorflow-gan's ``RunTrainOpsHook``) moves to a custom
#: training loop, where ``hookbridge.CallbackLoop`` runs its hooks and callbacks.
CUSTOM_LOOP_REASON: Final = (
    "fit runs one train step per batch; several train ops (alternating steps, several "
    "optimizers) move to a custom training loop (tf.GradientTape in a tf.function), where "
    "hookbridge.CallbackLoop runs the hooks (HookCallback) and Keras callbacks as fit would"
)
CUSTOM_LOOP_ACTION: Final = "hookbridge.CallbackLoop (docs/custom-loops.md)"
#: Hooks and helpers that run train ops themselves (tensorflow-gan, tf.contrib.gan), by name.
CUSTOM_LOOP_NAMES: Final = frozenset(
    {"RunTrainOpsHook", "get_sequential_train_hooks", "get_joint_train_hooks", "gan_train"}
)
#: Calls that make a train op; two or more in one function make a job fit cannot hold.
TRAIN_OP_METHODS: Final = frozenset({"minimize"})

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
    "TPUEstimatorSpec": {
        "training_hooks": None,
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

#: Where hooks passed to an entry point's argument run after the migration.
DESTINATIONS: Final = {
    "training_hooks": "fit",
    "training_chief_hooks": "fit",
    "evaluation_hooks": "evaluate",
    "prediction_hooks": "predict",
    "chief_only_hooks": "fit",
}
DESTINATION_BY_ENTRY: Final = {
    "evaluate": "evaluate",
    "predict": "predict",
    "EvalSpec": "evaluate",
    "HookCallback": "Keras (already under HookCallback)",
    "CallbackHook": "the TF1 loop (CallbackHook)",
}

#: TPU names recognised wherever they come from (tf.contrib.tpu, tf.compat.v1.estimator.tpu,
#: tf.estimator.tpu, tensor2tensor's ``contrib.tpu()``): by name under a ``tpu`` module.
TPU_ENTRIES: Final = frozenset({"TPUEstimator", "TPUEstimatorSpec", "RunConfig"})
#: Estimators whose object's train/evaluate/predict are entry points.
ESTIMATOR_CLASSES: Final = frozenset({"Estimator", "TPUEstimator"})

#: Canned Estimators hookbridge.keras_twin builds (V1 names; its own list).
KERAS_TWINS: Final = frozenset(arguments.SUPPORTED)
CANNED_BY_HAND: Final = (
    "a canned Estimator hookbridge.keras_twin does not build: write its Keras model and map "
    "the Estimator's checkpoint with restore_checkpoint(model, model_dir, 'auto'); its hooks "
    "go to fit"
)
BOOSTED_TREES_REASON: Final = (
    "BoostedTrees Estimators have no Keras twin (gradient-boosted trees are not a Keras "
    "model): the bridge cannot carry them; TensorFlow Decision Forests is their successor"
)

#: Methods whose string argument names a tensor, an op or a collection of the default graph.
BY_NAME_METHODS: Final = frozenset(
    {"get_tensor_by_name", "get_operation_by_name", "as_graph_element"}
)
COLLECTION_METHODS: Final = frozenset({"get_collection", "get_collection_ref"})


#: Every last name of a call the scan may report (a call with keywords is always looked at:
#: hooks=, callbacks=). Names of the conformance results are added in :func:`relevant_names`.
_RELEVANT: Final = (
    set(ENTRY_POINTS)
    | CANNED_ESTIMATORS
    | TPU_ENTRIES
    | KNOWN_HOOKS
    | HOOKBRIDGE_HOOKS
    | BY_NAME_METHODS
    | COLLECTION_METHODS
    | {"train", "evaluate", "predict", "SessionRunArgs", "TensorBoard"}
)


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


@functools.cache
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


def relevant_names() -> frozenset[str]:
    """Last names of the calls the scan looks at: entry points, hooks, callbacks, tensor reads."""
    return frozenset(_RELEVANT | known_names("hook") | known_names("callback"))
