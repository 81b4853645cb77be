"""More of Keras's own callback tests (``keras/src/callbacks/*_test.py``, Keras 3.15), each run
natively in ``fit`` beside the same scenario in a TF1 ``MonitoredSession`` with ``CallbackHook``.

The oracle is that of ``test_keras_callbacks_ported`` (whose helpers this file imports): a batch's
loss is ``mean(x**2)`` on both sides. Where a Keras test needs weights that change (which
checkpoint holds what, which weights ``restore_best_weights`` brings back), a :class:`Stamp`
callback writes a value naming the moment into the kernel (the native Dense kernel; a ``(1, 1)``
graph variable on the bridged side) and resets it to 1 before any step or validation, so the
losses stay the oracle's. Each test checks that both sides agree and that the outcome is the one
Keras's test expects.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

from .test_keras_callbacks_ported import (
    KERAS3,
    Bridged,
    Recorder,
    _batches,
    _data,
    _eval_graph,
    _history,
    _identity_model,
    _per_epoch,
    _run_session,
    _unknown_length,
    _with_zero_targets,
    bridged_fit,
    loop_fit,
    native_fit,
)

keras = tf.keras
v1 = tf.compat.v1
KERAS215 = tf.__version__.startswith("2.15.")
LR_KEY = "learning_rate" if KERAS3 else "lr"
#: each scenario natively in fit, bridged (CallbackHook) and in a custom loop (CallbackLoop)
SIDES = (("native", native_fit), ("bridged", bridged_fit), ("loop", loop_fit))


# -- helpers ---------------------------------------------------------------------------------------
def _kernel(batch):
    """``bridged_fit``'s ``size_fn`` that also builds the oracle's kernel in the graph: a trainable
    ``(1, 1)`` variable of ones, what the bridged model's get/set/save_weights cover (natively the
    Dense kernel). Returns the batch: each batch still weighted by its size."""
    v1.get_variable("kernel", initializer=tf.ones([1, 1]))
    return batch


def _run_both(make_callbacks, x, **fit_kw):
    """{side: (callbacks, result)}: ``make_callbacks(side)`` run natively (result: the model),
    bridged with a kernel variable (result: ``Bridged``) and in a custom loop (``loop``, result:
    the model)."""
    native = make_callbacks("native")
    bridged = make_callbacks("bridged")
    looped = make_callbacks("loop")
    return {
        "native": (native, native_fit(native, x, **fit_kw)),
        "bridged": (bridged, bridged_fit(bridged, x, size_fn=_kernel, **fit_kw)),
        "loop": (looped, loop_fit(looped, x, **fit_kw)),
    }


def _set_kernel(model, value: float) -> None:
    model.set_weights([np.full((1, 1), value, dtype="float32")])


class Stamp(keras.callbacks.Callback):
    """Sets the kernel to ``epoch + 1`` (the 1-based epoch, as ``{epoch}`` formats it) at each
    epoch end, for the callbacks after it; back to 1 before the next epoch and validation."""

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch
        _set_kernel(self.model, 1.0)

    def on_test_begin(self, logs=None):
        _set_kernel(self.model, 1.0)

    def on_epoch_end(self, epoch, logs=None):
        _set_kernel(self.model, epoch + 1)


class BatchStamp(Stamp):
    """Also ``100 * (epoch + 1) + batch + 1`` at each batch end; 1 again before each step."""

    def on_train_batch_begin(self, batch, logs=None):
        _set_kernel(self.model, 1.0)

    def on_train_batch_end(self, batch, logs=None):
        _set_kernel(self.model, 100 * (self.epoch + 1) + batch + 1)


class WeightsAtEnd(keras.callbacks.Callback):
    """The kernel in ``on_train_end`` (listed last: after EarlyStopping restored its best)."""

    value = None

    def on_train_end(self, logs=None):
        self.value = float(np.asarray(self.model.get_weights()[0]).reshape(-1)[0])


class StopAt(keras.callbacks.Callback):
    """Another callback requesting the stop at the end of epoch ``epoch``."""

    def __init__(self, epoch: int) -> None:
        super().__init__()
        self.at = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.at:
            self.model.stop_training = True


def _saved(directory, side: str) -> dict:
    """{file name: saved kernel} of a ModelCheckpoint directory: native files loaded into a new
    model (Keras's ``load_weights``), bridged ones read with ``hookbridge.read_weights``."""
    out = {}
    if not os.path.isdir(directory):  # nothing saved (nor the directory made)
        return out
    # one model loads every file in turn (each load sets its one weight): a new one per file
    # was a build (and compile) a file, the pool's models being held until the test ends
    model = _identity_model() if side != "bridged" else None
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if model is not None:  # native and loop: Keras's files
            model.load_weights(path)
            value = model.get_weights()[0]
        else:
            value = hookbridge.read_weights(path)["kernel"]
        out[name] = float(np.asarray(value).reshape(-1)[0])
    return out


def _lr(result) -> float:
    """The rate left at the end: the native model's optimizer, or the bridged graph variable."""
    if isinstance(result, Bridged):
        return result.lr
    return float(np.asarray(result.optimizer.learning_rate))


def _final_lr(runs) -> dict:
    return {side: _lr(result) for side, (_, result) in runs.items()}


class _ListHandler(logging.Handler):
    def __init__(self, messages: list) -> None:
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _keras_warnings():
    """The messages Keras warns with: ``warnings.warn`` (Keras 3), the ``tensorflow`` logger
    (tf_keras / Keras 2). Complete once the block has ended."""
    messages: list[str] = []
    logger = logging.getLogger("tensorflow")
    handler = _ListHandler(messages)
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
    finally:
        logger.removeHandler(handler)
    messages.extend(str(w.message) for w in caught)


# -- model_checkpoint_test.py ----------------------------------------------------------------------
#: A mode (and an ``initial_value_threshold``) is ModelCheckpoint's own comparison of the value the
#: logs give it: under CallbackHook the logs, the ``{epoch}``/``{loss}`` names and the proxy's
#: ``save_weights`` are the same whatever it decides. CI keeps a variant of each outcome the bridge
#: serves (every epoch saved, the improving epochs saved, nothing saved) and the default mode;
#: the other modes and thresholds, the same path deciding otherwise, are deep.
deep = pytest.mark.deep


@pytest.mark.parametrize(
    ("mode", "best_only", "expected"),
    [
        # "auto" on a monitor named *loss is "min" (Keras 3 and 2): "auto" in CI covers it
        pytest.param("min", True, {"w-01-5.00": 1, "w-02-3.00": 2, "w-04-2.00": 4}, marks=deep),
        ("auto", True, {"w-01-5.00": 1, "w-02-3.00": 2, "w-04-2.00": 4}),
        # the improving epochs of the other direction: the same saves at other epochs
        pytest.param("max", True, {"w-01-5.00": 1, "w-05-6.00": 5}, marks=deep),
        (
            "auto",
            False,
            {"w-01-5.00": 1, "w-02-3.00": 2, "w-03-4.00": 3, "w-04-2.00": 4, "w-05-6.00": 5},
        ),
    ],
    ids=["min", "auto", "max", "every_epoch"],
)
def test_model_checkpoint_save_best_only_modes(tmp_path, mode, best_only, expected):
    """model_checkpoint_test.py ``test_model_checkpoint_options`` cases 2-4 (``save_best_only``
    with each mode) and 8b (``save_weights_only``), on the training loss 5, 3, 4, 2, 6 with
    ``{epoch:02d}-{loss:.2f}`` in the path: the same files, each holding its epoch's weights."""
    losses = [5.0, 3.0, 4.0, 2.0, 6.0]

    def make(side):
        path = str(tmp_path / side / "w-{epoch:02d}-{loss:.2f}.weights.h5")
        checkpoint = keras.callbacks.ModelCheckpoint(
            path, monitor="loss", mode=mode, save_best_only=best_only, save_weights_only=True
        )
        return [Stamp(), checkpoint]

    _run_both(
        make, _per_epoch(losses), batch_size=1, epochs=len(losses), steps_per_epoch=1, repeat=False
    )
    saved = {side: _saved(tmp_path / side, side) for side, _ in SIDES}
    assert saved["bridged"] == saved["native"] == saved["loop"]
    assert saved["native"] == {f"{name}.weights.h5": v for name, v in expected.items()}


@pytest.mark.parametrize(
    ("mode", "best_only", "threshold", "expected"),
    [
        # CI: every epoch saved (case1), the first only (case12, the default mode), none
        # (case13: the threshold never beaten, no directory made); deep: the same outcomes
        # reached by another mode or threshold (ModelCheckpoint's comparisons, see above)
        ("auto", False, None, ["01", "02", "03"]),
        pytest.param("min", True, None, ["01"], marks=deep),
        pytest.param("max", True, -0.01, ["01"], marks=deep),
        ("auto", True, None, ["01"]),
        ("min", True, 0.0, []),
        pytest.param("auto", True, 0.0, [], marks=deep),
        pytest.param("min", True, 6.0, ["01"], marks=deep),
    ],
    ids=["case1", "min", "case11_max", "case12_auto", "case13_min", "case14_auto", "min_above"],
)
def test_model_checkpoint_val_loss_and_initial_value_threshold(
    tmp_path, mode, best_only, threshold, expected
):
    """model_checkpoint_test.py ``test_model_checkpoint_options`` case 1 and cases 11-14
    (``initial_value_threshold``), monitoring ``val_loss`` (5.0 each epoch: only a strict
    improvement on the best, or on the threshold, saves)."""

    def make(side):
        checkpoint = keras.callbacks.ModelCheckpoint(
            str(tmp_path / side / "{epoch:02d}.weights.h5"),
            monitor="val_loss",
            mode=mode,
            save_best_only=best_only,
            save_weights_only=True,
            initial_value_threshold=threshold,
        )
        return [Stamp(), checkpoint, keras.callbacks.History()]

    runs = _run_both(make, np.arange(1, 5), batch_size=2, epochs=3, steps_per_epoch=2, val=[1, 3])
    saved = {side: _saved(tmp_path / side, side) for side, _ in SIDES}
    assert saved["bridged"] == saved["native"] == saved["loop"]
    assert saved["native"] == {f"{e}.weights.h5": int(e) for e in expected}
    assert _history(runs["bridged"][0][2:]) == _history(runs["native"][0][2:])
    assert _history(runs["loop"][0][2:]) == _history(runs["native"][0][2:])
    assert _history(runs["native"][0][2:])[1]["val_loss"] == [5.0] * 3


@pytest.mark.parametrize(
    ("path", "save_freq", "epochs", "expected"),
    [
        ("e{epoch:02d}.weights.h5", 3, 6, {"e02": 201, "e03": 302, "e05": 501, "e06": 602}),
        (
            "e{epoch:02d}b{batch:02d}-{loss:.2f}.weights.h5",
            1,
            2,
            {"e01b01-2.50": 101, "e01b02-7.50": 102, "e02b01-2.50": 201, "e02b02-7.50": 202},
        ),
    ],
    ids=["every_3_steps", "every_step_batch_in_name"],
)
def test_model_checkpoint_integer_save_freq(tmp_path, path, save_freq, epochs, expected):
    """model_checkpoint_test.py ``test_model_checkpoint_options`` cases 8a/8b (an integer
    ``save_freq`` counts steps across epochs) and 10b (``{batch}`` in the path, ``save_freq=1``):
    saved at the same steps, named from the batch logs (running means 2.5, 7.5), holding the
    weights of that step's end."""

    def make(side):
        checkpoint = keras.callbacks.ModelCheckpoint(
            str(tmp_path / side / path), save_freq=save_freq, save_weights_only=True
        )
        return [BatchStamp(), checkpoint]

    _run_both(make, np.arange(1, 5), batch_size=2, epochs=epochs, steps_per_epoch=2)
    saved = {side: _saved(tmp_path / side, side) for side, _ in SIDES}
    assert saved["bridged"] == saved["native"] == saved["loop"]
    assert saved["native"] == {f"{name}.weights.h5": v for name, v in expected.items()}


def test_model_checkpoint_monitor_not_available(tmp_path):
    """model_checkpoint_test.py ``test_model_checkpoint_options`` case 5: ``monitor="unknown"``
    with ``save_best_only``: a warning at each epoch; Keras 3 saves anyway, tf_keras / Keras 2
    skip the save."""
    saved, messages = {}, {}
    for side, fit in SIDES:
        path = str(tmp_path / side / "best.weights.h5")
        checkpoint = keras.callbacks.ModelCheckpoint(
            path, monitor="unknown", mode="min", save_best_only=True, save_weights_only=True
        )
        kw = {"size_fn": _kernel} if side == "bridged" else {}
        with _keras_warnings() as caught:
            fit([checkpoint], np.arange(1, 5), batch_size=2, epochs=2, steps_per_epoch=2, **kw)
        saved[side] = os.path.exists(path)
        messages[side] = [m for m in caught if "Can save best model only with unknown" in m]
    assert saved["bridged"] == saved["native"] == saved["loop"] == KERAS3
    assert messages["bridged"] == messages["native"] == messages["loop"]
    assert len(messages["native"]) == 2


def test_model_checkpoint_full_model_is_refused(tmp_path):
    """model_checkpoint_test.py ``test_model_checkpoint_loading`` (default: a full ``.keras``
    model, loaded back with ``load_model``). Natively it loads; under CallbackHook a ``.keras``
    archive is refused with a named error, as documented (docs/callbacks.md, ModelCheckpoint:
    "works, weights only")."""
    native_path = str(tmp_path / "native.keras")
    checkpoint = keras.callbacks.ModelCheckpoint(native_path, monitor="loss", save_best_only=True)
    model = native_fit([checkpoint], np.arange(1, 5), batch_size=2, epochs=1, steps_per_epoch=2)
    loaded = keras.models.load_model(native_path)
    np.testing.assert_allclose(loaded.get_weights()[0], model.get_weights()[0])
    loop_path = str(tmp_path / "loop.keras")  # a custom loop trains a real model: as native
    checkpoint = keras.callbacks.ModelCheckpoint(loop_path, monitor="loss", save_best_only=True)
    model = loop_fit([checkpoint], np.arange(1, 5), batch_size=2, epochs=1, steps_per_epoch=2)
    loaded = keras.models.load_model(loop_path)
    np.testing.assert_allclose(loaded.get_weights()[0], model.get_weights()[0])
    bridged = keras.callbacks.ModelCheckpoint(
        str(tmp_path / "bridged.keras"), monitor="loss", save_best_only=True
    )
    with pytest.raises(hookbridge.UnsupportedModelAttributeError, match=r"\.keras archive"):
        bridged_fit([bridged], np.arange(1, 5), batch_size=2, epochs=1, steps_per_epoch=2)
    assert not (tmp_path / "bridged.keras").exists()


def test_model_checkpoint_weights_load_back(tmp_path):
    """model_checkpoint_test.py ``test_model_checkpoint_loading`` (weights): the best epoch's
    weights (loss 5, 3, 4: epoch 2) load back into a new model, natively with ``load_weights``,
    bridged with ``hookbridge.load_weights`` into a new session of a new graph."""
    losses = [5.0, 3.0, 4.0]

    def make(side):
        path = str(tmp_path / f"{side}.weights.h5")
        return [
            Stamp(),
            keras.callbacks.ModelCheckpoint(
                path, monitor="loss", save_best_only=True, save_weights_only=True
            ),
        ]

    _run_both(make, _per_epoch(losses), batch_size=1, epochs=3, steps_per_epoch=1, repeat=False)
    native = _identity_model()
    native.load_weights(str(tmp_path / "native.weights.h5"))
    graph = tf.Graph()
    with graph.as_default():
        kernel = v1.get_variable("kernel", initializer=tf.zeros([1, 1]))
        with v1.train.MonitoredSession() as sess:
            loaded = hookbridge.load_weights(sess, str(tmp_path / "bridged.weights.h5"))
            value = sess.run(kernel)
    assert loaded == ["kernel"]
    assert float(value[0, 0]) == float(native.get_weights()[0][0, 0]) == 2.0


# -- early_stopping_test.py ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("losses", "kwargs", "stop_at", "trained", "expected"),
    [
        ([0.2, 0.15, 0.1, 0.11, 0.12], {"patience": 2}, None, 5, 3.0),
        # EarlyStopping stops and restores itself, as in "patience": baseline changes only its
        # own comparison (deep)
        pytest.param(
            [0.9, 0.8, 0.7, 0.71, 0.72, 0.73],
            {"patience": 5, "baseline": 0.5},
            None,
            5,
            3.0,
            marks=deep,
        ),
        # Keras 2.15 restores only when EarlyStopping itself stops (in on_epoch_end)
        ([0.9, 0.8, 0.7, 0.71, 0.72, 0.73], {"patience": 5, "baseline": 0.5}, 3, 4, None),
    ],
    ids=["patience", "baseline", "another_callback_stops"],
)
def test_early_stopping_restores_best_weights(losses, kwargs, stop_at, trained, expected):
    """early_stopping_test.py ``test_early_stopping_final_weights_when_restoring_model_weights``
    (its three cases; monitoring the training loss, which varies here as its val_loss does):
    the weights at the end are those of the best epoch (the third: kernel 3)."""
    if expected is None:
        expected = 4.0 if KERAS215 else 3.0

    def make(side):
        stopper = keras.callbacks.EarlyStopping(monitor="loss", restore_best_weights=True, **kwargs)
        others = [] if stop_at is None else [StopAt(stop_at)]
        return [Stamp(), stopper, *others, WeightsAtEnd(), keras.callbacks.History()]

    runs = _run_both(
        make, _per_epoch(losses), batch_size=1, epochs=len(losses), steps_per_epoch=1, repeat=False
    )
    native, bridged, looped = runs["native"][0], runs["bridged"][0], runs["loop"][0]
    assert _history(bridged) == _history(native) == _history(looped)
    assert len(_history(native)[0]) == trained
    assert bridged[-2].value == native[-2].value == looped[-2].value == expected


