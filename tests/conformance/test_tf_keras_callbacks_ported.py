"""tf_keras's own callback test scenarios (``tf_keras/callbacks_test.py``, tf-keras 2.21), and
the Keras 2 semantics CallbackHook keeps on that stack (issue 25), each run natively in ``fit``
beside the same scenario in a TF1 ``MonitoredSession`` with ``CallbackHook``.

The oracle is that of ``test_keras_callbacks_ported``: a Keras model predicting its input
(Dense kernel 1, no bias, SGD(0)) trained against zeros, so the loss of a batch ``x`` is
``mean(x**2)``; the metrics here are ``zeta`` (MSE, ``mean(x**2)``) and ``alpha`` (MAE,
``mean(|x|)``), compiled in that order (not sorted), which the TF1 graph computes from the same
batches. The scenarios run on every stack: where Keras 3 differs from tf_keras (key order, the
slow-callback warning), the native run says what is expected, and the bridged run must match.
"""

from __future__ import annotations

import contextlib
import csv
import http.server
import json
import logging
import math
import re
import threading
import time
import warnings
from typing import ClassVar

import numpy as np
import pytest
import reused_models
import tensorflow as tf

import hookbridge

from .test_keras_callbacks_ported import KERAS3, Recorder, _batches, _data

keras = tf.keras
v1 = tf.compat.v1
LR_KEY = "learning_rate" if KERAS3 else "lr"
X = [1.0, 2.0, 3.0, 1.0, 2.0, 2.0, 4.0, 1.0, 0.5, 3.0]  # 5 batches of 2 per epoch


# -- the two sides -----------------------------------------------------------------------------
def _model(metrics: bool, lr: float = 0.0):
    """The identity model (a kernel of ones, frozen for a rate other than 0), compiled with the
    ``zeta``/``alpha`` metrics or none. One per (metrics, rate), reused across tests reset to its
    built state (``tests/reused_models.py``: its traced ``train_function`` kept; fit resets the
    metrics); the rate set again, which a scheduler may have changed (Keras 2 / tf_keras keep it
    outside ``optimizer.variables``, which the reset restores). A test compiling it again gets a
    fresh one next time."""

    def build():
        keras.utils.set_random_seed(0)
        dense = keras.layers.Dense(
            1, use_bias=False, kernel_initializer="ones", trainable=lr == 0.0
        )
        model = keras.Sequential([keras.Input((1,)), dense])
        compiled = (
            [
                keras.metrics.MeanSquaredError(name="zeta"),
                keras.metrics.MeanAbsoluteError(name="alpha"),
            ]
            if metrics
            else []
        )
        model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse", metrics=compiled)
        return model

    model = reused_models.reused(("conformance identity", metrics, lr), 0, build)
    model.optimizer.learning_rate = lr
    return model


def native(callbacks, x=X, *, epochs=2, spe=5, metrics=True, val=None, verbose=0, lr=0.0, **fit_kw):
    """``fit`` on ``x`` in batches of 2, ``epochs`` x ``spe`` steps; returns the model."""
    model = fit_kw.pop("model", None) or _model(metrics, lr)
    ds = _batches(x, 2).map(lambda b: (b, tf.zeros_like(b))).repeat(epochs)
    validation = None if val is None else (_data(val), np.zeros_like(_data(val)))
    model.fit(
        ds,
        epochs=epochs,
        steps_per_epoch=spe,
        validation_data=validation,
        callbacks=callbacks,
        verbose=verbose,
        shuffle=False,
        **fit_kw,
    )
    return model


def _metric_tensors(batch, metrics: bool) -> dict:
    """loss, then zeta, alpha (compile order), as tensors of ``batch``."""
    loss = tf.reduce_mean(tf.square(batch), name="loss")
    if not metrics:
        return {"loss": loss}
    return {"loss": loss, "zeta": tf.identity(loss), "alpha": tf.reduce_mean(tf.abs(batch))}


