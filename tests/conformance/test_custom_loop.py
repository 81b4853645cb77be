"""CallbackLoop beside its oracle, ``fit``: the same step function run by a custom loop and by a
model whose ``train_step`` / ``test_step`` run it, with the same callbacks.

The oracle's steps report each value through a ``keras.metrics.Mean`` weighted by the batch's
sample count, as ``fit`` reports a compiled loss; a metric object the step returns is reported by
its ``result()`` and reset at each epoch, as ``fit`` resets the model's metrics. Both runs record
every callback event with its logs; the events must be the same, the logs equal to float32
rounding, and what the callbacks write (CSV rows, checkpoints) the same.
"""

from __future__ import annotations

import csv
import functools
import math
import warnings

import numpy as np
import pytest
import reused_models
import tensorflow as tf

import hookbridge

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")
if not hasattr(keras.Model, "train_step"):  # pragma: no cover - every supported Keras has it
    pytest.skip("this Keras has no train_step to build the oracle", allow_module_level=True)

EVENTS = (
    "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
    "on_train_batch_begin", "on_train_batch_end",
    "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
)  # fmt: skip


class Recorder(keras.callbacks.Callback):
    """Every event with its index and logs (floats), in order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple] = []


def _recording(name: str):
    def method(self, *args, **kwargs):
        logs = kwargs.get("logs", args[-1] if args and isinstance(args[-1], dict) else None)
        index = args[0] if args and not isinstance(args[0], dict) else None
        self.events.append((name, index, {k: float(v) for k, v in (logs or {}).items()}))

    method.__name__ = name
    return method


for _name in EVENTS:
    setattr(Recorder, _name, _recording(_name))


def assert_same_events(native: list, looped: list) -> None:
    """The same events in the same order, with logs equal to float32 rounding."""
    assert [e[:2] for e in looped] == [e[:2] for e in native]
    for (name, index, want), (_, _, got) in zip(native, looped):
        assert list(got) == list(want), (name, index, want, got)
        for key in want:
            w, g = want[key], got[key]
            assert (math.isnan(w) and math.isnan(g)) or g == pytest.approx(w, rel=2e-6, abs=1e-7), (
                name, index, key, w, g,
            )  # fmt: skip


def data(n: int = 10, batch: int = 4, seed: int = 0, inf_at: int | None = None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True).astype("float32")
    if inf_at is not None:
        y[inf_at] = np.inf
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def inner_model() -> keras.Model:
    keras.utils.set_random_seed(0)
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])


class Task:
    """The user's step functions, over an inner model and an optimizer they own."""

    def __init__(self, model: keras.Model, with_mae: bool = False) -> None:
        self.model = model
        self.optimizer = keras.optimizers.SGD(0.05)
        self.mae = keras.metrics.MeanAbsoluteError(name="mae") if with_mae else None

    def logs(self, x, y, loss):
        if self.mae is not None:
            self.mae.update_state(y, self.model(x))
        return {"loss": loss}

    def train(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self.model(x) - y))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return self.logs(x, y, loss)

    def test(self, x, y):
        return self.logs(x, y, tf.reduce_mean(tf.square(self.model(x) - y)))


class Oracle(keras.Model):
    """``fit``'s side: train_step / test_step run the Task's step, values through Means."""

    def __init__(self, with_mae: bool = False) -> None:
        super().__init__()
        self.task = Task(inner_model(), with_mae)
        self.inner = self.task.model
        self.tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        return [self.tracker] + ([self.task.mae] if self.task.mae is not None else [])

    def call(self, x):
        return self.inner(x)

    def _report(self, logs, x):
        self.tracker.update_state(logs["loss"], sample_weight=tf.shape(x)[0])
        return {m.name: m.result() for m in self.metrics}

    def train_step(self, data):
        x, y = data
        return self._report(self.task.train(x, y), x)

    def test_step(self, data):
        x, y = data
        return self._report(self.task.test(x, y), x)