@pytest.mark.parametrize(
    ("mode", "min_delta", "patience", "losses", "stopped"),
    [
        ("min", 0.5, 2, [10.0, 9.0, 8.8, 8.6, 7.0, 6.9], 3),
        # deep: EarlyStopping's own comparison deciding otherwise on the same epoch logs (never
        # stopping: as test_monitor_not_available_warns_and_never_stops in CI; the other mode)
        pytest.param("min", 0.0, 2, [10.0, 9.0, 8.8, 8.6, 7.0, 6.9], 0, marks=deep),
        pytest.param("max", 0.5, 1, [1.0, 1.75, 2.0, 2.2, 3.0], 2, marks=deep),
    ],
    ids=["min_delta", "no_min_delta", "max_min_delta"],
)
def test_early_stopping_min_delta_and_mode(mode, min_delta, patience, losses, stopped):
    """early_stopping_test.py ``test_early_stopping`` (explicit ``mode``) and
    monitor_callback_test.py ``test_min_delta``: an improvement must exceed ``min_delta``."""

    def make(side):
        return [
            keras.callbacks.EarlyStopping(
                monitor="loss", mode=mode, min_delta=min_delta, patience=patience
            ),
            keras.callbacks.History(),
        ]

    runs = _run_both(
        make, _per_epoch(losses), batch_size=1, epochs=len(losses), steps_per_epoch=1, repeat=False
    )
    native, bridged, looped = runs["native"][0], runs["bridged"][0], runs["loop"][0]
    assert bridged[0].stopped_epoch == native[0].stopped_epoch == looped[0].stopped_epoch == stopped
    assert _history(bridged) == _history(native) == _history(looped)
    assert len(_history(native)[0]) == (stopped + 1 if stopped else len(losses))


