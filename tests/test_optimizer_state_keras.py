"""A TF1 job's optimizer state continued by Keras optimizers as users wrap and extend them, and
written back (every stack: a plain TF1 graph, no Estimator).

The TF1 job (:func:`tf1_train`: a 3 -> 1 dense layer named ``dense/kernel``, ``dense/bias``, MSE,
batches of 16 in order) trains 8 steps into ``model_dir``; a copy continues natively to 16.
Keras restores ``model_dir`` (``"auto"``) and continues 8 -> 16 under
``HookCallback(estimator_hooks(model_dir, model=...))``; the TF1 job then continues from the
checkpoint Keras wrote while Keras goes on in memory: losses loss by loss, slots value by value.

* ``LossScaleOptimizer(Adam)``: the inner Adam receives the checkpoint's Adam state (issue 31
  item 6; the warning said to compile with Adam, which the model was), and it is written back.
* Keras 3 ``Adam(gradient_accumulation_steps=2)``: ``restore_checkpoint`` crashed
  (``'EagerTensor' object has no attribute 'assign'``, ``iterations`` is computed); one Keras
  update of two batches is TF1's update of the two batches in one.
"""

from __future__ import annotations

import re
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
from conftest import KERAS3
from estimator_setup import BATCH, keras_fit, linear_data

import hookbridge
from hookbridge import _tfcompat
from hookbridge._migrate.optimizer_state import inner

v1 = tf.compat.v1
keras = tf.keras
X, Y = linear_data(seed=3)
SLOTS = {"dense/kernel/Adam": "m", "dense/kernel/Adam_1": "v",
         "dense/bias/Adam": "m", "dense/bias/Adam_1": "v"}


def tf1_train(
    model_dir: Path,
    train_op: Callable[[Any, Any], Any],
    first: int,
    last: int,
    x: np.ndarray = X,
    y: np.ndarray = Y,
    batch: int = BATCH,
) -> list[float]:
    """The TF1 job: from ``model_dir``'s latest checkpoint (else fresh, seeded) at ``first`` to
    ``last`` on ``x``, ``y`` in order, ``train_op(loss, global_step)`` each step; saves
    ``model.ckpt-<last>`` and returns the batch losses."""
    with tf.Graph().as_default():
        global_step = v1.train.get_or_create_global_step()
        xb = v1.placeholder(tf.float32, [None, 3])
        yb = v1.placeholder(tf.float32, [None, 1])
        with v1.variable_scope("dense"):
            kernel = v1.get_variable("kernel", [3, 1], initializer=v1.glorot_uniform_initializer(0))
            bias = v1.get_variable("bias", [1], initializer=v1.zeros_initializer())
        loss = v1.losses.mean_squared_error(yb, tf.matmul(xb, kernel) + bias)
        op = train_op(loss, global_step)
        saver = v1.train.Saver()
        losses = []
        with v1.Session() as session:
            prefix = tf.train.latest_checkpoint(str(model_dir))
            if prefix:
                saver.restore(session, prefix)
            else:
                session.run(v1.global_variables_initializer())
            assert session.run(global_step) == first
            per_epoch = len(y) // batch
            for step in range(first, last):
                i = step % per_epoch
                feed = {xb: x[i * batch : (i + 1) * batch], yb: y[i * batch : (i + 1) * batch]}
                losses.append(float(session.run([loss, op], feed)[0]))
            saver.save(session, str(model_dir / "model.ckpt"), global_step=last)
    return losses


def minimize(optimizer: Callable[[], Any]) -> Callable[[Any, Any], Any]:
    return lambda loss, global_step: optimizer().minimize(loss, global_step)


def keras_dense(optimizer: Any) -> Any:
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    return model


def slot_values(model: Any, slots: dict[str, str]) -> dict[str, np.ndarray]:
    """The model's optimizer's slot values under the checkpoint's slot names (``slots``:
    ``{"dense/kernel/Adam": "m"}``)."""
    weights = {"dense/kernel": model.weights[0], "dense/bias": model.weights[1]}
    out = {}
    for name, slot in slots.items():
        weight = weights[name.rsplit("/", 1)[0]]
        owner = [o for o in getattr(model, "extra_optimizers", []) if _tfcompat.keras_optimizer_owns(o, weight)]
        optimizer = inner(owner[0] if owner else model.optimizer)
        found = _tfcompat.keras_optimizer_slot(optimizer, weight, slot)
        out[name] = np.asarray(found.numpy())
    return out


