"""CallbackHook's model proxy beside native ``fit`` (issue 25 items 3, 4, 8, 9, 10).

Each test runs the same callbacks natively in ``model.fit`` and under ``CallbackHook`` in a real
``MonitoredSession`` / ``MonitoredTrainingSession`` / ``Estimator`` and compares what they read,
restored or wrote, read back with the real readers (``tf.train.load_checkpoint``, the SavedModel
loader, TensorBoard's ``EventAccumulator``):

* item 10: ``model.weights`` holds the non-trainable model variables (BatchNorm's moving
  statistics), not the optimizer's, so ``restore_best_weights`` restores them as ``fit`` does;
* item 9: what a callback writes at the last step (``EarlyStopping(restore_best_weights=True)``,
  a ``ReduceLROnPlateau`` cut) reaches the session's final checkpoint;
* item 3: ``model.load_weights`` (``ModelCheckpoint(load_weights_on_restart=True)``);
* item 4: ``ModelCheckpoint(save_weights_only=False)`` without an extension: a SavedModel;
* item 8: ``epoch_learning_rate`` per stack, weight histograms and images.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import reused_models
import tensorflow as tf

import hookbridge

keras = tf.keras
v1 = tf.compat.v1
KERAS3 = hasattr(keras, "ops")
HAS_ESTIMATOR = hasattr(tf, "estimator") and hasattr(tf.estimator, "Estimator")
STEPS = 2  # steps per epoch on both sides: 8 samples, batch size 4
X = (np.arange(24, dtype="float32").reshape(8, 3) % 5) / 5.0
Y = (np.arange(8) % 2).reshape(8, 1).astype("float32")
SCORES = [3.0, 1.0, 2.0, 2.5, 2.6]  # EarlyStopping(patience=1): best epoch 1, stop after epoch 2
BEST = 1
#: The graph's model variables, in the order of the native model.weights (BatchNorm, Dense).
MODEL_VARIABLES = [
    "bn/gamma",
    "bn/beta",
    "bn/moving_mean",
    "bn/moving_variance",
    "dense/kernel",
    "dense/bias",
]


class Score(keras.callbacks.Callback):
    """Natively: puts ``score = scores[epoch]`` in the epoch logs the next callbacks see."""

    def __init__(self, scores):
        super().__init__()
        self.scores = scores

    def on_epoch_end(self, epoch, logs=None):
        logs["score"] = self.scores[epoch]


class Weights(keras.callbacks.Callback):
    """Records ``model.get_weights()`` at each epoch end, and at train begin and end."""

    def __init__(self):
        super().__init__()
        self.epochs, self.begin, self.end = [], None, None

    def on_train_begin(self, logs=None):
        self.begin = [np.array(w) for w in self.model.get_weights()]

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append([np.array(w) for w in self.model.get_weights()])

    def on_train_end(self, logs=None):
        self.end = [np.array(w) for w in self.model.get_weights()]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-6)


# -- native fit ------------------------------------------------------------------------------------
def native_bn_model(seed=0, named=False):
    """BatchNorm then Dense(1), Adam(0.1), MSE; ``named``: the layers named as the graph's
    scopes (``bn``, ``dense``), so weight files and summary tags name the same weights. One per
    (seed, named), reused across tests reset to its built state (``tests/reused_models.py``: its
    traced ``train_function`` kept, its weights, Adam's slots and step, the seed as built)."""

    def build():
        keras.utils.set_random_seed(seed)
        model = keras.Sequential(
            [
                keras.Input((3,)),
                keras.layers.BatchNormalization(name="bn" if named else None),
                keras.layers.Dense(1, name="dense" if named else None),
            ]
        )
        model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
        return model

    return reused_models.reused(("model proxy bn", seed, named), seed, build)


def native_fit(callbacks, epochs=5, model=None):  # 5 = len(SCORES)
    model = model or native_bn_model()
    model.fit(X, Y, batch_size=4, epochs=epochs, verbose=0, callbacks=callbacks, shuffle=False)
    return model


# -- the same model as a TF1 graph -------------------------------------------------------------------
def build_bn_graph():
    """BatchNorm (gamma, beta, moving mean and variance updated each step) then Dense(1), trained
    by a TF1 Adam (slots and beta powers: optimizer state, not model weights); ``score`` fed."""
    gs = v1.train.get_or_create_global_step()
    x = v1.placeholder(tf.float32, [None, 3], name="x")
    y = v1.placeholder(tf.float32, [None, 1], name="y")
    score = v1.placeholder(tf.float32, [], name="score_in")
    with v1.variable_scope("bn"):
        gamma = v1.get_variable("gamma", initializer=tf.ones([3]))
        beta = v1.get_variable("beta", initializer=tf.zeros([3]))
        mean = v1.get_variable("moving_mean", initializer=tf.zeros([3]), trainable=False)
        var = v1.get_variable("moving_variance", initializer=tf.ones([3]), trainable=False)
    batch_mean, batch_var = tf.nn.moments(x, [0])
    updates = [
        v1.assign(mean, mean * 0.99 + batch_mean * 0.01),
        v1.assign(var, var * 0.99 + batch_var * 0.01),
    ]
    h = tf.nn.batch_normalization(x, batch_mean, batch_var, beta, gamma, 1e-3)
    with v1.variable_scope("dense"):
        kernel = v1.get_variable("kernel", initializer=tf.constant([[0.5], [-0.5], [0.25]]))
        bias = v1.get_variable("bias", initializer=tf.zeros([1]))
    loss = tf.reduce_mean(tf.square(tf.matmul(h, kernel) + bias - y), name="loss")
    lr = v1.get_variable("lr", initializer=0.1, trainable=False)
    with tf.control_dependencies(updates):
        train = v1.train.AdamOptimizer(lr).minimize(loss, global_step=gs)
    return {
        "x": x,
        "y": y,
        "score_in": score,
        "score": tf.identity(score, name="score"),
        "loss": loss,
        "lr": lr,
        "train": train,
        "gs": gs,
    }


def run_bridged(
    callbacks, *, scores=SCORES, checkpoint_dir=None, save_steps=STEPS, scaffold=None, **hook_kw
):
    """``len(scores)`` epochs of STEPS runs (fewer if a callback stops) in a
    MonitoredTrainingSession (checkpoints every epoch into ``checkpoint_dir``; ``scaffold()``,
    built in the graph, its Scaffold)."""
    graph = tf.Graph()
    with graph.as_default():
        t = build_bn_graph()
        hook_kw.setdefault("logs", {"score": t["score"]})
        hook = hookbridge.CallbackHook(
            callbacks, steps_per_epoch=STEPS, epochs=len(scores), batch_size=4, **hook_kw
        )
        with v1.train.MonitoredTrainingSession(
            checkpoint_dir=checkpoint_dir,
            scaffold=scaffold() if scaffold else None,
            save_checkpoint_steps=save_steps if checkpoint_dir else None,
            save_checkpoint_secs=None,
            save_summaries_steps=None,
            save_summaries_secs=None,
            log_step_count_steps=None,
            hooks=[hook],
        ) as sess:
            step = 0
            while not sess.should_stop():
                i = step % STEPS
                feed = {t["x"]: X[4 * i : 4 * i + 4], t["y"]: Y[4 * i : 4 * i + 4]}
                feed[t["score_in"]] = scores[min(step // STEPS, len(scores) - 1)]
                sess.run(t["train"], feed)
                step += 1
    return step


# -- item 10: the model's variables by default, as model.weights ------------------------------------
def test_weights_are_the_model_variables_as_keras_model_weights():
    """BatchNorm + Dense: the proxy's weights are the native model.weights' shapes in order
    (gamma, beta, moving mean, moving variance, kernel, bias), trainable and not as natively,
    and count_params agrees; Adam's slots, beta powers, the global step and the learning-rate
    variable are left out, as Keras keeps them in its optimizer."""
    native = native_bn_model()
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            m = self.model
            seen["weights"] = [v.op.name for v in m.weights]
            seen["shapes"] = [tuple(v.shape.as_list()) for v in m.weights]
            seen["trainable"] = [v.op.name for v in m.trainable_weights]
            seen["non_trainable"] = [v.op.name for v in m.non_trainable_weights]
            seen["count"] = m.count_params()
            seen["values"] = [np.shape(w) for w in m.get_weights()]

    run_bridged([Probe()], scores=[1.0], learning_rate="lr")
    assert seen["shapes"] == [tuple(w.shape) for w in native.weights] == seen["values"]
    assert seen["weights"] == MODEL_VARIABLES
    assert len(seen["trainable"]) == len(native.trainable_weights) == 4
    assert len(seen["non_trainable"]) == len(native.non_trainable_weights) == 2
    assert seen["count"] == native.count_params() == 16


def test_restore_best_weights_restores_the_moving_statistics_and_checkpoint_as_native(tmp_path):
    """EarlyStopping(restore_best_weights=True) on a BatchNorm model: natively the model ends
    with every weight of the best epoch, moving statistics included (they moved since); under
    CallbackHook the same, and the session's final checkpoint holds them (item 9: on Keras 3
    the restore runs in on_train_end, after CheckpointSaverHook.end saved; on tf_keras in the
    last on_epoch_end, after CheckpointSaverHook.after_run saved that step)."""

    def callbacks(score):
        rec, final = Weights(), Weights()  # final: after EarlyStopping, sees what it restored
        stop = keras.callbacks.EarlyStopping(
            "score", patience=1, mode="min", restore_best_weights=True
        )
        return rec, final, ([Score(SCORES)] if score else []) + [rec, stop, final]

    rec, final, cbs = callbacks(True)
    model = native_fit(cbs)
    assert len(rec.epochs) == BEST + 2  # stopped after epoch 2
    _assert_same(model.get_weights(), rec.epochs[BEST])
    assert not np.allclose(rec.epochs[BEST][2], rec.epochs[-1][2])  # moving mean moved

    _assert_same(final.end, rec.epochs[BEST])
    rec, final, cbs = callbacks(False)
    ckpt = str(tmp_path / "mts")
    steps = run_bridged(cbs, checkpoint_dir=ckpt, learning_rate="lr")
    assert steps == (BEST + 2) * STEPS
    _assert_same(final.end, rec.epochs[BEST])
    assert not np.allclose(rec.epochs[BEST][2], rec.epochs[-1][2])
    reader = tf.train.load_checkpoint(ckpt)
    assert tf.train.latest_checkpoint(ckpt).endswith(f"-{steps}")
    _assert_same([reader.get_tensor(n) for n in MODEL_VARIABLES], rec.epochs[BEST])


def test_explicit_trainable_variables_leave_the_moving_statistics_as_before():
    """``variables=`` still decides: the trainable ones only, as in earlier releases."""
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["names"] = [v.op.name for v in self.model.weights]

    run_bridged(
        [Probe()],
        scores=[1.0],
        learning_rate="lr",
        variables=["bn/gamma", "bn/beta", "dense/kernel", "dense/bias"],
    )
    assert seen["names"] == ["bn/gamma", "bn/beta", "dense/kernel", "dense/bias"]


# -- item 9: a ReduceLROnPlateau cut at the last epoch reaches the checkpoint -----------------------
def test_learning_rate_cut_at_the_last_epoch_reaches_the_checkpoint_as_fit_keeps_it(tmp_path):
    """Natively fit ends with the rate cut at the last epoch (0.05), the rate a continued fit
    starts from; the session's last checkpoint (written at that step, before the callback ran)
    holds it too, so a restarted session starts from 0.05, not 0.1."""
    scores = [1.0, 2.0]
    lr_key = "learning_rate" if KERAS3 else "lr"

    def plateau():
        return keras.callbacks.ReduceLROnPlateau("score", factor=0.5, patience=0, mode="min")

    model = native_bn_model()
    native_fit([Score(scores), plateau()], epochs=2, model=model)
    native_lr = float(keras.backend.get_value(getattr(model.optimizer, lr_key)))
    assert native_lr == pytest.approx(0.05)

    ckpt = str(tmp_path / "mts")
    run_bridged([plateau()], scores=scores, checkpoint_dir=ckpt, learning_rate="lr")
    assert tf.train.latest_checkpoint(ckpt).endswith(f"-{2 * STEPS}")
    assert tf.train.load_checkpoint(ckpt).get_tensor("lr") == pytest.approx(native_lr)
    seen = []

    class Rate(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append(float(self.model.optimizer.learning_rate))

    run_bridged([Rate()], scores=scores + [1.0], checkpoint_dir=ckpt, learning_rate="lr")
    assert seen == [pytest.approx(native_lr)]


def test_a_checkpoint_of_an_earlier_step_is_left_alone(tmp_path):
    """A write at the last step when the last checkpoint is of an earlier step: nothing is
    written again (CheckpointSaverHook.end saves the last step itself when it had not)."""
    scores = [1.0, 2.0]
    ckpt = str(tmp_path / "mts")
    plateau = keras.callbacks.ReduceLROnPlateau("score", factor=0.5, patience=0, mode="min")
    run_bridged([plateau], scores=scores, checkpoint_dir=ckpt, save_steps=100, learning_rate="lr")
    # CheckpointSaverHook saves step 0 (after_create_session) and the last step in end(),
    # before CallbackHook's end(): that save came after the cut (in after_run) and holds it.
    assert tf.train.latest_checkpoint(ckpt).endswith(f"-{2 * STEPS}")
    assert tf.train.load_checkpoint(ckpt).get_tensor("lr") == pytest.approx(0.05)


@pytest.mark.skipif(not HAS_ESTIMATOR, reason="tf.estimator exists on TF 2.15 only")
def test_estimator_final_checkpoint_has_the_restored_best_weights(tmp_path):
    """Estimator.train with EarlyStopping(restore_best_weights=True) in training_hooks: the
    model_dir's final checkpoint (what evaluate / predict / export read) holds the best epoch's
    weights, as fit's model does."""
    rec = Weights()
    stop = keras.callbacks.EarlyStopping("score", patience=1, mode="min", restore_best_weights=True)

    def model_fn(features, labels, mode):
        gs = v1.train.get_or_create_global_step()
        w = v1.get_variable("w", initializer=tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], w) - labels))
        score = tf.identity(tf.reduce_mean(features["score"]), name="score")
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
        hook = hookbridge.CallbackHook(
            [rec, stop],
            logs={"score": score},
            steps_per_epoch=STEPS,
            epochs=len(SCORES),
            batch_size=4,
        )
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train, training_hooks=[hook])

    def input_fn():
        scores = np.repeat(np.asarray(SCORES, "float32"), 8)  # 8 rows per epoch
        xs = np.tile(X, (len(SCORES), 1))
        ys = np.tile(Y, (len(SCORES), 1))
        return tf.data.Dataset.from_tensor_slices(({"x": xs, "score": scores}, ys)).batch(4)

    config = tf.estimator.RunConfig(
        model_dir=str(tmp_path / "est"),
        save_checkpoints_steps=STEPS,
        save_summary_steps=None,
        log_step_count_steps=1000,
    )
    est = tf.estimator.Estimator(model_fn, config=config)
    est.train(input_fn)
    assert len(rec.epochs) == BEST + 2
    assert not np.allclose(rec.epochs[BEST][0], rec.epochs[-1][0])
    np.testing.assert_allclose(est.get_variable_value("w"), rec.epochs[BEST][0], rtol=1e-6)
    assert est.latest_checkpoint().endswith(f"-{(BEST + 2) * STEPS}")


