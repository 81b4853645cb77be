"""Issue 13 item 7: ``loss:0`` and every log tensor hold the value of the batch just run, for any
batch sizes.

Oracle: a native TF1 ``MonitoredSession`` training the same one-unit linear model (same initial
weights, plain SGD, MSE loss, an MAE tensor) on the same batches, fed through ``feed_dict``; the
same fetching hook runs in both worlds and records ``loss:0`` / ``mae:0`` per step. In TF1 those
tensors are the batch's values by construction. Keras logs running means weighted by sample
counts, so the bridge must recover the batch value: these scenarios vary the batch size inside an
epoch and hide the number of steps from Keras.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import reused_models
import tensorflow as tf

import hookbridge

keras = tf.keras
T = tf.compat.v1.train
LR = 0.05


def _batches(sizes, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        x = rng.normal(size=(n, 1)).astype("float32")
        y = (2.0 * x + 1.0 + rng.normal(size=(n, 1))).astype("float32")
        out.append((x, y))
    return out


class FetchLogs(T.SessionRunHook):
    """Fetches ``loss:0`` and ``mae:0`` through ``before_run`` on every
    ``every``-th step run (counted in ``after_run``: Keras may begin a batch its input no longer
    has, and then runs no step)."""

    def __init__(self, every=1):
        self.every = every
        self.got = []

    def begin(self):
        self._done = 0

    def before_run(self, run_context):
        if self._done % self.every == 0:
            return T.SessionRunArgs({"loss": "loss:0", "mae": "mae:0"})
        return None

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            r = run_values.results
            self.got.append((self._done, float(r["loss"]), float(r["mae"])))
        self._done += 1


def _native(batches, epochs, make_hook):
    """TF1: the same linear model trained with SGD on the same batches, hook in the session."""
    graph = tf.Graph()
    with graph.as_default():
        gs = T.get_or_create_global_step()
        x = tf.compat.v1.placeholder(tf.float32, [None, 1])
        y = tf.compat.v1.placeholder(tf.float32, [None, 1])
        kernel = tf.compat.v1.get_variable("kernel", initializer=np.full((1, 1), 0.5, "float32"))
        bias = tf.compat.v1.get_variable("bias", initializer=np.zeros((1,), "float32"))
        err = tf.matmul(x, kernel) + bias - y
        loss = tf.reduce_mean(tf.square(err), name="loss")
        tf.reduce_mean(tf.abs(err), name="mae")
        train = T.GradientDescentOptimizer(LR).minimize(loss, global_step=gs)
        hook = make_hook()
        with T.MonitoredSession(hooks=[hook]) as sess:
            for _ in range(epochs):
                for xb, yb in batches:
                    sess.run(train, {x: xb, y: yb})
    return hook.got


def _build():
    model = keras.Sequential(
        [
            keras.Input((1,)),
            keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.5)),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", metrics=["mae"])
    return model


def _model():
    """:func:`_build`'s model (its weights set by constant initializers) from a module pool
    (``tests/reused_models.py``): reset to its built state, its traced ``train_function`` kept
    across the tests, instead of a build and a trace per test."""
    return reused_models.reused(("batch values",), 0, _build)


def _bridged(data, epochs, make_hook, **fit_kw):
    bridge = hookbridge.HookCallback(lambda: [make_hook()])
    with bridge:
        _model().fit(data, epochs=epochs, verbose=0, callbacks=[bridge], **fit_kw)
    return bridge.hooks[0].got


def _generator_dataset(batches):
    def gen():
        yield from batches

    spec = (tf.TensorSpec([None, 1], tf.float32), tf.TensorSpec([None, 1], tf.float32))
    return tf.data.Dataset.from_generator(gen, output_signature=spec)


def _assert_same(native, bridged):
    """Same steps, same values up to float32 rounding: Keras accumulates the running sums in
    float32, so a value recovered from them can be off by about 2**-24 * (samples so far) *
    |mean| / (batch size): 5e-6 for a 1-sample batch after 72 samples of mean loss 1.6."""
    assert [s for s, *_ in bridged] == [s for s, *_ in native]
    np.testing.assert_allclose(
        np.array([v[1:] for v in bridged]),
        np.array([v[1:] for v in native]),
        rtol=2e-4,
        atol=2e-5,
    )


SIZES = [16, 4, 16, 28]


@pytest.mark.parametrize("every", [1, 3])
def test_generator_of_16_4_16_28(every):
    """A Python generator: Keras knows no step count, batch sizes vary inside the epoch."""
    batches = _batches(SIZES)

    def gen():
        yield from batches

    native = _native(batches, 1, lambda: FetchLogs(every))
    bridged = _bridged(gen(), 1, lambda: FetchLogs(every))
    _assert_same(native, bridged)
    # the scenario of the issue: a running mean is not a batch loss
    assert len(native) == len(range(0, len(SIZES), every))


@pytest.mark.parametrize("every", [1, 2])
def test_tf_data_with_varying_batches_over_two_epochs(every):
    """tf.data of unknown cardinality (from a generator), batch sizes varying, two epochs."""
    batches = _batches(SIZES + [8, 1])
    native = _native(batches, 2, lambda: FetchLogs(every))
    bridged = _bridged(_generator_dataset(batches), 2, lambda: FetchLogs(every))
    _assert_same(native, bridged)


def test_tf_data_filter_with_ragged_last_batch():
    """``.filter`` before ``.batch``: unknown cardinality, full batches and a ragged last one."""
    xs, ys = (np.concatenate(v) for v in zip(*_batches([40], seed=3)))
    keep = np.array([i % 3 != 0 for i in range(40)])
    batches = [(xs[keep][i : i + 6], ys[keep][i : i + 6]) for i in range(0, int(keep.sum()), 6)]
    assert [len(b[0]) for b in batches] == [6, 6, 6, 6, 2]
    ds = (
        tf.data.Dataset.from_tensor_slices((np.arange(40), xs, ys))
        .filter(lambda i, x, y: i % 3 != 0)
        .map(lambda i, x, y: (x, y))
        .batch(6)
    )
    assert ds.cardinality().numpy() == tf.data.UNKNOWN_CARDINALITY
    native = _native(batches, 2, FetchLogs)
    bridged = _bridged(ds, 2, FetchLogs)
    _assert_same(native, bridged)


def test_repeat_with_steps_per_epoch_puts_ragged_batches_mid_epoch():
    """``batch(4).repeat()`` of 10 samples with ``steps_per_epoch=5``: sizes 4,4,2,4,4 then
    2,4,4,2,4: Keras knows the step count, but the short batches are not at an epoch's end."""
    xs, ys = (np.concatenate(v) for v in zip(*_batches([10], seed=5)))
    one_pass = [(xs[i : i + 4], ys[i : i + 4]) for i in range(0, 10, 4)]
    batches = (one_pass * 4)[:10]
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4).repeat()
    native = _native(batches, 1, lambda: FetchLogs(every=1))
    bridged = _bridged(ds, 2, lambda: FetchLogs(every=1), steps_per_epoch=5)
    _assert_same(native, bridged)


