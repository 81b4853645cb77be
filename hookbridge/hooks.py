"""Hooks hookbridge ships: the R tfestimators package's ``hook_progress_bar()`` and
``hook_history_saver()``.

Both read the loss the way the R package's hooks do: the first tensor of the graph's ``LOSSES``
collection (``graph.get_collection("losses")``) unless a ``loss`` tensor (or name) is given.
"""

from __future__ import annotations

import csv
import sys
from typing import Any, TextIO

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat

SessionRunHook = tf.compat.v1.train.SessionRunHook
SessionRunArgs = tf.compat.v1.train.SessionRunArgs

__all__ = ["HistorySaverHook", "ProgressBarHook", "TrainingHistory"]


def _loss_tensor(loss: Any, hook: str) -> tf.Tensor:
    graph = tf.compat.v1.get_default_graph()
    if loss is None:
        losses = graph.get_collection(tf.compat.v1.GraphKeys.LOSSES)
        if not losses:
            raise ValueError(
                f"{hook}: the graph's LOSSES collection is empty and no `loss` was given. Pass "
                f"{hook}(loss=<loss tensor or its name>), or add the loss with "
                "tf.compat.v1.losses.add_loss(loss) (canned Estimators do)."
            )
        return losses[0]
    if isinstance(loss, str):
        try:
            return graph.as_graph_element(loss if ":" in loss else loss + ":0")
        except (KeyError, ValueError) as e:
            raise ValueError(f"{hook}: loss={loss!r} is not a tensor of the graph: {e}") from None
    return loss


def _global_step_read() -> Any:
    step = tf.compat.v1.train.get_global_step()
    return None if step is None else _tfcompat.global_step_read_tensor(step.graph)


class TrainingHistory:
    """What :class:`HistorySaverHook` saved: one row per saved step.

    Columns (as the R package's data frame): ``mean_losses``, ``total_losses``, ``steps``.
    """

    columns = ("mean_losses", "total_losses", "steps")

    def __init__(self) -> None:
        self.mean_losses: list[float] = []
        self.total_losses: list[float] = []
        self.steps: list[int] = []

    def __len__(self) -> int:
        return len(self.steps)

    def rows(self) -> list[tuple[float, float, int]]:
        """The table as ``(mean_losses, total_losses, steps)`` tuples."""
        return list(zip(self.mean_losses, self.total_losses, self.steps))

    def to_dict(self) -> dict[str, list]:
        """Column name -> values (``pandas.DataFrame(history.to_dict())`` makes a data frame)."""
        return {c: list(getattr(self, c)) for c in self.columns}

    def __repr__(self) -> str:
        lines = [f"{'':>3} {'mean_losses':>12} {'total_losses':>12} {'steps':>6}"]
        for i, (m, t, s) in enumerate(self.rows(), 1):
            lines.append(f"{i:>3} {m:>12.4f} {t:>12.4f} {s:>6}")
        return "\n".join(lines)

    def to_csv(self, path: str) -> None:
        """Writes the table as CSV with a header row."""
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(self.columns)
            writer.writerows(self.rows())

    def plot(self, path: str | None = None) -> Any:
        """Plots both loss columns against ``steps`` (matplotlib, imported here only).

        Args:
            path: if given, the figure is saved there (PNG for a ``.png`` path).

        Returns:
            The matplotlib ``Figure``.
        """
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
        axes[0].plot(self.steps, self.mean_losses, marker="o")
        axes[0].set_ylabel("mean_losses")
        axes[1].plot(self.steps, self.total_losses, marker="o")
        axes[1].set_ylabel("total_losses")
        axes[1].set_xlabel("steps")
        if path is not None:
            fig.savefig(path)
            plt.close(fig)
        return fig


