"""CallbackHook's model and optimizer as Keras's: native ``fit`` beside the bridged session.

Each test runs the same Keras callbacks (same arguments, epochs and steps) once in a native
``model.fit`` and once under ``CallbackHook`` in a real ``MonitoredSession``, and compares what
the callbacks decided or recorded: metric directions for ``mode="auto"`` (issue 14 item 1), the
learning rate from a schedule or any tensor (item 2), one model shared by every callback
(item 5), ``summary``/``count_params``/``get_config`` (item 6), summaries written inside the
model (item 8).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import reused_models
import tensorflow as tf
from conftest import step_reads

import hookbridge

keras = tf.keras
KERAS3 = hasattr(keras, "ops")
STEPS = 2  # steps per epoch in both worlds: 8 samples, batch size 4
X = np.arange(24, dtype="float32").reshape(8, 3) / 24.0
Y = (np.arange(8) % 2).reshape(8, 1).astype("float32")


def native_model(metrics=(), optimizer=None):
    """The native oracle's model. With no metrics and the default SGD(0.1): one compiled model
    reused across this module's tests, reset to its built state (``tests/reused_models.py``:
    its traced ``train_function`` kept); a rate a callback assigned is reset with it."""

    def build():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.Input((3,)), keras.layers.Dense(1, activation="sigmoid")]
        )
        model.compile(
            optimizer=optimizer or keras.optimizers.SGD(0.1),
            loss="binary_crossentropy",
            metrics=list(metrics),
        )
        return model

    if metrics or optimizer is not None:
        return build()
    return reused_models.reused(("conformance callbacks_model sgd0.1",), 0, build)


def native_fit(callbacks, *, epochs=2, metrics=(), optimizer=None, validation=False):
    model = native_model(metrics, optimizer)
    model.fit(
        X,
        Y,
        batch_size=4,
        epochs=epochs,
        verbose=0,
        callbacks=callbacks,
        validation_data=(X, Y) if validation else None,
    )
    return model


def bridged_run(
    callbacks, *, epochs=2, names=("loss",), values=None, build=None, feed=None, **kwargs
):
    """``epochs * STEPS`` MonitoredSession steps under CallbackHook (fewer if one stops).

    Each log name is a fed scalar; ``values(step) -> {name: value}`` (default 0.5 each);
    ``feed(step)`` adds entries to each run's feed_dict.
    ``build(graph_tensors) -> dict of CallbackHook kwargs`` may add tensors to the graph; the
    learning rate is a 0.1 variable unless ``learning_rate=`` is given.
    Returns the number of steps run.
    """
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        feeds = {n: tf.compat.v1.placeholder(tf.float32, [], name=f"feed_{n}") for n in names}
        logs = {n: tf.identity(p, name=n) for n, p in feeds.items()}
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([3, 1]))
        lr = tf.compat.v1.get_variable("lr", initializer=0.1, trainable=False)
        with tf.control_dependencies(step_reads(gs)):
            train = tf.group(tf.compat.v1.assign_add(w, tf.ones([3, 1])), gs.assign_add(1))
        extra = build({"gs": gs, "w": w, "lr": lr}) if build else {}
        hook = hookbridge.CallbackHook(
            callbacks,
            logs=logs,
            steps_per_epoch=STEPS,
            epochs=epochs,
            **{"learning_rate": lr, **kwargs, **extra},
        )
        n = 0
        with tf.compat.v1.train.MonitoredSession(hooks=[hook]) as sess:
            for step in range(epochs * STEPS):
                if sess.should_stop():
                    break
                vals = values(step) if values else {}
                feed_dict = {p: vals.get(k, 0.5) for k, p in feeds.items()}
                sess.run(train, {**feed_dict, **(feed(step) if feed else {})})
                n += 1
    return n


# -- item 1: metric direction --------------------------------------------------------------------
MONITORED = ("acc", "val_acc", "accuracy", "auc", "val_auc", "precision", "recall", "mae", "loss")


def _metric_objects():
    return [
        "acc",
        "accuracy",
        keras.metrics.AUC(name="auc"),
        keras.metrics.Precision(name="precision"),
        keras.metrics.Recall(name="recall"),
        "mae",
    ]


def _monitor_callbacks(tmp_path, tag):
    cbs = {}
    for name in MONITORED:
        path = str(tmp_path / f"{tag}-{name}.weights.h5")
        cbs[name] = [
            keras.callbacks.EarlyStopping(name, patience=5),
            keras.callbacks.ModelCheckpoint(path, name, save_weights_only=True),
            keras.callbacks.ReduceLROnPlateau(name, patience=5),
        ]
    return cbs


def _decisions(cbs):
    """monitor -> per callback: True if it maximizes (its monitor_op(1, 0) holds)."""
    return {
        name: [bool(np.asarray(cb.monitor_op(1.0, 0.0))) for cb in group]
        for name, group in cbs.items()
    }


def test_mode_auto_direction_as_native_fit(tmp_path):
    native = _monitor_callbacks(tmp_path, "native")
    native_fit(
        [cb for g in native.values() for cb in g],
        epochs=1,
        metrics=_metric_objects(),
        validation=True,
    )
    bridged = _monitor_callbacks(tmp_path, "bridged")
    names = [n for n in MONITORED if not n.startswith("val_")]
    bridged_run(
        [cb for g in bridged.values() for cb in g],
        epochs=1,
        names=names,
        validation_fn=lambda s: dict.fromkeys(names, 0.5),
    )
    expected = _decisions(native)
    assert expected["acc"] == [True, True, True]  # the case: maximized, no ValueError
    assert expected["mae"] == [False, False, False]
    assert _decisions(bridged) == expected
    # ModelCheckpoint(save_best_only=False) on "acc" saved, natively and bridged
    assert (tmp_path / "native-acc.weights.h5").exists()
    assert (tmp_path / "bridged-acc.weights.h5").exists()


def test_unknown_name_raises_keras_error_as_native_and_can_be_declared():
    scores = [0.3, 0.5, 0.4, 0.2]  # best at epoch 1 when maximized

    class Score(keras.callbacks.Callback):  # the native run's "my_score" epoch log
        def on_epoch_end(self, epoch, logs=None):
            logs["my_score"] = scores[epoch]

    native_es = keras.callbacks.EarlyStopping("my_score", mode="max", patience=1)
    native_fit([Score(), native_es], epochs=4)

    es = keras.callbacks.EarlyStopping("my_score", patience=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = bridged_run(
            [es],
            epochs=4,
            names=("my_score",),
            values=lambda step: {"my_score": scores[step // STEPS]},
            metric_directions={"my_score": "max"},
        )
    declared_ignored = [w for w in caught if "metric_directions['my_score']" in str(w.message)]
    if KERAS3:
        assert not declared_ignored
        assert (es.stopped_epoch, es.best) == (native_es.stopped_epoch, native_es.best)
        assert n == (native_es.stopped_epoch + 1) * STEPS
        # undeclared: Keras 3's own ValueError, natively for a custom metric function too
        with pytest.raises(ValueError, match="automatically determine"):
            bridged_run([keras.callbacks.EarlyStopping("my_score")], names=("my_score",))
    else:
        # tf_keras / Keras 2 minimize any name without "acc", ignoring the model: say so
        assert len(declared_ignored) == 1 and "mode='max'" in str(declared_ignored[0].message)


def test_metric_directions_bad_input():
    with pytest.raises(ValueError, match=r"metric_directions\['s'\] = 'up'"):
        hookbridge.CallbackHook([], logs={}, metric_directions={"s": "up"})
    with pytest.raises(TypeError, match="metric_directions must be a mapping"):
        hookbridge.CallbackHook([], logs={}, metric_directions=["s"])


# -- item 2: learning rate from a schedule or any tensor -------------------------------------------
SCHEDULES = {
    "polynomial_decay": (
        lambda: keras.optimizers.schedules.PolynomialDecay(0.1, 10),
        lambda gs: tf.compat.v1.train.polynomial_decay(0.1, gs, 10),
    ),
    "exponential_decay": (
        lambda: keras.optimizers.schedules.ExponentialDecay(0.1, 3, 0.5),
        lambda gs: tf.compat.v1.train.exponential_decay(0.1, gs, 3, 0.5),
    ),
}


class ReadsRate(keras.callbacks.Callback):
    """A third-party logger's way of reading the rate: shape, float, numpy, dtype."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        lr = self.model.optimizer.learning_rate
        value = lr.numpy()
        self.seen.append((tuple(lr.shape), float(lr), float(value), tf.as_dtype(lr.dtype).name))