def round_trip(
    root: Path,
    train_op: Callable[[Any, Any], Any],
    keras_model: Callable[[], Any],
    slots: dict[str, str],
    **restore: Any,
) -> dict[str, Any]:
    """TF1 0 -> 8, natively on to 16; Keras restored at 8 on to 16 writing checkpoints; TF1 on
    from Keras's step-16 checkpoint to 24 while Keras goes on in memory."""
    bridged, native, back = root / "bridged", root / "native", root / "back"
    tf1_train(bridged, train_op, 0, 8)
    shutil.copytree(bridged, native)
    native_losses = tf1_train(native, train_op, 8, 16)
    model = keras_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hookbridge.restore_checkpoint(model, bridged, "auto", **restore)
    reader = tf.train.load_checkpoint(str(bridged))
    at_switch = (slot_values(model, slots), {n: reader.get_tensor(n) for n in slots})

    def hooks():  # no slot_map here: the restore's is remembered
        return hookbridge.estimator_hooks(
            bridged, model=model, save_checkpoints_steps=8, save_summary_steps=0,
            log_step_count_steps=None, backup=None,
        )

    bridged_losses = keras_fit(model, X, Y, 8, 16, hooks)
    written = tf.train.load_checkpoint(str(bridged))
    at_write = (slot_values(model, slots), {n: written.get_tensor(n) for n in slots})
    shutil.copytree(bridged, back)
    back_losses = tf1_train(back, train_op, 16, 24)
    keras_losses = keras_fit(model, X, Y, 16, 24, lambda: [])
    return {
        "step": step,
        "warnings": [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)],
        "at_switch": at_switch,
        "at_write": at_write,
        "native": native_losses,
        "bridged": bridged_losses,
        "back": back_losses,
        "keras": keras_losses,
        "model": model,
        "written": written,
    }


def assert_same_slots(pair: tuple[dict, dict]) -> None:
    keras_side, checkpoint = pair
    assert sorted(keras_side) == sorted(checkpoint)
    for name in checkpoint:
        expected = checkpoint[name].reshape(keras_side[name].shape)
        np.testing.assert_array_equal(keras_side[name], expected, err_msg=name)


def test_the_adam_inside_a_loss_scale_optimizer_continues_and_is_written_back(tmp_path):
    r = round_trip(
        tmp_path,
        minimize(lambda: v1.train.AdamOptimizer(0.01)),
        lambda: keras_dense(
            keras.mixed_precision.LossScaleOptimizer(keras.optimizers.Adam(0.01, epsilon=1e-8))
        ),
        SLOTS,
    )
    assert r["step"] == 8 and r["warnings"] == []
    assert_same_slots(r["at_switch"])  # the inner Adam holds the checkpoint's m and v
    np.testing.assert_allclose(r["bridged"], r["native"], rtol=2e-5, atol=1e-7)
    assert_same_slots(r["at_write"])  # and they are written back under the TF1 names
    assert int(r["written"].get_tensor("global_step")) == 16
    beta1_power = float(r["written"].get_tensor("beta1_power"))
    np.testing.assert_allclose(beta1_power, 0.9**17, rtol=1e-6)
    np.testing.assert_allclose(r["back"], r["keras"], rtol=2e-5, atol=1e-7)


