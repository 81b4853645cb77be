"""``hookbridge demo``: TF1 hooks inside Keras ``fit``, and what they leave behind.

Trains a small regression on the shipped ``mtcars`` table with six built-in TF1 hooks under
:class:`hookbridge.HookCallback`, then reads back what the hooks wrote (checkpoints with
``tf.train.load_checkpoint``, events with TensorBoard's ``EventAccumulator``), restores the
checkpoint into a fresh model with :func:`hookbridge.restore_checkpoint`, and plots the loss.
"""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

import numpy as np

FEATURES = ("drat", "cyl", "wt")
TARGET = "mpg"
BATCH_SIZE = 8
#: Seeds Python, NumPy, TensorFlow and Keras (weight initialization): every run of the demo
#: trains the same model to the same losses (only StepCounterHook's global_step/sec, a timing,
#: differs).
SEED = 0


def load_mtcars(columns: tuple[str, ...] = ("mpg", "cyl", "drat", "wt")) -> dict[str, np.ndarray]:
    """Returns the shipped 32-row ``mtcars`` table as ``{column: float32 array}``."""
    with resources.files("hookbridge").joinpath("data/mtcars.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return {c: np.array([float(r[c]) for r in rows], dtype=np.float32) for c in columns}


def _dataset() -> tuple[np.ndarray, np.ndarray]:
    table = load_mtcars((TARGET, *FEATURES))
    x = np.stack([table[c] for c in FEATURES], axis=1)
    x = (x - x.mean(axis=0)) / x.std(axis=0)  # standardized features
    y = table[TARGET][:, None]
    return x, y


def _build_model(keras: Any) -> Any:
    model = keras.Sequential(
        [
            keras.Input(shape=(len(FEATURES),)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.1), loss="mse")
    return model


def run_demo(out: str, steps: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Runs the demo, writing into ``out``; returns what it measured (for tests)."""
    if steps < 1:
        raise ValueError(f"hookbridge demo: --steps must be at least 1, received {steps}.")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError as e:
        raise SystemExit(
            f"hookbridge demo needs matplotlib and tensorboard ({e}); "
            'install them with: pip install "tf-hookbridge[demo]"'
        ) from e
    import tensorflow as tf

    import hookbridge

    keras = tf.keras
    v1 = tf.compat.v1
    v1.logging.set_verbosity(v1.logging.INFO)  # LoggingTensorHook / StepCounterHook log at INFO
    keras.utils.set_random_seed(SEED)  # also seeds Python, NumPy and tf.random

    out = os.path.abspath(out)
    ckpt_dir = os.path.join(out, "checkpoints")
    events_dir = os.path.join(out, "events")
    plot_path = os.path.join(out, "loss.png")
    os.makedirs(out, exist_ok=True)
    every = max(1, steps // 4)

    x, y = _dataset()
    steps_per_epoch = -(-len(x) // BATCH_SIZE)
    epochs = -(-steps // steps_per_epoch) + 1  # more than needed: StopAtStepHook ends training

    say(
        f"hookbridge demo: {len(x)} cars from mtcars, predicting {TARGET} from {', '.join(FEATURES)}"
    )

    def hooks() -> list:
        # Called by HookCallback while its graph is the default graph: the Keras loss is the
        # tensor "loss:0" there, as a TF1 model_fn's loss was.
        graph = v1.get_default_graph()
        loss = graph.get_tensor_by_name("loss:0")
        global_step = v1.train.get_global_step()
        summary_op = v1.summary.scalar("batch_loss", loss)
        return [
            v1.train.StopAtStepHook(last_step=steps),
            v1.train.NanTensorHook(loss),
            v1.train.LoggingTensorHook({"loss": loss, "step": global_step}, every_n_iter=every),
            v1.train.CheckpointSaverHook(ckpt_dir, save_steps=every),
            v1.train.SummarySaverHook(save_steps=1, output_dir=events_dir, summary_op=summary_op),
            v1.train.StepCounterHook(every_n_steps=every, output_dir=events_dir),
        ]

    model = _build_model(keras)
    keras_pkg = sys.modules[type(model).__module__.split(".")[0]]
    say(
        f"  {keras_pkg.__name__} {getattr(keras_pkg, '__version__', '?')} on TensorFlow "
        f"{tf.__version__}; seed {SEED}; output directory: {out}"
    )
    bridge = hookbridge.HookCallback(hooks)
    say(f"\n1. model.fit(..., epochs={epochs}, callbacks=[HookCallback(hooks)]) with hooks:")
    history = model.fit(
        x, y, batch_size=BATCH_SIZE, epochs=epochs, shuffle=False, verbose=0, callbacks=[bridge]
    )
    hook_names = [type(h).__name__ for h in bridge.hooks]
    for name in hook_names:
        say(f"   - {name}")
    step = int(model.optimizer.iterations.numpy())
    say(
        f"   StopAtStepHook stopped fit at global step {step} "
        f"(epoch {len(history.history['loss'])} of {epochs})."
    )
    say("   (LoggingTensorHook and StepCounterHook logged to stderr at INFO level.)")

    say(f"\n2. CheckpointSaverHook wrote checkpoints to {ckpt_dir}:")
    state = tf.train.get_checkpoint_state(ckpt_dir)
    prefixes = list(state.all_model_checkpoint_paths) if state else []
    for prefix in prefixes:
        say(f"   - {os.path.basename(prefix)}")
    latest = tf.train.latest_checkpoint(ckpt_dir)
    reader = tf.train.load_checkpoint(latest)
    shapes = reader.get_variable_to_shape_map()
    say(f"   tf.train.load_checkpoint({os.path.basename(latest)!r}) holds:")
    for key in sorted(shapes):
        say(f"     {key:<28} shape={list(shapes[key])}")
    ckpt_step = int(reader.get_tensor("global_step"))
    say(f"     global_step = {ckpt_step}")

    say(f"\n3. SummarySaverHook and StepCounterHook wrote events to {events_dir}:")
    acc = EventAccumulator(events_dir, size_guidance={"scalars": 0})
    acc.Reload()
    scalar_tags = sorted(acc.Tags()["scalars"])
    scalars = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in scalar_tags}
    for tag in scalar_tags:
        points = scalars[tag]
        say(
            f"   - {tag}: {len(points)} points, steps {points[0][0]}..{points[-1][0]}, "
            f"first {points[0][1]:.3f}, last {points[-1][1]:.3f}"
        )
    say(f"   (view them with: tensorboard --logdir {events_dir})")

    say("\n4. hookbridge.restore_checkpoint into a fresh model:")
    fresh = _build_model(keras)
    restored_step = hookbridge.restore_checkpoint(fresh, ckpt_dir)
    diff = float(np.max(np.abs(fresh.predict(x, verbose=0) - model.predict(x, verbose=0))))
    mse = float(fresh.evaluate(x, y, verbose=0))
    say(
        f"   restored global step {restored_step}; optimizer.iterations = "
        f"{int(fresh.optimizer.iterations.numpy())}"
    )
    say(
        f"   max |prediction difference| vs the trained model: {diff:.2g}; restored model mse {mse:.3f}"
    )

    batch_loss = scalars.get("batch_loss", [])
    fig, ax = plt.subplots(figsize=(7, 4))
    if batch_loss:
        ax.plot(*zip(*batch_loss), marker=".", label="batch loss (SummarySaverHook events)")
    epoch_steps = [
        min(steps_per_epoch * (i + 1), step) for i in range(len(history.history["loss"]))
    ]
    ax.plot(
        epoch_steps, history.history["loss"], marker="o", label="epoch mean loss (Keras History)"
    )
    ax.set_xlabel("global step")
    ax.set_ylabel("mse")
    ax.set_yscale("log")
    ax.set_title("hookbridge demo: TF1 hooks inside Keras fit")
    ax.legend()
    fig.tight_layout()
    fig.savefig(plot_path, dpi=100)
    plt.close(fig)
    say(f"\n5. Loss history plot: {plot_path}")

    return {
        "hooks": hook_names,
        "step": step,
        "checkpoint_step": ckpt_step,
        "checkpoints": prefixes,
        "checkpoint_keys": sorted(shapes),
        "scalars": scalars,
        "restored_step": restored_step,
        "max_prediction_diff": diff,
        "plot": plot_path,
    }