# -- item 3: model.load_weights ---------------------------------------------------------------------
@pytest.mark.skipif(KERAS3, reason="Keras 3's ModelCheckpoint has no load_weights_on_restart")
# CI: the TensorFlow format and the HDF5 one through an epoch pattern (which Keras resolves to the
# newest file); the plain HDF5 name, the same HDF5 load without the pattern, in the deep profile.
@pytest.mark.parametrize(
    "name", ["ckpt/weights", pytest.param("w.h5", marks=pytest.mark.deep), "w-{epoch:02d}.h5"]
)
def test_load_weights_on_restart_as_native(tmp_path, name):
    """ModelCheckpoint(load_weights_on_restart=True) over two runs: at the second run's
    on_train_begin the model holds what the first saved (natively: a fresh model initialized
    otherwise; bridged: a new session of the same graph, initialized again)."""

    def checkpoint(side):
        path = str(tmp_path / side / name)
        return keras.callbacks.ModelCheckpoint(
            path, save_weights_only=True, load_weights_on_restart=True
        )

    first, second = Weights(), Weights()
    native_fit([checkpoint("native"), first], epochs=2)
    other = native_bn_model(seed=1)
    initial = [np.array(w) for w in other.get_weights()]
    native_fit([checkpoint("native"), second], epochs=1, model=other)
    _assert_same(second.begin, first.epochs[-1])
    assert not np.allclose(initial[4], first.epochs[-1][4])

    first, second = Weights(), Weights()
    run_bridged([checkpoint("bridged"), first], scores=[1.0, 1.0], learning_rate="lr")
    run_bridged([checkpoint("bridged"), second], scores=[1.0], learning_rate="lr")
    _assert_same(second.begin, first.epochs[-1])
    assert not np.allclose(first.begin[4], first.epochs[-1][4])  # trained, then loaded


