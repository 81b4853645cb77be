"""The rest of the ``EstimatorSpec`` under ``hookbridge.model_fn_model``, against the Estimator.

The r1 MNIST subject (``tests/fixtures/model_fns/mnist.py``) makes ``tf.compat.v1.metrics.
accuracy`` in TRAIN mode (LOCAL variables ``accuracy/total``, ``accuracy/count``) and returns a
``LoggingTensorHook`` on ``learning_rate``, ``cross_entropy`` and ``train_accuracy`` (the
streaming accuracy) as ``training_hooks``. Natively the local variables are in no checkpoint,
start from zero at each ``Estimator.train`` call (``local_init_op``) and accumulate over it; under
``fit`` the hook runs through ``HookCallback`` and must log the same values. On every stack the
bridged runs are held to ``mnist/train_log.json`` and ``mnist/evaluate.json``, written by the
native runs (``python tests/test_model_fn_spec.py`` on tf215); the deep profile reruns those on
tf215 against the files.
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixture_modules import assert_json_as_recorded

import hookbridge
from hookbridge._hook_callback.graph import tf1_names
from hookbridge._migrate.model_fn import compat

HERE = Path(__file__).resolve().parent / "fixtures" / "model_fns"
FIXTURE = json.loads((HERE / "fixtures.json").read_text())["subjects"]["mnist"]
LOG_FILE = HERE / "mnist" / "train_log.json"
EVAL_FILE = HERE / "mnist" / "evaluate.json"
#: evaluate over this many batches of the fixture's predict rows (the last one partial).
EVAL_ROWS = 56
#: Two train() calls (two fit calls) of this many steps each, on the continuation rows.
CALLS, STEPS = 2, 6


def _mnist():
    if str(HERE.parent.parent) not in sys.path:  # run as a script
        sys.path.insert(0, str(HERE.parent.parent))
    from fixtures.model_fns import mnist

    return mnist


def _rows(call: int):
    mnist = _mnist()
    features, labels = mnist.rows(FIXTURE["seeds"]["continue"], CALLS * STEPS * mnist.BATCH)
    rows = slice(call * STEPS * mnist.BATCH, (call + 1) * STEPS * mnist.BATCH)
    return features[rows], labels[rows]


def _dataset(call: int):
    return tf.data.Dataset.from_tensor_slices(_rows(call)).batch(
        _mnist().BATCH, drop_remainder=True
    )


def native_log(tmp: Path) -> list[dict[str, float]]:
    """What the LoggingTensorHook logs natively: the Estimator continuing from the fixture's
    checkpoint, ``CALLS`` train() calls of ``STEPS`` steps, one thread (deterministic)."""
    mnist = _mnist()
    model_dir = tmp / "native"
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1
    )
    estimator = mnist.estimator(model_dir, {"session_config": config}, dict(mnist.PARAMS))
    del mnist.LOG[:]
    for call in range(CALLS):
        estimator.train(lambda call=call: _dataset(call), steps=STEPS)
    log = list(mnist.LOG)
    del mnist.LOG[:]
    return log


def _built():
    """The MNIST subject's ``model_fn_model`` with its own params, as the Estimator ran it."""
    mnist = _mnist()
    features, labels = _rows(0)
    return hookbridge.model_fn_model(
        mnist.model_fn, params=dict(mnist.PARAMS), features=features, labels=labels
    )


@pytest.fixture(scope="module")
def restored():
    """``restored()``: the MNIST subject's model restored from the fixture's checkpoint. Built
    once in this module (the build traces the model_fn in each mode) and restored on every call:
    weights, slots and step are the checkpoint's; the local variables (the streaming accuracy)
    restart with each fit/evaluate call, as these tests hold."""
    models = []

    def restore():
        if not models:
            models.append(_built())
        hookbridge.restore_checkpoint(models[0], str(HERE / "mnist" / "model_dir"))
        return models[0]

    yield restore
    models.clear()