def bridged(
    callbacks,
    x=X,
    *,
    epochs=2,
    spe=5,
    metrics=True,
    val=None,
    verbose=0,
    lr=0.0,
    checkpoint_dir=None,
    logs_fn=None,
    **hook_kw,
):
    """The same training in a TF1 graph; returns (steps run, the learning rate at the end)."""
    graph = tf.Graph()
    with graph.as_default():
        gs = v1.train.get_or_create_global_step()
        batch = v1.data.make_one_shot_iterator(_batches(x, 2).repeat(epochs)).get_next()
        logs = (logs_fn or _metric_tensors)(batch, metrics)
        lr_var = v1.get_variable("lr", initializer=lr, trainable=False)
        with tf.control_dependencies(list(logs.values())):
            train_op = v1.assign_add(gs, 1)
        if val is not None:
            v = tf.constant(_data(val))
            val_logs = _metric_tensors(v, metrics)
            hook_kw["validation_fn"] = lambda session: session.run(val_logs)
        hook = hookbridge.CallbackHook(
            callbacks,
            logs=logs,
            steps_per_epoch=spe,
            epochs=epochs,
            batch_size=batch,
            learning_rate=lr_var,
            verbose=verbose,
            **hook_kw,
        )
        steps, end_lr = 0, []

        class ReadLr(v1.train.SessionRunHook):
            def end(self, session):
                end_lr.append(float(session.run(lr_var)))

        with v1.train.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            hooks=[hook, ReadLr()],
            save_summaries_steps=None,
            save_checkpoint_steps=1 if checkpoint_dir else None,
            log_step_count_steps=None,
        ) as sess:
            while not sess.should_stop():
                sess.run(train_op)
                steps += 1
    return steps, end_lr[0]


def looped(
    callbacks,
    x=X,
    *,
    epochs=2,
    spe=5,
    metrics=True,
    val=None,
    verbose=0,
    lr=0.0,
    model=None,
    metric_objects=None,
    **loop_kw,
):
    """``native``'s training as a custom loop through ``hookbridge.CallbackLoop``: the same
    model and batches, a ``GradientTape`` step returning the loss, the compiled metrics
    (``zeta``, ``alpha``; or ``metric_objects``) updated by the step and given as ``metrics=``;
    returns the model, as ``native``."""
    model = model or _model(metrics, lr)
    if metric_objects is None:
        metric_objects = (
            [keras.metrics.MeanSquaredError(name="zeta"), keras.metrics.MeanAbsoluteError("alpha")]
            if metrics
            else []
        )
    loss_fn = keras.losses.MeanSquaredError()

    def logs(features, targets, predictions):
        for metric in metric_objects:
            metric.update_state(targets, predictions)
        return {"loss": loss_fn(targets, predictions)}

    def train_step(features, targets):
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            loss = loss_fn(targets, predictions)
        if model.trainable_variables:  # fit skips the optimizer with nothing to train
            grads = tape.gradient(loss, model.trainable_variables)
            model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return logs(features, targets, predictions)

    if val is not None:  # fit batches the arrays by 32: one batch here
        loop_kw["validation_data"] = [(_data(val), np.zeros_like(_data(val)))]
        loop_kw["validation_step"] = lambda batch: logs(*batch, model(batch[0]))
    ds = _batches(x, 2).map(lambda b: (b, tf.zeros_like(b))).repeat(epochs)
    loop = hookbridge.CallbackLoop(
        model,
        callbacks,
        data=ds,
        epochs=epochs,
        steps_per_epoch=spe,
        verbose=verbose,
        metrics=metric_objects,
        **loop_kw,
    )
    with loop:
        for _ in loop.epochs():
            for features, targets in loop.steps():
                loop.step_end(train_step(features, targets))
    return model


#: each scenario natively in fit, bridged (CallbackHook) and in a custom loop (CallbackLoop)
SIDES = (("native", native), ("bridged", bridged), ("loop", looped))


def _both(make, **kw):
    """{side: (callbacks, result)} for ``make(side)`` run natively, bridged and in a custom
    loop (``loop``)."""
    out = {}
    for side, run in SIDES:
        callbacks = make(side)
        out[side] = (callbacks, run(callbacks, **kw))
    return out


class KeyOrder(keras.callbacks.Callback):
    """The keys of every logs dict, in the order given."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(("batch", list(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(("epoch", list(logs)))

    def on_train_end(self, logs=None):
        self.seen.append(("end", list(logs or {})))


# -- item 1: log order --
def test_log_keys_in_the_order_keras_gives_them():
    """tf_keras: compile order (loss, zeta, alpha, then val_loss, val_zeta, val_alpha); Keras 3
    sorts them. Seen by a callback, ProgbarLogger's line and EarlyStopping's warning."""
    results = _both(lambda side: [KeyOrder()], val=[1.0, 2.0])
    orders = {side: cbs[0].seen for side, (cbs, _) in results.items()}
    assert orders["bridged"] == orders["native"] == orders["loop"]
    epoch_keys = next(k for kind, k in orders["native"] if kind == "epoch")
    train = ["loss", "zeta", "alpha"]
    expected = train + [f"val_{k}" for k in train]
    assert epoch_keys == (sorted(expected) if KERAS3 else expected)


def test_early_stopping_available_metrics_warning_lists_keras_order(caplog):
    """EarlyStopping on a missing monitor lists the available metrics in the logs' order."""
    messages = {}
    for side, run in SIDES:
        with _tf_log() as records:
            with pytest.warns(UserWarning) if KERAS3 else contextlib.nullcontext() as caught:
                run([keras.callbacks.EarlyStopping(monitor="nope", mode="min")], epochs=1)
        texts = [str(w.message) for w in caught] if KERAS3 else records
        messages[side] = [t for t in texts if "nope" in t]
    assert messages["native"] and messages["bridged"] == messages["native"] == messages["loop"]


