"""The named cases: each trains with some hooks or callbacks and returns its epochs' seconds."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

import hookbridge

from . import timing
from .workloads import (
    BATCH,
    HIDDEN,
    WIDE,
    IdleHook,
    NoopCallback,
    Tf1Equivalent,
    dataset,
    graph_mlp,
    image_dataset,
    keras_cnn,
    keras_equivalents,
    keras_mlp,
    standard_hooks,
)

v1 = tf.compat.v1

#: Steps per timed epoch of the realistic CNN cases (their step is 10–50× the MLP's): one timed
#: epoch of 500 steps carries exactly its share of the standard set's periodic work.
CNN_STEPS, CNN_EPOCHS = 500, 1


class Case:
    """A named way of training: ``run(steps, epochs)`` trains ``epochs`` epochs of ``steps`` steps
    in one run (one ``fit``, or one ``MonitoredSession``) and returns each epoch's seconds.

    ``steps`` / ``epochs``, when set, replace the benchmark's own for this case (the CNN's).
    """

    def __init__(
        self,
        name: str,
        description: str,
        run: Callable[..., list[float]],
        steps: int | None = None,
        epochs: int | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.run = run
        self.steps = steps
        self.epochs = epochs


class _EpochClock:
    """Times each epoch of a ``fit``: ``start`` goes first in the callback list and ``stop``
    last, so an epoch's time covers every callback's work in it (and nothing of ``fit``'s
    set-up, ``on_train_begin`` or ``on_train_end``)."""

    def __init__(self) -> None:
        self.epochs: list[float] = []
        self._t0 = 0.0
        clock = self

        class Start(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                clock._t0 = timing.CLOCK()

        class Stop(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                clock.epochs.append(timing.CLOCK() - clock._t0)

        self.start, self.stop = Start(), Stop()


def fit_case(
    name: str, description: str, model: Any, ds: Any, callbacks: Callable, **sizes: int
) -> Case:
    """A case training ``model`` with Keras ``fit`` and ``callbacks(total_steps)``."""

    def run(steps: int, epochs: int = 1) -> list[float]:
        clock = _EpochClock()
        cbs = [clock.start, *callbacks(steps * epochs), clock.stop]
        with timing.timed():
            history = model.fit(
                ds, steps_per_epoch=steps, epochs=epochs, verbose=0, callbacks=cbs, shuffle=False
            )
        if len(history.history.get("loss", ())) != epochs:
            raise RuntimeError(f"{name}: fit did not run {epochs} epochs: {history.history}")
        return clock.epochs

    return Case(name, description, run, **sizes)


def session_case(name: str, description: str, hooks: Callable[[int], list]) -> Case:
    """A case running the TF1 graph MLP's train op in a native ``MonitoredSession``."""

    def run(steps: int, epochs: int = 1) -> list[float]:
        graph = tf.Graph()
        times = []
        with graph.as_default():
            train_op, _ = graph_mlp(HIDDEN)
            hs = hooks(steps * epochs)
            with timing.timed(), v1.train.MonitoredSession(hooks=hs) as sess:
                for _ in range(epochs):
                    t0 = timing.CLOCK()
                    for _ in range(steps):
                        sess.run(train_op)
                    times.append(timing.CLOCK() - t0)
        return times

    return Case(name, description, run)