def test_monitor_not_available_warns_and_never_stops():
    """early_stopping_test.py / reduce_lr_on_plateau: a monitor missing from the logs
    (``val_loss`` without validation) warns at each epoch end and neither stops nor reduces."""
    outcome = {}
    for side, fit in SIDES:
        stopper = keras.callbacks.EarlyStopping(monitor="val_loss", patience=0)
        reducer = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", patience=0)
        history = keras.callbacks.History()
        with _keras_warnings() as caught:
            result = fit(
                [stopper, reducer, history],
                np.arange(1, 5),
                batch_size=2,
                epochs=3,
                steps_per_epoch=2,
                lr=0.1,
            )
        relevant = [m for m in caught if "val_loss" in m and "not available" in m]
        outcome[side] = (history.epoch, stopper.stopped_epoch, relevant, _lr(result))
    assert outcome["bridged"][:3] == outcome["native"][:3] == outcome["loop"][:3]
    epochs, stopped, relevant, lr = outcome["native"]
    assert epochs == [0, 1, 2] and stopped == 0
    assert len(relevant) == 6  # each epoch: EarlyStopping's and ReduceLROnPlateau's
    assert outcome["bridged"][3] == lr == outcome["loop"][3] == pytest.approx(0.1)


def test_early_stopping_and_reduce_lr_reused_across_runs():
    """early_stopping_test.py ``test_early_stopping_reuse`` / ``test_state_reset_across_fit_calls``
    and reduce_lr_on_plateau_test.py ``test_state_reset_across_fit_calls``: the same instances
    in a second run start afresh: a stale best of 8 (and ReduceLROnPlateau's wait of 1) would
    stop the second run at its epoch 1 and cut its rate at once."""
    first, second = [10.0, 9.0, 8.0, 9.0, 9.0], [20.0, 19.0, 18.0, 17.0]
    results = {}
    for side, fit in SIDES:
        stopper = keras.callbacks.EarlyStopping(monitor="loss", patience=1)
        reducer = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=2, cooldown=2)
        runs = []
        for losses in (first, second):
            history = keras.callbacks.History()
            result = fit(
                [stopper, reducer, history],
                _per_epoch(losses),
                batch_size=1,
                epochs=len(losses),
                steps_per_epoch=1,
                repeat=False,
                lr=0.1,
            )
            state = (stopper.stopped_epoch, stopper.best, reducer.wait, reducer.best)
            runs.append((_history([history]), state, _lr(result)))
        results[side] = runs
    assert results["bridged"] == results["native"] == results["loop"]
    (history_1, state_1, lr_1), (history_2, state_2, lr_2) = results["native"]
    assert history_1[0] == history_2[0] == [0, 1, 2, 3]
    assert state_1 == (3, pytest.approx(8.0), 1, pytest.approx(8.0))
    assert state_2 == (0, pytest.approx(17.0), 0, pytest.approx(17.0))
    assert lr_1 == lr_2 == pytest.approx(0.1)  # never reduced