class LoadAtBegin(keras.callbacks.Callback):
    def __init__(self, path, **kwargs):
        super().__init__()
        self.path, self.kwargs = path, kwargs

    def on_train_begin(self, logs=None):
        self.model.load_weights(self.path, **self.kwargs)


def test_load_weights_reads_a_tf1_saver_checkpoint_of_the_same_variables(tmp_path):
    """A checkpoint the session's own Saver wrote (model variables, Adam's slots, the global
    step): model.load_weights(directory) loads the model variables from it."""
    ckpt = str(tmp_path / "mts")
    run_bridged([], scores=[1.0, 1.0], checkpoint_dir=ckpt, learning_rate="lr")
    reader = tf.train.load_checkpoint(ckpt)
    rec = Weights()
    run_bridged([LoadAtBegin(ckpt), rec], scores=[1.0], learning_rate="lr")
    _assert_same(rec.begin, [reader.get_tensor(n) for n in MODEL_VARIABLES])


def test_load_weights_of_a_native_weights_file(tmp_path):
    """A weights file native fit wrote, of layers named as the graph's scopes: tf_keras /
    Keras 2's HDF5 layout names each weight (``bn/gamma:0``) and loads into the graph's
    variables of those names; Keras 3's ``.weights.h5`` numbers them (``vars/0``): a
    ValueError naming what is missing, as Keras refuses a file of another model."""
    model = native_bn_model(seed=2, named=True)
    model.fit(X, Y, batch_size=4, epochs=1, verbose=0)
    path = str(tmp_path / ("native.weights.h5" if KERAS3 else "native.h5"))
    model.save_weights(path)
    rec = Weights()
    if KERAS3:
        with pytest.raises(ValueError, match="cannot load 6 of the model's 6 variables"):
            run_bridged([LoadAtBegin(path), rec], scores=[1.0], learning_rate="lr")
        return
    run_bridged([LoadAtBegin(path), rec], scores=[1.0], learning_rate="lr")
    _assert_same(rec.begin, model.get_weights())