def oracle(with_mae: bool = False, reuse: bool = True) -> Oracle:
    """A built, compiled Oracle; ``reuse``: one per ``with_mae`` reused across runs, reset to
    its built state (``tests/reused_models.py``: its traced ``train_function`` kept)."""

    def build():
        model = Oracle(with_mae)  # seeds itself (inner_model)
        model(np.zeros((1, 3), "float32"))  # built, as ModelCheckpoint needs
        model.compile(optimizer=model.task.optimizer)
        return model

    return reused_models.reused(("custom loop oracle", with_mae), 0, build) if reuse else build()


def run_fit(callbacks, *, train, epochs, val=None, with_mae=False, **fit_kw):
    # tf_keras's BackupAndRestore deletes the model's training state at on_train_end: a model
    # that ran it is not handed to a later run (a fresh one, as natively).
    backup = any(isinstance(c, keras.callbacks.BackupAndRestore) for c in callbacks)
    model = oracle(with_mae, reuse=not backup)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(train, epochs=epochs, validation_data=val, callbacks=callbacks, verbose=0,
                  **fit_kw)  # fmt: skip
    return model, [str(w.message) for w in caught]


class _Pooled:
    """A Task and its traced step, with what they hold as built, to hand out again."""

    def __init__(self, with_mae: bool) -> None:
        self.task = Task(inner_model(), with_mae)
        self.step = tf.function(self.task.train)
        optimizer = self.task.optimizer
        optimizer.build(self.task.model.trainable_variables)  # its variables exist from here
        self.weights = self.task.model.get_weights()
        self.variables = list(optimizer.variables)
        self.values = [v.numpy() for v in self.variables]
        self.in_use = True

    def restore(self) -> bool:
        """Back to as built; False where that cannot be certain (the optimizer grew variables,
        the model got an optimizer of its own or was made (non-)trainable)."""
        task = self.task
        if (
            [id(v) for v in task.optimizer.variables] != [id(v) for v in self.variables]
            or getattr(task.model, "optimizer", None) is not None
            or not task.model.trainable
        ):
            return False
        keras.utils.set_random_seed(0)
        task.model.set_weights(self.weights)
        for variable, value in zip(self.variables, self.values):
            variable.assign(value)
        if task.mae is not None:
            task.mae.reset_state()
        task.model.stop_training = False
        self.in_use = True
        return True


_TASKS: dict[bool, list[_Pooled]] = {}


@pytest.fixture(autouse=True)
def _free_the_pooled_tasks():
    yield
    for pool in _TASKS.values():
        for pooled in pool:
            pooled.in_use = False


def loop_task(with_mae: bool = False):
    """A Task and its ``tf.function`` step, one per ``with_mae`` reused across runs (another
    where the test holds every one), reset to their built state: the inner model's weights, the
    optimizer's variables (its step), the metric's state; the step's trace kept."""
    pool = _TASKS.setdefault(with_mae, [])
    for pooled in [p for p in pool if not p.in_use]:
        if pooled.restore():
            return pooled.task, pooled.step
        pool.remove(pooled)
    pool.append(_Pooled(with_mae))
    return pool[-1].task, pool[-1].step