class LateFetch(T.SessionRunHook):
    """Reads ``loss:0`` with ``session.run`` inside ``after_run``: no ``before_run`` request."""

    def __init__(self):
        self.got = []

    def after_run(self, run_context, run_values):
        self.got.append(float(run_context.session.run("loss:0")))


def test_a_value_read_without_a_before_run_request_warns_when_it_may_be_inexact():
    batches = _batches(SIZES)
    expected = [v[1] for v in _native(batches, 1, FetchLogs)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _bridged(_generator_dataset(batches), 1, LateFetch)
    messages = [str(w.message) for w in caught if "before_run" in str(w.message)]
    assert len(messages) == 1 and "assumes the batch had" in messages[0]
    # the first batch needs no count; the second assumed 16 samples, but had 4
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    assert abs(got[1] - expected[1]) > 1e-3


def test_a_summary_of_the_loss_holds_the_batch_loss():
    """A summary op on ``loss:0`` runs in the bridge's graph, fed the exact batch value."""
    batches = _batches(SIZES)
    expected = [v[1] for v in _native(batches, 1, FetchLogs)]

    class Summaries(T.SessionRunHook):
        def begin(self):
            self.op = tf.compat.v1.summary.scalar(
                "l", tf.compat.v1.get_default_graph().get_tensor_by_name("loss:0")
            )
            self.got = []

        def before_run(self, run_context):
            return T.SessionRunArgs(self.op)

        def after_run(self, run_context, run_values):
            summary = tf.compat.v1.Summary.FromString(run_values.results)
            self.got.append(summary.value[0].simple_value)

    got = _bridged(_generator_dataset(batches), 1, Summaries)
    np.testing.assert_allclose(got, expected, rtol=2e-4)


def test_nan_tensor_hook_stops_at_the_nan_batch_of_varying_sizes():
    """NanTensorHook (no sample-count reads: it only asks whether its fetch is NaN) stops at the
    same step as natively, with batch sizes varying; a second hook fetching the loss on the same
    steps still gets exact values."""
    batches = _batches(SIZES + [8, 12])
    x, y = batches[3]
    batches[3] = (x, np.where(np.arange(len(y))[:, None] == 2, np.nan, y).astype("float32"))

    def hooks():
        return [T.NanTensorHook("loss:0", fail_on_nan_loss=False), FetchLogs(every=2)]

    native_logs = _native(batches, 1, lambda: FetchLogs(every=2))
    native_steps = _native_steps_until_nan(batches)
    bridge = hookbridge.HookCallback(hooks)
    model = _model()
    with bridge:
        model.fit(_generator_dataset(batches), epochs=1, verbose=0, callbacks=[bridge])
    assert native_steps == 4  # steps 0..3; NaN in step 3's batch
    assert int(model.optimizer.iterations.numpy()) == native_steps
    bridged_logs = bridge.hooks[1].got
    _assert_same(native_logs[: len(bridged_logs)], bridged_logs)
    assert [s for s, *_ in bridged_logs] == [0, 2]
    assert bridge.hooks[0].__class__ is T.NanTensorHook


def _native_steps_until_nan(batches):
    """How many runs a native MonitoredSession makes before NanTensorHook stops it."""
    graph = tf.Graph()
    with graph.as_default():
        gs = T.get_or_create_global_step()
        x = tf.compat.v1.placeholder(tf.float32, [None, 1])
        y = tf.compat.v1.placeholder(tf.float32, [None, 1])
        kernel = tf.compat.v1.get_variable("kernel", initializer=np.full((1, 1), 0.5, "float32"))
        bias = tf.compat.v1.get_variable("bias", initializer=np.zeros((1,), "float32"))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, kernel) + bias - y), name="loss")
        train = T.GradientDescentOptimizer(LR).minimize(loss, global_step=gs)
        runs = 0
        with T.MonitoredSession(hooks=[T.NanTensorHook(loss, fail_on_nan_loss=False)]) as sess:
            for xb, yb in batches:
                if sess.should_stop():
                    break
                sess.run(train, {x: xb, y: yb})
                runs += 1
    return runs