def bridged_log(model) -> tuple[list[dict[str, float]], object]:
    """The same under ``fit``: ``model`` (``model_fn_model`` restored from the fixture), ``CALLS``
    fit calls."""
    mnist = _mnist()
    del mnist.LOG[:]
    for call in range(CALLS):
        model.fit(_dataset(call), epochs=1, verbose=0)
    log = list(mnist.LOG)
    del mnist.LOG[:]
    return log, model


def _check(log, reference) -> None:
    assert len(log) == len(reference) == CALLS * STEPS
    for key in ("learning_rate", "cross_entropy", "train_accuracy"):
        got = np.array([entry[key] for entry in log])
        want = np.array([entry[key] for entry in reference])
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=0, err_msg=key)


#: The native runs beside the recorded files (``train_log.json``, ``evaluate.json``): on TF 2.15
#: the deep profile's (two Estimator train() calls, two evaluate() calls: ~25 s of the tf215
#: file's CI time); CI holds the bridged runs to the files, which the script below writes.
_NATIVE_ONLY = pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")


@pytest.mark.deep
@_NATIVE_ONLY
def test_the_recorded_training_log_is_the_estimators(tmp_path):
    """The native run writes train_log.json, within float32 roundings (another CPU's)."""
    assert_json_as_recorded(native_log(tmp_path), json.loads(LOG_FILE.read_text()))


def test_the_spec_training_hook_logs_the_streaming_accuracy_as_the_estimator_did(restored):
    reference = json.loads(LOG_FILE.read_text())
    log, model = bridged_log(restored())
    _check(log, reference)
    # The accuracy restarts with each train() call, as the Estimator's local_init_op made it.
    accuracy = [entry["train_accuracy"] for entry in reference]
    assert accuracy[STEPS] != accuracy[STEPS - 1]
    # The local variables are model state, not weights: no checkpoint holds them.
    names = set(tf1_names(model).values())
    assert not any(name.startswith("accuracy/") for name in names), sorted(names)
    assert "dense/kernel" in names