@pytest.mark.skipif(not KERAS3, reason="gradient_accumulation_steps is a Keras 3 option")
def test_gradient_accumulation_restores_as_tf1s_update_of_the_accumulated_batches(tmp_path):
    """Keras ``Adam(gradient_accumulation_steps=2)`` applies the mean gradient of two batches of
    16: TF1's Adam on the same 32 rows as one batch (MSE: the mean of the two means)."""
    train_op = minimize(lambda: v1.train.AdamOptimizer(0.01))
    tf1_train(tmp_path, train_op, 0, 4, batch=2 * BATCH)
    native = tmp_path / "native"
    shutil.copytree(tmp_path, native)
    tf1_train(native, train_op, 4, 6, batch=2 * BATCH)  # 2 updates = 4 Keras batches
    model = keras_dense(keras.optimizers.Adam(0.01, epsilon=1e-8, gradient_accumulation_steps=2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hookbridge.restore_checkpoint(model, tmp_path, "auto") == 4
    assert [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)] == []
    counter, per_update = _tfcompat.keras_optimizer_counter(model.optimizer)
    assert int(model.optimizer.iterations.numpy()) == 4  # updates: the global step
    assert (int(counter.numpy()), per_update) == (8, 2)  # batches: the start of an accumulation
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert_same_slots((slot_values(model, SLOTS), {n: reader.get_tensor(n) for n in SLOTS}))
    model.fit(X, Y, batch_size=BATCH, shuffle=False, epochs=1, verbose=0)  # 4 batches, 2 updates
    assert int(model.optimizer.iterations.numpy()) == 6
    reader = tf.train.load_checkpoint(str(native))
    for name, weight in (("dense/kernel", model.weights[0]), ("dense/bias", model.weights[1])):
        np.testing.assert_allclose(
            np.asarray(weight.numpy()), reader.get_tensor(name), rtol=2e-5, atol=1e-7
        )
    # the slots follow: not bit for bit (Keras sums the two gradients, TF1 averages 32 rows)
    for name, value in slot_values(model, SLOTS).items():
        np.testing.assert_allclose(value, reader.get_tensor(name).reshape(value.shape), rtol=2e-5,
                                   atol=1e-9)


@pytest.mark.skipif(not KERAS3, reason="gradient_accumulation_steps is a Keras 3 option")
def test_a_restore_mid_accumulation_starts_a_new_one(tmp_path):
    """A model that trained 3 batches (one update, one batch accumulated) restored from a TF1
    checkpoint: the accumulated gradient is dropped (TF1 keeps none), iterations = the step."""
    tf1_train(tmp_path, minimize(lambda: v1.train.AdamOptimizer(0.01)), 0, 4)
    model = keras_dense(keras.optimizers.Adam(0.01, gradient_accumulation_steps=2))
    model.fit(X[:48], Y[:48], batch_size=BATCH, shuffle=False, epochs=1, verbose=0)
    accumulators = _tfcompat.keras_gradient_accumulators(model.optimizer)
    assert len(accumulators) == 2 and np.abs(accumulators[0].numpy()).sum() > 0
    hookbridge.restore_checkpoint(model, tmp_path, "auto")
    assert int(model.optimizer.iterations.numpy()) == 4
    assert int(_tfcompat.keras_optimizer_counter(model.optimizer)[0].numpy()) == 8
    assert all(not np.asarray(a.numpy()).any() for a in accumulators)


def two_adams(loss, global_step):
    """Two TF1 Adams of one job (a GAN's two players): the kernel's, then the bias's (named
    ``Adam`` too: slots ``dense/bias/Adam``, beta powers ``beta1_power_1``)."""
    kernel, bias = v1.trainable_variables()
    grads = tf.gradients(loss, [kernel, bias])
    first = v1.train.AdamOptimizer(0.01).apply_gradients([(grads[0], kernel)])
    second = v1.train.AdamOptimizer(0.05).apply_gradients([(grads[1], bias)], global_step)
    return tf.group(first, second)


def two_adam_dense(build_extra: bool = True) -> Any:
    """The Keras side: the bias trained by ``extra_optimizers[0]``, built on it."""

    class TwoPlayers(keras.Model):
        def train_step(self, data):
            x, y = data[0], data[1]
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x, y, y_pred)
            kernel, bias = self.trainable_variables
            grads = tape.gradient(loss, [kernel, bias])
            self.optimizer.apply_gradients([(grads[0], kernel)])
            self.extra_optimizers[0].apply_gradients([(grads[1], bias)])
            if KERAS3:  # Keras 3 logs what the step returns
                return {"loss": loss}
            return self.compute_metrics(x, y, y_pred, None)  # tf_keras: compile's running mean

    inputs = keras.Input((3,))
    model = TwoPlayers(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.Adam(0.01, epsilon=1e-8), loss="mse")
    model.extra_optimizers = [keras.optimizers.Adam(0.05, epsilon=1e-8)]
    if build_extra:
        _tfcompat.build_keras_optimizer(model.extra_optimizers[0], [model.weights[1]])
    return model


def test_two_optimizers_of_one_kind_each_continue_their_own_variables(tmp_path):
    """Issue 31 item 5's cause beyond the canned twin: state was routed by kind, so the bias's
    Adam state went to ``model.optimizer`` (the kernel's Adam)."""
    r = round_trip(tmp_path, two_adams, two_adam_dense, SLOTS)
    assert r["step"] == 8 and r["warnings"] == []
    assert_same_slots(r["at_switch"])
    np.testing.assert_allclose(r["bridged"], r["native"], rtol=2e-5, atol=1e-7)
    assert_same_slots(r["at_write"])
    np.testing.assert_allclose(r["back"], r["keras"], rtol=2e-5, atol=1e-7)


def test_an_extra_optimizer_not_built_is_refused_naming_it(tmp_path):
    tf1_train(tmp_path, two_adams, 0, 4)
    with pytest.raises(ValueError, match=r"extra_optimizers Adam\(.*not built.*optimizer.build"):
        hookbridge.restore_checkpoint(two_adam_dense(build_extra=False), tmp_path, "auto")