class HistorySaverHook(SessionRunHook):
    """Saves the loss every ``every_n_step`` steps: R tfestimators' ``hook_history_saver()``.

    Each saved row holds the mean and the sum of the loss tensor's values (a per-example loss
    vector gives the batch's mean and total loss; a scalar loss gives itself twice) and the step
    (the global step after the run, read in a run of its own on saving steps as TF1's
    ``StepCounterHook`` reads it, or the count of runs when the graph has no global step).

    Args:
        every_n_step: save every this many runs of the session.
        loss: the loss tensor or its name; default: the first of the graph's ``LOSSES``.

    Attributes:
        history: the :class:`TrainingHistory` (kept after the session ends; reset by ``begin``).

    Not forwarded:
        Steps between saves are not recorded (as in R); losses are fetched on saving steps only.

    Example:
        >>> hook = hookbridge.hooks.HistorySaverHook(every_n_step=2)     # doctest: +SKIP
        >>> estimator.train(input_fn, steps=4, hooks=[hook]); hook.history
    """

    def __init__(self, every_n_step: int = 10, loss: Any = None) -> None:
        if not isinstance(every_n_step, int) or every_n_step < 1:
            raise ValueError(
                f"HistorySaverHook: every_n_step must be a positive int, received {every_n_step!r}."
            )
        self.every_n_step = every_n_step
        self._loss_arg = loss
        self.history = TrainingHistory()

    def begin(self) -> None:
        self._loss = _loss_tensor(self._loss_arg, "HistorySaverHook")
        self._step = _global_step_read()
        self._args = SessionRunArgs(self._loss)
        self._count = 0
        self.history = TrainingHistory()

    def before_run(self, run_context: Any) -> Any:
        if (self._count + 1) % self.every_n_step == 0:
            return self._args
        return None

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._count += 1
        if self._count % self.every_n_step:
            return
        values = np.asarray(run_values.results, dtype=np.float64)
        h = self.history
        h.mean_losses.append(float(values.mean()))
        h.total_losses.append(float(values.sum()))
        # The step is read after the run, as StepCounterHook reads it: a read fetched with the
        # train op is unordered against its increment (TF races them) unless the model orders it.
        h.steps.append(
            self._count if self._step is None else int(run_context.session.run(self._step))
        )


class ProgressBarHook(SessionRunHook):
    """A Keras ``Progbar`` over the training steps: R tfestimators' ``hook_progress_bar()``.

    Prints ``Training`` then Keras's own progress bar (``2/2 [=====] - ETA: 0s - loss: ...`` on
    tf_keras / Keras 2, Keras 3's bar on Keras 3) updated every step with the batch loss.

    Args:
        steps: the bar's target (e.g. the ``steps`` of ``Estimator.train``); ``None``: unknown.
        loss: the loss tensor or its name; default: the first of the graph's ``LOSSES``.
        verbose: Keras ``Progbar`` verbosity (1: a bar, 2: one line at the end).
        stream: where ``Training`` is written (the bar writes to Keras's own output).

    Not forwarded:
        The loss shown is the batch's (its mean), not a running mean across steps.
    """

    def __init__(
        self,
        steps: int | None = None,
        loss: Any = None,
        verbose: int = 1,
        stream: TextIO | None = None,
    ) -> None:
        self.steps = steps
        self._loss_arg = loss
        self.verbose = verbose
        self._stream = stream

    def begin(self) -> None:
        self._args = SessionRunArgs(_loss_tensor(self._loss_arg, "ProgressBarHook"))
        self._seen = 0
        self._last_loss: float | None = None
        with _tfcompat.eager():
            self.progbar = tf.keras.utils.Progbar(
                self.steps, verbose=self.verbose, stateful_metrics=["loss"]
            )

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._seen == 0:
            stream = self._stream or sys.stdout
            stream.write("Training\n")
            stream.flush()

    def before_run(self, run_context: Any) -> Any:
        return self._args

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._seen += 1
        self._last_loss = float(np.mean(run_values.results))
        finalize = self.steps is not None and self._seen >= self.steps
        with _tfcompat.eager():
            self.progbar.update(self._seen, [("loss", self._last_loss)], finalize=finalize)

    def end(self, session: Any) -> None:
        if self.steps is None or self._seen < self.steps:
            values = [] if self._last_loss is None else [("loss", self._last_loss)]
            with _tfcompat.eager():
                self.progbar.target = self._seen
                self.progbar.update(self._seen, values, finalize=True)