def test_a_model_fn_run_twice_keeps_one_set_of_local_variables_per_mode():
    mnist = _mnist()
    features, labels = _rows(0)
    # Every batch counted, where the Estimator counted only the batches a hook fetched on: said.
    with pytest.warns(UserWarning, match=r"updates local variables \['accuracy/count', 'accur"):
        model = hookbridge.model_fn_model(
            mnist.model_fn, params={**mnist.PARAMS, "log": False}, features=features, labels=labels
        )
    store = model._mfn_store
    count, total = sorted(store.locals("train"), key=lambda v: v.name)
    assert (count.name, total.name) == ("accuracy/count:0", "accuracy/total:0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(_dataset(0), epochs=1, verbose=0)
        assert float(count.numpy()) == STEPS * mnist.BATCH  # every batch counted (limits.md)
        model.fit(_dataset(1), epochs=1, verbose=0)
    assert not [w for w in caught if "local variables" in str(w.message)], "said once a model"
    assert float(count.numpy()) == STEPS * mnist.BATCH, "fit did not start from local_init_op"
    assert len(store.locals("train")) == 2


def _tpu_model_fn(features, labels, mode, params):
    """The MNIST model_fn returning a TPUEstimatorSpec whose EVAL metrics are eval_metrics =
    (metric_fn, tensors), as TPUEstimator code writes them (use_tpu=False semantics)."""
    from hookbridge.estimator_compat import TPUEstimatorSpec

    mnist = _mnist()
    spec = mnist.model_fn(features, labels, mode, {**params, "log": False})
    if mode != "eval":
        return spec

    def metric_fn(labels, logits):
        predictions = tf.argmax(logits, axis=1)
        return {"accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=predictions)}

    (logits,) = [
        op.outputs[0]
        for op in tf.compat.v1.get_default_graph().get_operations()
        if op.name == "dense_1/BiasAdd"
    ]
    return TPUEstimatorSpec(mode, loss=spec.loss, eval_metrics=(metric_fn, [labels, logits]))


def test_a_tpu_estimator_specs_eval_metrics_evaluate_as_the_estimators_metrics():
    reference = json.loads(EVAL_FILE.read_text())["all"]
    features, labels = _rows(0)
    mnist = _mnist()
    model = hookbridge.model_fn_model(
        _tpu_model_fn, params=dict(mnist.PARAMS), features=features, labels=labels
    )
    hookbridge.restore_checkpoint(model, str(HERE / "mnist" / "model_dir"))
    result = model.evaluate(_eval_dataset(), verbose=0, return_dict=True)
    assert result["accuracy"] == reference["accuracy"]
    np.testing.assert_allclose(result["loss"], reference["loss"], rtol=1e-5)


def _scaffold_model_fn(scaffold_args=dict):
    from hookbridge.estimator_compat import EstimatorSpec, ModeKeys

    def model_fn(features, labels, mode):
        v1 = tf.compat.v1
        kernel = v1.get_variable("kernel", [3, 1], initializer=v1.zeros_initializer())
        logits = tf.matmul(features, kernel)
        scaffold = v1.train.Scaffold(**scaffold_args())  # after the variables (a Saver's)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=logits, scaffold=scaffold)
        loss = tf.reduce_mean(tf.square(logits - labels))
        step = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, v1.train.get_or_create_global_step()
        )
        return EstimatorSpec(mode, loss=loss, train_op=step, scaffold=scaffold)

    return model_fn


@pytest.mark.parametrize(
    "field", ["init_fn", "saver", "ready_op", "init_op", "local_init_op", "summary_op"]
)
def test_a_scaffold_the_estimator_ran_on_its_session_is_refused_naming_the_field(field):
    def value():
        if field == "init_fn":
            return lambda scaffold, session: None
        if field == "saver":
            return tf.compat.v1.train.Saver(tf.compat.v1.global_variables())
        return tf.constant([], tf.string) if field == "ready_op" else tf.no_op()

    features, labels = np.zeros((2, 3), np.float32), np.zeros((2, 1), np.float32)
    model_fn = _scaffold_model_fn(lambda: {field: value()})
    with pytest.raises(ValueError, match=f"Scaffold with {field}.*restore_checkpoint"):
        hookbridge.model_fn_model(model_fn, features=features, labels=labels)
    # The default Scaffold (what every spec without one gets) runs.
    model = hookbridge.model_fn_model(_scaffold_model_fn(), features=features, labels=labels)
    assert model(features).shape == (2, 1)


def _eval_dataset(rows: int = EVAL_ROWS):
    mnist = _mnist()
    features, labels = mnist.rows(FIXTURE["seeds"]["predict"], EVAL_ROWS)
    data = (features[:rows], labels[:rows])
    return tf.data.Dataset.from_tensor_slices(data).batch(mnist.BATCH)


#: Two evaluate calls: every row, then the first batch alone (a metric carried over from the
#: first call would show).
EVAL_CALLS = {"all": EVAL_ROWS, "first_batch": 16}


def native_evaluate(tmp: Path) -> dict[str, dict[str, float]]:
    """``Estimator.evaluate`` on the fixture's checkpoint: streaming accuracy, mean loss."""
    mnist = _mnist()
    model_dir = tmp / "native_eval"  # evaluate writes an eval/ directory there
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)
    estimator = mnist.estimator(model_dir, {}, dict(mnist.PARAMS))
    results = {}
    for call, rows in EVAL_CALLS.items():
        result = estimator.evaluate(lambda rows=rows: _eval_dataset(rows))
        results[call] = {key: float(value) for key, value in result.items()}
    return results


@pytest.mark.deep
@_NATIVE_ONLY
def test_the_recorded_evaluation_is_the_estimators(tmp_path):
    """The native run writes evaluate.json, within float32 roundings (another CPU's)."""
    assert_json_as_recorded(native_evaluate(tmp_path), json.loads(EVAL_FILE.read_text()))


def test_evaluate_gives_the_estimators_eval_metric_ops_and_mean_loss(restored):
    reference = json.loads(EVAL_FILE.read_text())
    model = restored()
    assert reference["all"]["accuracy"] != reference["first_batch"]["accuracy"]
    for call, rows in EVAL_CALLS.items():  # each evaluate starts its metrics anew
        result = model.evaluate(_eval_dataset(rows), verbose=0, return_dict=True)
        assert sorted(result) == ["accuracy", "loss"], call
        want = reference[call]
        assert result["accuracy"] == want["accuracy"], call
        np.testing.assert_allclose(result["loss"], want["loss"], rtol=1e-5, err_msg=call)
        assert int(model.optimizer.iterations.numpy()) == want["global_step"]