def _epoch_scalars(logdir, tag):
    import os

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(logdir, "train"))
    acc.Reload()
    if tag not in acc.Tags()["tensors"]:
        return []
    return [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]


@pytest.mark.parametrize("kind", sorted(SCHEDULES))
def test_schedule_tensor_logged_and_read_as_native(tmp_path, kind):
    keras_schedule, tf1_schedule = SCHEDULES[kind]
    native_reader = ReadsRate()
    native_tb = keras.callbacks.TensorBoard(str(tmp_path / "native"))
    native_fit(
        [native_tb, native_reader],
        epochs=3,
        optimizer=keras.optimizers.SGD(keras_schedule()),
    )
    reader = ReadsRate()
    tb = keras.callbacks.TensorBoard(str(tmp_path / "bridged"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bridged_run(
            [tb, reader], epochs=3, build=lambda t: {"learning_rate": tf1_schedule(t["gs"])}
        )
    native_lr = _epoch_scalars(str(tmp_path / "native"), "epoch_learning_rate")
    bridged_lr = _epoch_scalars(str(tmp_path / "bridged"), "epoch_learning_rate")
    assert [s for s, _ in native_lr] == [s for s, _ in bridged_lr] == [0, 1, 2]
    assert [v for _, v in bridged_lr] == pytest.approx([v for _, v in native_lr], rel=1e-6)
    assert [r[0] for r in reader.seen] == [r[0] for r in native_reader.seen] == [()] * 3
    assert [r[3] for r in reader.seen] == [r[3] for r in native_reader.seen]
    lags = [w for w in caught if "one step behind" in str(w.message)]
    if KERAS3:
        assert [r[1] for r in reader.seen] == pytest.approx([r[1] for r in native_reader.seen])
        assert [r[2] for r in reader.seen] == pytest.approx([r[2] for r in native_reader.seen])
        assert not lags
    else:
        # tf_keras / Keras 2: the rate the last step used natively (schedule(iterations - 1));
        # CallbackHook gives schedule(global step), as TensorBoard logs it, and warns once.
        schedule = keras_schedule()
        steps = [STEPS * (e + 1) for e in range(3)]
        assert [r[1] for r in native_reader.seen] == pytest.approx(
            [float(schedule(s - 1)) for s in steps], rel=1e-6
        )
        assert [r[1] for r in reader.seen] == pytest.approx([v for _, v in native_lr], rel=1e-6)
        assert len(lags) == 1


class EpochTrace(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.events = []

    def on_epoch_begin(self, epoch, logs=None):
        self.events.append(("begin", epoch))

    def on_epoch_end(self, epoch, logs=None):
        self.events.append(("end", epoch))


def _lr_callbacks():
    return {
        "ReduceLROnPlateau": lambda: keras.callbacks.ReduceLROnPlateau(
            "loss", patience=0, min_delta=100.0
        ),
        "LearningRateScheduler": lambda: keras.callbacks.LearningRateScheduler(
            lambda epoch, lr: lr * 0.5
        ),
    }


@pytest.mark.parametrize("name", sorted(_lr_callbacks()))
def test_assigning_a_schedule_raises_where_keras_raises(name):
    make = _lr_callbacks()[name]
    native_trace, native_error = EpochTrace(), None
    try:
        native_fit(
            [native_trace, make()],
            epochs=3,
            optimizer=keras.optimizers.SGD(keras.optimizers.schedules.PolynomialDecay(0.1, 10)),
        )
    except TypeError as e:
        native_error = e
    trace, error = EpochTrace(), None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            bridged_run(
                [trace, make()],
                epochs=3,
                build=lambda t: {
                    "learning_rate": tf.compat.v1.train.polynomial_decay(0.1, t["gs"], 10)
                },
            )
        except TypeError as e:
            error = e
    assert trace.events == native_trace.events
    if KERAS3:  # Keras 3 raises its own TypeError at the assignment
        assert native_error is not None and error is not None
        assert str(error).startswith(str(native_error))
    else:  # tf_keras / Keras 2 accept it and overwrite it with the schedule: ignored, and said
        assert native_error is None and error is None
        assert len([w for w in caught if "assignment is ignored" in str(w.message)]) == 1


def test_placeholder_fed_rate_as_native_per_batch_assignment(tmp_path):
    rates = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]

    class SetRate(keras.callbacks.Callback):  # natively: the rate each step uses, set per batch
        def __init__(self):
            super().__init__()
            self.step = 0

        def on_train_batch_begin(self, batch, logs=None):
            self.model.optimizer.learning_rate = rates[self.step]
            self.step += 1

    native_tb = keras.callbacks.TensorBoard(str(tmp_path / "native"))
    native_fit([SetRate(), native_tb], epochs=3)
    tb = keras.callbacks.TensorBoard(str(tmp_path / "bridged"))

    def build(t):
        t["lr_feed"] = tf.compat.v1.placeholder_with_default(0.01, [], name="lr_feed")
        return {"learning_rate": t["lr_feed"]}

    # the run feeds the rate by name, as a TF1 training loop may
    bridged_run([tb], epochs=3, build=build, feed=lambda step: {"lr_feed:0": rates[step]})
    native_lr = _epoch_scalars(str(tmp_path / "native"), "epoch_learning_rate")
    bridged_lr = _epoch_scalars(str(tmp_path / "bridged"), "epoch_learning_rate")
    expected = [(0, 0.2), (1, 0.4), (2, 0.6)]  # the rate each epoch's last step used
    if KERAS3:
        assert [(s, round(v, 6)) for s, v in native_lr] == expected
        assert [(s, round(v, 6)) for s, v in bridged_lr] == expected
    else:
        # tf_keras / Keras 2 log the rate only for a LearningRateSchedule, not an assigned one
        assert native_lr == bridged_lr == []


def test_rate_computed_from_a_placeholder_is_refused():
    def build(t):
        ph = tf.compat.v1.placeholder(tf.float32, [], name="base_lr")
        return {"learning_rate": ph * 0.5}

    with pytest.raises(ValueError, match="computed from the placeholder 'base_lr'"):
        bridged_run([keras.callbacks.History()], build=build)


# -- item 5: one model for every callback ----------------------------------------------------------
class Sets(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.model.shared_note = "set by Sets"


class Reads(keras.callbacks.Callback):
    """Listed after History and Sets: sees what they set on the model."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        history = getattr(self.model, "history", None)
        self.seen.append(
            (
                self.model.shared_note,
                None if history is None else list(history.epoch),
                None if history is None else sorted(history.history),
            )
        )


def test_one_model_shared_by_every_callback_as_native():
    def callbacks():
        return [keras.callbacks.History(), Sets(), Reads(), keras.callbacks.CSVLogger("/dev/null")]

    native = callbacks()
    native_fit(native, epochs=2)
    bridged = callbacks()
    bridged_run(bridged, epochs=2)
    assert len({id(cb.model) for cb in native}) == 1
    assert len({id(cb.model) for cb in bridged}) == 1
    assert bridged[2].seen == native[2].seen
    if KERAS3:  # Keras 3's History sets model.history at each epoch end
        assert native[2].seen == [("set by Sets", [0], ["loss"]), ("set by Sets", [0, 1], ["loss"])]
    assert bridged[0].model.stop_training is False


def test_shared_model_errors_still_name_the_callback():
    class Curious(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.compiled_loss  # noqa: B018

    with pytest.raises(hookbridge.UnsupportedModelAttributeError, match="Curious accessed"):
        bridged_run([keras.callbacks.History(), Curious()], epochs=1)


# -- item 6: summary, count_params, get_config -----------------------------------------------------
class Describes(keras.callbacks.Callback):
    """A third-party experiment logger: records the model summary and optimizer params (at the
    epoch end: Keras 3 builds its optimizer, whose variables the summary counts, at the first
    step; a TF1 graph has its optimizer's variables before the session starts)."""

    def on_epoch_end(self, epoch, logs=None):
        lines = []
        self.model.summary(print_fn=lambda text, **kwargs: lines.append(text))
        self.summary = "\n".join(lines)
        self.params = self.model.count_params()
        self.optimizer_config = self.model.optimizer.get_config()
        self.model_config = self.model.get_config()


def _totals(summary):
    return [
        line.strip()
        for line in summary.splitlines()
        if line.strip().startswith(
            ("Total params", "Trainable params", "Non-trainable params", "Optimizer params")
        )
    ]


def test_summary_count_params_and_configs_as_native():
    native = Describes()
    native_fit([native], epochs=1, optimizer=keras.optimizers.SGD(0.1, momentum=0.9))
    bridged = Describes()

    def build(t):  # the native model's Dense(1) on 3 inputs: kernel (3, 1), bias (1,)
        b = tf.compat.v1.get_variable("b", initializer=tf.zeros([1]))
        optimizer = tf.compat.v1.train.MomentumOptimizer(t["lr"], 0.9)
        optimizer.minimize(tf.reduce_sum(t["w"]) + tf.reduce_sum(b))
        return {"optimizer": optimizer, "learning_rate": None}

    bridged_run([bridged], epochs=1, build=build)
    assert bridged.params == native.params == 4
    native_totals, bridged_totals = _totals(native.summary), _totals(bridged.summary)
    if KERAS3:
        # Keras 3 counts its optimizer's variables (iterations, learning rate, momentums);
        # the bridged ones: global step, learning-rate variable, the TF1 optimizer's slots
        assert native_totals == [
            "Total params: 10 (44.00 B)",
            "Trainable params: 4 (16.00 B)",
            "Non-trainable params: 0 (0.00 B)",
            "Optimizer params: 6 (28.00 B)",
        ]
    assert bridged_totals == native_totals
    assert "w (float32)" in bridged.summary and "(3, 1)" in bridged.summary
    assert bridged.optimizer_config["name"] == "Momentum"
    assert bridged.optimizer_config["learning_rate"] == pytest.approx(
        native.optimizer_config["learning_rate"]
    )
    assert bridged.optimizer_config["momentum"] == pytest.approx(
        native.optimizer_config["momentum"]
    )
    native_model_config = keras.Model().get_config()
    assert sorted(bridged.model_config) == sorted(native_model_config)
    assert bridged.model_config["name"] == "graph" and bridged.model_config["trainable"] is True


def test_summary_without_optimizer_and_what_stays_unsupported(capsys):
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.model.summary()
            seen["config"] = self.model.optimizer.get_config()
            with pytest.raises(hookbridge.UnsupportedModelAttributeError, match="no layers"):
                self.model.summary(layer_range=["a", "b"])
            with pytest.raises(hookbridge.UnsupportedModelAttributeError, match="to_json"):
                self.model.to_json()

    bridged_run([Probe()], epochs=1, learning_rate=None)
    out = capsys.readouterr().out
    assert 'Model: "graph"' in out and "Trainable params: 3 " in out
    assert seen["config"] == {"name": "graph_optimizer"}


# -- item 8: summaries written inside the model ----------------------------------------------------
def _train_tags(logdir):
    import os

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(logdir, "train"))
    acc.Reload()
    return set(acc.Tags()["tensors"]) | set(acc.Tags()["scalars"])


@pytest.mark.parametrize("update_freq", ["epoch", "batch"])
def test_summaries_inside_the_model_as_native_or_warned(tmp_path, update_freq):
    class Writes(keras.layers.Layer):  # a layer that writes a summary during fit
        def call(self, x):
            tf.summary.scalar("inside_mean", tf.reduce_mean(x))
            return x

    model = keras.Sequential([keras.Input((3,)), Writes(), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    native_dir = str(tmp_path / "native")
    model.fit(
        X,
        Y,
        batch_size=4,
        epochs=1,
        verbose=0,
        callbacks=[keras.callbacks.TensorBoard(native_dir, update_freq=update_freq)],
    )
    # fit records it under the layer's scope, e.g. "sequential/writes/inside_mean"
    native_records = any(t.endswith("inside_mean") for t in _train_tags(native_dir))
    assert native_records == (update_freq == "batch")

    bridged_dir = str(tmp_path / "bridged")

    def build(t):  # the TF1 graph's model writes the same summary
        tf.summary.scalar("inside_mean", tf.reduce_mean(t["w"]))
        return {}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bridged_run(
            [keras.callbacks.TensorBoard(bridged_dir, update_freq=update_freq)],
            epochs=1,
            build=build,
        )
    unrecorded = [w for w in caught if "are not recorded in its train/ events" in str(w.message)]
    # never recorded (docs/callbacks.md, TensorBoard row)
    assert not any(t.endswith("inside_mean") for t in _train_tags(bridged_dir))
    # the warning comes exactly when fit would have recorded it
    assert len(unrecorded) == (1 if native_records else 0)
    if unrecorded:
        assert "inside_mean" in str(unrecorded[0].message)


def test_v1_summaries_in_the_graph_are_named_in_the_warning(tmp_path):
    def build(t):
        tf.compat.v1.summary.scalar("w_sum", tf.reduce_sum(t["w"]))
        return {}

    with pytest.warns(UserWarning, match=r"1 tf.compat.v1.summary op\(s\) \(written by a Summ"):
        bridged_run(
            [keras.callbacks.TensorBoard(str(tmp_path), update_freq=1)], epochs=1, build=build
        )
