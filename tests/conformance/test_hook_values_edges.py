"""Issue 24: every value a hook reads under HookCallback is exact, or refused with a clear message.

Each test runs the scenario natively beside the bridged ``fit``: a native TF1 ``MonitoredSession``
for what a hook sees in TF1 (global steps, checkpoints, NaN checks), or native Keras (its own batch
logs, ``optimizer.iterations``, or the batch's value computed directly from the model's weights
before the step) for what a batch value must be.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import reused_models
import tensorflow as tf

import hookbridge

keras = tf.keras
T = tf.compat.v1.train
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")


class StepRecorder(T.SessionRunHook):
    """Records the global step fetched in the step's run (stale) and read in ``after_run``."""

    def begin(self):
        self.step = T.get_global_step()
        self.got = []

    def before_run(self, run_context):
        return T.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
        self.got.append((int(run_values.results), int(run_context.session.run(self.step))))


def _native_steps(increments, checkpoint_dir):
    """TF1: one ``run`` per execution, the train op advancing the global step by the steps that
    execution ran (ordered after the hooks' fetch, as the train op's increment is)."""
    with tf.Graph().as_default():
        gs = T.get_or_create_global_step()
        inc = tf.compat.v1.placeholder(tf.int64, [])
        w = tf.compat.v1.get_variable("w", initializer=np.float32(1.0))
        # The increment waits for every read a hook's fetch maps to: TF's cached global-step
        # read and the variable's own read (what fetching the variable runs). Ordered after an
        # identity only, a fetch of the variable raced the increment (CI on tfkeras once saw
        # the new value, 3, at the first run: the oracle flaked, not the bridge).
        from hookbridge import _tfcompat

        graph = tf.compat.v1.get_default_graph()
        reads = [_tfcompat.global_step_read_tensor(graph), graph.as_graph_element(gs)]
        with tf.control_dependencies(reads):
            train = gs.assign_add(inc)
        recorder = StepRecorder()
        saver = T.CheckpointSaverHook(checkpoint_dir, save_steps=1000)
        with T.MonitoredSession(hooks=[recorder, saver]) as sess:
            for k in increments:
                sess.run(train, {inc: k})
        del w
    return recorder.got


# -- item 1: steps_per_execution with an epoch that is not a multiple of k ----------------------
#: k=4 (executions of 4, 4, 2) in deep only: k=3 (3, 3, 3, 1) has the ragged execution too.
@pytest.mark.parametrize("k", [3, pytest.param(4, marks=pytest.mark.deep)])
def test_global_step_is_iterations_under_steps_per_execution_ragged_epoch(tmp_path, k):
    """10 steps per epoch, ``steps_per_execution=k``, 2 epochs: the last execution of each epoch
    runs fewer than k steps. The hooks see ``optimizer.iterations`` (read by a Keras callback
    after them) in the stale fetch and in ``after_run``, ``CheckpointSaverHook`` writes the
    final step's checkpoint and ``restore_checkpoint`` returns it, as the native session does."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.01), "mse", steps_per_execution=k)
    iterations = []

    class Iterations(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            iterations.append(int(self.model.optimizer.iterations.numpy()))

    bridged_dir = str(tmp_path / "bridged")
    bridge = hookbridge.HookCallback(
        lambda: [StepRecorder(), T.CheckpointSaverHook(bridged_dir, save_steps=1000)]
    )
    x = np.zeros((10, 1), "float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with bridge:
            model.fit(x, x, batch_size=1, epochs=2, verbose=0, callbacks=[bridge, Iterations()])
    assert iterations[-1] == int(model.optimizer.iterations.numpy()) == 20
    increments = np.diff([0, *iterations]).tolist()
    native = _native_steps(increments, str(tmp_path / "native"))
    bridged = bridge.hooks[0].got
    assert bridged == native
    assert [after for _, after in bridged] == iterations
    native_ckpt = os.path.basename(T.latest_checkpoint(str(tmp_path / "native")))
    assert os.path.basename(T.latest_checkpoint(bridged_dir)) == native_ckpt == "model.ckpt-20"
    fresh = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    fresh.compile(keras.optimizers.SGD(0.01), "mse")
    assert hookbridge.restore_checkpoint(fresh, bridged_dir) == 20


# -- helpers for batch values ----------------------------------------------------------------------
class KerasBatchValues(keras.callbacks.Callback):
    """Native Keras's own value of each batch: its metrics reset before every batch, so the logs
    at the batch's end hold that batch alone (training is unchanged: metrics take no part)."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_begin(self, batch, logs=None):
        self.model.reset_metrics()

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({k: float(v) for k, v in (logs or {}).items()})


