"""The four worlds, and the custom loop: each runs a scenario and returns its trace.

=====================  ==================================  ==================================
runner                 what runs                           imitates
=====================  ==================================  ==================================
``run_session``        hooks in a native ``MonitoredSession``   (the TF1 spec)
``run_fit``            callbacks in a native Keras ``fit``      (the Keras spec)
``run_hook_callback``  hooks under ``HookCallback`` in ``fit``   ``run_session``
``run_callback_hook``  callbacks under ``CallbackHook`` in a     ``run_fit``
                       ``MonitoredSession``
``run_loop``           callbacks in a custom loop            ``run_fit``
                       (``CallbackLoop``)
``run_hook_callback_   hooks under ``HookCallback`` in a      ``run_session``
in_loop``              ``CallbackLoop``
=====================  ==================================  ==================================

The TF1 graph has a global step, a train op incrementing it, a float scalar ``loss`` fed with the
scripted batch loss (also in the ``LOSSES`` collection), a ``dense/kernel`` and ``dense/bias`` and a
``learning_rate`` variable. The Keras model is ``Dense(1)`` with zero weights, mean squared error
and SGD with learning rate 0, trained on ``x = 0, y = sqrt(loss)`` one sample per batch: its batch
losses are exactly the scripted ones. The model is built once per process and reused (its
iterations are reset before each run), so a ``fit`` costs milliseconds.

Every runner ends the trace with ``("runner", "outcome", "ok")`` or
``("runner", "outcome", "<ExceptionType>")``: the exception that left the run, if any.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._conform.recorders import RecordingCallback, RecordingHook
from hookbridge._conform.scenarios import CallbackScenario, HookScenario, _Run
from hookbridge._conform.trace import Trace

keras = tf.keras
_MODEL: list[Any] = []


def keras_model() -> Any:
    """The shared zero-weight, learning-rate-0 Keras model every ``fit`` runner uses."""
    if not _MODEL:
        model = keras.Sequential(
            [
                keras.Input((1,)),
                keras.layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros"),
            ]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
        _MODEL.append(model)
    return _MODEL[0]


def _release_model_after(callbacks: list[Any]) -> None:
    """Drops the shared model after a run whose callbacks leave it unusable for another ``fit``:
    tf_keras's ``BackupAndRestore`` deletes the model's training state in ``on_train_end``, so a
    second ``fit`` of that model fails natively too (``AttributeError``); the next run builds a
    fresh model instead of inheriting that."""
    if any(isinstance(c, keras.callbacks.BackupAndRestore) for c in callbacks):
        _MODEL.clear()


def _outcome(run: Callable[[], Any], trace: Trace, errors: list[BaseException] | None) -> Trace:
    """Calls ``run``; ends ``trace`` with its outcome: ``ok`` or the type of the exception that
    left it (which is also appended to ``errors``)."""
    error: BaseException | None = None
    try:
        run()
    except Exception as e:  # noqa: BLE001 - the run's outcome is part of the trace
        error = e
        if errors is not None:
            errors.append(e)
    trace.append(("runner", "outcome", "ok" if error is None else type(error).__name__))
    return trace


def _batch(run: _Run, i: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``i``-th batch of the Keras runs: one sample, ``x = 0, y = sqrt(loss)``."""
    return np.zeros((1, 1), "float32"), np.array([[math.sqrt(run.loss(i))]], "float32")


# ------------------------------------------------------------------------- TF1 session side
class SessionGraph:
    """The TF1 graph of the session runners (see the module docstring)."""

    def __init__(self, end_of_input: int | None = None) -> None:
        self.graph = graph = tf.Graph()
        with graph.as_default():
            self.global_step = tf.compat.v1.train.get_or_create_global_step()
            self.loss_in = tf.compat.v1.placeholder(tf.float32, [], name="loss_in")
            self.loss = tf.identity(self.loss_in, name="loss")
            tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, self.loss)
            zeros = tf.compat.v1.zeros_initializer()
            self.kernel = tf.compat.v1.get_variable("dense/kernel", [1, 1], initializer=zeros)
            self.bias = tf.compat.v1.get_variable("dense/bias", [1], initializer=zeros)
            self.learning_rate = tf.compat.v1.get_variable(
                "learning_rate", [], initializer=zeros, trainable=False
            )
            # The train op runs after every read of the global step, so a hook fetching it gets
            # the pre-step value deterministically (TF1 leaves that order to the scheduler).
            deps = [
                _tfcompat.global_step_read_tensor(graph),
                graph.as_graph_element(self.global_step),
            ]
            if end_of_input is not None:
                dataset = tf.data.Dataset.range(end_of_input)
                deps.append(tf.compat.v1.data.make_one_shot_iterator(dataset).get_next())
            with tf.control_dependencies(deps):
                self.train_op = tf.compat.v1.assign_add(self.global_step, 1, name="train_op")


