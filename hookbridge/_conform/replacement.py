"""Does a Keras callback replace a TF1 hook? Both run on the same training; what they did, compared.

:func:`compare_replacement` runs Keras ``fit`` twice on the same model and data: once with the
hook under :class:`hookbridge.HookCallback`, once with the candidate callback(s) natively. Each
run has its own empty working directory (the factory is called and ``fit`` runs inside it, so
relative paths land there), and records:

* every line the hook's or callback's code logs (any logger, every level), warns or prints to
  ``sys.stdout``/``sys.stderr``, in order, normalized; the library's and TensorFlow's/Keras's own
  lines are left out on both sides alike (:mod:`hookbridge._conform.capture` says which);
* the files written there, read back (:mod:`hookbridge._conform.outputs`): checkpoints with
  ``tf.train.load_checkpoint``, event files with ``EventAccumulator``, CSV, text;
* the training itself: the step ``fit`` stopped at (``optimizer.iterations``), its epoch logs
  (``History``), the model's final weights, and the exception that ended it, if any.

A replacement *replaces* when nothing differs and everything was compared.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from hookbridge._conform.capture import Capture, captured, inside
from hookbridge._conform.outputs import Output, compare_outputs, read_outputs, same_value
from hookbridge._conform.scenarios import EXACT_LOSSES


@dataclasses.dataclass
class Training:
    """What ``check`` trains: a compiled Keras model and its data (one batch per step)."""

    model: Any
    x: Any
    y: Any
    batch_size: int
    epochs: int

    def fit(self, callbacks: list[Any]) -> Any:
        """``model.fit`` on the data, in order, silent, with ``callbacks``: its History."""
        return self.model.fit(
            self.x,
            self.y,
            batch_size=self.batch_size,
            epochs=self.epochs,
            shuffle=False,
            verbose=0,
            callbacks=callbacks,
        )


@dataclasses.dataclass
class Run:
    """What one side did (see the module docstring)."""

    logs: list[str]
    #: Lines left out as noise (capture.py): the library's and TensorFlow's/Keras's own.
    ignored: list[str]
    outputs: dict[str, Output]
    stopped_at: int
    history: dict[str, list[float]]
    weights: list[Any]
    error: str | None


@dataclasses.dataclass
class Replacement:
    """Both runs, and where they differ."""

    hook: Run
    callback: Run
    differences: list[str]
    unknown: list[str]
    compared: list[str]

    @property
    def replaces(self) -> bool:
        """Nothing differs and nothing was left uncompared."""
        return not self.differences and not self.unknown


def default_training(steps: int, steps_per_epoch: int) -> Callable[[], Training]:
    """The engine's own run: the shared zero-weight, learning-rate-0 model, one sample a batch,
    batch losses :data:`~hookbridge._conform.scenarios.EXACT_LOSSES` (as ``check`` scripts)."""

    def make() -> Training:
        from hookbridge._conform.runners import keras_model

        model = keras_model()
        model.optimizer.iterations.assign(0)
        # Shared by every run of the process: what the other side (or an earlier check) did to
        # it is undone, weights to zero, learning rate to 0.
        model.set_weights([np.zeros_like(w) for w in model.get_weights()])
        model.optimizer.learning_rate.assign(0.0)
        losses = [EXACT_LOSSES[i % len(EXACT_LOSSES)] for i in range(steps_per_epoch)]
        y = np.array([[math.sqrt(v)] for v in losses], dtype="float32")
        return Training(model, np.zeros_like(y), y, 1, steps // steps_per_epoch)

    return make


def user_training(
    factory: Callable[[], Any], steps: int, steps_per_epoch: int, name: str
) -> Callable[[], Training]:
    """The user's model: ``factory()`` returns ``(model, x, y)`` or a compiled model alone.

    A model alone gets ``steps_per_epoch`` samples of standard-normal inputs (seed 0) and its
    own predictions as targets. The first ``batch * steps_per_epoch`` samples are used, in
    ``steps_per_epoch`` batches of ``len(x) // steps_per_epoch``. Keras's random seed is set to 0
    before each call, so two calls build the same weights.

    Raises:
        ValueError: ``factory`` returned something else, an uncompiled model, or fewer samples
            than steps per epoch.
    """

    def make() -> Training:
        import keras as _keras_pkg  # noqa: F401 - the Keras tf.keras resolves to
        import tensorflow as tf

        tf.keras.utils.set_random_seed(0)
        made = factory()
        if isinstance(made, tuple) and len(made) == 3:
            model, x, y = made
        elif isinstance(made, tuple):
            raise ValueError(
                f"--model {name} returned a tuple of {len(made)}: return (model, x, y) or a "
                "compiled Keras model."
            )
        else:
            model, x, y = made, None, None
        if not (hasattr(model, "fit") and hasattr(model, "optimizer")):
            raise ValueError(
                f"--model {name} returned {type(model).__name__}, not a Keras model: return a "
                "compiled model, or (model, x, y)."
            )
        if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", True):
            raise ValueError(f"--model {name}: the model is not compiled; call model.compile().")
        if x is None:
            shape = getattr(model, "input_shape", None)
            if shape is None:
                raise ValueError(
                    f"--model {name}: the model has no input shape (build it, e.g. with "
                    "keras.Input), or return (model, x, y)."
                )
            rng = np.random.default_rng(0)
            x = rng.standard_normal((steps_per_epoch, *shape[1:])).astype("float32")
            y = np.asarray(model(x, training=False))
        n = len(x)
        if n < steps_per_epoch:
            raise ValueError(
                f"--model {name}: {n} samples, fewer than --steps-per-epoch {steps_per_epoch} "
                "(one batch per step)."
            )
        batch = n // steps_per_epoch
        used = batch * steps_per_epoch
        return Training(model, x[:used], y[:used], batch, steps // steps_per_epoch)

    return make


def run_side(
    make_training: Callable[[], Training], make_callbacks: Callable[[], list[Any]]
) -> Run:
    """One ``fit`` with the callbacks ``make_callbacks()`` returns, in a fresh folder."""
    folder = tempfile.mkdtemp(prefix="hookbridge-check-")
    cwd = os.getcwd()
    capture = Capture()
    error: str | None = None
    training: Training | None = None
    history: dict[str, list[float]] = {}
    try:
        os.chdir(folder)
        training = make_training()
        with captured(capture, folder):
            callbacks = inside(make_callbacks)
            try:
                result = inside(lambda: training.fit(callbacks))
                history = {k: [float(v) for v in vs] for k, vs in result.history.items()}
            except Exception as e:  # noqa: BLE001 - how the run ended is compared
                error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            finally:
                for c in callbacks:
                    close = getattr(c, "close", None)
                    if callable(close):
                        inside(close)
        outputs = read_outputs(folder, {os.path.realpath(folder): "<dir>", folder: "<dir>"})
        model = training.model
        return Run(
            logs=capture.lines,
            ignored=capture.ignored,
            outputs=outputs,
            stopped_at=int(np.asarray(model.optimizer.iterations)),
            history=history,
            weights=[np.asarray(w) for w in model.get_weights()],
            error=error,
        )
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


def compare_replacement(
    make_hooks: Callable[[], Any],
    make_callbacks: Callable[[], Any],
    make_training: Callable[[], Training],
) -> Replacement:
    """Runs the hook(s) under ``HookCallback`` and the callback(s) natively, and compares."""
    from hookbridge import HookCallback

    def hook_side() -> list[Any]:
        made = make_hooks()
        return [HookCallback(list(made) if isinstance(made, (list, tuple)) else [made])]

    def callback_side() -> list[Any]:
        made = make_callbacks()
        return list(made) if isinstance(made, (list, tuple)) else [made]

    hook = run_side(make_training, hook_side)
    callback = run_side(make_training, callback_side)
    return _compare(hook, callback)


def _compare(hook: Run, callback: Run) -> Replacement:
    h, c = "the hook", "the callback"
    differences: list[str] = []
    compared: list[str] = []
    if hook.error != callback.error:
        differences.append(f"fit ended: {h} with {hook.error or 'no error'}, {c} with "
                           f"{callback.error or 'no error'}")
    if hook.stopped_at != callback.stopped_at:
        differences.append(f"fit stopped at step {hook.stopped_at} with {h}, "
                           f"{callback.stopped_at} with {c}")
    compared.append(f"the step fit stopped at ({hook.stopped_at})")
    if not same_value(hook.history, callback.history):
        differences.append(f"the epoch logs (History): {h} {hook.history}, {c} {callback.history}")
    if not same_value(hook.weights, callback.weights):
        differences.append("the model's final weights differ")
    compared.append("the epoch logs and the final weights")
    for i in range(max(len(hook.logs), len(callback.logs))):
        a = hook.logs[i] if i < len(hook.logs) else "(no line)"
        b = callback.logs[i] if i < len(callback.logs) else "(no line)"
        if a != b:
            differences.append(
                f"log/stdout line {i + 1} ({len(hook.logs)} lines vs {len(callback.logs)}): "
                f"{h} {a!r}, {c} {b!r}"
            )
            break
    ignored = len(hook.ignored) + len(callback.ignored)
    compared.append(
        f"{len(hook.logs)} log/stdout lines"
        + (f" ({ignored} more left out: hookbridge's, TensorFlow's or Keras's own)"
           if ignored else "")
    )
    found, unknown, same = compare_outputs(
        hook.outputs, callback.outputs, left_name=h, right_name=c
    )
    differences += found
    compared.append(f"{len(set(hook.outputs) | set(callback.outputs))} files "
                    f"({len(same)} the same)")
    if not (hook.logs or hook.outputs or hook.error):
        unknown.append(
            "the hook wrote no log line, printed nothing and wrote no file in the run's folder: "
            "what it does (files outside the working directory, a network call, state in "
            "Python) is not something check can observe, so it cannot show that anything "
            "replaces it (write relative paths, or log what it does)"
        )
    return Replacement(hook, callback, differences, unknown, compared)