# -- issue 31 item 3: optimizer state hookbridge does not know, named by slot_map ----------------
class BertStyleAdam(v1.train.Optimizer):
    """An optimizer of a project's own, as google-research/bert's ``AdamWeightDecayOptimizer``
    is (written here from its description): per variable ``<var>/adam_m`` and ``<var>/adam_v``
    made with ``get_variable`` beside the variable, Adam's moments with no bias correction (no
    beta powers), a decoupled weight decay on the variables no ``exclude`` pattern names; the
    caller counts the global step."""

    def __init__(self, lr, weight_decay=0.0, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude=("bias",)):
        super().__init__(use_locking=False, name="BertStyleAdam")
        self.lr, self.weight_decay, self.exclude = lr, weight_decay, exclude
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        updates = []
        for grad, var in grads_and_vars:
            base = var.op.name
            m, v = (
                v1.get_variable(f"{base}/{slot}", var.shape, tf.float32, v1.zeros_initializer(),
                                trainable=False)
                for slot in ("adam_m", "adam_v")
            )
            new_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
            new_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
            step = new_m / (tf.sqrt(new_v) + self.epsilon)
            if self.weight_decay and not any(p in base for p in self.exclude):
                step += self.weight_decay * var
            updates += [var.assign(var - self.lr * step), m.assign(new_m), v.assign(new_v)]
        return tf.group(*updates, name=name)


def bert_style(loss, global_step):
    variables = v1.trainable_variables()
    grads = tf.gradients(loss, variables)
    update = BertStyleAdam(0.05).apply_gradients(zip(grads, variables))
    with tf.control_dependencies([update]):
        return global_step.assign_add(1)  # as BERT's create_optimizer does after it


class WithoutBiasCorrection(keras.optimizers.schedules.LearningRateSchedule):
    """Keras's Adam multiplies ``lr`` by ``sqrt(1 - beta_2**t) / (1 - beta_1**t)`` (t = its
    ``iterations + 1``); this rate divides it back out: Adam's update is then BERT's."""

    def __init__(self, lr, beta_1=0.9, beta_2=0.999):
        self.lr, self.beta_1, self.beta_2 = lr, beta_1, beta_2

    def __call__(self, step):
        t = tf.cast(step, tf.float32) + 1.0
        return self.lr * (1.0 - tf.pow(self.beta_1, t)) / tf.sqrt(1.0 - tf.pow(self.beta_2, t))

    def get_config(self):
        return {"lr": self.lr, "beta_1": self.beta_1, "beta_2": self.beta_2}


BERT_SLOT_MAP = {"adam_m": "m", "adam_v": "v"}
BERT_SLOTS = {"dense/kernel/adam_m": "m", "dense/kernel/adam_v": "v",
              "dense/bias/adam_m": "m", "dense/bias/adam_v": "v"}


def bert_keras():
    return keras_dense(keras.optimizers.Adam(WithoutBiasCorrection(0.05), epsilon=1e-6))


def test_a_slot_map_continues_an_optimizer_of_ones_own_both_ways(tmp_path):
    """BERT-style ``adam_m``/``adam_v`` into Keras Adam's m and v (exact), Keras continuing
    equal to TF1 continuing loss by loss, written back under their names (exact), TF1
    continuing from them equal to Keras."""
    r = round_trip(tmp_path, bert_style, bert_keras, BERT_SLOTS, slot_map=BERT_SLOT_MAP)
    assert r["step"] == 8 and r["warnings"] == []
    assert_same_slots(r["at_switch"])
    np.testing.assert_allclose(r["bridged"], r["native"], rtol=2e-5, atol=1e-7)
    assert_same_slots(r["at_write"])
    assert int(r["written"].get_tensor("global_step")) == 16
    np.testing.assert_allclose(r["back"], r["keras"], rtol=2e-5, atol=1e-7)


def test_without_a_slot_map_unknown_state_is_named_with_the_way_to_map_it(tmp_path):
    tf1_train(tmp_path, bert_style, 0, 4)
    with pytest.warns(UserWarning, match=r"dense/bias/adam_m \(not an optimizer state .*slot_map"):
        hookbridge.restore_checkpoint(bert_keras(), tmp_path, "auto")


def test_a_wrong_slot_map_is_refused_naming_the_entry(tmp_path):
    tf1_train(tmp_path, bert_style, 0, 4)
    cases = [  # (slot_map, what the message says)
        ({"adam_m": "momentum", "adam_v": "v"}, "Adam does not keep"),
        ({"adam_m": "m", "adam_v": "velocity"}, "is not a Keras slot name; one of m, v"),
        ({"adam_m": "m", "adam_v": "v", "Adam": "m"}, "['Adam'] match no optimizer state"),
    ]
    for slot_map, detail in cases:
        with pytest.raises(ValueError, match=re.escape(detail)):
            hookbridge.restore_checkpoint(bert_keras(), tmp_path, "auto", slot_map=slot_map)
    with pytest.raises(ValueError, match="slot_map needs an assignment_map"):
        hookbridge.restore_checkpoint(bert_keras(), tmp_path, slot_map=BERT_SLOT_MAP)