def test_load_weights_of_another_model_raises_unless_skip_mismatch(tmp_path):
    """As Keras's load_weights: a file missing some of the model's variables is refused,
    naming them; skip_mismatch=True loads the others."""
    path = str(tmp_path / "part.h5")
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["hookbridge_names"] = [b"dense/kernel"]
        f.create_dataset("dense/kernel", data=np.full((3, 1), 7.0, "float32"))
    with pytest.raises(ValueError, match=r"cannot load 5 of the model's 6 variables.*bn/gamma"):
        run_bridged([LoadAtBegin(path)], scores=[1.0], learning_rate="lr")
    rec = Weights()
    run_bridged([LoadAtBegin(path, skip_mismatch=True), rec], scores=[1.0], learning_rate="lr")
    np.testing.assert_allclose(rec.begin[4], np.full((3, 1), 7.0))
    np.testing.assert_allclose(rec.begin[0], np.ones(3))  # left as initialized


# -- item 4: ModelCheckpoint(save_weights_only=False) without an extension ----------------------------
@pytest.mark.skipif(KERAS3, reason="Keras 3's ModelCheckpoint requires a .keras path then")
def test_full_model_checkpoint_is_a_saved_model_as_native(tmp_path):
    """tf_keras / Keras 2 write a SavedModel directory; CallbackHook one of the graph, whose
    variables loaded back with the TF1 loader hold the values of the last save."""
    paths = {side: str(tmp_path / side / "model") for side in ("native", "bridged")}
    native_fit([keras.callbacks.ModelCheckpoint(paths["native"])], epochs=2)
    rec = Weights()
    checkpoint = keras.callbacks.ModelCheckpoint(paths["bridged"])
    run_bridged([checkpoint, rec], scores=[1.0, 1.0], learning_rate="lr")
    for path in paths.values():
        assert tf.saved_model.contains_saved_model(path)
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as sess:
        meta = v1.saved_model.loader.load(
            sess, [v1.saved_model.tag_constants.SERVING], paths["bridged"]
        )
        assert not meta.signature_def  # documented: the hook does not know inputs / outputs
        by_name = {v.op.name: v for v in graph.get_collection(v1.GraphKeys.GLOBAL_VARIABLES)}
        values = sess.run([by_name[n] for n in MODEL_VARIABLES])
        assert float(sess.run(by_name["lr"])) == pytest.approx(0.1)
        assert "bn/gamma/Adam" in by_name  # the optimizer's state too, as tf_keras saves it
    _assert_same(values, rec.epochs[-1])