def run_loop(callbacks, *, train, epochs, val=None, with_mae=False, compiled=False, **loop_kw):
    if compiled:  # model.optimizer is the step's (BackupAndRestore backs it up)
        task = Task(inner_model(), with_mae)
        task.model.compile(optimizer=task.optimizer)
        step = tf.function(task.train)
    else:
        task, step = loop_task(with_mae)
    loop = hookbridge.CallbackLoop(
        task.model, callbacks, epochs=epochs, validation_data=val,
        validation_step=None if val is None else (lambda b: task.test(*b)),
        metrics=[task.mae] if with_mae else [], **loop_kw,
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with loop:
            for _ in loop.epochs():
                for x, y in loop.steps(train):
                    loop.step_end(step(x, y))
    return task, loop, [str(w.message) for w in caught]


#: CI runs the diagonal (training alone with the loss alone, validation with the metric too:
#: each value of each argument once); deep runs the other two pairs.
@pytest.mark.parametrize(
    "validate, with_mae",
    [
        (False, False),
        (True, True),
        pytest.param(False, True, marks=pytest.mark.deep),
        pytest.param(True, False, marks=pytest.mark.deep),
    ],
    ids=["train-loss", "validation-loss+metric", "train-loss+metric", "validation-loss"],
)
def test_events_and_logs_match_fit(validate, with_mae):
    val = data(6, 4, seed=1) if validate else None
    native, looped = Recorder(), Recorder()
    model, _ = run_fit([native], train=data(), epochs=3, val=val, with_mae=with_mae)
    task, loop, _ = run_loop([looped], train=data(), epochs=3, val=val, with_mae=with_mae)
    assert_same_events(native.events, looped.events)
    assert loop.history.history.keys() == model.history.history.keys()
    for key, values in model.history.history.items():
        np.testing.assert_allclose(loop.history.history[key], values, rtol=2e-6)
    for want, got in zip(model.inner.get_weights(), task.model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_ragged_last_batch_weighs_by_its_sample_count():
    """10 samples in batches of 4: the epoch mean weights the last batch (2 samples) by 2."""
    looped = Recorder()
    _task, loop, _ = run_loop([looped], train=data(10, 4), epochs=1)
    batch_means = [e[2]["loss"] for e in looped.events if e[0] == "on_train_batch_end"]
    assert len(batch_means) == 3
    # the running means unwound by the sample counts give the batch values back
    sums = np.array(batch_means) * np.array([4, 8, 10])
    batches = np.diff(np.concatenate([[0.0], sums])) / np.array([4, 4, 2])
    assert loop.history.history["loss"][0] == pytest.approx(
        float(np.dot(batches, [4, 4, 2]) / 10), rel=1e-6
    )
    assert loop.history.history["loss"][0] != pytest.approx(float(batches.mean()), rel=1e-3)


@pytest.mark.parametrize(
    "make",
    [
        lambda: keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0),
        lambda: keras.callbacks.TerminateOnNaN(),
    ],
    ids=["EarlyStopping", "TerminateOnNaN"],
)
def test_stops_at_the_step_fit_stops(make):
    """EarlyStopping ends after an epoch, TerminateOnNaN after the step whose loss is inf."""
    native, looped = Recorder(), Recorder()
    kwargs = {"train": data(12, 4, inf_at=5), "epochs": 4}
    model, _ = run_fit([make(), native], **kwargs)
    task, _loop, _ = run_loop([make(), looped], **kwargs)
    assert_same_events(native.events, looped.events)
    assert int(task.optimizer.iterations.numpy()) == int(model.task.optimizer.iterations.numpy())
    assert task.model.stop_training and model.stop_training


def test_csv_logger_and_model_checkpoint_write_what_fit_writes(tmp_path):
    def callbacks(side):
        return [
            keras.callbacks.CSVLogger(str(tmp_path / f"{side}.csv")),
            keras.callbacks.ModelCheckpoint(
                str(tmp_path / f"{side}-{{epoch}}.weights.h5"), save_weights_only=True
            ),
        ]

    model, _ = run_fit(callbacks("fit"), train=data(), epochs=2, val=data(6, 4, seed=1))
    task, _, _ = run_loop(callbacks("loop"), train=data(), epochs=2, val=data(6, 4, seed=1))
    rows = {}
    for side in ("fit", "loop"):
        with open(tmp_path / f"{side}.csv") as f:
            rows[side] = list(csv.DictReader(f))
    assert [list(r) for r in rows["loop"]] == [list(r) for r in rows["fit"]]
    for want, got in zip(rows["fit"], rows["loop"]):
        for key in want:
            assert float(got[key]) == pytest.approx(float(want[key]), rel=2e-6), key
    for epoch in (1, 2):  # each epoch's weights, read back into fresh models
        fresh = inner_model()
        fresh.load_weights(str(tmp_path / f"loop-{epoch}.weights.h5"))
        oracle = Oracle()
        oracle(np.zeros((1, 3), "float32"))
        oracle.load_weights(str(tmp_path / f"fit-{epoch}.weights.h5"))
        for want, got in zip(oracle.inner.get_weights(), fresh.get_weights()):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    for want, got in zip(model.inner.get_weights(), task.model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("initial_epoch", [0, 2])
def test_steps_per_epoch_and_initial_epoch(initial_epoch):
    """A repeated dataset read across epochs, ``steps_per_epoch`` at a time, from an epoch."""
    native, looped = Recorder(), Recorder()
    kwargs = {"train": data(16, 4).repeat(), "epochs": 4, "steps_per_epoch": 3,
              "initial_epoch": initial_epoch}  # fmt: skip
    run_fit([native], **kwargs)
    run_loop([looped], **kwargs)
    assert_same_events(native.events, looped.events)


def unknown_size(dataset):
    return dataset.filter(lambda x, y: True)  # the cardinality becomes unknown


@pytest.mark.parametrize(
    "train, steps_per_epoch",
    [
        (lambda: data(20, 4), 3),
        (lambda: unknown_size(data(20, 4)), 3),
        (lambda: unknown_size(data(10, 4)), None),
    ],
    ids=["known-size", "unknown-size", "unknown-size-whole-epochs"],
)
def test_input_ending_inside_an_epoch_ends_as_fit(train, steps_per_epoch, caplog):
    """The data ends before ``steps_per_epoch`` steps (or its size is unknown): the same begins
    without an end, the same epochs, and the same warning (Keras 3 warns, tf_keras logs)."""
    native, looped = Recorder(), Recorder()
    kwargs = {"epochs": 3, "steps_per_epoch": steps_per_epoch}
    with caplog.at_level("WARNING"):
        _, native_warnings = run_fit([native], train=train(), **kwargs)
        native_logged = [r.getMessage() for r in caplog.records if "ran out" in r.getMessage()]
        caplog.clear()
        _, _, loop_warnings = run_loop([looped], train=train(), **kwargs)
        loop_logged = [r.getMessage() for r in caplog.records if "ran out" in r.getMessage()]
    assert_same_events(native.events, looped.events)
    assert [w for w in loop_warnings if "ran out" in w][:1] == [
        w for w in native_warnings if "ran out" in w
    ][:1]
    assert loop_logged[:1] == native_logged[:1]
    if steps_per_epoch is not None:
        assert native_logged[:1] or [w for w in native_warnings if "ran out" in w]


def test_misuse_gets_clear_errors():
    task = Task(inner_model())
    with pytest.raises(TypeError, match="needs the Keras model"):
        hookbridge.CallbackLoop(None)
    with pytest.raises(ValueError, match="validation_step="):
        hookbridge.CallbackLoop(task.model, validation_data=data())
    loop = hookbridge.CallbackLoop(task.model, epochs=1)
    with pytest.raises(RuntimeError, match="inside `with loop:`"):
        next(loop.epochs())
    with loop:
        for _ in loop.epochs():
            with pytest.raises(RuntimeError, match="without loop.step_end"):
                for _batch in loop.steps(data()):
                    pass
    loop = hookbridge.CallbackLoop(task.model, epochs=1)
    with pytest.raises(TypeError, match="'loss' is not a scalar"), loop:
        for _ in loop.epochs():
            for x, _y in loop.steps(data()):
                loop.step_end({"loss": x})


def _spe_oracle() -> Oracle:
    """The oracle of test_steps_per_execution, pooled: its two variants share one build and
    trace (reset to its built state between them, as :func:`oracle`)."""
    model = Oracle()
    model(np.zeros((1, 3), "float32"))
    model.compile(optimizer=model.task.optimizer, steps_per_execution=3)
    return model


@pytest.mark.parametrize("n_samples", [40, 36], ids=["partial-last", "full-executions"])
def test_steps_per_execution(n_samples):
    """Three steps per call, as ``compile(steps_per_execution=3)``: one begin and end per call
    (the end's index as each stack reports it, also for a partial last call), the epoch values
    exact through a Mean the step updates per batch, the optimizer's step count the same."""
    native, looped = Recorder(), Recorder()
    model = reused_models.reused(("custom loop oracle", "steps_per_execution=3"), 0, _spe_oracle)
    model.fit(data(n_samples, 4), epochs=2, callbacks=[native], verbose=0)

    task = Task(inner_model())
    tracker = keras.metrics.Mean(name="loss")

    @tf.function
    def one(x, y):
        tracker.update_state(task.train(x, y)["loss"], sample_weight=tf.shape(x)[0])

    loop = hookbridge.CallbackLoop(
        task.model, [looped], epochs=2, metrics=[tracker], steps_per_execution=3
    )
    with loop:
        for _ in loop.epochs():
            for batches in loop.steps(data(n_samples, 4)):
                for x, y in batches:
                    one(x, y)
                loop.step_end({})
    assert_same_events(native.events, looped.events)
    assert int(task.optimizer.iterations.numpy()) == int(model.task.optimizer.iterations.numpy())


def test_optimizer_is_the_models_while_the_loop_runs():
    """``optimizer=`` names the optimizer callbacks see as ``model.optimizer`` (the global step
    of HookCallback, the rate ReduceLROnPlateau sets); the model's own is restored after."""
    task = Task(inner_model())
    other = keras.optimizers.SGD(0.5)
    before = getattr(task.model, "optimizer", None)
    seen = []
    probe = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(task.model.optimizer)
    )
    loop = hookbridge.CallbackLoop(task.model, [probe], epochs=1, optimizer=other)
    with loop:
        for _ in loop.epochs():
            for x, y in loop.steps(data()):
                loop.step_end(task.train(x, y))
    assert seen and all(o is other for o in seen)
    assert getattr(task.model, "optimizer", None) is before
    with pytest.raises(TypeError, match="takes a Keras optimizer"):
        hookbridge.CallbackLoop(task.model, optimizer="sgd")


def test_hook_callback_sees_each_steps_own_values():
    """HookCallback in the loop: ``loss:0`` is the step's own value (ragged last batch, an inf
    batch), never a running mean, the global step is the optimizer's iterations (stale
    in the run, fresh in after_run), as a TF1 loss tensor in a MonitoredSession is."""
    v1 = tf.compat.v1
    seen, raw = [], []

    class Peek(v1.train.SessionRunHook):
        def begin(self):
            self.fetches = [v1.train.get_global_step(), "loss:0"]

        def before_run(self, run_context):
            return v1.train.SessionRunArgs(self.fetches)

        def after_run(self, run_context, run_values):
            fresh = run_context.session.run(self.fetches[0])
            seen.append((int(run_values.results[0]), int(fresh), float(run_values.results[1])))

    task = Task(inner_model())
    task.model.compile(optimizer=task.optimizer)
    loop = hookbridge.CallbackLoop(
        task.model, [hookbridge.HookCallback([Peek()])], data=data(10, 4, inf_at=5), epochs=2
    )
    with loop:
        for _ in loop.epochs():
            for x, y in loop.steps():
                logs = task.train(x, y)
                raw.append(float(logs["loss"]))
                loop.step_end(logs)
    assert [s[:2] for s in seen] == [(i, i + 1) for i in range(6)]
    np.testing.assert_array_equal([s[2] for s in seen], raw)  # each step's own value
    assert math.isinf(raw[1]) and raw[0] != loop.history.history["loss"][0]


class HookEvents(tf.compat.v1.train.SessionRunHook):
    """A TF1 hook recording its lifecycle: each run's global step (pre-step) and ``loss:0``."""

    def __init__(self, events: list) -> None:
        self.events = events

    def begin(self):
        self.events.append(("begin",))

    def after_create_session(self, session, coord):
        self.events.append(("create",))

    def before_run(self, run_context):
        fetches = [tf.compat.v1.train.get_global_step(), "loss:0"]
        return tf.compat.v1.train.SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        step, loss = run_values.results
        self.events.append(("run", int(step), float(loss)))

    def end(self, session):
        self.events.append(("end",))


def checkpoint_steps(model_dir: str) -> list[int]:
    """The global step saved in each checkpoint the directory's state lists."""
    state = tf.train.get_checkpoint_state(model_dir)
    paths = list(state.all_model_checkpoint_paths) if state else []
    return [int(tf.train.load_checkpoint(p).get_tensor("global_step")) for p in paths]


@pytest.mark.parametrize(
    "stop_at, validation_freq",
    [(6, 1), (None, 2)],
    ids=["StopAtStepHook6-validate-each-epoch", "no-stop-validate-every-2nd"],
)
def test_hook_callback_training_hooks_go_on_through_validation(tmp_path, stop_at, validation_freq):
    """fit's validation runs no training hook (its on_test_* are the training run's): the hooks
    run every training step of every epoch in one session, end() once; the loop the same."""

    def hook_callback(side: str, events: list):
        def hooks():
            stop = [] if stop_at is None else [tf.compat.v1.train.StopAtStepHook(last_step=stop_at)]
            saver = tf.compat.v1.train.CheckpointSaverHook(str(tmp_path / side), save_steps=3)
            return [*stop, saver, HookEvents(events)]

        return hookbridge.HookCallback(hooks)

    hook_events: dict[str, list] = {"fit": [], "loop": []}
    native, looped = Recorder(), Recorder()
    kwargs = {"train": data(16, 4), "epochs": 3, "val": data(6, 4, seed=1),
              "validation_freq": validation_freq}  # fmt: skip
    model, _ = run_fit([hook_callback("fit", hook_events["fit"]), native], **kwargs)
    task = Task(inner_model())
    task.model.compile(optimizer=task.optimizer)  # the hooks' global step: its iterations
    step = tf.function(task.train)
    loop = hookbridge.CallbackLoop(
        task.model, [hook_callback("loop", hook_events["loop"]), looped], epochs=3,
        validation_data=kwargs["val"], validation_step=lambda b: task.test(*b),
        validation_freq=validation_freq,
    )  # fmt: skip
    with loop:
        for _ in loop.epochs():
            for x, y in loop.steps(kwargs["train"]):
                loop.step_end(step(x, y))

    want, got = hook_events["fit"], hook_events["loop"]
    steps = 12 if stop_at is None else stop_at
    assert [e[:2] for e in want] == [("begin",), ("create",)] + [
        ("run", i) for i in range(steps)
    ] + [("end",)]  # fmt: skip
    assert [e[:2] for e in got] == [e[:2] for e in want]
    np.testing.assert_allclose([e[2] for e in got if e[0] == "run"],
                               [e[2] for e in want if e[0] == "run"], rtol=2e-6)  # fmt: skip
    assert checkpoint_steps(str(tmp_path / "fit")) == [0, 3, 6] + ([9, 12] if stop_at is None else [])
    assert checkpoint_steps(str(tmp_path / "loop")) == checkpoint_steps(str(tmp_path / "fit"))
    assert int(task.optimizer.iterations.numpy()) == int(model.task.optimizer.iterations.numpy())
    assert_same_events(native.events, looped.events)


@pytest.mark.parametrize("leave", ["end", "exception"])
def test_evaluate_after_the_loop_is_an_evaluation_run(leave):
    """The loop is the hooks' fit only while it runs: an evaluate after it (ended or left by an
    exception) runs its hooks once per batch, in a session of its own, as after fit."""
    events: list = []
    task = Task(inner_model())
    task.model.compile(optimizer=task.optimizer, loss="mse")
    callback = hookbridge.HookCallback(lambda: [HookEvents(events)])
    loop = hookbridge.CallbackLoop(task.model, [callback], data=data(8, 4), epochs=1)
    with pytest.raises(ZeroDivisionError) if leave == "exception" else warnings.catch_warnings():
        with loop:
            for _ in loop.epochs():
                for x, y in loop.steps():
                    loop.step_end(task.train(x, y))
                    if leave == "exception":
                        raise ZeroDivisionError
    del events[:]
    task.model.evaluate(data(8, 4), callbacks=[callback], verbose=0)
    assert [e[0] for e in events] == ["begin", "create", "run", "run", "end"]


class Interrupt(keras.callbacks.Callback):
    """Raises at the begin of batch ``batch`` of epoch ``epoch`` (a preemption, as Keras's own
    BackupAndRestore tests interrupt fit)."""

    def __init__(self, epoch: int, batch: int) -> None:
        super().__init__()
        self.at, self.epoch = (epoch, batch), None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if (self.epoch, batch) == self.at:
            raise RuntimeError("interrupted")


@pytest.mark.parametrize("save_freq", ["epoch", 3])
def test_backup_and_restore_resumes_where_fit_resumes(tmp_path, save_freq):
    """Interrupted at epoch 2 and run again with the same BackupAndRestore, fit and the loop
    resume at the same epoch (tf_keras / Keras 2 after a mid-epoch backup: at the same step),
    with the same events, History and weights."""
    kwargs = {"train": data(16, 4), "epochs": 4}
    events = {}
    for side in ("fit", "loop"):
        backup = str(tmp_path / side)
        run = run_fit if side == "fit" else functools.partial(run_loop, compiled=True)
        with pytest.raises(RuntimeError, match="interrupted"):
            run([keras.callbacks.BackupAndRestore(backup, save_freq=save_freq), Interrupt(2, 1)],
                **kwargs)  # fmt: skip
        if side == "loop":  # the resumed epoch's size is known from data=, as fit knows it
            run = functools.partial(run, data=kwargs["train"])
            if not KERAS3 and save_freq != "epoch":  # resumed at a step: the size is needed
                with pytest.raises(ValueError, match=r"pass CallbackLoop\(data=\.\.\.\)"):
                    run_loop([keras.callbacks.BackupAndRestore(backup, save_freq=save_freq)],
                             compiled=True, **kwargs)  # fmt: skip
                assert not hookbridge._exact.DRIVEN  # the run it began is declared over
        events[side] = Recorder()
        result = run([keras.callbacks.BackupAndRestore(backup, save_freq=save_freq),
                      events[side]], **kwargs)  # fmt: skip
        if side == "fit":
            model = result[0]
        else:
            task, loop = result[:2]
    assert_same_events(events["fit"].events, events["loop"].events)
    begins = [e[1] for e in events["loop"].events if e[0] == "on_epoch_begin"]
    first_batch = next(e[1] for e in events["loop"].events if e[0] == "on_train_batch_begin")
    assert (begins, first_batch) == ([2, 3], 0 if KERAS3 or save_freq == "epoch" else 1)
    assert loop.history.epoch == model.history.epoch == [2, 3]
    for key, values in model.history.history.items():
        np.testing.assert_allclose(loop.history.history[key], values, rtol=2e-6)
    for want, got in zip(model.inner.get_weights(), task.model.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize(
    "validation_freq", [pytest.param([2], marks=pytest.mark.deep), 2, [1, 3], (3,)], ids=str
)
def test_validation_freq_as_fit(validation_freq):
    """An int validates every that many epochs, a list after the epochs it names (from 1). A
    one-element list in deep only: CI has a list ([1, 3]) and a one-element tuple."""
    val = data(6, 4, seed=1)
    native, looped = Recorder(), Recorder()
    fit_freq = list(validation_freq) if isinstance(validation_freq, tuple) else validation_freq
    model, _ = run_fit([native], train=data(), epochs=3, val=val, validation_freq=fit_freq)
    _task, loop, _ = run_loop(
        [looped], train=data(), epochs=3, val=val, validation_freq=validation_freq
    )
    assert_same_events(native.events, looped.events)
    validated = [i for i, logs in enumerate(loop.history.history.get("val_loss", []))]
    assert len(validated) == {"[2]": 1, "2": 1, "[1, 3]": 2, "(3,)": 1}[str(validation_freq)]
    assert loop.history.history.keys() == model.history.history.keys()
    for key, values in model.history.history.items():
        np.testing.assert_allclose(loop.history.history[key], values, rtol=2e-6)


@pytest.mark.parametrize("bad", [0, "2", 1.5, ["2"], True])
def test_validation_freq_refused_at_once(bad):
    task = Task(inner_model())
    with pytest.raises((TypeError, ValueError), match="validation_freq"):
        hookbridge.CallbackLoop(task.model, validation_data=data(), validation_step=task.test,
                                validation_freq=bad)  # fmt: skip