METRIC_NAMES = ("loss", "mse", "acc", "accuracy", "hinge", "f1_score")


def _metrics_model():
    """early_stopping_test.py's compiled metrics on a Dense(1) with loss ``mae``."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.SGD(0.0),
        loss="mae",
        metrics=["mse", "acc", "accuracy", "hinge", keras.metrics.F1Score(name="f1_score")],
    )
    return model


def _bridged_named_logs(callbacks, names):
    """A MonitoredSession whose logs are ``names`` (each ``mean(x**2)``), with validation;
    Keras 3's F1Score direction declared (compiled as a metric object natively)."""
    graph = tf.Graph()
    with graph.as_default():
        gs = v1.train.get_or_create_global_step()
        batch = v1.data.make_one_shot_iterator(_batches(np.arange(8), 4)).get_next()
        loss = tf.reduce_mean(tf.square(batch))
        train_op = v1.assign_add(gs, 1)
        declared = {"metric_directions": {"f1_score": "max"}} if KERAS3 else {}
        hook = hookbridge.CallbackHook(
            callbacks,
            logs=dict.fromkeys(names, loss),
            steps_per_epoch=2,
            epochs=1,
            batch_size=batch,
            validation_fn=lambda session: dict.fromkeys(names, 2.5),
            **declared,
        )
        with v1.train.MonitoredSession(hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run([train_op, loss])


def test_early_stopping_mode_per_monitor():
    """early_stopping_test.py ``test_early_stopping`` (and monitor_callback_test.py
    ``test_monitor_op_logic``): the direction each monitor gets, ``mode`` explicit or ``"auto"``,
    on a model compiled with ``mse``, ``acc``, ``accuracy``, ``hinge`` and ``f1_score``."""
    cases = [
        ("max", "val_mse"),
        ("min", "val_loss"),
        ("auto", "val_mse"),
        ("auto", "loss"),
        ("auto", "acc"),
        ("auto", "val_accuracy"),
        ("auto", "hinge"),
        ("auto", "f1_score"),
    ]
    native = [keras.callbacks.EarlyStopping(m, mode=mode, patience=9) for mode, m in cases]
    _metrics_model().fit(
        _data(np.arange(8)),
        np.zeros((8, 1), "float32"),
        batch_size=4,
        epochs=1,
        verbose=0,
        validation_data=(_data([1.0, 2.0]), np.zeros((2, 1), "float32")),
        callbacks=native,
    )
    bridged = [keras.callbacks.EarlyStopping(m, mode=mode, patience=9) for mode, m in cases]
    _bridged_named_logs(bridged, METRIC_NAMES)
    directions = {
        side: [bool(np.asarray(cb.monitor_op(1.0, 0.0))) for cb in cbs]
        for side, cbs in (("native", native), ("bridged", bridged))
    }
    assert directions["bridged"] == directions["native"]
    # Keras 3 asks the compiled metrics (F1Score: maximized); tf_keras / Keras 2 the name only
    assert directions["native"] == [True, False, False, False, True, True, False, KERAS3]
    # In a custom loop (one loop per case: Keras 3 raises at the first epoch end), tf_keras /
    # Keras 2 decide by the name as in fit. Keras 3 finds a direction only among the compiled
    # metrics fit builds at its first step, never built in a loop: with mode="auto", only a
    # *loss monitor is known; the others raise Keras's ValueError asking for mode (the
    # documented limit, docs/custom-loops.md). The loops share one model that fit never ran (a
    # loop neither trains it nor builds its compiled metrics: each case sees it as built).
    looped, loop_model = [], _metrics_model()
    for mode, monitor in cases:
        stopper = keras.callbacks.EarlyStopping(monitor, mode=mode, patience=9)
        try:
            _loop_named_logs(loop_model, [stopper], METRIC_NAMES)
            looped.append(bool(np.asarray(stopper.monitor_op(1.0, 0.0))))
        except ValueError as err:
            assert "Pass `mode='max'`" in str(err) and monitor in str(err)
            looped.append("ValueError")
    if KERAS3:
        known = [mode != "auto" or monitor.endswith("loss") for mode, monitor in cases]
        expected = [d if k else "ValueError" for d, k in zip(directions["native"], known)]
        assert looped == expected == [True, False] + ["ValueError", False] + ["ValueError"] * 4
    else:
        assert looped == directions["native"]


def _loop_named_logs(model, callbacks, names):
    """``_bridged_named_logs``'s run in a custom loop: each name's value ``mean(x**2)`` per batch
    of 4 over ``arange(8)``, 2.5 in the validation, on ``model`` (a ``_metrics_model()``)."""
    data = tf.data.Dataset.from_tensor_slices(_data(np.arange(8))).batch(4)
    loop = hookbridge.CallbackLoop(
        model,
        callbacks,
        data=data,
        validation_data=[None],
        validation_step=lambda batch: dict.fromkeys(names, 2.5),
    )
    with loop:
        for _ in loop.epochs():
            for batch in loop.steps():
                loop.step_end(dict.fromkeys(names, tf.reduce_mean(tf.square(batch))))


@pytest.mark.skipif(not KERAS3, reason="MonitorCallback is Keras 3's base class (not in tf_keras)")
def test_monitor_callback_improvements_with_min_delta():
    """monitor_callback_test.py ``test_min_delta`` (``mode="max"``, ``min_delta=0.5``) as a
    ``MonitorCallback`` subclass in a run: improvements judged on 0.5, 1.25, 1.5, 0.2, 2.0."""
    from keras.src.callbacks.monitor_callback import MonitorCallback

    class Improvements(MonitorCallback):
        def __init__(self):
            super().__init__(monitor="loss", mode="max", min_delta=0.5)
            self.seen = []

        def on_epoch_end(self, epoch, logs=None):
            if self.monitor_op is None:
                self._set_monitor_op()
            improved = bool(self._is_improvement(logs["loss"], self.best))
            self.best = logs["loss"] if improved else self.best
            self.seen.append(improved)

    losses = [0.5, 1.25, 1.5, 0.2, 2.0]
    runs = _run_both(
        lambda side: [Improvements()],
        _per_epoch(losses),
        batch_size=1,
        epochs=len(losses),
        steps_per_epoch=1,
        repeat=False,
    )
    assert runs["bridged"][0][0].seen == runs["native"][0][0].seen == [1, 1, 0, 0, 1]
    assert runs["loop"][0][0].seen == runs["native"][0][0].seen


# -- reduce_lr_on_plateau_test.py ------------------------------------------------------------------
VAL_RUN = {"x": np.arange(8), "batch_size": 4, "steps_per_epoch": 2, "val": [1.0, 2.0]}


@pytest.mark.parametrize(
    ("kwargs", "losses", "final", "logged"),
    [
        # CI: honors_min_lr (two cuts on val_loss, the second clipped) and min_delta_on_loss
        # (the training loss monitored); deep: reduces_lr (honors_min_lr's first two epochs)
        # and patience_2 (ReduceLROnPlateau's own wait count on the same logs)
        pytest.param(
            {"monitor": "val_loss", "patience": 1, "min_delta": 100},
            2,
            0.01,
            [0.1, 0.1],
            id="reduces_lr",
            marks=deep,
        ),
        pytest.param(  # 0.01 * 0.1 is below min_lr: 0.005 exactly on both sides
            {"monitor": "val_loss", "patience": 1, "min_delta": 10, "min_lr": 0.005},
            4,
            0.005,
            [0.1, 0.1, 0.01, 0.005],
            id="honors_min_lr",
        ),
        pytest.param(
            {"monitor": "val_loss", "patience": 2, "min_delta": 100},
            4,
            0.01,
            [0.1, 0.1, 0.1, 0.01],
            id="patience_2",
            marks=deep,
        ),
        pytest.param(
            {"monitor": "loss", "patience": 1, "min_delta": 0.5},
            [10.0, 9.0, 8.95, 8.9, 7.0],
            0.001,
            [0.1, 0.1, 0.1, 0.01, 0.001],
            id="min_delta_on_loss",
        ),
    ],
)
def test_reduce_lr_on_plateau(kwargs, losses, final, logged):
    """reduce_lr_on_plateau_test.py ``test_reduces_lr_with_model_fit``, ``test_honors_min_lr``,
    and patience / ``min_delta`` variants: the rate left in the optimizer (the graph variable)
    and the rate logged each epoch (``learning_rate``; tf_keras / Keras 2: ``lr``)."""
    if isinstance(losses, int):
        data = dict(VAL_RUN, epochs=losses)
    else:
        x = _per_epoch(losses)
        data = {"x": x, "batch_size": 1, "steps_per_epoch": 1, "epochs": len(losses)}
        data["repeat"] = False
    runs = _run_both(
        lambda side: [
            keras.callbacks.ReduceLROnPlateau(factor=0.1, **kwargs),
            keras.callbacks.History(),
        ],
        lr=0.1,
        **data,
    )
    lr = _final_lr(runs)
    assert lr["bridged"] == lr["native"] == lr["loop"]  # both a float32 variable read back
    assert lr["native"] == pytest.approx(final, rel=1e-6)
    native = _history(runs["native"][0])
    assert _history(runs["bridged"][0]) == native == _history(runs["loop"][0])
    assert native[1][LR_KEY] == pytest.approx(logged, rel=1e-5)


@pytest.mark.parametrize(
    "which",
    ["ReduceLROnPlateau", "LearningRateScheduler"],
)
def test_verbose_messages_as_native(which):
    """reduce_lr_on_plateau_test.py and learning_rate_scheduler_test.py ``test_verbose_logging``:
    ``verbose=1`` prints the same messages, with the rate read back from the optimizer."""
    printed = {}
    for side, fit in SIDES:
        if which == "ReduceLROnPlateau":
            callback = keras.callbacks.ReduceLROnPlateau(
                patience=1, factor=0.1, monitor="val_loss", min_delta=100, verbose=1
            )
        else:
            callback = keras.callbacks.LearningRateScheduler(
                lambda epoch: 1.0 / (1.0 + epoch), verbose=1
            )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            fit([callback], lr=0.1, epochs=2, **VAL_RUN)
        printed[side] = [line for line in out.getvalue().splitlines() if which in line]
    assert printed["bridged"] == printed["native"] == printed["loop"]
    if which == "ReduceLROnPlateau":
        assert len(printed["native"]) == 1
        head, rate = printed["native"][0].rstrip(".").rsplit(" ", 1)
        assert head == "Epoch 2: ReduceLROnPlateau reducing learning rate to"
        assert float(rate) == pytest.approx(0.01)
    else:
        assert [line.split(": ", 1)[1] for line in printed["native"]] == [
            "LearningRateScheduler setting learning rate to 1.0.",
            "LearningRateScheduler setting learning rate to 0.5.",
        ]


# -- learning_rate_scheduler_test.py ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("schedule", "initial", "epochs", "logged"),
    [
        # deep: the one-argument schedule takes the same way (LearningRateScheduler reads the
        # rate, then calls schedule(epoch) on its TypeError); in CI in
        # test_verbose_messages_as_native[LearningRateScheduler] and test_tf_keras_callbacks_ported
        pytest.param(lambda epoch: 1.0 / (2.0 + epoch), 0.1, 1, [0.5], marks=deep),
        (lambda epoch, lr: lr / 2, 0.03, 2, [0.015, 0.0075]),
    ],
    ids=["updates_learning_rate", "dependent_on_previous_rate"],
)
def test_learning_rate_scheduler_sets_the_rate(schedule, initial, epochs, logged):
    """learning_rate_scheduler_test.py ``test_updates_learning_rate`` (a one-argument schedule:
    0.5) and ``test_schedule_dependent_on_previous_learning_rate`` (0.03 halved twice)."""
    runs = _run_both(
        lambda side: [keras.callbacks.LearningRateScheduler(schedule), keras.callbacks.History()],
        np.arange(8),
        batch_size=4,
        epochs=epochs,
        steps_per_epoch=2,
        lr=initial,
    )
    lr = _final_lr(runs)
    assert lr["bridged"] == lr["native"] == lr["loop"]  # both a float32 variable read back
    assert lr["native"] == pytest.approx(logged[-1], rel=1e-6)
    native = _history(runs["native"][0])
    assert _history(runs["bridged"][0]) == native == _history(runs["loop"][0])
    assert native[1][LR_KEY] == pytest.approx(logged, rel=1e-5)