# -- item 2: logs that are not running means --
class Total(keras.metrics.Metric):
    """tf_keras's ``AddAllOnes`` (test_progbar_logging_with_stateful_metrics): a running total."""

    def __init__(self, name="total", **kwargs):
        super().__init__(name=name, **kwargs)
        self.total = self.add_weight(name="total", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.total.assign_add(tf.reduce_sum(tf.cast(y_pred, "float32")))

    def result(self):
        return self.total


def _total_model():
    """``_model(False)`` compiled with a ``Total`` metric: one, reused across tests as ``_model``
    (its traced ``train_function`` kept; fit resets the metric at each epoch's begin)."""

    def build():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((1,)), keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse", metrics=[Total()])
        return model

    return reused_models.reused(("conformance identity", "total"), 0, build)


def _total_logs(reduction):
    def logs_fn(batch, metrics):
        total = v1.get_variable("total", initializer=0.0, trainable=False, use_resource=True)
        per_batch = tf.reduce_sum(batch)
        running = total.assign_add(per_batch)
        value = running if reduction == "last" else per_batch
        return {"loss": tf.reduce_mean(tf.square(batch)), "total": value}

    return logs_fn


@pytest.mark.parametrize("reduction", ["last", "sum"])
@pytest.mark.parametrize("batch_listener", [True, False], ids=["fetched", "graph_sums"])
def test_stateful_running_total_reduced_as_declared(reduction, batch_listener):
    """``log_reductions``: a running-total tensor with ``"last"``, or its per-batch increment
    with ``"sum"``, gives Keras's stateful metric result (7.0 after [1, 2], [3, 1]), batch by
    batch and at the epoch's end; the default mean gives the mean of the running values."""
    x = [1.0, 2.0, 3.0, 1.0]

    def make():
        history = keras.callbacks.History()
        rec = Recorder() if batch_listener else keras.callbacks.Callback()
        return [history, rec]

    nat = make()
    native(nat, x, epochs=1, spe=2, model=_total_model())
    bri = make()
    bridged(
        bri,
        x,
        epochs=1,
        spe=2,
        metrics=False,
        logs_fn=_total_logs(reduction),
        log_reductions={"total": reduction},
    )
    lop = make()
    looped(lop, x, epochs=1, spe=2, metrics=False, metric_objects=[Total()])
    assert nat[0].history["total"] == [7.0]
    assert bri[0].history == nat[0].history == lop[0].history
    if batch_listener:
        assert bri[1].events == nat[1].events == lop[1].events
    default = []
    bridged(
        [keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: default.append(logs))],
        x,
        epochs=1,
        spe=2,
        metrics=False,
        logs_fn=_total_logs("last"),
    )
    assert default[0]["total"] == pytest.approx((3.0 * 2 + 7.0 * 2) / 4)  # the documented mean


def test_log_reductions_checked():
    with pytest.raises(ValueError, match="log_reductions names 'x'"):
        hookbridge.CallbackHook([], logs={"loss": "loss"}, log_reductions={"x": "last"})
    with pytest.raises(ValueError, match=r"must be one of \['mean', 'last', 'sum'\]"):
        hookbridge.CallbackHook([], logs={"loss": "loss"}, log_reductions={"loss": "max"})
    with pytest.raises(TypeError, match="log_reductions must be a mapping"):
        hookbridge.CallbackHook([], logs={"loss": "loss"}, log_reductions=["loss"])


# -- item 5: a session resumed past the last epoch --
def test_resumed_past_the_last_epoch_trains_nothing(tmp_path):
    """Restarted at global step 10 with epochs=2 and 5 steps per epoch: no step, as
    ``fit(initial_epoch=2, epochs=2)``: on_train_begin, then on_train_end with no logs."""
    nat = Recorder()
    native([nat], epochs=2, initial_epoch=2)
    first = bridged([keras.callbacks.History()], checkpoint_dir=str(tmp_path))
    assert first[0] == 10
    rec = Recorder()
    steps, _ = bridged([rec], checkpoint_dir=str(tmp_path))
    assert steps == 0
    assert rec.events == nat.events == [("train_begin", {}), ("train_end", {})]
    lop = Recorder()
    looped([lop], epochs=2, initial_epoch=2)
    assert lop.events == nat.events