if __name__ == "__main__":  # writes the native fixtures (tf215: the Estimator)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        LOG_FILE.write_text(json.dumps(native_log(Path(tmp)), indent=0) + "\n")
        EVAL_FILE.write_text(json.dumps(native_evaluate(Path(tmp)), indent=0) + "\n")
    print(f"wrote {LOG_FILE}, {EVAL_FILE}")


def test_a_model_fn_without_local_variables_trains_without_the_streaming_warning():
    def model_fn(features, labels, mode):
        from hookbridge.estimator_compat import EstimatorSpec

        logits = _dense(features)
        if mode == "infer":
            return EstimatorSpec(mode, predictions=logits)
        loss = tf.reduce_mean(tf.square(logits - labels))
        step = tf.compat.v1.train.get_or_create_global_step()
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
        return EstimatorSpec(mode, predictions=logits, loss=loss, train_op=train_op)

    x = np.ones((4, 2), "float32")
    y = np.ones((4, 1), "float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = hookbridge.model_fn_model(model_fn, features=x, labels=y)
        model.fit(tf.data.Dataset.from_tensors((x, y)), epochs=1, verbose=0)
    assert not [w for w in caught if "local variables" in str(w.message)]


def _dense(x):
    kernel = tf.compat.v1.get_variable("kernel", [2, 1], initializer=tf.zeros_initializer())
    return tf.matmul(x, kernel)


def test_a_prediction_hook_holding_a_second_output_is_refused_by_predict_not_by_the_build():
    # A batch tensor (logits) is handed whole (test_model_fn_predict_hooks.py); an op's second
    # output has no name of its own for the hooks' graph.
    from hookbridge.estimator_compat import EstimatorSpec

    seen = []

    class Recording(tf.compat.v1.train.SessionRunHook):
        def __init__(self, indices):
            self.indices = indices  # TopKV2:1

        def begin(self):
            seen.append("begin")

    def model_fn(features, mode):
        logits = tf.identity(_dense(features), name="logits")
        indices = tf.math.top_k(tf.reshape(logits, [-1]), 2).indices
        return EstimatorSpec(mode, predictions=logits, prediction_hooks=[Recording(indices)])

    x = np.ones((4, 2), "float32")
    model = hookbridge.model_fn_model(model_fn, features=x)  # model(x) and fit need no hook
    np.testing.assert_array_equal(model(x), np.zeros((4, 1)))
    with pytest.raises(ValueError, match=r"infer hook Recording names tensor 'TopKV2:1'.*predict"):
        model.predict(x, verbose=0)
    assert seen == []  # refused before any hook ran, never half-run


def test_several_hook_callbacks_beside_the_spec_hooks_are_said_to_be_a_second_session(restored):
    # With ONE HookCallback the spec's hooks join it (tests/test_model_fn_train_hooks.py).
    mnist = _mnist()
    model = restored()
    mine = hookbridge.HookCallback([tf.compat.v1.train.StopAtStepHook(num_steps=2)])
    other = hookbridge.HookCallback([])
    del mnist.LOG[:]
    with pytest.warns(UserWarning, match="2 HookCallbacks, so the spec's training hooks run"):
        model.fit(_dataset(0), epochs=1, verbose=0, callbacks=[mine, other])
    assert len(mnist.LOG) == 2  # the caller's StopAtStepHook stopped both after two steps
    del mnist.LOG[:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mine = hookbridge.HookCallback([tf.compat.v1.train.StopAtStepHook(num_steps=2)])
        model.fit(_dataset(0), epochs=1, verbose=0, callbacks=[mine])
    assert not [w for w in caught if "HookCallbacks" in str(w.message)]
    assert len(mnist.LOG) == 2  # one session: the spec's hook ran in the caller's callback
    del mnist.LOG[:]