# -- csv_logger_test.py ----------------------------------------------------------------------------
def test_csv_logger_instance_reused_with_append(tmp_path):
    """csv_logger_test.py ``test_CSVLogger`` cases 1-3: a tab-separated file, then one
    ``append=True`` instance over two runs (1 epoch, then 2): one header, 5 lines, the same rows."""
    texts, rows = {}, {}
    for side, fit in SIDES:
        path = str(tmp_path / f"{side}.tsv")
        run = {"batch_size": 2, "steps_per_epoch": 2, "val": [1.0, 3.0]}
        fit([keras.callbacks.CSVLogger(path, separator="\t")], np.arange(4), epochs=1, **run)
        reused = keras.callbacks.CSVLogger(path, separator="\t", append=True)
        fit([reused], np.arange(4), epochs=1, **run)
        fit([reused], np.arange(2, 6), epochs=2, **run)
        with open(path) as f:
            texts[side] = f.read()
        reader = csv.DictReader(io.StringIO(texts[side]), delimiter="\t")
        rows[side] = [(r["epoch"], float(r["loss"]), float(r["val_loss"])) for r in reader]
    assert texts["bridged"] == texts["native"] == texts["loop"]
    lines = texts["native"].splitlines()
    assert len(lines) == 5 and texts["native"].count("epoch") == 1
    assert all(line.count("\t") == 2 for line in lines)
    assert csv.Sniffer().sniff(texts["native"]).delimiter == "\t"
    # x = 0..3: (0 + 1 + 4 + 9) / 4; x = 2..5: (4 + 9 + 16 + 25) / 4; val (1 + 9) / 2
    assert (
        rows["bridged"]
        == rows["native"]
        == rows["loop"]
        == [
            ("0", 3.5, 5.0),
            ("0", 3.5, 5.0),
            ("0", 13.5, 5.0),
            ("1", 13.5, 5.0),
        ]
    )


