"""hookbridge.hooks: the R tfestimators hook_history_saver() / hook_progress_bar()."""

from __future__ import annotations

import csv

import pytest
import tensorflow as tf
from conftest import step_reads

from hookbridge.hooks import HistorySaverHook, ProgressBarHook


def train(hooks_fn, steps, increment=1):
    g = tf.Graph()
    with g.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        # per-example losses of a batch of 8 whose values grow with the step
        per_example = tf.cast(gs + 1, tf.float32) * tf.range(1.0, 9.0)
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, per_example)
        # The step increments after the run's reads of the global step, so a fetch of it in the
        # same run is the stale value (in a model_fn that orders nothing, TF races the two).
        with tf.control_dependencies([per_example, *step_reads(gs)]):
            train_op = tf.compat.v1.assign_add(gs, increment)
        hooks = hooks_fn()
        with tf.compat.v1.train.MonitoredSession(
            hooks=hooks + [tf.compat.v1.train.StopAtStepHook(last_step=steps)]
        ) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    return hooks


def test_history_saver_table_csv_and_png(tmp_path):
    (hook,) = train(lambda: [HistorySaverHook(every_n_step=2)], steps=4)
    h = hook.history
    assert h.steps == [2, 4]
    assert h.mean_losses == [2 * 4.5, 4 * 4.5]  # step k runs with gs = k - 1
    assert h.total_losses == [2 * 36.0, 4 * 36.0]
    assert "mean_losses total_losses  steps" in repr(h)
    path = tmp_path / "history.csv"
    h.to_csv(str(path))
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [(float(r["mean_losses"]), int(r["steps"])) for r in rows] == [(9.0, 2), (18.0, 4)]
    pytest.importorskip("matplotlib")
    png = tmp_path / "history.png"
    h.plot(str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("increment, steps", [(1, [2, 4, 6]), (2, [4, 8, 12])])
def test_history_saver_records_the_global_step_after_the_run(increment, steps):
    # Estimator.train(steps=6) with every_n_step=2 once recorded [2, 4, 7] in CI: the step was
    # the read fetched with the train op plus one, and TF had run that read after the increment.
    # The step is now read after the run, so it is exact however the run advances it (here also
    # by 2 a run, as a train op running several steps per run does).
    (hook,) = train(lambda: [HistorySaverHook(every_n_step=2)], steps=6 * increment, increment=increment)
    assert hook.history.steps == steps
    # run k computes its loss with the global step before its increment: (k - 1) * increment
    assert hook.history.mean_losses == [((k - 1) * increment + 1) * 4.5 for k in (2, 4, 6)]


def test_progress_bar_is_keras_progbar(capsys):
    (hook,) = train(lambda: [ProgressBarHook(steps=2)], steps=2)
    out = capsys.readouterr().out
    assert out.startswith("Training\n")
    assert "2/2" in out and "loss: 9.0000" in out  # last batch: mean of 2 * (1..8)
    assert isinstance(hook.progbar, tf.keras.utils.Progbar)


def test_hooks_without_a_loss_say_how_to_fix():
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.train.get_or_create_global_step()
        with pytest.raises(ValueError, match="LOSSES collection is empty.*loss="):
            HistorySaverHook().begin()
        with pytest.raises(ValueError, match="every_n_step"):
            HistorySaverHook(every_n_step=0)
        x = tf.constant([1.0, 3.0], name="x")
        hook = ProgressBarHook(loss="x")
        hook.begin()
        assert hook._args.fetches is x