@pytest.mark.skipif(not KERAS3, reason="Keras 3's error")
def test_keras3_save_without_extension_raises_keras_error(tmp_path):
    """Keras 3's model.save refuses a path without .keras / .h5 (natively too)."""
    path = str(tmp_path / "model")

    class Save(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.model.save(path)

    with pytest.raises(ValueError, match="Invalid filepath extension") as native:
        native_fit([Save()], epochs=1)
    with pytest.raises(ValueError, match="Invalid filepath extension") as bridged:
        run_bridged([Save()], scores=[1.0], learning_rate="lr")
    assert str(native.value).split(" Use ")[0] == str(bridged.value).split(" Use ")[0]


# -- item 8: weight histograms and images ---------------------------------------------------------
def _weight_tags(logdir):
    """{kind: {tag: [steps]}} of the weight summaries in ``train/`` (EventAccumulator)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(os.path.join(logdir, "train"), size_guidance={"tensors": 0})
    acc.Reload()
    out = {"histogram": {}, "image": {}}
    for tag in acc.Tags()["tensors"]:
        kind = tag.rpartition("/")[2]
        if kind in out:
            name = tag if not KERAS3 else tag.split("/", 1)[1] if tag.count("/") > 2 else tag
            out[kind][name] = [e.step for e in acc.Tensors(tag)]
    return out


def test_weight_histograms_and_images_of_every_model_variable_as_native(tmp_path):
    """TensorBoard(histogram_freq=1, write_images=True): natively a histogram per weight of
    every layer and an image per 1-D / 2-D weight that squeezes to one, each epoch; under
    CallbackHook the same tags for the graph's variables (layers named as the graph's scopes
    natively, so the tags match; Keras 3's carry the model's name first, left out here)."""
    model = native_bn_model(named=True)
    logdirs = {side: str(tmp_path / side) for side in ("native", "bridged")}

    def board(side):
        return keras.callbacks.TensorBoard(logdirs[side], histogram_freq=1, write_images=True)

    native_fit([board("native")], epochs=2, model=model)
    run_bridged([board("bridged")], scores=[1.0, 1.0], learning_rate="lr")
    native, bridged = _weight_tags(logdirs["native"]), _weight_tags(logdirs["bridged"])
    assert len(native["histogram"]) == 6 and native["image"]
    assert bridged == native
    assert all(steps == [0, 1] for kind in bridged.values() for steps in kind.values())


@pytest.mark.skipif(KERAS3, reason="tf.compat.v1.layers needs tf_keras / Keras 2")
@pytest.mark.parametrize("optimizer", ["momentum", "adam", "rmsprop"])
def test_tf1_layers_batch_normalization_weights_as_native(optimizer):
    """A TF1 graph built with tf.compat.v1.layers (batch_normalization, dense) and a TF1 slot
    optimizer: the proxy's weights are the layers' six variables, shaped as native
    model.weights, whatever slots (``<var>/Momentum``, ``/Adam``, ``/RMSProp``) and non-slot
    variables the optimizer made."""
    native = native_bn_model()
    seen = {}

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["names"] = [v.op.name for v in self.model.weights]
            seen["count"] = self.model.count_params()

    graph = tf.Graph()
    with graph.as_default():
        gs = v1.train.get_or_create_global_step()
        x = tf.constant(X)
        h = v1.layers.batch_normalization(x, training=True)
        loss = tf.reduce_mean(tf.square(v1.layers.dense(h, 1) - Y), name="loss")
        make = {
            "momentum": lambda: v1.train.MomentumOptimizer(0.1, 0.9),
            "adam": lambda: v1.train.AdamOptimizer(0.1),
            "rmsprop": lambda: v1.train.RMSPropOptimizer(0.1, momentum=0.5),
        }[optimizer]
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            train = make().minimize(loss, global_step=gs)
        hook = hookbridge.CallbackHook(
            [Probe()], logs={"loss": loss}, steps_per_epoch=1, epochs=1, batch_size=8
        )
        with v1.train.MonitoredSession(hooks=[hook]) as sess:
            while not sess.should_stop():
                sess.run(train)
    assert seen["names"] == [
        "batch_normalization/gamma",
        "batch_normalization/beta",
        "batch_normalization/moving_mean",
        "batch_normalization/moving_variance",
        "dense/kernel",
        "dense/bias",
    ]
    assert seen["count"] == native.count_params() == 16


# -- what docs/limits.md says stays different -----------------------------------------------------
def test_which_non_trainable_variables_count_as_the_models():
    """docs/limits.md: a non-trainable variable outside any scope (a running ``total``, an
    ``lr``) is bookkeeping, not a model variable; one inside a scope that no update op reads
    (``schedule/lr``) counts as the model's unless passed as learning_rate=."""
    seen = []

    class Probe(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append([v.op.name for v in self.model.weights])

    graph = tf.Graph()
    with graph.as_default():
        gs = v1.train.get_or_create_global_step()
        w = v1.get_variable("w", initializer=tf.ones([3, 1]))
        v1.get_variable("lr", initializer=0.1, trainable=False)
        total = v1.get_variable("total", initializer=0.0, trainable=False)
        with v1.variable_scope("schedule"):
            scoped_lr = v1.get_variable("lr", initializer=0.1, trainable=False)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(X), w) - Y), name="loss")
        train = tf.group(
            v1.train.AdamOptimizer(0.1).minimize(loss, global_step=gs), total.assign_add(loss)
        )
        for kwargs in ({}, {"learning_rate": scoped_lr}):
            hook = hookbridge.CallbackHook(
                [Probe()], logs={"loss": loss}, steps_per_epoch=1, epochs=1, batch_size=8, **kwargs
            )
            with v1.train.MonitoredSession(hooks=[hook]) as sess:
                while not sess.should_stop():
                    sess.run(train)
    assert seen == [["w", "schedule/lr"], ["w"]]