def test_csv_logger_logs_nan_when_terminated(tmp_path):
    """csv_logger_test.py ``test_stop_training_csv`` (NaN flavour; the inf one is in
    test_keras_callbacks_ported): the row of the stopped epoch holds ``nan``."""
    values = {}
    for side, fit in SIDES:
        path = str(tmp_path / f"{side}.csv")
        callbacks = [keras.callbacks.TerminateOnNaN(), keras.callbacks.CSVLogger(path)]
        # lr != 0 freezes the native kernel (a NaN gradient times 0.0 would make it NaN)
        fit(callbacks, [1.0, np.nan, 3.0, 4.0], batch_size=2, epochs=5, steps_per_epoch=2, lr=0.5)
        with open(path) as f:
            values[side] = [row for row in csv.reader(f) if row]
    assert values["bridged"] == values["native"] == values["loop"]
    assert len(values["native"]) == 2 and "nan" in values["native"][-1]


# -- terminate_on_nan_test.py ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "epochs_run", "steps_run"),
    [([np.inf, 2.0], 1, 1), ([1.0, 2.0], 2, 4)],
    ids=["inf", "normal"],
)
def test_terminate_on_nan_graceful_stop_or_normal_training(x, epochs_run, steps_run):
    """terminate_on_nan_test.py ``test_terminate_on_nan_graceful_stop`` (an inf loss at the
    first batch: one epoch of one step) and ``test_normal_training_does_not_raise`` (2 epochs)."""
    outcome = {}
    for side, fit in SIDES:
        history, rec = keras.callbacks.History(), Recorder()
        fit(
            [keras.callbacks.TerminateOnNaN(), history, rec],
            x,
            batch_size=1,
            epochs=2,
            steps_per_epoch=2,
            lr=0.5,
        )
        outcome[side] = (_history([history]), rec.events)
    assert outcome["bridged"] == outcome["native"] == outcome["loop"]
    (epochs, logs), events = outcome["native"]
    assert (len(epochs), [e[0] for e in events].count("train_batch_end")) == (epochs_run, steps_run)
    assert math.isinf(logs["loss"][0]) == (x[0] == np.inf)


