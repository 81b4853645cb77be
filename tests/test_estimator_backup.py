"""The Estimator's checkpoint ``estimator_hooks`` keeps (``<model_dir>/estimator-backup``) is
complete or absent, on every stack.

``model_dir`` holds an Estimator-like checkpoint (a TF1 ``Saver``'s ``model.ckpt-8``, a data file
of some 400 kB). The copy is cut short at each point by a real exception raised from hookbridge's
own file copy (``backup.copy_file``: half the file written, then ``OSError: No space left``) or
from its check before the rename (``KeyboardInterrupt``); the job restarts, and the backup must
then hold the checkpoint's values, read back with ``tf.train.load_checkpoint``.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import hookbridge
from hookbridge._migrate import backup as _backup

v1 = tf.compat.v1


def _estimator_checkpoint(model_dir):
    """``model.ckpt-8`` in ``model_dir``; returns its values by name."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.train.get_or_create_global_step()
        v1.get_variable("dnn/hiddenlayer_0/kernel", [320, 320])
        v1.get_variable("dnn/logits/bias", [1], initializer=v1.constant_initializer(0.5))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(step.assign(8))
            prefix = v1.train.Saver(sharded=True).save(
                sess, os.path.join(model_dir, "model.ckpt"), global_step=8)
    reader = tf.train.load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def _start(model_dir):
    """What a (re)started Keras job does first: ``estimator_hooks`` in HookCallback's graph."""
    with tf.Graph().as_default(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v1.train.get_or_create_global_step()
        tf.identity(0.0, name="loss")
        hookbridge.estimator_hooks(model_dir, save_checkpoints_steps=1, save_summary_steps=0,
                                   log_step_count_steps=None)
    return [str(w.message) for w in caught if "estimator_hooks: the backup" in str(w.message)]


def _assert_backup_holds(model_dir, values):
    kept = tf.train.latest_checkpoint(os.path.join(model_dir, "estimator-backup"))
    assert os.path.basename(kept) == "model.ckpt-8"
    reader = tf.train.load_checkpoint(kept)
    assert sorted(reader.get_variable_to_shape_map()) == sorted(values)
    for name, value in values.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)


def _cut_at(monkeypatch, which):
    """hookbridge's own copy of the file named ``*which*`` writes half of it, then fails."""
    copy = _backup.copy_file

    def cut(tf_, source, target):
        if which not in os.path.basename(source):
            return copy(tf_, source, target)
        with open(source, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read()[: os.path.getsize(source) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_backup, "copy_file", cut)


@pytest.mark.parametrize("which", [".data-", ".index", ".meta"])
def test_a_copy_cut_short_is_no_backup_and_a_restart_makes_it(which, tmp_path, monkeypatch):
    model_dir = str(tmp_path)
    values = _estimator_checkpoint(model_dir)
    with monkeypatch.context() as m:
        _cut_at(m, which)
        with pytest.raises(OSError, match="No space left"):
            _start(model_dir)
    assert not os.path.exists(tmp_path / "estimator-backup")  # absent, not half there
    assert _start(model_dir) == []
    _assert_backup_holds(model_dir, values)
    assert not os.path.exists(tmp_path / "estimator-backup.partial")


def test_an_interruption_before_the_rename_leaves_no_backup(tmp_path, monkeypatch):
    model_dir = str(tmp_path)
    values = _estimator_checkpoint(model_dir)

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(_backup, "_keys_problem", ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            _start(model_dir)
    assert sorted(os.listdir(tmp_path / "estimator-backup.partial"))  # the copy was there
    assert not os.path.exists(tmp_path / "estimator-backup")
    _start(model_dir)
    _assert_backup_holds(model_dir, values)


def test_a_backup_without_its_data_is_said_and_made_again(tmp_path):
    # What an interrupted copy of hookbridge <= 0.1 left: .index and .meta, no data file.
    model_dir = str(tmp_path)
    values = _estimator_checkpoint(model_dir)
    target = tmp_path / "estimator-backup"
    target.mkdir()
    for suffix in (".index", ".meta"):
        (target / f"model.ckpt-8{suffix}").write_bytes((tmp_path / f"model.ckpt-8{suffix}")
                                                       .read_bytes())
    said = _start(model_dir)
    assert len(said) == 1
    assert f"the backup {str(target)!r} is incomplete (no {_backup.MARKER}" in said[0]
    assert "Copying model.ckpt-8" in said[0]
    _assert_backup_holds(model_dir, values)
    assert _start(model_dir) == []  # complete now: kept as it is


def test_a_backup_cut_short_after_its_marker_is_said_and_made_again(tmp_path):
    model_dir = str(tmp_path)
    values = _estimator_checkpoint(model_dir)
    _start(model_dir)
    data = next((tmp_path / "estimator-backup").glob("*.data-*"))
    data.write_bytes(data.read_bytes()[:1000])
    said = _start(model_dir)
    assert len(said) == 1 and f"{data.name} has 1000 bytes of" in said[0]
    _assert_backup_holds(model_dir, values)


def test_a_broken_backup_whose_checkpoint_is_gone_is_an_error(tmp_path):
    model_dir = str(tmp_path)
    _estimator_checkpoint(model_dir)
    target = tmp_path / "estimator-backup"
    target.mkdir()
    (target / "model.ckpt-8.index").write_bytes((tmp_path / "model.ckpt-8.index").read_bytes())
    for file in tmp_path.glob("model.ckpt-8.*"):
        file.unlink()  # keep_checkpoint_max deleted the Estimator's own files
    with pytest.raises(_backup.BackupError, match=r"the backup .*estimator-backup' is incomplete"
                       r".*no longer holds model.ckpt-8.*Move it away"):
        _start(model_dir)
