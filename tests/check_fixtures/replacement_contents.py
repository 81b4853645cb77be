"""Hooks and the callbacks meant to replace them, for what ``check --replaced-by`` compares: printed
lines beside TensorFlow's noise, a team's own logger, and the contents of summaries.

Each hook has a faithful callback (``make_*``) and variants that differ in one thing only.
"""

from __future__ import annotations

import logging

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1
TEAM = logging.getLogger("team.hooks")


def _step(model) -> int:
    """The global step a hook fetched in this batch's run: the value before the step."""
    return int(np.asarray(model.optimizer.iterations)) - 1


# ------------------------------------------------------------------ printed lines and noise
class PrintingHook(v1.train.SessionRunHook):
    """Prints a line per step; its begin() calls a deprecated TensorFlow function (a deprecation
    notice, once per process: on the hook's side only)."""

    def begin(self):
        self.step = v1.train.get_global_step()
        v1.train.checkpoint_exists("no-such-checkpoint")  # deprecated: a notice, once

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
        print(f"step {int(run_values.results)} done")


class PrintingCallback(tf.keras.callbacks.Callback):
    def __init__(self, text: str = "step {} done") -> None:
        super().__init__()
        self.text = text

    def on_train_batch_end(self, batch, logs=None):
        print(self.text.format(_step(self.model)))


def make_printing_callback():
    return PrintingCallback()


def make_other_printing_callback():
    return PrintingCallback("step {} finished")


# ------------------------------------------------------------------ a team's own logger
class TeamLogHook(v1.train.SessionRunHook):
    """Logs through the team's logger (INFO and DEBUG, no handler configured) and writes
    ``steps.txt``."""

    def begin(self):
        self.step = v1.train.get_global_step()

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.step)

    def after_run(self, run_context, run_values):
        _team_step(int(run_values.results), log=True)


def _team_step(step: int, log: bool) -> None:
    if log:
        TEAM.info("step %d: checked", step)
        if step % 3 == 0:
            TEAM.debug("step %d: detail", step)
    with open("steps.txt", "a") as f:
        f.write(f"{step}\n")


class TeamLogCallback(tf.keras.callbacks.Callback):
    def __init__(self, log: bool = True) -> None:
        super().__init__()
        self.log = log

    def on_train_batch_end(self, batch, logs=None):
        _team_step(_step(self.model), log=self.log)


def make_team_log_callback():
    return TeamLogCallback()


def make_silent_team_callback():
    """Writes ``steps.txt`` as the hook does, and logs nothing."""
    return TeamLogCallback(log=False)


# ------------------------------------------------------------------ summary contents
def _histogram_values(step, scale: float = 1.0):
    return tf.cast(step, tf.float32) * tf.constant([1.0, 2.0, 3.0, 5.0]) * scale


def _pixels(step, offset: int = 0):
    return tf.reshape(tf.cast(tf.fill([4], step * 10 + offset), tf.uint8), [2, 2, 1])


class SummaryHook(v1.train.SessionRunHook):
    """Writes a text, a histogram and an image summary every step (TF1: summary ops in the
    graph, a ``FileWriter``), of the step it counts (fed: reading the global step in the run
    that increments it would race with the train op natively)."""

    def begin(self):
        self.count = 0
        self.step = v1.placeholder(tf.int64, [], name="summary_step")
        self.summary = v1.summary.merge(
            [
                v1.summary.text("note", tf.strings.format("step {}", self.step)),
                v1.summary.histogram("values", _histogram_values(self.step)),
                v1.summary.image("picture", _pixels(self.step)[None]),
            ]
        )
        self.writer = v1.summary.FileWriter("events")

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(self.summary, feed_dict={self.step: self.count})

    def after_run(self, run_context, run_values):
        self.writer.add_summary(run_values.results, self.count)
        self.count += 1

    def end(self, session):
        self.writer.close()


class SummaryCallback(tf.keras.callbacks.Callback):
    """Writes the same summaries from Keras (``differs``: that one's content changes)."""

    def __init__(self, differs: str | None = None) -> None:
        super().__init__()
        self.differs = differs

    def on_train_begin(self, logs=None):
        self.writer = tf.summary.create_file_writer("events")

    def on_train_batch_end(self, batch, logs=None):
        step = _step(self.model)
        text = f"step {step + (self.differs == 'text')}"
        values = _histogram_values(step, 1.5 if self.differs == "histogram" else 1.0)
        png = tf.io.encode_png(_pixels(step, 1 if self.differs == "image" else 0)).numpy()
        image = v1.Summary.Image(height=2, width=2, colorspace=1, encoded_image_string=png)
        picture = v1.Summary(value=[v1.Summary.Value(tag="picture/image/0", image=image)])
        with self.writer.as_default():
            tf.summary.experimental.write_raw_pb(v1.summary.text("note", tf.constant(text)), step)
            tf.summary.experimental.write_raw_pb(v1.summary.histogram("values", values), step)
            tf.summary.experimental.write_raw_pb(picture.SerializeToString(), step)

    def on_train_end(self, logs=None):
        self.writer.close()


def make_summary_callback():
    return SummaryCallback()


def make_summary_callback_text_differs():
    return SummaryCallback("text")


def make_summary_callback_histogram_differs():
    return SummaryCallback("histogram")


def make_summary_callback_image_differs():
    return SummaryCallback("image")


# ------------------------------------------------------------------ what check does not decode
class GraphHook(v1.train.SessionRunHook):
    """Writes its graph to an event file (TensorBoard's Graphs tab)."""

    def after_create_session(self, session, coord):
        writer = v1.summary.FileWriter("events")
        writer.add_event(v1.Event(graph_def=session.graph.as_graph_def().SerializeToString()))
        writer.close()


class GraphCallback(tf.keras.callbacks.Callback):
    """Writes a graph of its own: not the hook's, and check does not compare graphs."""

    def on_train_begin(self, logs=None):
        graph = tf.Graph()
        with graph.as_default():
            tf.constant(1.0, name="keras_side")
        writer = tf.summary.create_file_writer("events")
        with writer.as_default():
            tf.summary.graph(graph.as_graph_def())
        writer.close()


def make_graph_callback():
    return GraphCallback()
