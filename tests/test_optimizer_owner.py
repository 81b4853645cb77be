"""Two optimizers of one kind: each variable's state goes to the optimizer that trains it (TF 2.15
stack: tensorflow-estimator).

A ``DNNLinearCombinedClassifier`` with Adagrad for both parts (issue 31 item 5) keeps two
Adagrad states: V1 ``<var>/Adagrad`` for every variable, V2 ``training/Adagrad/...`` (DNN) and
``training/Adagrad_1/...`` (linear, the graph's second Adagrad). They were routed by kind: V1's
linear accumulators went to the DNN optimizer (losses 1.5 % off from the 2nd step), V2's
``Adagrad_1`` was refused ("compile with keras.optimizers.Adagrad_1"). The round trip of
``estimator_setup.switch_and_back``: the Estimator trains 8 steps, continues natively to 16;
``keras_twin`` continues 8 -> 16 from the same checkpoint, loss by loss; the Estimator continues
from the twin's step-16 checkpoint while the twin goes on in memory.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from estimator_setup import ESTIMATOR_ONLY, dataset_fn, linear_data, run_config, switch_and_back

pytest.importorskip("tensorflow_estimator", reason=ESTIMATOR_ONLY, exc_type=ImportError)

import hookbridge
from hookbridge import _tfcompat

X, SCORE = linear_data(seed=4)
FEATURES = {"b": X[:, :1], "a": X[:, 1:2], "c": X[:, 2:]}
LABELS = (SCORE > 0).astype("int64")
CONFIG = {"save_checkpoints_steps": 4, "save_summary_steps": 100, "log_step_count_steps": 100}


def estimator(v2, model_dir):
    columns = [tf.feature_column.numeric_column(k) for k in ("b", "a", "c")]
    make = (tf.estimator if v2 else tf.compat.v1.estimator).DNNLinearCombinedClassifier
    return make(
        linear_feature_columns=columns[:2],
        dnn_feature_columns=columns,
        dnn_hidden_units=[8, 4],
        linear_optimizer="Adagrad",
        dnn_optimizer="Adagrad",
        config=run_config(model_dir, CONFIG),
    )


@pytest.fixture(scope="module", params=["V1", "V2"])
def runs(request, tmp_path_factory):
    v2 = request.param == "V2"
    twins = []

    def twin(model_dir):
        twins.append(hookbridge.keras_twin(estimator(v2, model_dir)))
        return twins[-1]

    r = switch_and_back(
        tmp_path_factory.mktemp(request.param),
        lambda model_dir: estimator(v2, model_dir),
        dataset_fn(FEATURES, LABELS),
        twin,
        FEATURES,
        LABELS,
        CONFIG,
        rollback=False,  # no test here reads it (test_canned and test_optimizer_state roll back)
    )
    return {**r, "twin": twins[0], "root": r["back_dir"].parent}


def accumulators(reader):
    return {
        n: reader.get_tensor(n)
        for n in reader.get_variable_to_shape_map()
        if n.endswith(("/Adagrad", "/accumulator"))
    }


def test_the_twin_continues_the_two_adagrads_loss_by_loss(runs):
    assert runs["step"] == 8 and runs["restore_warnings"] == []
    assert len(runs["bridged"]) == len(runs["native"]) == 8
    np.testing.assert_allclose(runs["bridged"], runs["native"], rtol=2e-5, atol=1e-7)


def test_the_accumulators_written_back_are_the_estimators(runs):
    """Keras's step-16 checkpoint holds each part's accumulators as the Estimator's own step-16
    checkpoint does; the Estimator continuing from it equals the twin, loss by loss."""
    written = accumulators(tf.train.load_checkpoint(str(runs["root"] / "bridged/model.ckpt-16")))
    native = accumulators(tf.train.load_checkpoint(str(runs["root"] / "native/model.ckpt-16")))
    assert sorted(written) == sorted(native) and any("linear" in n for n in native)
    for name in native:
        np.testing.assert_allclose(written[name], native[name], rtol=2e-5, err_msg=name)
    np.testing.assert_allclose(runs["back"], runs["keras"], rtol=2e-5, atol=1e-7)


def test_each_part_of_the_twin_keeps_its_own_accumulators(runs):
    """At step 24 the twin's two optimizers hold what the Estimator continuing from Keras's
    checkpoint holds: the linear part's in ``extra_optimizers[0]``, the DNN's in ``optimizer``."""
    twin = runs["twin"]
    reader = tf.train.load_checkpoint(str(runs["back_dir"]))
    assert int(reader.get_tensor("global_step")) == 24
    from hookbridge._hook_callback.graph import tf1_names
    from hookbridge._migrate.optimizer_state import classify

    # the twin's weights by the Estimator's names they answer to (keras_twin declares them)
    by_weight = {name: twin.weights[i] for i, name in tf1_names(twin).items()}
    names = list(reader.get_variable_to_shape_map())
    var_of = {s.name: s.var for s in classify(names, set(names)).slots}
    dnn = [n for n in accumulators(reader) if "/dnn/" in f"/{n}"]
    linear_bias = next(n for n in accumulators(reader) if "bias_weights" in n)
    assert dnn
    for name in dnn:
        weight = by_weight[var_of[name]]
        slot = _tfcompat.keras_optimizer_slot(twin.optimizer, weight, "accumulator")
        np.testing.assert_allclose(slot.numpy(), reader.get_tensor(name), rtol=2e-5, err_msg=name)
        assert _tfcompat.keras_optimizer_owns(twin.extra_optimizers[0], weight) is False
    bias = by_weight[var_of[linear_bias]]
    slot = _tfcompat.keras_optimizer_slot(twin.extra_optimizers[0], bias, "accumulator")
    np.testing.assert_allclose(slot.numpy(), reader.get_tensor(linear_bias), rtol=2e-5)
    assert _tfcompat.keras_optimizer_owns(twin.optimizer, bias) is False