@pytest.mark.skipif(
    not KERAS3, reason="TerminateOnNaN(raise_error=) is Keras 3 only (tf_keras / Keras 2 lack it)"
)
def test_terminate_on_nan_raise_error_at_a_later_batch():
    """terminate_on_nan_test.py ``test_terminate_on_nan_raise_error_raises_error``,
    ``test_raise_error_terminate_stops_on_later_batch`` and
    ``test_raise_error_terminate_does_not_trigger_on_train_end``: a RuntimeError naming batch 1
    propagates; no ``on_train_end``."""
    events = {}
    for side, fit in SIDES:
        rec = Recorder()
        callbacks = [rec, keras.callbacks.TerminateOnNaN(raise_error=True)]
        with pytest.raises(RuntimeError, match="NaN or Inf loss encountered at batch 1"):
            fit(callbacks, [1.0, np.inf], batch_size=1, epochs=1, steps_per_epoch=2, lr=0.5)
        events[side] = rec.events
    assert events["bridged"] == events["native"] == events["loop"]
    assert [e[0] for e in events["native"]][-2:] == ["train_batch_begin", "train_batch_end"]
    assert "train_end" not in [e[0] for e in events["native"]]


# -- lambda_callback_test.py -----------------------------------------------------------------------
def test_lambda_callback_with_batches_and_extra_kwargs():
    """lambda_callback_test.py ``test_lambda_callback_with_batches`` (train batch begin and end,
    with validation), ``test_lambda_callback_no_args`` and
    ``test_lambda_callback_with_additional_kwargs``."""
    calls = {"native": [], "bridged": [], "loop": []}

    def make(side):
        def note(name):
            return lambda batch, logs: calls[side].append(
                (name, batch, round(float(logs["loss"]), 4) if "end" in name else None)
            )

        extra = keras.callbacks.LambdaCallback(custom_method=lambda logs: None)
        assert callable(extra.custom_method)
        batches = keras.callbacks.LambdaCallback(
            on_train_batch_begin=note("begin"), on_train_batch_end=note("end")
        )
        return [keras.callbacks.LambdaCallback(), extra, batches]

    x = np.arange(16)
    for side, fit in SIDES:  # 2 epochs (Keras's test: 5): the same calls, 3 epochs fewer
        fit(make(side), x, batch_size=4, epochs=2, steps_per_epoch=4, val=[1.0, 2.0])
    assert calls["bridged"] == calls["native"] == calls["loop"]
    assert len(calls["native"]) == 16
    # running means of x**2: (0 + 1 + 4 + 9) / 4, then (14 + 16 + 25 + 36 + 49) / 8
    assert calls["native"][:4] == [
        ("begin", 0, None),
        ("end", 0, 3.5),
        ("begin", 1, None),
        ("end", 1, 17.5),
    ]


@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_lambda_callback_on_test_begin_in_evaluate():
    """lambda_callback_test.py ``test_lambda_callback_with_kwargs``: ``on_test_begin`` given to a
    LambdaCallback runs once in ``evaluate`` (bridged: an evaluation session)."""
    calls = {"native": [], "bridged": []}

    def make(side):
        return keras.callbacks.LambdaCallback(
            on_test_begin=lambda logs: calls[side].append(("on_test_begin", logs))
        )

    x = np.arange(16)
    data = _unknown_length(_with_zero_targets(_batches(x, 4)))
    _identity_model().evaluate(data, callbacks=[make("native")], verbose=0)
    graph, batch, loss = _eval_graph(x, 4)
    with graph.as_default():
        hook = hookbridge.CallbackHook(
            [make("bridged")], logs={"loss": loss}, batch_size=batch, mode="evaluate"
        )
    assert _run_session(graph, hook, loss) == 4
    assert calls["bridged"] == calls["native"]
    assert [c[0] for c in calls["native"]] == ["on_test_begin"]


# -- callback_test.py ------------------------------------------------------------------------------
def test_model_state_is_current_at_batch_end():
    """callback_test.py ``test_model_state_is_current_on_epoch_end``: at ``on_batch_end`` the
    step has run (here: ``optimizer.iterations``, the global step bridged) = steps so far."""
    seen = {"native": [], "bridged": [], "loop": []}

    def make(side):
        return keras.callbacks.LambdaCallback(
            on_batch_end=lambda batch, logs: seen[side].append(
                (batch, int(np.asarray(side_model[side].optimizer.iterations)))
            )
        )

    side_model = {}

    class Grab(keras.callbacks.Callback):
        def __init__(self, side):
            super().__init__()
            self.side = side

        def on_train_begin(self, logs=None):
            side_model[self.side] = self.model

    for side, fit in SIDES:
        fit([Grab(side), make(side)], np.arange(8), batch_size=2, epochs=2, steps_per_epoch=4)
    assert seen["bridged"] == seen["native"] == seen["loop"]
    assert seen["native"] == [(b % 4, b + 1) for b in range(8)]


# -- tensorboard_test.py ---------------------------------------------------------------------------
def _event_scalars(logdir: str) -> list:
    """Sorted (run, tag, step, value) of every scalar in the event files under ``logdir`` (read
    raw: two runs into one directory repeat steps, which EventAccumulator would purge)."""
    out = []
    for run in ("train", "validation"):
        directory = os.path.join(logdir, run)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if not name.startswith("events.out."):
                continue
            for event in v1.train.summary_iterator(os.path.join(directory, name)):
                for value in event.summary.value:
                    if not value.tag.startswith(("epoch_", "batch_", "evaluation_")):
                        continue
                    number = (
                        value.simple_value
                        if value.WhichOneof("value") == "simple_value"
                        else float(tf.make_ndarray(value.tensor))
                    )
                    out.append((run, value.tag, event.step, round(number, 4)))
    return sorted(out)


def _tensorboard_both(tmp_path, runs=1, others=(), **tb_kwargs):
    """{side: logdir}: one TensorBoard instance per side over ``runs`` runs with validation,
    beside new instances of the ``others`` classes."""
    logdirs = {}
    for side, fit in SIDES:
        logdirs[side] = str(tmp_path / side)
        callback = keras.callbacks.TensorBoard(logdirs[side], **tb_kwargs)
        for _ in range(runs):
            callbacks = [callback, *(make() for make in others)]
            fit(callbacks, np.arange(1, 5), batch_size=2, epochs=2, steps_per_epoch=2, val=[1, 3])
    return logdirs


def _documented_tf_keras_difference(native: list, bridged: list) -> tuple[list, list]:
    """tf_keras / Keras 2 log no ``epoch_learning_rate`` for a constant rate (a variable under
    CallbackHook), Keras 3 does: checked on both sides, both lists returned unchanged."""
    if not KERAS3:
        assert not [s for s in native + bridged if s[1] == "epoch_learning_rate"]
    return native, bridged


