"""The twin's ``train_function`` called flat trains exactly as Keras's own call.

``hookbridge._keras_call`` runs Keras's traced ``train_function`` graph without ``tf.function``'s
per-call dispatch (``benchmarks/twin_step.md``: the dispatch is most of what plain ``fit`` adds
to the census twin's step). Here, on every stack, the census twin restored from the
Estimator's step-300 ``model_dir`` is trained twice side by side, once called flat (the
default) and once with Keras's own ``train_function`` (``flat_train_function = False``), on the
same scenario: two epochs over a dataset of unknown length with a ragged last batch (the end
of the data found by the flat call: ``OutOfRangeError`` on Keras 2, an empty ``Optional`` on
Keras 3), a second ``fit`` under ``HookCallback`` with ``estimator_hooks`` writing a
checkpoint, ``evaluate`` and ``predict`` (not touched by the lever), then 4 steps a call
(``compile(steps_per_execution=4)``, a ragged last call). Every loss, the checkpoint (read back
with ``tf.train.load_checkpoint``), every weight, the evaluation and the predictions are equal
bit for bit, and the flat call did run. The flat run once more on TensorFlow's single-threaded
executor (``tf.experimental.function_executor_type``, every op in the calling thread: how
``benchmarks/twin_step.py`` runs the twin like the Estimator's caller-thread session) trains
bit for bit the same too. Small native Keras models check the fallbacks (a new
input structure retraces through Keras, a ``MirroredStrategy``, the off switch).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixtures.census_twin import columns, data

import hookbridge
from hookbridge import _keras_call

pytestmark = pytest.mark.filterwarnings("ignore:Your input ran out of data")  # the end, found
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "census_twin" / "model_dir"
ROWS = 6 * data.BATCH + 7  # 7 batches, the last of 7 rows


class BatchLosses(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.losses: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


def census_batches(seed: int, rows: int, unknown_length: bool = False) -> tf.data.Dataset:
    features, labels = data.rows(seed, rows)
    batches = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)
    return batches.filter(lambda x, y: True) if unknown_length else batches


def train(twin, model_dir: Path, flat: bool) -> dict:
    """The run of the module docstring, plain ``fit`` (one step a call), from step 300, under
    the executor the caller set (``tf.experimental.function_executor_type``)."""
    assert hookbridge.restore_checkpoint(twin, model_dir, "auto") == 300
    twin.flat_train_function = flat
    run: dict = {"losses": BatchLosses()}
    history = twin.fit(
        census_batches(data.CONTINUE_SEED, ROWS, unknown_length=True),
        epochs=2,
        shuffle=False,
        verbose=0,
        callbacks=[run["losses"]],
    )
    run["epoch_losses"] = history.history["loss"]
    hooks = lambda: hookbridge.estimator_hooks(  # noqa: E731
        model_dir,
        model=twin,
        save_checkpoints_steps=1000,
        save_summary_steps=0,
        log_step_count_steps=None,
        backup=None,
    )
    twin.fit(
        census_batches(data.PREDICT_SEED, ROWS),
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[hookbridge.HookCallback(hooks), run["losses"]],
    )
    run["checkpoint"] = tf.train.load_checkpoint(str(model_dir))
    run["evaluate"] = twin.evaluate(census_batches(data.TRAIN_SEED, ROWS), verbose=0)
    run["predict"] = twin.predict(census_batches(data.TRAIN_SEED, ROWS), verbose=0)
    run["weights"] = [w.numpy() for w in twin.weights]
    return run


def train_per_execution(twin, model_dir: Path, flat: bool) -> dict:
    """Then 4 steps a call over the 7 batches (4 + 3), from step 300."""
    assert hookbridge.restore_checkpoint(twin, model_dir, "auto") == 300
    twin.flat_train_function = flat
    run: dict = {"losses": BatchLosses()}
    twin.fit(
        census_batches(data.CONTINUE_SEED, ROWS),  # Keras 2 needs the length here
        epochs=2,
        shuffle=False,
        verbose=0,
        callbacks=[run["losses"]],
    )
    run["weights"] = [w.numpy() for w in twin.weights]
    return run


def counted(function, run: dict) -> dict:
    """``run`` with the calls ``function`` ran flat and gave Keras's own function meanwhile."""
    run["calls"] = (function.flat_calls, function.keras_calls)
    function.flat_calls = function.keras_calls = 0
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One twin (its traces shared), trained from step 300 with Keras's own call, then again
    from step 300 called flat (on the default executor, then on the single-threaded one):
    plain, then 4 steps a call."""
    tmp = tmp_path_factory.mktemp("twin_flat")
    for name in ("keras", "flat", "single", "keras4", "flat4"):
        shutil.copytree(FIXTURE, tmp / name)
    twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    runs = {"keras": train(twin, tmp / "keras", flat=False)}
    function = twin.train_function
    assert isinstance(function, _keras_call.FlatTrainFunction)
    runs["keras"] = counted(function, runs["keras"])
    runs["flat"] = counted(function, train(twin, tmp / "flat", flat=True))
    with tf.experimental.function_executor_type("SINGLE_THREADED_EXECUTOR"):
        runs["single"] = counted(function, train(twin, tmp / "single", flat=True))
    twin.compile(optimizer=twin.optimizer, loss=twin.loss, steps_per_execution=4)
    keras4 = train_per_execution(twin, tmp / "keras4", flat=False)
    function4 = twin.train_function
    runs["keras4"] = counted(function4, keras4)
    runs["flat4"] = counted(function4, train_per_execution(twin, tmp / "flat4", flat=True))
    return runs


def test_the_flat_call_ran_and_not_when_off(runs):
    keras_run, flat_run, keras4, flat4 = (runs[k] for k in ("keras", "flat", "keras4", "flat4"))
    # 7 batches an epoch (one found the end of the data on Keras 3), three iterators:
    assert keras_run["calls"][0] == 0 and keras_run["calls"][1] >= 3 * 7
    assert flat_run["calls"][1] == 3 and flat_run["calls"][0] >= 3 * 7 - 3, flat_run["calls"]
    assert keras4["calls"][0] == 0 and flat4["calls"][1] == 2 and flat4["calls"][0] >= 2
    assert flat_run["calls"][0] + flat_run["calls"][1] == sum(keras_run["calls"])
    assert sum(flat4["calls"]) == sum(keras4["calls"])


@pytest.mark.parametrize("flat", ["flat", "single"])
def test_losses_checkpoint_and_weights_equal_bit_for_bit(runs, flat):
    keras_run, flat_run = runs["keras"], runs[flat]
    assert flat_run["calls"][0] >= 3 * 7 - 3, flat_run["calls"]
    assert len(flat_run["losses"].losses) == 3 * 7
    assert flat_run["losses"].losses == keras_run["losses"].losses
    assert flat_run["epoch_losses"] == keras_run["epoch_losses"]
    flat_ckpt, keras_ckpt = flat_run["checkpoint"], keras_run["checkpoint"]
    names = keras_ckpt.get_variable_to_shape_map()
    assert flat_ckpt.get_variable_to_shape_map() == names
    assert any("Ftrl" in n for n in names) and any("Adagrad" in n for n in names)
    assert int(flat_ckpt.get_tensor("global_step")) > 300
    for name in sorted(names):
        np.testing.assert_array_equal(flat_ckpt.get_tensor(name), keras_ckpt.get_tensor(name), name)
    assert_weights_equal(flat_run, keras_run)


@pytest.mark.parametrize("flat", ["flat", "single"])
def test_evaluate_and_predict_equal(runs, flat):
    keras_run, flat_run = runs["keras"], runs[flat]
    assert flat_run["evaluate"] == keras_run["evaluate"]
    np.testing.assert_array_equal(flat_run["predict"], keras_run["predict"])


def test_steps_per_execution_equal_bit_for_bit(runs):
    keras4, flat4 = runs["keras4"], runs["flat4"]
    assert len(flat4["losses"].losses) == 2 * 2  # one logs a call
    assert flat4["losses"].losses == keras4["losses"].losses
    assert_weights_equal(flat4, keras4)


def assert_weights_equal(run: dict, reference: dict) -> None:
    assert len(run["weights"]) == len(reference["weights"]) > 10
    for weight, expected in zip(run["weights"], reference["weights"]):
        np.testing.assert_array_equal(weight, expected)


# ---- the fallbacks, on a small native Keras model ----


def small_model(flat: bool) -> tuple[tf.keras.Model, list]:
    """A two-input regression whose train function is flat-called (or not)."""
    keras = tf.keras

    class Small(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1, kernel_initializer="ones")

        def call(self, x):
            inputs = x if isinstance(x, dict) else {"a": x, "b": x}
            return self.dense(tf.concat([inputs["a"], inputs["b"]], 1))

        def make_train_function(self, force=False):
            made = super().make_train_function(force)
            _keras_call.install(self)
            return None if made is None else self.train_function

    model = Small()
    model.flat_train_function = flat
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    losses = BatchLosses()
    return model, losses


def small_fit(model, losses, inputs, epochs: int = 2) -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=(20, 1)).astype("float32")
    model.fit(inputs, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0, callbacks=[losses])


def test_a_new_input_structure_retraces_through_keras_and_trains_as_keras_does():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(20, 2)).astype("float32")
    results, calls = [], []
    for flat in (False, True):
        model, losses = small_model(flat)
        small_fit(model, losses, {"a": x, "b": x})
        calls.append((model.train_function.flat_calls, model.train_function.keras_calls))
        small_fit(model, losses, x)  # one tensor: Keras traces its function again
        function = model.train_function
        calls.append((function.flat_calls - calls[-1][0], function.keras_calls - calls[-1][1]))
        results.append((losses.losses, [w.numpy() for w in model.weights]))
    (keras_losses, keras_weights), (flat_losses, flat_weights) = results
    assert calls[0][0] == calls[1][0] == 0  # flat_train_function False: none flat
    # 3 batches an epoch, 2 epochs: one Keras call per iterator (one or two a fit), the rest
    # flat, after the retrace too:
    for flat_calls, keras_calls in calls[2:]:
        assert flat_calls + keras_calls == 6 and flat_calls >= 4, calls
    assert len(flat_losses) == 12 and flat_losses == keras_losses
    for flat_weight, keras_weight in zip(flat_weights, keras_weights):
        np.testing.assert_array_equal(flat_weight, keras_weight)


def test_off_switch_in_the_environment(monkeypatch):
    monkeypatch.setenv(_keras_call.ENVIRONMENT, "0")
    model, losses = small_model(True)
    x = np.ones((20, 2), "float32")
    small_fit(model, losses, x)
    assert isinstance(model.train_function, _keras_call.FlatTrainFunction)
    assert model.train_function.flat_calls == 0 and model.train_function.keras_calls == 6


def test_a_distribution_strategy_falls_back_to_keras_own_call():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model, losses = small_model(True)
    small_fit(model, losses, np.ones((20, 2), "float32"))
    function = model.train_function
    assert isinstance(function, _keras_call.FlatTrainFunction)
    assert function.flat_calls == 0 and function.keras_calls == 6