def drive_session(
    make_hooks: Callable[[SessionGraph], Sequence[Any]],
    run: _Run,
    trace: Trace,
    *,
    session_graph: SessionGraph | None = None,
    errors: list[BaseException] | None = None,
) -> Trace:
    """Runs ``make_hooks(graph)`` in a native ``MonitoredSession`` over ``run``'s steps.

    The caller loop is TF1's: ``while not should_stop(): run(train_op)``, at most ``run.steps``
    times (``end_of_input + 2`` when the input ends first). The exception that ended the run, if
    any, is appended to ``errors``.
    """
    g = session_graph or SessionGraph(run.end_of_input)
    limit = run.steps if run.end_of_input is None else run.end_of_input + 2

    def steps() -> None:
        with g.graph.as_default():
            hooks = list(make_hooks(g))
            with tf.compat.v1.train.MonitoredSession(hooks=hooks) as sess:
                for i in range(limit):
                    if sess.should_stop():
                        break
                    sess.run(g.train_op, {g.loss_in: run.loss(i)})

    return _outcome(steps, trace, errors)


def recording_hooks(scenario: HookScenario, trace: Trace) -> list[RecordingHook]:
    """One :class:`RecordingHook` per spec, named ``h0``, ``h1``, ..."""
    return [RecordingHook(f"h{i}", trace, spec) for i, spec in enumerate(scenario.hooks)]


def recording_callbacks(scenario: CallbackScenario, trace: Trace) -> list[RecordingCallback]:
    """One :class:`RecordingCallback` per spec, named ``c0``, ``c1``, ..."""
    return [RecordingCallback(f"c{i}", trace, spec) for i, spec in enumerate(scenario.callbacks)]


def run_session(scenario: HookScenario) -> Trace:
    """Native: the scenario's recording hooks in a ``MonitoredSession``."""
    trace: Trace = []
    return drive_session(lambda g: recording_hooks(scenario, trace), scenario, trace)


def run_callback_hook(scenario: CallbackScenario, **hook_kwargs: Any) -> Trace:
    """Bridged: the recording callbacks under ``CallbackHook`` in a ``MonitoredSession``."""

    trace: Trace = []
    # Built before the graph, as a user builds them (tf_keras returns graph-mode classes inside).
    callbacks = recording_callbacks(scenario, trace)

    def hooks(g: SessionGraph) -> list[Any]:
        return [callback_hook(callbacks, scenario, **hook_kwargs)]

    return drive_session(hooks, scenario, trace)


def callback_hook(callbacks: Sequence[Any], run: _Run, **kwargs: Any) -> Any:
    """The ``CallbackHook`` the runners use: ``fit``'s ``params`` and the graph's loss/lr."""
    from hookbridge import CallbackHook

    spe = None if run.end_of_input is not None else run.steps_per_epoch
    kwargs.setdefault("logs", {"loss": "loss"})
    kwargs.setdefault("learning_rate", "learning_rate")
    kwargs.setdefault("verbose", 0)
    kwargs.setdefault("batch_size", 1)  # drive_fit's batches hold one sample each
    return CallbackHook(list(callbacks), steps_per_epoch=spe, epochs=run.epochs, **kwargs)


