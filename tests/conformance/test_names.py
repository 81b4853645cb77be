"""Issue 13 item 8: names from the old graph.

A hook built on a name the graph lacks fails in ``begin()`` natively with TF's ``KeyError``; under
HookCallback it fails at the same point with the bridge's error (still a ``KeyError``): the name
asked for, the names available, and how to expose the value. Built on a name the bridge does
have (a compiled metric, a weight mirror), the same hook logs what it logs natively.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import hookbridge
from hookbridge._hook_callback.names import MissingTensorError

keras = tf.keras
T = tf.compat.v1.train


def _native_begin_error(make_hook):
    """The error native MonitoredSession raises for ``make_hook()`` on a graph with a global
    step and a loss, and nothing else."""
    with tf.Graph().as_default():
        T.get_or_create_global_step()
        tf.constant(1.0, name="loss")
        hook = make_hook()
        with pytest.raises(KeyError) as info:
            T.MonitoredSession(hooks=[hook])
    return info.value


def _fit(hooks, metrics=(), lr=0.0, steps=2):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(lr), loss="mse", metrics=list(metrics))
    x = np.ones((steps * 4, 2), "float32")
    y = np.ones((steps * 4, 1), "float32")
    bridge = hookbridge.HookCallback(hooks)
    with bridge:
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=[bridge])
    return model


@pytest.mark.parametrize("name", ["dense/kernel:0", "accuracy:0"])
def test_logging_hook_on_a_name_the_graph_lacks(name):
    native = _native_begin_error(lambda: T.LoggingTensorHook({"v": name}, every_n_iter=1))
    assert name in str(native)  # TF: "The name ... refers to a Tensor which does not exist"
    with pytest.raises(KeyError) as info:
        _fit(lambda: [T.LoggingTensorHook({"v": name}, every_n_iter=1)])
    error = info.value
    assert isinstance(error, MissingTensorError)
    text = str(error)
    assert f"LoggingTensorHook.begin asked for {name!r}" in text
    assert "Tensors available: ['loss:0', 'running_mean/loss:0']" in text
    assert "get_global_step()" in text
    assert "Weight mirrors: ['model/000/kernel', 'model/001/bias']" in text
    assert "metrics=['accuracy'] -> 'accuracy:0'" in text and "log_names=" in text
    if name == "dense/kernel:0":
        assert "e.g. ['model/000/kernel/Read/ReadVariableOp:0']" in text
    assert "(TensorFlow: " in text and "does not exist" in text  # TF's own message kept


def test_get_tensor_by_name_in_a_users_begin():
    class UserHook(T.SessionRunHook):
        def begin(self):
            self.t = tf.compat.v1.get_default_graph().get_tensor_by_name("logits:0")

    assert "logits:0" in str(_native_begin_error(UserHook))
    with pytest.raises(MissingTensorError, match=r"UserHook.begin asked for 'logits:0'"):
        _fit(lambda: [UserHook()])


def test_a_name_in_the_hooks_callable():
    def hooks():
        tf.compat.v1.get_default_graph().get_tensor_by_name("dense/bias:0")
        return []

    with pytest.raises(MissingTensorError, match=r"the hooks callable asked for 'dense/bias:0'"):
        _fit(hooks)


def test_other_errors_of_begin_are_unchanged():
    class Broken(T.SessionRunHook):
        def begin(self):
            raise KeyError("my own key")

    with pytest.raises(KeyError) as info:
        _fit(lambda: [Broken()])
    assert type(info.value) is KeyError and info.value.args == ("my own key",)


def test_the_exposed_names_log_what_native_logs():
    """``accuracy:0`` (compiled as a metric) and the value of the kernel's mirror log
    the same values as a native TF1 graph holding the same tensors (learning rate 0: fixed
    weights, so every step's values are known)."""
    native_seen, bridged_seen = [], []

    def hook(name, seen):
        return T.LoggingTensorHook(
            {"v": name}, every_n_iter=1, formatter=lambda d: seen.append(np.array(d["v"])) or ""
        )

    model = _fit(
        lambda: [
            hook("model/000/kernel/Read/ReadVariableOp:0", bridged_seen),
            hook("accuracy:0", bridged_seen),
        ],
        metrics=["accuracy"],
    )
    kernel = model.get_weights()[0]
    x = np.ones((4, 2), "float32")
    y = np.ones((4, 1), "float32")
    with tf.Graph().as_default():
        gs = T.get_or_create_global_step()
        w = tf.compat.v1.get_variable("dense/kernel", initializer=kernel)
        xp = tf.compat.v1.placeholder(tf.float32, [None, 2])
        yp = tf.compat.v1.placeholder(tf.float32, [None, 1])
        pred = tf.matmul(xp, w)
        # Keras's "accuracy" on a one-unit output is binary accuracy, threshold 0.5
        correct = tf.cast(tf.equal(yp, tf.cast(pred > 0.5, tf.float32)), tf.float32)
        tf.reduce_mean(correct, name="accuracy")
        train = tf.compat.v1.assign_add(gs, 1)
        hooks = [
            hook("dense/kernel/Read/ReadVariableOp:0", native_seen),
            hook("accuracy:0", native_seen),
        ]
        with T.MonitoredSession(hooks=hooks) as sess:
            for _ in range(2):
                sess.run(train, {xp: x, yp: y})
    assert len(native_seen) == len(bridged_seen) == 4
    for got, want in zip(bridged_seen, native_seen):
        np.testing.assert_allclose(got, want, rtol=1e-6)