def build_cases(workdir: str) -> dict[str, Case]:
    """Every case, keyed by name (models are built and traced once, shared by their cases)."""
    ds = dataset()
    small = keras_mlp(HIDDEN)
    wide = keras_mlp(WIDE)
    images = image_dataset()
    cnn = keras_cnn()
    cnn_sizes = {"steps": CNN_STEPS, "epochs": CNN_EPOCHS}

    def d(name: str) -> str:
        path = os.path.join(workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def idle(n: int) -> Callable[[int], list]:
        return lambda steps: [hookbridge.HookCallback([IdleHook() for _ in range(n)])]

    def standard(name: str) -> Callable[[int], list]:
        out = d(name)
        return lambda steps: [hookbridge.HookCallback(standard_hooks(out, steps + 10))]

    def callback_hook(with_batch_listener: bool) -> Callable[[int], list]:
        def make(steps: int) -> list:
            out = d("callback_hook")
            callbacks = [
                keras.callbacks.History(),
                keras.callbacks.EarlyStopping(monitor="loss", patience=10**9),
                keras.callbacks.CSVLogger(os.path.join(out, "log.csv")),
            ]
            if with_batch_listener:  # reads every batch's logs: the loss is fetched every step
                callbacks.append(keras.callbacks.TerminateOnNaN())
            logs = {"loss": "loss:0"}
            hook = hookbridge.CallbackHook(
                # verbose=0, as the fit cases: no progress bar added
                callbacks,
                logs=logs,
                steps_per_epoch=100,
                batch_size=BATCH,
                verbose=0,
            )
            return [hook]

        return make

    keras_out, cnn_keras_out = d("keras"), d("cnn_keras")
    cases = [
        fit_case("bare", "bare fit, no callbacks", small, ds, lambda s: []),
        fit_case(
            "keras_noop",
            "a Keras callback doing nothing per batch (what Keras charges any batch callback)",
            small,
            ds,
            lambda s: [NoopCallback()],
        ),
        fit_case("idle_1", "HookCallback, 1 hook fetching nothing", small, ds, idle(1)),
        fit_case(
            "nan",
            "HookCallback, NanTensorHook('loss:0')",
            small,
            ds,
            lambda s: [hookbridge.HookCallback([v1.train.NanTensorHook("loss:0")])],
        ),
        fit_case(
            "keras_nan",
            "Keras's TerminateOnNaN: the batch loss checked for NaN every step",
            small,
            ds,
            lambda s: [keras.callbacks.TerminateOnNaN()],
        ),
        fit_case("standard", "HookCallback, standard hook set", small, ds, standard("standard")),
        fit_case(
            "keras_equiv",
            "hand-written Keras callbacks (same jobs as the standard set)",
            small,
            ds,
            lambda s: keras_equivalents(keras_out),
        ),
        fit_case("idle_10", "HookCallback, 10 idle hooks", small, ds, idle(10)),
        fit_case("idle_100", "HookCallback, 100 idle hooks", small, ds, idle(100)),
        fit_case("wide_bare", f"bare fit, 10x wider ({WIDE} units)", wide, ds, lambda s: []),
        fit_case(
            "wide_standard", "10x wider, standard hook set", wide, ds, standard("wide_standard")
        ),
        fit_case(
            "cnn_bare",
            "realistic: a small CNN on 32x32x3 images, bare fit",
            cnn,
            images,
            lambda s: [],
            **cnn_sizes,
        ),
        fit_case(
            "cnn_keras_noop",
            "realistic: the CNN with a Keras callback doing nothing per batch",
            cnn,
            images,
            lambda s: [NoopCallback()],
            **cnn_sizes,
        ),
        fit_case(
            "cnn_standard",
            "realistic: the CNN with the standard hook set",
            cnn,
            images,
            standard("cnn_standard"),
            **cnn_sizes,
        ),
        fit_case(
            "cnn_keras_equiv",
            "realistic: the CNN with the hand-written Keras callbacks",
            cnn,
            images,
            lambda s: keras_equivalents(cnn_keras_out),
            **cnn_sizes,
        ),
        session_case("ms_bare", "MonitoredSession, no hooks (TF1 graph MLP)", lambda s: []),
        session_case(
            "ms_nan_hook",
            "MonitoredSession + native NanTensorHook(loss): the one per-step fetch any "
            "batch-level listener needs",
            lambda s: [v1.train.NanTensorHook("loss:0")],
        ),
        session_case(
            "ms_standard",
            "MonitoredSession + the standard hook set, natively: what the hooks cost in TF1",
            lambda steps: standard_hooks(d("ms_standard"), steps + 10)(),
        ),
        session_case(
            "ms_callback_hook",
            "MonitoredSession + CallbackHook(History, EarlyStopping, CSVLogger, TerminateOnNaN)",
            callback_hook(with_batch_listener=True),
        ),
        session_case(
            "ms_tf1_equiv",
            "MonitoredSession + one hand-written TF1 hook doing the same four jobs (history, "
            "early stopping, CSV rows, NaN check): what a TF1 user writes instead",
            lambda s: [Tf1Equivalent(os.path.join(d("ms_tf1_equiv"), "log.csv"))],
        ),
        session_case(
            "ms_callback_hook_epoch",
            "MonitoredSession + CallbackHook(History, EarlyStopping, CSVLogger): epoch-level "
            "callbacks only, so the epoch sums stay in the graph",
            callback_hook(with_batch_listener=False),
        ),
    ]
    return {c.name: c for c in cases}