class FetchKeys(T.SessionRunHook):
    """Fetches ``<key>:0`` for each key on every step, through ``before_run``."""

    def __init__(self, keys):
        self.keys = list(keys)
        self.got = []

    def before_run(self, run_context):
        return T.SessionRunArgs({k: f"{k}:0" for k in self.keys})

    def after_run(self, run_context, run_values):
        self.got.append({k: float(v) for k, v in run_values.results.items()})


def _built(make_model):
    """``make_model()``'s model (every builder here sets its weights by constant initializers),
    from a pool per builder (``tests/reused_models.py``): reset to its built state, its traced
    ``train_function`` kept. The native run of a test and its bridged one (``_again``), and the
    tests building the same model, share one build and one trace."""
    return reused_models.reused(("hook values edges", make_model.__qualname__), 0, make_model)


def _again(make_model):
    """The model the test's native run used, put back in its built state for the bridged run
    (HookCallback leaves ``fit``'s own functions alone: the bridge runs hooks in a side graph)."""
    reused_models.release_all()  # this test holds no other pooled model
    return _built(make_model)


def _fit_twice(make_model, fit_kw, keys, log_names=()):
    """The same model (same initial weights) fitted natively with Keras's batch values recorded,
    then with a HookCallback fetching ``keys``; returns (native batch values, fetched, warnings)."""
    native = KerasBatchValues()
    _built(make_model).fit(**fit_kw, verbose=0, callbacks=[native])
    bridge = hookbridge.HookCallback(lambda: [FetchKeys(keys)], log_names=list(log_names))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bridge:
            _again(make_model).fit(**fit_kw, verbose=0, callbacks=[bridge])
    return native.logs, bridge.hooks[0].got, [str(w.message) for w in caught]


def _assert_values(native, bridged, keys, rtol=1e-4, atol=1e-5):
    assert len(bridged) == len(native)
    for key in keys:
        np.testing.assert_allclose(
            [b[key] for b in bridged], [n[key] for n in native], rtol=rtol, atol=atol,
            err_msg=key,
        )


def _data(n=10, seed=0, features=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) + rng.normal(size=(n, 1))).astype("float32")
    return x, y


def _dense(units=1, name=None):
    return keras.layers.Dense(
        units, name=name, kernel_initializer=keras.initializers.Constant(0.3)
    )


# -- item 2: an infinite batch does not poison the rest of the epoch -----------------------------
def _mean_of_y(y_true, y_pred):
    return tf.reduce_mean(y_true + 0.0 * y_pred, axis=-1)


def _native_nan_checks(batch_losses):
    """TF1: NanTensorHook on a loss tensor fed each batch's loss; how many runs ran."""
    with tf.Graph().as_default():
        gs = T.get_or_create_global_step()
        fed = tf.compat.v1.placeholder(tf.float32, [])
        loss = tf.identity(fed, name="loss")
        train = gs.assign_add(1)
        runs = 0
        with T.MonitoredSession(hooks=[T.NanTensorHook(loss)]) as sess:
            for value in batch_losses:
                sess.run(train, {fed: value})
                runs += 1
    return runs


def _mean_of_y_model():
    model = keras.Sequential([keras.Input((1,)), _dense()])
    model.compile(keras.optimizers.SGD(0.01), loss=_mean_of_y)
    return model


@pytest.mark.parametrize("with_exact_consumer", [False, True])
def test_an_infinite_batch_does_not_make_nan_tensor_hook_fire_later(with_exact_consumer):
    """Batch losses 1, inf, 1, 1: natively NanTensorHook never fires (isnan(inf) is false); through
    the bridge it did on the batch after the inf (loss:0 was inf - inf = NaN). With another hook
    fetching loss:0 exactly on the same steps, NanTensorHook still sees the right NaN-ness."""
    losses = [1.0, np.inf, 1.0, 1.0]
    assert _native_nan_checks(losses) == len(losses)
    y = np.repeat(np.array(losses, "float32"), 3)[:, None]
    x = np.zeros((len(y), 1), "float32")
    model = _built(_mean_of_y_model)  # both variants: one build, one trace

    def hooks():
        extra = [FetchKeys(["loss"])] if with_exact_consumer else []
        return [T.NanTensorHook("loss:0"), *extra]

    bridge = hookbridge.HookCallback(hooks)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bridge:
            model.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0, callbacks=[bridge])
    assert int(model.optimizer.iterations.numpy()) == len(losses)
    messages = [str(w.message) for w in caught if "cannot be recovered" in str(w.message)]
    if with_exact_consumer:
        got = [r["loss"] for r in bridge.hooks[1].got]
        assert got[:2] == [1.0, np.inf]
        assert len(messages) == 1 and "'loss'" in messages[0]
    else:
        assert messages == []