# -- item 6: one logs dict per event, shared --
class Writer(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        logs["written"] = batch

    def on_train_batch_end(self, batch, logs=None):
        logs["written_end"] = batch

    def on_epoch_end(self, epoch, logs=None):
        logs["written_epoch"] = epoch


class Reader(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_begin(self, batch, logs=None):
        self.seen.append(("begin", logs.get("written")))

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(("end", logs.get("written_end")))

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append(("epoch", logs.get("written_epoch")))


def test_a_callback_sees_what_an_earlier_one_wrote_into_the_logs():
    results = _both(lambda side: [Writer(), Reader()])
    seen = {side: cbs[1].seen for side, (cbs, _) in results.items()}
    assert seen["native"][:3] == [("begin", 0), ("end", 0), ("begin", 1)]
    assert seen["bridged"] == seen["native"] == seen["loop"]


# -- item 7: tf_keras's slow-callback warning --
@contextlib.contextmanager
def _tf_log():
    """Messages TensorFlow's logger (tf_keras's ``logging.warning``) emits inside the block."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep(logging.WARNING)
    logger = tf.get_logger()
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


class Slow(keras.callbacks.Callback):
    """Slower than its batch by construction, whatever the machine's load: ``on_train_batch_end``
    sleeps twice the time since ``on_train_batch_begin`` (which holds tf_keras's batch time), at
    least 50 ms. A fixed 50 ms sleep let a batch slowed past it by a loaded machine hide the
    warning."""

    def on_train_batch_begin(self, batch, logs=None):
        self.begun = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(max(0.05, 2 * (time.perf_counter() - self.begun)))


def _normalized(messages, needle):
    return [re.sub(r"\d+\.\d+s", "Ts", m) for m in messages if needle in m]


def test_slow_callback_warning_as_tf_keras_emits_it():
    """tf_keras (not Keras 3) warns once per run when a batch method is slower than the batch
    (the first 5 timed batches), naming the method; here ``on_train_batch_end``."""
    seen = {}
    for side, run in SIDES:
        with _tf_log() as records:
            run([Slow()])
        seen[side] = _normalized(records, "is slow compared to the batch time")
    expected = (
        []
        if KERAS3
        else [
            "Callback method `on_train_batch_end` is slow compared to the batch time (batch "
            "time: Ts vs `on_train_batch_end` time: Ts). Check your callbacks."
        ]
    )
    assert seen["native"] == expected
    assert seen["bridged"] == seen["native"] == seen["loop"]


def test_default_callbacks_no_warning():
    """test_default_callbacks_no_warning: Keras's own callbacks are never timed (tf_keras's
    ``globals()`` check), so no warning, even with a progress bar (a batch listener)."""
    for run in (native, bridged, looped):
        with _tf_log() as records:
            run([keras.callbacks.TerminateOnNaN(), keras.callbacks.History()], verbose=1)
        assert _normalized(records, "is slow compared") == []


# -- item 11: verbose prints the progress bar, as fit --
def _progbar_text(text: str) -> str:
    """The progress output without timings (``- 0s``, ``5ms/step``, ``12ms/epoch``)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = re.sub(r"\s*-?\s*\d+(\.\d+)?(s|ms|us|µs)(/step|/epoch)?", "", text)
    text = re.sub(r"[ \t]+", " ", text.replace("\r", "\n").replace("\x08", ""))
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def _headers_and_final_lines(lines: list[str]) -> list[str]:
    """Each epoch's header (``Epoch i/n``) and the last line printed under it, the epoch's
    final line (its values, with ``val_*``). The lines in between depend on time, not on the
    values: Progbar prints an update only when its interval (50 ms) passed since the last one,
    so a loaded machine prints more of them, on one side and not the other; the last step's
    update (``5/5``, before validation) too, whatever it shows (tf_keras: ``ETA``, Keras 3: a
    time)."""
    kept: list[str] = []
    for line in lines:
        if line.startswith("Epoch"):
            kept += [line, "<no line printed under the header>"]
        elif kept:
            kept[-1] = line
    return kept


@pytest.mark.parametrize("verbose", [1, 2])
def test_verbose_prints_progress_as_fit(capsys, verbose):
    out = {}
    for side, run in SIDES:
        run([], verbose=verbose, val=[1.0, 2.0])
        out[side] = _headers_and_final_lines(_progbar_text(capsys.readouterr().out).splitlines())
    native_text = "\n".join(out["native"])
    assert len(out["native"]) == 4 and "Epoch 2/2" in native_text, native_text
    assert all("loss" in line and "val_loss" in line for line in out["native"][1::2]), native_text
    assert out["bridged"] == out["native"] == out["loop"]


def test_verbose_0_prints_nothing_and_a_given_progbar_is_not_doubled(capsys):
    bridged([], verbose=0)
    assert capsys.readouterr().out == ""
    hook = hookbridge.CallbackHook([keras.callbacks.ProgbarLogger()], logs={})
    assert len(hook.active_callbacks) == 1
    assert isinstance(
        hookbridge.CallbackHook([], logs={}).active_callbacks[0], keras.callbacks.ProgbarLogger
    )


# -- tf_keras callbacks_test.py: CallbackCountsTest --
CALLBACK_HOOKS = [
    "on_batch_begin", "on_batch_end", "on_epoch_begin", "on_epoch_end",
    "on_predict_batch_begin", "on_predict_batch_end", "on_predict_begin", "on_predict_end",
    "on_test_batch_begin", "on_test_batch_end", "on_test_begin", "on_test_end",
    "on_train_batch_begin", "on_train_batch_end", "on_train_begin", "on_train_end",
]  # fmt: skip


class Counter(keras.callbacks.Callback):
    """tf_keras's ``Counter``: counts each method's calls (wrapped on the instance)."""

    def __init__(self):
        super().__init__()
        self.method_counts = dict.fromkeys(CALLBACK_HOOKS, 0)
        for name in CALLBACK_HOOKS:
            setattr(self, name, self._counting(name, getattr(self, name)))

    def _counting(self, name, method):
        def call(*args, **kwargs):
            self.method_counts[name] += 1
            return method(*args, **kwargs)

        return call


def test_callback_hooks_are_called_in_fit():
    """test_callback_hooks_are_called_in_fit: epochs of 5 steps with validation; counts as
    fit's (the bridged validation is one test batch per epoch). tf_keras's test runs 5 epochs;
    2 here: every count the same multiple of the epochs, 3 epochs fewer on each side."""
    results = _both(lambda side: [Counter()], epochs=2, val=[1.0, 2.0, 3.0, 4.0])
    counts = {side: cbs[0].method_counts for side, (cbs, _) in results.items()}
    expected = dict.fromkeys(CALLBACK_HOOKS, 0)
    expected.update(
        on_batch_begin=10, on_batch_end=10, on_epoch_begin=2, on_epoch_end=2,
        on_test_batch_begin=2, on_test_batch_end=2, on_test_begin=2, on_test_end=2,
        on_train_batch_begin=10, on_train_batch_end=10, on_train_begin=1, on_train_end=1,
    )  # fmt: skip
    # natively, the 4 validation samples are one batch too (fit batches arrays by 32; tf_keras's
    # test has 10 samples in batches of 2)
    native_expected = dict(expected, on_test_batch_begin=2, on_test_batch_end=2)
    native_counts = dict(counts["native"])
    assert native_counts == native_expected
    assert counts["bridged"] == expected
    assert counts["loop"] == native_expected


# -- KerasCallbacksTest ---------------------------------------------------------------------------
def test_progbar_logging_with_stateful_metrics(capsys):
    """test_progbar_logging_with_stateful_metrics: the line shows ``total: 7.0000``."""
    out = {}
    native([], [1.0, 2.0, 3.0, 1.0], epochs=1, spe=2, model=_total_model(), verbose=2)
    out["native"] = _progbar_text(capsys.readouterr().out)
    bridged(
        [],
        [1.0, 2.0, 3.0, 1.0],
        epochs=1,
        spe=2,
        metrics=False,
        verbose=2,
        logs_fn=_total_logs("last"),
        log_reductions={"total": "last"},
    )
    out["bridged"] = _progbar_text(capsys.readouterr().out)
    looped(
        [],
        [1.0, 2.0, 3.0, 1.0],
        epochs=1,
        spe=2,
        metrics=False,
        verbose=2,
        model=_model(False),
        metric_objects=[Total()],
    )
    out["loop"] = _progbar_text(capsys.readouterr().out)
    assert "total: 7.0000" in out["native"]
    assert out["bridged"] == out["native"] == out["loop"] == out["loop"]


def test_EarlyStopping_patience():
    """test_EarlyStopping_patience / with baseline: stops after ``patience`` epochs without
    improvement; here the loss never improves (lr 0, same data each epoch)."""
    results = _both(
        lambda side: [keras.callbacks.EarlyStopping("loss", patience=2), Recorder()], epochs=6
    )
    ends = {s: [e[1] for e in c[1].events if e[0] == "epoch_end"] for s, (c, _) in results.items()}
    assert ends["native"] == [0, 1, 2]
    assert ends["bridged"] == ends["native"] == ends["loop"]
    assert ends["loop"] == ends["native"]
    stopped = {side: cbs[0].stopped_epoch for side, (cbs, _) in results.items()}
    assert stopped == {"native": 2, "bridged": 2, "loop": 2}


def test_EarlyStopping_baseline():
    results = _both(
        lambda side: [keras.callbacks.EarlyStopping("loss", baseline=0.1, patience=1), Recorder()],
        epochs=4,
    )
    ends = {s: [e[1] for e in c[1].events if e[0] == "epoch_end"] for s, (c, _) in results.items()}
    assert ends["native"] == [0, 1] and ends["bridged"] == ends["native"] == ends["loop"]


def test_ModelCheckpoint_save_best_only_and_epoch_files(tmp_path):
    """test_ModelCheckpoint: one file per epoch with ``{epoch:02d}``; ``save_best_only`` keeps
    the first (the loss never improves)."""
    files = {}
    for side, run in SIDES:
        d = tmp_path / side
        d.mkdir()
        every = keras.callbacks.ModelCheckpoint(
            str(d / "every.{epoch:02d}.weights.h5"), save_weights_only=True
        )
        best = keras.callbacks.ModelCheckpoint(
            str(d / "best.{epoch:02d}.weights.h5"),
            save_weights_only=True,
            save_best_only=True,
            monitor="loss",
        )
        run([every, best], epochs=3)
        files[side] = sorted(p.name for p in d.iterdir())
    assert files["native"] == [
        "best.01.weights.h5",
        "every.01.weights.h5",
        "every.02.weights.h5",
        "every.03.weights.h5",
    ]
    assert files["bridged"] == files["native"] == files["loop"]


def test_ReduceLROnPlateau():
    """test_ReduceLROnPlateau: no improvement for ``patience`` epochs cuts the rate by
    ``factor`` (the logs carry it from the next epoch on)."""
    results = _both(
        lambda side: [
            keras.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=1, min_delta=10),
            Recorder(),
        ],
        epochs=4,
        lr=0.1,
    )
    lrs = {
        s: [round(float(e[2].get(LR_KEY, -1)), 6) for e in c[1].events if e[0] == "epoch_end"]
        for s, (c, _) in results.items()
    }
    assert lrs["bridged"] == lrs["native"] == lrs["loop"]
    native_lr = float(keras.backend.get_value(results["native"][1].optimizer.learning_rate))
    assert results["bridged"][1][1] == pytest.approx(native_lr)
    assert float(keras.backend.get_value(results["loop"][1].optimizer.learning_rate)) == native_lr
    assert native_lr < 0.1


def test_LearningRateScheduler():
    """test_LearningRateScheduler: the rate set to ``1 / (1 + epoch)`` before each epoch."""
    results = _both(
        lambda side: [keras.callbacks.LearningRateScheduler(lambda e: 1.0 / (1.0 + e))],
        epochs=3,
        lr=0.1,
    )
    native_lr = float(keras.backend.get_value(results["native"][1].optimizer.learning_rate))
    assert native_lr == pytest.approx(1.0 / 3.0)
    assert results["bridged"][1][1] == pytest.approx(native_lr)
    assert float(keras.backend.get_value(results["loop"][1].optimizer.learning_rate)) == native_lr


def test_CSVLogger_rows_and_append(tmp_path):
    """test_CSVLogger: a header then one row per epoch; ``append=True`` adds rows to the file
    without a second header."""
    rows = {}
    for side, run in SIDES:
        path = str(tmp_path / f"{side}.csv")
        run([keras.callbacks.CSVLogger(path)], val=[1.0, 2.0])
        run([keras.callbacks.CSVLogger(path, append=True)], epochs=1, val=[1.0, 2.0])
        with open(path) as f:
            rows[side] = list(csv.reader(f))
    assert len(rows["native"]) == 4 and rows["native"][0][0] == "epoch"
    assert _csv_values(rows["bridged"]) == _csv_values(rows["native"]) == _csv_values(rows["loop"])


def _csv_values(rows):
    """CSV rows with the numbers rounded to 6 significant digits: Keras averages in float32
    (``1.9500000476837158``), CallbackHook in float64 (``1.95``): docs/limits.md."""

    def cell(v):
        try:
            return float(f"{float(v):.6g}")
        except ValueError:
            return v

    return [[cell(v) for v in row] for row in rows]


def test_csv_values_are_float64_means_documented(tmp_path):
    """The documented difference (docs/limits.md): the same means, printed from float64 by the
    bridge, from float32 by Keras; equal to float32 precision."""
    rows = {}
    for side, run in SIDES:
        path = str(tmp_path / f"{side}.csv")
        run([keras.callbacks.CSVLogger(path)], epochs=1)
        with open(path) as f:
            rows[side] = next(csv.DictReader(f))
    assert rows["bridged"]["loss"] == repr(float(np.mean(np.square(X))))  # float64: 4.925
    assert float(rows["native"]["loss"]) == pytest.approx(float(rows["bridged"]["loss"]), rel=1e-6)
    # CallbackLoop sums in Python floats too (docs/custom-loops.md, limits)
    assert rows["loop"]["loss"] == rows["bridged"]["loss"]


def test_TerminateOnNaN():
    """test_TerminateOnNaN: a NaN loss stops training at that batch (one epoch ends)."""
    x = [1.0, 2.0, 3.0, 1.0, float("nan"), 1.0, 2.0, 2.0, 4.0, 1.0]
    results = _both(lambda side: [keras.callbacks.TerminateOnNaN(), Recorder()], x=x, epochs=2)
    events = {s: c[1].events for s, (c, _) in results.items()}
    ends = [e for e in events["native"] if e[0] == "train_batch_end"]
    assert len(ends) == 3 and math.isnan(ends[-1][2]["loss"])
    assert repr(events["bridged"]) == repr(events["native"]) == repr(events["loop"])


def test_LambdaCallback():
    """test_LambdaCallback: its functions called as the events come."""
    seen = {}
    for side, run in SIDES:
        log = []
        run(
            [
                keras.callbacks.LambdaCallback(
                    on_epoch_begin=lambda e, logs, log=log: log.append(("begin", e)),
                    on_epoch_end=lambda e, logs, log=log: log.append(
                        ("end", e, round(logs["loss"], 5))
                    ),
                    on_train_end=lambda logs, log=log: log.append("done"),
                )
            ]
        )
        seen[side] = log
    assert seen["native"][-1] == "done" and seen["bridged"] == seen["native"] == seen["loop"]


class _Collect(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _Collect.received.append(body)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_RemoteMonitor(monkeypatch):
    """test_RemoteMonitor: one POST per epoch end, its payload the epoch's logs, in order."""
    pytest.importorskip("requests")
    server = http.server.HTTPServer(("127.0.0.1", 0), _Collect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    root = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    payloads = {}
    try:
        for side, run in SIDES:
            _Collect.received = []
            run([keras.callbacks.RemoteMonitor(root=root, send_as_json=True)], val=[1.0, 2.0])
            payloads[side] = [list(json.loads(body)) for body in _Collect.received]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert len(payloads["native"]) == 2
    assert payloads["bridged"] == payloads["native"] == payloads["loop"]


def test_TensorBoard_epoch_scalars(tmp_path):
    """test_TensorBoard (epoch level): the same ``epoch_*`` scalars, read back with
    TensorBoard's EventAccumulator."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = {}
    for side, run in SIDES:
        run([keras.callbacks.TensorBoard(str(tmp_path / side))])
        acc = EventAccumulator(str(tmp_path / side / "train"), size_guidance={"tensors": 0})
        acc.Reload()
        scalars[side] = {
            tag: [round(float(tf.make_ndarray(e.tensor_proto)), 5) for e in acc.Tensors(tag)]
            for tag in acc.Tags()["tensors"]
            if tag in ("epoch_loss", "epoch_zeta", "epoch_alpha")
        }
    assert set(scalars["native"]) == {"epoch_loss", "epoch_zeta", "epoch_alpha"}
    assert scalars["bridged"] == scalars["native"] == scalars["loop"]


def test_stop_training_csv(tmp_path):
    """test_stop_training_csv: a callback stopping mid-run; CSVLogger still writes the epoch."""

    class StopAtBatch(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.model.stop_training = True

    rows = {}
    for side, run in SIDES:
        path = str(tmp_path / f"{side}.csv")
        run([StopAtBatch(), keras.callbacks.CSVLogger(path)], epochs=3)
        with open(path) as f:
            rows[side] = list(csv.reader(f))
    assert len(rows["native"]) == 2
    assert _csv_values(rows["bridged"]) == _csv_values(rows["native"]) == _csv_values(rows["loop"])


# -- test_ModelCheckpoint's cases (weights files) ----------------------------------------------
MODEL_CHECKPOINT_CASES = {
    # Case 5: the monitored metric is not available: no file
    "unknown_monitor": (
        dict(monitor="unknown", mode="min", save_best_only=True),
        "ckpt.weights.h5",
    ),
    # Case 8: an integer save_freq counts batches across epochs
    "save_freq_7": (dict(save_freq=7), "ckpt.{epoch:02d}.weights.h5"),
    # Case 11: save_freq=1 with the batch in the file name
    "save_freq_1_batch": (dict(save_freq=1), "ckpt.{epoch:02d}b{batch:02d}.weights.h5"),
    # Case 14: initial_value_threshold=0 with mode="min": never better, no file
    "threshold_never": (
        dict(monitor="loss", mode="min", save_best_only=True, initial_value_threshold=0),
        "ckpt.weights.h5",
    ),
    # Case 12: a threshold every epoch beats
    "threshold_beaten": (
        dict(monitor="loss", mode="min", save_best_only=True, initial_value_threshold=100),
        "ckpt.{epoch:02d}.weights.h5",
    ),
    # Case 6 (tf_keras / Keras 2 only): the deprecated `period`
    "period_2": (dict(period=2), "ckpt.{epoch:02d}.weights.h5"),
}


#: Cases whose scenario CI runs in test_keras_callbacks_ported_more (on every stack, each saved
#: file's weights checked as well): unknown_monitor in test_model_checkpoint_monitor_not_available
#: (its warnings too), save_freq_7 in test_model_checkpoint_integer_save_freq[every_3_steps] (an
#: integer save_freq counted across epochs), save_freq_1_batch in its every_step_batch_in_name
#: ({batch} in the name, save_freq=1), threshold_never in
#: test_model_checkpoint_val_loss_and_initial_value_threshold[case13_min]. Deep here.
DEEP_CHECKPOINT_CASES = {"unknown_monitor", "save_freq_7", "save_freq_1_batch", "threshold_never"}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.deep) if case in DEEP_CHECKPOINT_CASES else case
        for case in MODEL_CHECKPOINT_CASES
    ],
)
def test_ModelCheckpoint_cases(tmp_path, case):
    """test_ModelCheckpoint's cases 5, 6, 8, 11, 12, 14: the same files written natively and
    bridged (4 epochs of 5 steps)."""
    kwargs, name = MODEL_CHECKPOINT_CASES[case]
    if case == "period_2" and KERAS3:
        pytest.skip("Keras 3's ModelCheckpoint has no `period`")
    files = {}
    for side, run in SIDES:
        d = tmp_path / side
        d.mkdir()
        callback = keras.callbacks.ModelCheckpoint(str(d / name), save_weights_only=True, **kwargs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the unknown monitor's warning, on both sides
            run([callback], epochs=4)
        files[side] = sorted(p.name for p in d.iterdir())
    expected = {
        # tf_keras skips the save (warning); Keras 3 warns and saves
        "unknown_monitor": ["ckpt.weights.h5"] if KERAS3 else [],
        "save_freq_7": ["ckpt.02.weights.h5", "ckpt.03.weights.h5"],
        "threshold_never": [],
        "threshold_beaten": ["ckpt.01.weights.h5"],
        "period_2": ["ckpt.02.weights.h5", "ckpt.04.weights.h5"],
    }
    if case == "save_freq_1_batch":
        assert len(files["native"]) == 20
    else:
        assert files["native"] == expected[case]
    assert files["bridged"] == files["native"] == files["loop"]


@pytest.mark.deep
def test_LearningRateScheduler_verbose_and_halving(capsys):
    """test_LearningRateScheduler: ``verbose=1`` prints the rate it sets; a two-argument schedule
    ``lambda epoch, lr: lr / 2`` reads the current rate (0.1 -> 0.025 after two epochs). Deep:
    CI runs both halves on every stack in test_keras_callbacks_ported_more:
    ``test_verbose_messages_as_native[LearningRateScheduler]`` (the verbose lines, equal on the
    three sides) and ``test_learning_rate_scheduler_sets_the_rate[dependent_on_previous_rate]``
    (``lr / 2`` twice, the rate left in each side's optimizer)."""
    out, lrs = {}, {}
    for side, run in SIDES:
        result = run(
            [keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr / 2, verbose=1)], lr=0.1
        )
        out[side] = [
            line for line in capsys.readouterr().out.splitlines() if "LearningRateScheduler" in line
        ]
        lrs[side] = (
            result[1]
            if side == "bridged"
            else float(keras.backend.get_value(result.optimizer.learning_rate))
        )
    assert len(out["native"]) == 2 and out["bridged"] == out["native"] == out["loop"]
    assert lrs["native"] == pytest.approx(0.025) and lrs["bridged"] == pytest.approx(0.025)
    assert lrs["loop"] == lrs["native"]


@pytest.mark.deep
def test_EarlyStopping_with_start_from_epoch():
    """test_EarlyStopping_with_start_from_epoch: no stop before ``start_from_epoch``, then
    ``patience`` epochs without improvement. Deep: CI runs the scenario on every stack in
    test_keras_callbacks_ported's ``test_early_stopping_baseline_and_start_from_epoch``
    [start_from_epoch] (a known loss sequence: the same epoch logs to EarlyStopping)."""
    results = _both(
        lambda side: [
            keras.callbacks.EarlyStopping("loss", patience=1, start_from_epoch=2),
            Recorder(),
        ],
        epochs=8,
    )
    ends = {s: [e[1] for e in c[1].events if e[0] == "epoch_end"] for s, (c, _) in results.items()}
    assert len(ends["native"]) < 8 and ends["bridged"] == ends["native"] == ends["loop"]