def test_a_saver_outside_the_savers_collection_keeps_the_state_before_on_train_end(tmp_path):
    """docs/limits.md: with Scaffold(saver=...) (not in the SAVERS collection) the final
    checkpoint is not written again: it holds the last epoch's weights, not the restored best
    ones the session's model holds at the end."""
    rec, final = Weights(), Weights()
    stop = keras.callbacks.EarlyStopping("score", patience=1, mode="min", restore_best_weights=True)
    ckpt = str(tmp_path / "mts")
    run_bridged(
        [rec, stop, final],
        checkpoint_dir=ckpt,
        learning_rate="lr",
        scaffold=lambda: v1.train.Scaffold(saver=v1.train.Saver()),
    )
    _assert_same(final.end, rec.epochs[BEST])
    reader = tf.train.load_checkpoint(ckpt)
    _assert_same([reader.get_tensor(n) for n in MODEL_VARIABLES], rec.epochs[-1])


def test_a_write_at_an_earlier_epoch_end_reaches_the_next_checkpoint_not_that_one(tmp_path):
    """docs/limits.md: a ReduceLROnPlateau cut at an epoch's end (a checkpoint of that step was
    written just before it) is in the next checkpoint, not in the one of that step."""
    ckpt = str(tmp_path / "mts")
    plateau = keras.callbacks.ReduceLROnPlateau("score", factor=0.5, patience=0, mode="min")
    # the cut comes at epoch 1's end (2.0 after 1.0), after that step's checkpoint was written
    run_bridged([plateau], scores=[1.0, 2.0, 0.5], checkpoint_dir=ckpt, learning_rate="lr")
    state = tf.train.get_checkpoint_state(ckpt)
    by_step = {int(p.rsplit("-", 1)[1]): p for p in state.all_model_checkpoint_paths}
    assert tf.train.load_checkpoint(by_step[2 * STEPS]).get_tensor("lr") == pytest.approx(0.1)
    assert tf.train.load_checkpoint(by_step[3 * STEPS]).get_tensor("lr") == pytest.approx(0.05)