# ------------------------------------------------------------------------------ Keras side
def drive_fit(
    callbacks: Iterable[Any],
    run: _Run,
    trace: Trace,
    *,
    errors: list[BaseException] | None = None,
) -> Trace:
    """Runs Keras ``fit`` on the shared model with ``callbacks`` over ``run``'s steps (the
    exception that ended it, if any, is appended to ``errors``)."""
    callbacks = list(callbacks)
    model = keras_model()
    model.optimizer.iterations.assign(0)

    def fit() -> None:
        if run.end_of_input is None:
            ys = np.array(
                [[math.sqrt(run.loss(i))] for i in range(run.steps_per_epoch)], dtype="float32"
            )
            xs = np.zeros_like(ys)
            model.fit(
                xs,
                ys,
                batch_size=1,
                epochs=run.epochs,
                shuffle=False,
                verbose=0,
                callbacks=callbacks,
            )
        else:
            batches = (_batch(run, i) for i in range(run.end_of_input))
            model.fit(batches, epochs=1, shuffle=False, verbose=0, callbacks=callbacks)

    _outcome(fit, trace, errors)
    _release_model_after(callbacks)
    return trace


def run_fit(scenario: CallbackScenario) -> Trace:
    """Native: the scenario's recording callbacks in Keras ``fit``."""
    trace: Trace = []
    return drive_fit(recording_callbacks(scenario, trace), scenario, trace)


def run_hook_callback(scenario: HookScenario, **callback_kwargs: Any) -> Trace:
    """Bridged: the recording hooks under ``HookCallback`` in Keras ``fit``."""
    trace: Trace = []
    hooks = functools.partial(recording_hooks, scenario, trace)
    return drive_hook_callback(hooks, drive_fit, scenario, trace, **callback_kwargs)


def drive_hook_callback(
    make_hooks: Callable[[], Sequence[Any]],
    drive: Callable[..., Trace],
    run: _Run,
    trace: Trace,
    *,
    errors: list[BaseException] | None = None,
    **callback_kwargs: Any,
) -> Trace:
    """``HookCallback(make_hooks, **callback_kwargs)`` run by ``drive`` (:func:`drive_fit` or
    :func:`drive_loop`) over ``run``'s steps, then closed."""
    from hookbridge import HookCallback

    bridge = HookCallback(make_hooks, **callback_kwargs)
    try:
        return drive([bridge], run, trace, errors=errors)
    finally:
        bridge.close()


# ------------------------------------------------------------------------------ custom loop
def drive_loop(
    callbacks: Iterable[Any],
    run: _Run,
    trace: Trace,
    *,
    errors: list[BaseException] | None = None,
) -> Trace:
    """Runs ``run``'s steps in a custom training loop (``CallbackLoop``) on the shared model:
    the batches :func:`drive_fit` feeds, a ``GradientTape`` step computing the same loss; the
    oracle is :func:`drive_fit` itself (``docs/custom-loops.md``). The exception that ended it,
    if any, is appended to ``errors``."""
    from hookbridge import CallbackLoop

    callbacks = list(callbacks)
    model = keras_model()
    model.optimizer.iterations.assign(0)

    def step(x: Any, y: Any) -> dict[str, Any]:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    if run.end_of_input is None:  # fit knows the size of arrays
        data: Any = [_batch(run, i) for i in range(run.steps_per_epoch)]
        epochs = run.epochs
    else:  # a generator, as drive_fit's: its size is unknown
        data, epochs = (_batch(run, i) for i in range(run.end_of_input)), 1

    def steps() -> None:
        loop = CallbackLoop(model, callbacks, data=data, epochs=epochs)
        with loop:
            for _ in loop.epochs():
                for x, y in loop.steps():
                    loop.step_end(step(x, y))

    _outcome(steps, trace, errors)
    _release_model_after(callbacks)
    return trace


def run_loop(scenario: CallbackScenario) -> Trace:
    """The custom loop: the scenario's recording callbacks in a ``CallbackLoop``."""
    trace: Trace = []
    return drive_loop(recording_callbacks(scenario, trace), scenario, trace)


def run_hook_callback_in_loop(scenario: HookScenario, **callback_kwargs: Any) -> Trace:
    """Bridged twice: the recording hooks under ``HookCallback`` in a ``CallbackLoop``."""
    trace: Trace = []
    hooks = functools.partial(recording_hooks, scenario, trace)
    return drive_hook_callback(hooks, drive_loop, scenario, trace, **callback_kwargs)