def test_nan_tensor_hook_uses_its_fetch_only_through_isnan():
    """Pins what lets a step whose only batch-value consumer is NanTensorHook skip the count
    reads: its after_run reads the fetched value only in ``np.isnan(run_values.results)``."""
    import inspect

    source = inspect.getsource(T.NanTensorHook.after_run)
    assert source.count("run_values") == 2  # the parameter, and the one use below
    assert "np.isnan(run_values.results)" in source


def test_a_metric_that_is_not_a_mean_holds_keras_value_and_warns():
    """AUC has no per-batch value in Keras's logs (it is not a mean over samples): its tensor
    holds Keras's value, with a one-time warning; a mean metric beside it stays exact."""
    batches = _batches(SIZES)
    model = keras.Sequential(
        [
            keras.Input((1,)),
            keras.layers.Dense(1, kernel_initializer=keras.initializers.Constant(0.5)),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.SGD(LR),
        loss="mse",
        # Named: Keras 3 names a second unnamed AUC in one process "auc_1" (the last CI run drew
        # another file's AUC into the same xdist worker first), and the hook fetches "auc:0".
        metrics=["mae", keras.metrics.AUC(name="auc")],
    )
    logged = []

    class Logs(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            logged.append(logs["auc"])

    class FetchAuc(FetchLogs):
        def before_run(self, run_context):
            return T.SessionRunArgs({"loss": "loss:0", "mae": "mae:0", "auc": "auc:0"})

        def after_run(self, run_context, run_values):
            super().after_run(run_context, run_values)
            self.auc = [*getattr(self, "auc", []), float(run_values.results["auc"])]

    bridge = hookbridge.HookCallback(lambda: [FetchAuc()])
    binary = [(x, (y > 1.0).astype("float32")) for x, y in batches]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with bridge:
            model.fit(_generator_dataset(binary), epochs=1, verbose=0, callbacks=[bridge, Logs()])
    hook = bridge.hooks[0]
    np.testing.assert_allclose(hook.auc, logged, rtol=1e-6)
    messages = [str(w.message) for w in caught if "'auc' metric is not a mean" in str(w.message)]
    assert len(messages) == 1 and "running_mean/auc" in messages[0]
    expected = _native([(x, y) for x, y in binary], 1, FetchLogs)
    _assert_same(expected, hook.got)
