"""The test models ``make_model(reuse=True)`` hands back are in the state a fresh build has."""

from __future__ import annotations

import numpy as np
import reused_models
import tensorflow as tf
from conftest import keras, make_data, make_model


def _fit(model):
    x, y = make_data(n=48)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)


def test_a_reused_model_is_the_fresh_build_with_its_function_kept():
    fresh = make_model(seed=3)
    used = make_model(seed=3, reuse=True)
    _fit(used)
    assert int(used.optimizer.iterations.numpy()) == 3
    traced = used.train_function
    reused_models.release_all()  # what the autouse fixture does after each test

    again = make_model(seed=3, reuse=True)
    assert again is used and again.train_function is traced
    assert int(again.optimizer.iterations.numpy()) == 0
    for got, want in zip(again.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(got, want)
    _fit(again)
    _fit(fresh)
    for got, want in zip(again.get_weights(), fresh.get_weights()):
        np.testing.assert_array_equal(got, want)


def test_two_models_of_one_key_in_one_test_are_two_models():
    first = make_model(seed=4, reuse=True)
    assert make_model(seed=4, reuse=True) is not first


def test_a_model_compiled_again_is_not_handed_out():
    model = make_model(seed=5, reuse=True)
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    reused_models.release_all()
    assert make_model(seed=5, reuse=True) is not model


def test_a_model_a_checkpoint_was_restored_into_by_a_map_is_not_handed_out(tmp_path):
    import hookbridge

    model = make_model(seed=6, reuse=True)
    checkpoint = tf.train.Checkpoint(**{f"w{i}": w for i, w in enumerate(model.weights)})
    path = checkpoint.write(str(tmp_path / "ckpt"))
    names = [n for n, _ in tf.train.list_variables(path) if n.startswith("w")]
    hookbridge.restore_checkpoint(
        model, path, {n: int(n[1 : n.index("/")]) for n in names}
    )
    reused_models.release_all()
    assert make_model(seed=6, reuse=True) is not model


def test_the_learning_rate_a_scheduler_set_is_reset():
    model = make_model(lr=0.01, seed=7, reuse=True)
    x, y = make_data(n=48)
    halve = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr / 2)
    model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False, callbacks=[halve])
    assert float(np.asarray(model.optimizer.learning_rate)) == np.float32(0.0025)
    reused_models.release_all()
    again = make_model(lr=0.01, seed=7, reuse=True)
    assert again is model
    assert float(np.asarray(again.optimizer.learning_rate)) == np.float32(0.01)
