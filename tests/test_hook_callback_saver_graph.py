"""A ``CheckpointSaverHook`` whose Saver was built on another graph, native beside bridged.

TensorFlow runs a Saver by its tensor names in the session's graph. Natively, a Saver of another
graph either fails (``TypeError``: its names are not in the session's graph) or, when the
session's graph has the Scaffold's default Saver under the same names, silently writes the
session graph's variables into ``model.ckpt-N_temp/`` folders. ``HookCallback`` refuses it before
any hook's ``begin()``: nothing is written. A Saver built inside the hooks callable still saves
the Keras weights.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_data, make_model

import hookbridge

train = tf.compat.v1.train


def _model_graph_saver():
    """The user's TF1 model graph and a Saver of it, built before fit."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.get_variable("dense/kernel", initializer=np.ones((4, 1), np.float32))
        return train.Saver()


def _native(make_hooks, directory):
    """A MonitoredSession on its own graph (global step, one variable), three steps."""
    with tf.Graph().as_default():
        step = train.get_or_create_global_step()
        tf.compat.v1.get_variable("z", initializer=5.0)
        train_op = tf.compat.v1.assign_add(step, 1)
        hooks, scaffold = make_hooks(directory)
        creator = train.ChiefSessionCreator(scaffold=scaffold)
        with train.MonitoredSession(session_creator=creator, hooks=hooks) as session:
            for _ in range(3):
                session.run(train_op)


def _fit(hooks, scaffold=None, epochs=1):
    x, y = make_data(n=48)
    model = make_model(reuse=True)
    callback = hookbridge.HookCallback(hooks, scaffold=scaffold)
    model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=False, callbacks=[callback])
    return model


def _files(directory):
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_a_hook_saver_of_another_graph_is_refused_where_native_saves_the_wrong_variables(
    tmp_path,
):
    native, bridged = tmp_path / "native", tmp_path / "bridged"
    saver = _model_graph_saver()
    _native(
        lambda d: ([train.CheckpointSaverHook(str(d), save_steps=2, saver=saver)], None), native
    )
    # Native: no error, and a checkpoint of the session graph's variables, not the Saver's.
    latest = tf.train.latest_checkpoint(str(native))
    assert latest.endswith("model.ckpt-3_temp/part-00000-of-00001")
    saved = tf.train.load_checkpoint(latest).get_variable_to_shape_map()
    assert set(saved) == {"global_step", "z"}

    hooks = [train.CheckpointSaverHook(str(bridged), save_steps=2, saver=saver)]
    with pytest.raises(ValueError) as raised:
        _fit(hooks)
    message = str(raised.value)
    assert f"CheckpointSaverHook({str(bridged)!r}) was given (saver=)" in message
    assert "saving dense/kernel:0" in message and "another graph" in message
    assert "inside the hooks callable" in message
    assert "saver=tf.compat.v1.train.Saver())" in message
    assert not bridged.exists() or _files(bridged) == []  # nothing written, not even events


def _saver_in_scaffold(directory, saver):
    scaffold = train.Scaffold(saver=saver)
    return [train.CheckpointSaverHook(str(directory), save_steps=2, scaffold=scaffold)], scaffold


def _saver_in_collection(directory, saver):
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
    return [train.CheckpointSaverHook(str(directory), save_steps=2)], None


@pytest.mark.parametrize(
    ("make", "refusal"),
    [
        (_saver_in_scaffold, "HookCallback(scaffold=...): the Scaffold's saver"),
        (_saver_in_collection, "the SAVERS collection of the bridge's graph holds"),
    ],
)
def test_where_native_fails_loudly_the_bridge_refuses_before_writing(tmp_path, make, refusal):
    native, bridged = tmp_path / "native", tmp_path / "bridged"
    saver = _model_graph_saver()
    with pytest.raises(TypeError, match="save/Const:0"):
        _native(lambda d: make(d, saver), native)
    assert tf.train.latest_checkpoint(str(native)) is None
    assert "graph.pbtxt" in _files(native)  # native wrote before failing

    def hooks():
        made, _ = make(bridged, saver)
        return made

    scaffold = train.Scaffold(saver=saver) if make is _saver_in_scaffold else None
    with pytest.raises(ValueError, match="another graph") as raised:
        _fit(hooks, scaffold=scaffold)
    assert refusal in str(raised.value) and "saving dense/kernel:0" in str(raised.value)
    assert not bridged.exists() or _files(bridged) == []


def _assert_checkpoint_is_the_model(directory, model):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(directory)))
    assert reader.get_tensor("global_step") == int(np.asarray(model.optimizer.iterations))
    for i, weight in enumerate(model.weights):
        (name,) = [n for n in reader.get_variable_to_shape_map() if n.startswith(f"model/{i:03d}/")]
        np.testing.assert_array_equal(reader.get_tensor(name), np.asarray(weight))


def test_a_saver_built_in_the_hooks_callable_saves_the_keras_weights(tmp_path):
    model = _fit(
        lambda: [train.CheckpointSaverHook(str(tmp_path), save_steps=2, saver=train.Saver())]
    )
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-3")
    _assert_checkpoint_is_the_model(tmp_path, model)


def test_a_hook_without_saver_reused_across_fits_takes_each_runs_own(tmp_path):
    """TF's hook keeps the Saver it took from the first run's SAVERS collection; the bridge
    forgets it when the run closes, so the second fit (a new graph) is not refused."""
    hook = train.CheckpointSaverHook(str(tmp_path), save_steps=2)
    callback = hookbridge.HookCallback([hook])
    x, y = make_data(n=48)
    model = make_model(reuse=True)
    for _ in range(2):
        model.fit(x, y, batch_size=16, verbose=0, shuffle=False, callbacks=[callback])
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-6")
    _assert_checkpoint_is_the_model(tmp_path, model)