# -- item 4: weighted metrics --------------------------------------------------------------------
def test_weighted_metrics_batch_values_are_keras_batch_values():
    """sample_weight with weighted_metrics and a ragged last batch (10 samples in batches of 4):
    every key's batch value is the value Keras gives that batch alone (0.542 against 0.682
    before: the metric was recovered with the loss's sample counts, not its own weights)."""
    x, y = _data(10)
    weights = np.random.default_rng(1).uniform(0.1, 3.0, size=10).astype("float32")

    def make_model():
        model = keras.Sequential([keras.Input((2,)), _dense()])
        model.compile(
            keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"], weighted_metrics=["mse"]
        )
        return model

    fit_kw = dict(x=x, y=y, sample_weight=weights, batch_size=4, epochs=2, shuffle=False)
    native, bridged, messages = _fit_twice(make_model, fit_kw, ["loss", "mae", "mse"])
    _assert_values(native, bridged, ["loss", "mae", "mse"])
    assert not [m for m in messages if "HookCallback" in m]


# -- item 12: keys that are not the loss tracker's running mean -----------------------------------
def _custom_step_model():
    """The custom train_step of Keras's guide: its own Mean("loss") tracker (updated with the
    scalar batch loss: it counts batches) and a MeanAbsoluteError (it counts samples), plus a raw
    per-batch value it returns as is."""

    class CustomModel(keras.Model):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = tf.reduce_mean(tf.square(y - y_pred))
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            self.loss_tracker.update_state(loss)
            self.mae_metric.update_state(y, y_pred)
            return {
                "loss": self.loss_tracker.result(),
                "mae": self.mae_metric.result(),
                "batch_max": tf.reduce_max(y_pred),
            }

        @property
        def metrics(self):
            return [self.loss_tracker, self.mae_metric]

    inputs = keras.Input((2,))
    model = CustomModel(inputs, _dense()(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def test_custom_train_step_trackers_and_raw_values_are_batch_values():
    """Keras's guide's custom step with a ragged last batch: ``mae:0`` (its own sample count, not
    the loss tracker's batch count), ``loss:0`` (a tracker counting batches) and ``batch_max:0``
    (returned raw: passed through, with a warning at its first fetch naming it) are the values
    Keras gives each batch alone."""
    x, y = _data(10)
    fit_kw = dict(x=x, y=y, batch_size=4, epochs=2, shuffle=False)
    keys = ["loss", "mae", "batch_max"]
    native, bridged, messages = _fit_twice(_custom_step_model, fit_kw, keys, log_names=keys)
    _assert_values(native, bridged, keys)
    raw = [m for m in messages if "no metric of the model is named 'batch_max'" in m]
    assert len(raw) == 1
    assert not [m for m in messages if "HookCallback" in m and m not in raw]


def _two_output_model():
    inputs = keras.Input((2,))
    model = keras.Model(
        inputs, {"out_a": _dense(name="out_a")(inputs), "out_b": _dense(name="out_b")(inputs)}
    )
    model.compile(
        keras.optimizers.SGD(0.05),
        loss={"out_a": "mse", "out_b": "mae"},
        metrics={"out_a": ["mae"], "out_b": ["mse"]},
    )
    return model


@pytest.mark.parametrize("named", [True, False])
def test_per_output_losses_of_a_multi_output_model_are_batch_values(named):
    """A two-output model, ragged last batch: ``out_a_loss:0`` (Keras 3 counts each output's loss
    once per batch; it was -0.460 where the batch's value is 1.112), the metrics per output and
    the total loss are Keras's own batch values, whether named with ``log_names`` (as the
    docstring recommends) or not (item 14: the bridge infers the keys Keras logs)."""
    x, y = _data(10)
    fit_kw = dict(x=x, y={"out_a": y, "out_b": 2 * y}, batch_size=4, epochs=2, shuffle=False)
    keys = ["loss", "out_a_loss", "out_b_loss", "out_a_mae", "out_b_mse"]
    names = keys if named else ()
    native, bridged, messages = _fit_twice(_two_output_model, fit_kw, keys, log_names=names)
    _assert_values(native, bridged, keys)
    assert not [m for m in messages if "HookCallback" in m]


# -- item 14: tensors for keys Keras never logs ---------------------------------------------------
def test_a_metric_name_keras_does_not_log_for_a_multi_output_model_fails_in_begin():
    """Keras logs ``out_a_mae``, never ``mae``, for a model of two outputs: the bridge made a
    ``mae:0`` from the compile config anyway, so a hook fetching it passed ``begin()`` and failed
    at step 1 with a hint that did not apply. Now ``mae:0`` does not exist: ``begin()`` fails
    as natively for a missing tensor (a ``KeyError``), listing the tensors that do exist."""
    x, y = _data(8)
    model = _two_output_model()
    bridge = hookbridge.HookCallback(
        lambda: [T.LoggingTensorHook({"mae": "mae:0"}, every_n_iter=1)]
    )
    with pytest.raises(KeyError) as caught, bridge:
        model.fit(x, {"out_a": y, "out_b": y}, epochs=1, verbose=0, callbacks=[bridge])
    message = str(caught.value)
    assert "LoggingTensorHook.begin asked for 'mae:0'" in message
    assert "'out_a_mae:0'" in message and "'out_b_loss:0'" in message
    assert int(model.optimizer.iterations.numpy()) == 0  # no step ran


# -- item 3: loss:0 read in end(), after the epoch's validation -----------------------------------
class LossAtEnd(FetchKeys):
    """Fetches ``loss:0`` every step and reads it once more with ``session.run`` in ``end()``,
    as a TF1 hook reporting the final loss does."""

    def __init__(self):
        super().__init__(["loss", "mae"])

    def end(self, session):
        self.at_end = {k: float(session.run(f"{k}:0")) for k in self.keys}


def _dense_mse_mae():
    """The model of the tests reading ``loss:0`` in ``end()``: one pooled build for all three."""
    model = keras.Sequential([keras.Input((2,)), _dense()])
    model.compile(keras.optimizers.SGD(0.05), loss="mse", metrics=["mae"])
    return model


@pytest.mark.parametrize("length", ["known", "unknown"])
def test_loss_read_in_end_after_validation_is_the_last_batch_value(length):
    """With validation after every epoch, ``loss:0`` read in ``end()`` is the last training
    batch's value (natively the loss tensor still holds it), whether Keras knows the epoch's
    length or not; it was the epoch's mean (the validation had reset Keras's counts)."""
    x, y = _data(10)
    if length == "known":
        data = dict(x=x, y=y, batch_size=4)
    else:
        spec = (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 1], tf.float32))

        def gen():
            for i in range(0, 10, 4):
                yield x[i : i + 4], y[i : i + 4]

        data = dict(x=tf.data.Dataset.from_generator(gen, output_signature=spec))

    make_model = _dense_mse_mae
    fit_kw = dict(**data, epochs=2, shuffle=False, validation_data=(x[:3], y[:3]))
    native = KerasBatchValues()
    _built(make_model).fit(**fit_kw, verbose=0, callbacks=[native])
    bridge = hookbridge.HookCallback(lambda: [LossAtEnd()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with bridge:
            _again(make_model).fit(**fit_kw, verbose=0, callbacks=[bridge])
    hook = bridge.hooks[0]
    _assert_values(native.logs, hook.got, ["loss", "mae"])
    for key in ("loss", "mae"):
        np.testing.assert_allclose(hook.at_end[key], native.logs[-1][key], rtol=1e-4, atol=1e-5)


class FetchWeights(T.SessionRunHook):
    """Fetches a weight mirror on every other ``before_run``: a real run of the bridge's graph
    reading no log value (Keras 3 calls ``on_train_batch_begin`` once more at the end of an
    input of unknown length: here that call fetches nothing)."""

    def begin(self):
        self.kernel = tf.compat.v1.global_variables()[1]  # model/000/kernel (after the step)
        self.calls = 0

    def before_run(self, run_context):
        self.calls += 1
        return T.SessionRunArgs(self.kernel) if self.calls % 2 == 1 else None


class ReadAtEnd(T.SessionRunHook):
    def end(self, session):
        self.at_end = {k: float(session.run(f"{k}:0")) for k in ("loss", "mae")}


def test_loss_read_only_in_end_with_input_of_unknown_length_is_not_the_epoch_mean():
    """Only ``end()`` reads ``loss:0``; the input's length is unknown to Keras and ``fit``
    validates: the value was Keras's epoch mean, silently (the count was read after the
    validation had reset it). Now the counts are read before the validation; the step before
    was not prepared, so the value assumes the last batch's size (exact here: batches of 5) and
    says so at the fetch."""
    x, y = _data(10)
    spec = (tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None, 1], tf.float32))

    def gen():
        for i in range(0, 10, 5):
            yield x[i : i + 5], y[i : i + 5]

    make_model = _dense_mse_mae
    fit_kw = dict(
        x=tf.data.Dataset.from_generator(gen, output_signature=spec),
        epochs=2,
        validation_data=(x[:3], y[:3]),
    )
    native = KerasBatchValues()
    _built(make_model).fit(**fit_kw, verbose=0, callbacks=[native])
    bridge = hookbridge.HookCallback(lambda: [FetchWeights(), ReadAtEnd()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bridge:
            _again(make_model).fit(**fit_kw, verbose=0, callbacks=[bridge])
    at_end = bridge.hooks[1].at_end
    for key in ("loss", "mae"):
        np.testing.assert_allclose(at_end[key], native.logs[-1][key], rtol=1e-4, atol=1e-5)
    assert len([w for w in caught if "did not request it in before_run" in str(w.message)]) == 1


# -- item 5: a tensor derived from a log tensor nothing fed ---------------------------------------
class FetchInPredict(T.SessionRunHook):
    def __init__(self, derive):
        self.derive = derive

    def begin(self):
        loss = tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
        self.fetch = tf.multiply(loss, 2.0, name="doubled") if self.derive else loss

    def before_run(self, run_context):
        return T.SessionRunArgs(self.fetch)


@pytest.mark.parametrize("derive", [False, True])
def test_a_tensor_derived_from_loss_raises_in_predict_as_loss_does(derive):
    """In ``predict`` Keras logs no loss: fetching ``loss:0`` raises the bridge's error; a tensor
    derived from it (built in ``begin()``) raises the same error, where it evaluated to 0.0
    (the log tensors' placeholders had a default of 0)."""
    model = keras.Sequential([keras.Input((2,)), _dense()])
    model.compile(keras.optimizers.SGD(0.05), loss="mse")
    bridge = hookbridge.HookCallback(lambda: [FetchInPredict(derive)])
    with pytest.raises(ValueError, match=r"loss:0 has no value yet: Keras has not logged 'loss'"):
        with bridge:
            model.predict(np.zeros((4, 2), "float32"), verbose=0, callbacks=[bridge])


def test_a_metric_logging_a_function_of_its_mean_holds_keras_value_and_warns():
    """``RootMeanSquaredError`` has a total and a count but logs ``sqrt(total / count)``: no
    batch value can be derived from its running value by counts (the bridge did, silently).
    Its tensor holds Keras's value, with a warning at the first fetch naming it; ``mae:0``
    beside it stays Keras's batch value."""
    x, y = _data(10)

    def make_model():
        model = keras.Sequential([keras.Input((2,)), _dense()])
        model.compile(
            keras.optimizers.SGD(0.05),
            loss="mse",
            metrics=["mae", keras.metrics.RootMeanSquaredError(name="rmse")],
        )
        return model

    fit_kw = dict(x=x, y=y, batch_size=4, epochs=1, shuffle=False)
    logged = []

    class Logs(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            logged.append(float(logs["rmse"]))

    native = KerasBatchValues()
    _built(make_model).fit(**fit_kw, verbose=0, callbacks=[native])
    bridge = hookbridge.HookCallback(lambda: [FetchKeys(["loss", "mae", "rmse"])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bridge:
            _again(make_model).fit(**fit_kw, verbose=0, callbacks=[bridge, Logs()])
    bridged = bridge.hooks[0].got
    _assert_values(native.logs, bridged, ["loss", "mae"])
    np.testing.assert_allclose([b["rmse"] for b in bridged], logged, rtol=1e-6)
    messages = [str(w.message) for w in caught if "'rmse' metric is not a mean" in str(w.message)]
    assert len(messages) == 1