def test_tensorboard_across_invocations(tmp_path):
    """tensorboard_test.py ``test_TensorBoard_across_invocations``: one TensorBoard instance over
    two runs writes the same epoch scalars twice (loss 7.5, val 5.0, rate 0)."""
    logdirs = _tensorboard_both(tmp_path, runs=2)
    native, bridged = _documented_tf_keras_difference(
        _event_scalars(logdirs["native"]), _event_scalars(logdirs["bridged"])
    )
    assert bridged == native == _event_scalars(logdirs["loop"])
    expected = [
        ("train", "epoch_loss", 0, 7.5),
        ("train", "epoch_loss", 1, 7.5),
        ("validation", "epoch_loss", 0, 5.0),
        ("validation", "epoch_loss", 1, 5.0),
        ("validation", "evaluation_loss_vs_iterations", 2, 5.0),
        ("validation", "evaluation_loss_vs_iterations", 4, 5.0),
    ]
    if KERAS3:
        expected += [("train", "epoch_learning_rate", e, 0.0) for e in (0, 1)]
    assert native == sorted(expected * 2)


@pytest.mark.parametrize(
    "listener",
    # Keras 3's TensorBoard listens to batches itself: there a batch listener beside it (the
    # Recorder) changes nothing of its run, which "alone" makes (deep); tf_keras / Keras 2 run both
    [pytest.param(True, marks=deep if KERAS3 else ()), False],
    ids=["with_batch_listener", "alone"],
)
def test_tensorboard_batch_metrics(tmp_path, listener):
    """tensorboard_test.py ``test_TensorBoard_batch_metrics`` (``update_freq=1``): ``batch_loss``
    at each step (running means 2.5, 7.5 per epoch) besides the epoch scalars. tf_keras /
    Keras 2 call TensorBoard's batch hooks only when some callback of the list implements them
    (TensorBoard does only when profiling or writing steps per second): alone, none written."""
    logdirs = _tensorboard_both(tmp_path, others=[Recorder] if listener else [], update_freq=1)
    native, bridged = _documented_tf_keras_difference(
        _event_scalars(logdirs["native"]), _event_scalars(logdirs["bridged"])
    )
    assert bridged == native == _event_scalars(logdirs["loop"])
    batch = [(s[2], s[3]) for s in native if s[1] == "batch_loss"]
    written = KERAS3 or listener
    assert batch == ([(1, 2.5), (2, 7.5), (3, 2.5), (4, 7.5)] if written else [])
    assert ("train", "epoch_loss", 1, 7.5) in native


def test_tensorboard_global_step_and_steps_per_second(tmp_path):
    """tensorboard_test.py ``test_TensorBoard_global_step`` (``update_freq=1``,
    ``write_steps_per_second=True``): ``batch_loss`` and ``batch_steps_per_second`` at global
    steps 1-4, ``epoch_steps_per_second`` at epochs 0 and 1; rates are timings (positive), the
    losses the oracle's."""
    logdirs = _tensorboard_both(
        tmp_path, update_freq=1, profile_batch=0, write_steps_per_second=True
    )
    scalars = {}
    for side, logdir in logdirs.items():
        rows = _event_scalars(logdir)
        assert all(value > 0 for _, tag, _, value in rows if tag.endswith("steps_per_second"))
        scalars[side] = [
            (run, tag, step, None if tag.endswith("steps_per_second") else value)
            for run, tag, step, value in rows
        ]
    native, bridged = _documented_tf_keras_difference(scalars["native"], scalars["bridged"])
    assert bridged == native == scalars["loop"]
    steps = {tag: [s[2] for s in native if s[1] == tag] for tag in {s[1] for s in native}}
    assert steps["batch_steps_per_second"] == steps["batch_loss"] == [1, 2, 3, 4]
    assert steps["epoch_steps_per_second"] == [0, 1]
    assert [s[3] for s in native if s[1] == "batch_loss"] == [2.5, 7.5, 2.5, 7.5]


def test_tensorboard_no_spurious_event_files(tmp_path):
    """tensorboard_test.py ``test_TensorBoard_no_spurious_event_files``: without validation the
    only run directory with event files is ``train``."""
    runs = {}
    for side, fit in SIDES:
        logdir = str(tmp_path / side)
        fit([keras.callbacks.TensorBoard(logdir)], np.arange(1, 5), batch_size=2, epochs=2)
        runs[side] = sorted(
            os.path.relpath(d, logdir)
            for d, _, files in os.walk(logdir)
            if any(f.startswith("events.out.") for f in files)
        )
    assert runs["bridged"] == runs["native"] == runs["loop"] == ["train"]


def test_tensorboard_weight_histograms(tmp_path):
    """tensorboard_test.py ``test_TensorBoard_weight_histograms`` (``histogram_freq=1``): the
    epoch scalars are the same, and each side writes one histogram per epoch of its kernel,
    with the same buckets (CallbackHook: from the graph's model variables, one layer per scope;
    the tag is the variable's name where fit's is the Keras layer's)."""
    logdirs = {}
    for side, fit in SIDES:
        logdirs[side] = str(tmp_path / side)
        extra = {"size_fn": _kernel} if side == "bridged" else {}
        callback = keras.callbacks.TensorBoard(logdirs[side], histogram_freq=1)
        x = np.arange(1, 5)
        fit([callback], x, batch_size=2, epochs=2, steps_per_epoch=2, val=[1, 3], **extra)
    native, bridged = _documented_tf_keras_difference(
        _event_scalars(logdirs["native"]), _event_scalars(logdirs["bridged"])
    )
    assert bridged == native == _event_scalars(logdirs["loop"])
    assert ("train", "epoch_loss", 0, 7.5) in native
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    histograms = {}
    for side, logdir in logdirs.items():
        (tag,) = _histogram_tags(logdir)
        assert tag.endswith("kernel/histogram" if KERAS3 else "kernel_0/histogram")
        acc = EventAccumulator(os.path.join(logdir, "train"))
        acc.Reload()
        histograms[side] = [
            (e.step, tf.make_ndarray(e.tensor_proto).tolist()) for e in acc.Tensors(tag)
        ]
    assert [s for s, _ in histograms["native"]] == [0, 1]
    assert histograms["bridged"] == histograms["native"] == histograms["loop"]


def _histogram_tags(logdir: str) -> list:
    """Histogram tags in ``train/`` (v2 tensors or v1 histograms), read with EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(logdir, "train"))
    acc.Reload()
    tags = acc.Tags()
    return [t for t in tags["tensors"] + tags["histograms"] if t.endswith("histogram")]
