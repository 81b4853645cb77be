"""The twins' optimizers compute the Estimator's updates (issue 33, items 2 and 3).

Oracles: the TF1 optimizer (``tf.compat.v1.train``, graph mode, what V1 canned Estimators run)
applying the same gradients to the same variable, dense and ``IndexedSlices`` with duplicate ids,
several steps: values and slots equal bit for bit; the legacy Keras optimizer (what V2 canned run)
where it exists (TF 2.15, tf_keras); a Keras model with an embedding trained in ``fit`` against
the same network trained by TF1; on TF 2.15 the Estimator itself, its checkpoint restored into
the twin's optimizer and written back.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hookbridge._migrate.twins import optimizer_kernels
from hookbridge._migrate.twins.optimizers import canned_default_lr, estimator_optimizer

keras = tf.keras
v1 = tf.compat.v1
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")
LEGACY = None if KERAS3 else getattr(keras.optimizers, "legacy", None)
SHAPE = (6, 3)
SLOTS = {"Adagrad": ("accumulator",), "Ftrl": ("accumulator", "linear"), "SGD": ()}
TF1_SLOT = {"accumulator": {"Adagrad": "accumulator", "Ftrl": "accum"}, "linear": "linear"}
LR = {"Adagrad": 0.05, "Ftrl": 0.2, "SGD": 0.05}
CASES = {
    "Adagrad": ("Adagrad", {}),
    "Adagrad init 0.3": ("Adagrad", {"initial_accumulator_value": 0.3}),
    "Ftrl": ("Ftrl", {}),
    "Ftrl l1 l2 beta": (
        "Ftrl",
        {"l1_regularization_strength": 0.01, "l2_regularization_strength": 0.1, "beta": 0.3},
    ),
    "Ftrl shrinkage power": (
        "Ftrl",
        {"l2_shrinkage_regularization_strength": 0.05, "learning_rate_power": -0.7},
    ),
    "SGD": ("SGD", {}),
}


def gradients(steps: int = 5, seed: int = 0):
    """Per step: ids with duplicates (row 1 three times), their rows, and a dense gradient."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        ids = np.array([1, 3, 1, 5, 1, k % 6], np.int64)
        out.append(
            (
                ids,
                rng.normal(size=(6, 3)).astype("float32"),
                rng.normal(size=SHAPE).astype("float32"),
            )
        )
    return out


W0 = np.random.default_rng(1).normal(size=SHAPE).astype("float32")


def tf1_run(kind, settings, sparse, steps):
    """The TF1 optimizer's variable and slots after ``steps`` (graph mode, as V1 Estimators)."""
    with tf.Graph().as_default():
        var = v1.get_variable("w", initializer=W0, use_resource=True)
        ids, values = v1.placeholder(tf.int64, [None]), v1.placeholder(tf.float32, [None, 3])
        dense = v1.placeholder(tf.float32, SHAPE)
        optimizer = {
            "Adagrad": v1.train.AdagradOptimizer,
            "Ftrl": v1.train.FtrlOptimizer,
            "SGD": v1.train.GradientDescentOptimizer,
        }[kind](LR[kind], **settings)
        grad = tf.IndexedSlices(values, ids, tf.constant(SHAPE, tf.int64)) if sparse else dense
        train = optimizer.apply_gradients([(grad, var)])
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for i, v, d in steps:
                session.run(train, {ids: i, values: v, dense: d})
            slots = {
                s: session.run(optimizer.get_slot(var, _tf1_slot(kind, s))) for s in SLOTS[kind]
            }
            return session.run(var), slots


def _tf1_slot(kind, slot):
    names = TF1_SLOT[slot]
    return names[kind] if isinstance(names, dict) else names


def keras_run(optimizer, sparse, steps):
    """A Keras optimizer's variable after ``steps`` applied in a ``tf.function`` (as ``fit``)."""
    var = tf.Variable(W0)

    @tf.function
    def step(ids, values, dense):
        grad = tf.IndexedSlices(values, ids, tf.constant(SHAPE, tf.int64)) if sparse else dense
        optimizer.apply_gradients([(grad, var)])

    for i, v, d in steps:
        step(i, v, d)
    return var


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_tf1_flavor_computes_the_tf1_optimizers_update_bit_for_bit(case, sparse):
    kind, settings = CASES[case]
    steps = gradients()
    expected, expected_slots = tf1_run(kind, settings, sparse, steps)
    optimizer = estimator_optimizer({"name": kind, **settings}, v2=False, default_lr=LR[kind])
    var = keras_run(optimizer, sparse, steps)
    assert np.abs(var.numpy() - W0).max() > 1e-3  # it trained
    np.testing.assert_array_equal(var.numpy(), expected)
    for slot in SLOTS[kind]:
        np.testing.assert_array_equal(optimizer.slot(var, slot).numpy(), expected_slots[slot])


@pytest.mark.skipif(LEGACY is None, reason="Keras 3 has no optimizers.legacy (the V2 oracle)")
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][0] != "SGD"])
def test_the_keras_flavor_computes_the_legacy_keras_update_bit_for_bit(case, sparse):
    """What V2 canned Estimators run (tf.keras.optimizers.legacy), against the class the twin
    uses for them on Keras 3 (built here on the Keras 2 of this stack)."""
    kind, settings = CASES[case]
    steps = gradients()
    legacy = getattr(LEGACY, kind)(learning_rate=0.05, **settings)
    expected = keras_run(legacy, sparse, steps)
    ours = optimizer_kernels.classes(keras)[kind](0.05, flavor="keras", **settings)
    var = keras_run(ours, sparse, steps)
    np.testing.assert_array_equal(var.numpy(), expected.numpy())
    for slot in SLOTS[kind]:
        np.testing.assert_array_equal(
            ours.slot(var, slot).numpy(), legacy.get_slot(expected, slot).numpy()
        )


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][0] != "SGD"])
def test_the_keras_flavor_computes_the_legacy_keras_update_on_every_stack(case, sparse):
    """The class a V2 canned Estimator's twin trains with on Keras 3, against what
    ``tf.keras.optimizers.legacy`` computed on TF 2.15 (``tests/fixtures/twin_optimizers``,
    written by its ``make_fixture.py``): bit for bit on that TF; on another TF within the
    rounding of TensorFlow's own kernels, which changed (measured on TF 2.21: the dense
    ``ResourceApplyFtrlV2`` with ``learning_rate_power=-0.7`` ends 6e-8 off TF 2.15's in the
    variable, 2e-6 relative in the ``linear`` slot, the legacy Keras Ftrl of TF 2.21 as well;
    every other case bit-equal)."""
    from pathlib import Path

    kind, settings = CASES[case]
    fixture = np.load(Path(__file__).parent / "fixtures" / "twin_optimizers" / "legacy_keras.npz")
    same_tf = str(fixture["tf_version"]) == tf.__version__
    key = f"{case}|{'sparse' if sparse else 'dense'}"
    ours = optimizer_kernels.classes(keras)[kind](0.05, flavor="keras", **settings)
    var = keras_run(ours, sparse, gradients())
    got = {"var": var.numpy(), **{s: ours.slot(var, s).numpy() for s in SLOTS[kind]}}
    for what, value in got.items():
        if same_tf:
            np.testing.assert_array_equal(value, fixture[f"{key}|{what}"], err_msg=what)
        else:
            np.testing.assert_allclose(
                value, fixture[f"{key}|{what}"], rtol=1e-5, atol=1e-7, err_msg=what
            )


@pytest.mark.skipif(not KERAS3, reason="Keras 2.11+ sums duplicate ids first (no trap there)")
def test_keras_3s_own_adagrad_is_what_the_tf1_flavor_fixes():
    """The trap the twins' Adagrad avoids: Keras 3's own Adagrad on duplicate ids."""
    steps = gradients()
    expected, slots = tf1_run("Adagrad", {}, True, steps)
    theirs = keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.1, epsilon=0.0)
    var = keras_run(theirs, True, steps)
    assert np.abs(var.numpy() - expected).max() > 1e-4
    accumulator = theirs._accumulators[0].numpy()  # the sum of squares, not square of the sum
    assert np.abs(accumulator - slots["accumulator"]).max() > 1e-2


VOCAB, DIM, BATCH = 10, 4, 8


class Embedded(keras.layers.Layer):
    """Mean of each row's embeddings (ids with duplicates), then a linear unit."""

    def build(self, input_shape):
        rng = np.random.default_rng(3)
        self.table = self.add_weight(
            name="table",
            shape=(VOCAB, DIM),
            initializer=keras.initializers.Constant(rng.normal(size=(VOCAB, DIM))),
        )
        self.kernel = self.add_weight(
            name="kernel",
            shape=(DIM, 1),
            initializer=keras.initializers.Constant(rng.normal(size=(DIM, 1))),
        )

    def call(self, ids):
        return tf.matmul(tf.reduce_mean(tf.gather(self.table, ids), axis=1), self.kernel)


def embedding_data(seed=4):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 4, size=(BATCH * 6, 3)).astype("int64")  # few ids: many duplicates
    return ids, rng.normal(size=(BATCH * 6, 1)).astype("float32")


def tf1_embedding_training(init, ids, y, epochs):
    """TF1's AdagradOptimizer training :class:`Embedded`'s network in a graph, batch by batch:
    the weights and their accumulators."""
    with tf.Graph().as_default():
        table = v1.get_variable("table", initializer=init[0], use_resource=True)
        kernel = v1.get_variable("kernel", initializer=init[1], use_resource=True)
        x, t = v1.placeholder(tf.int64, [None, 3]), v1.placeholder(tf.float32, [None, 1])
        out = tf.matmul(tf.reduce_mean(tf.gather(table, x), axis=1), kernel)
        tf1 = v1.train.AdagradOptimizer(0.05)
        train = tf1.minimize(tf.reduce_mean(tf.square(t - out)))
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            for _ in range(epochs):
                for k in range(0, len(y), BATCH):
                    session.run(train, {x: ids[k : k + BATCH], t: y[k : k + BATCH]})
            return session.run([table, kernel]), session.run(
                [tf1.get_slot(table, "accumulator"), tf1.get_slot(kernel, "accumulator")]
            )


def fit_embedding(optimizer, ids, y, epochs):
    model = keras.Sequential([keras.Input((3,), dtype="int64"), Embedded()])
    model.compile(optimizer=optimizer, loss="mse")
    init = [w.numpy() for w in model.weights]
    model.fit(ids, y, batch_size=BATCH, shuffle=False, epochs=epochs, verbose=0)
    return model, init


@pytest.mark.parametrize(
    "which",
    [
        "twin",
        pytest.param(
            "keras",
            marks=pytest.mark.skipif(
                not KERAS3, reason="Keras 2.11+'s Adagrad sums duplicate ids first (no trap there)"
            ),
        ),
    ],
)
def test_fit_with_an_embedding_trains_as_tf1_does(which):
    """``fit`` (sparse gradient of the table, duplicate ids in each batch) with the twins'
    Adagrad against TF1's AdagradOptimizer training the same network in a graph, 12 steps:
    equal up to the float rounding of Keras's forward pass and loss (a few ulp, measured
    1.2e-7). Keras's own Adagrad (``"keras"``), given TF1's settings, is measured too: it
    accumulates each duplicate row's square instead of the square of their sum."""
    ids, y = embedding_data()
    optimizer = (
        estimator_optimizer("Adagrad", v2=False, default_lr=0.05)
        if which == "twin"
        else keras.optimizers.Adagrad(0.05, initial_accumulator_value=0.1, epsilon=0.0)
    )
    model, init = fit_embedding(optimizer, ids, y, 2)
    expected, accumulators = tf1_embedding_training(init, ids, y, 2)
    assert np.abs(expected[0] - init[0]).max() > 1e-2
    weights = [w.numpy() for w in model.weights]
    if which == "keras":
        assert np.abs(weights[0] - expected[0]).max() > 1e-4
        return
    for got, want in zip(weights, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for w, want in zip(model.weights, accumulators):
        np.testing.assert_allclose(optimizer.slot(w, "accumulator").numpy(), want, rtol=1e-6)


def test_estimator_optimizer_gives_the_canned_defaults():
    adagrad = estimator_optimizer(
        None,
        v2=False,
        default_name="Adagrad",
        default_lr=canned_default_lr("DNNClassifier", "dnn", None, False, 3),
    )
    assert type(adagrad).__name__ == "EstimatorAdagrad" and adagrad.flavor == "tf1"
    assert np.isclose(float(np.asarray(adagrad.learning_rate)), 0.05)
    assert adagrad.initial_accumulator_value == 0.1
    ftrl = estimator_optimizer(
        "Ftrl", v2=True, default_lr=canned_default_lr("LinearClassifier", "linear", "Ftrl", True, 9)
    )
    expected = "EstimatorFtrl" if KERAS3 else "Ftrl"
    assert type(ftrl).__name__ == expected
    assert np.isclose(float(np.asarray(ftrl.learning_rate)), 0.2)
    assert canned_default_lr("LinearClassifier", "linear", None, True, 36) == pytest.approx(1 / 6)
    assert canned_default_lr("DNNLinearCombinedClassifier", "linear", "Ftrl", False, 4) == 0.005
    assert canned_default_lr("DNNClassifier", "dnn", "Adagrad", True, 4) is None
    v2 = estimator_optimizer("Adagrad", v2=True)  # V2 DNN: the Keras class's own lr, 0.001
    assert np.isclose(float(np.asarray(v2.learning_rate)), 0.001)
    assert np.isclose(float(v2.epsilon), 1e-7)


def test_estimator_optimizer_reads_a_tf1_instance_and_a_dict():
    tf1 = v1.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01, beta=0.2)
    ftrl = estimator_optimizer(tf1, v2=False)
    assert (ftrl.flavor, ftrl.lr_value, ftrl.l1_regularization_strength, ftrl.beta) == (
        "tf1",
        0.1,
        0.01,
        0.2,
    )
    sgd = estimator_optimizer({"name": "GradientDescent", "learning_rate": 0.3}, v2=False)
    assert np.isclose(float(np.asarray(sgd.learning_rate)), 0.3)


def test_estimator_optimizer_refuses_what_it_cannot_copy():
    with pytest.raises(ValueError, match="'Adadelta' is not an optimizer a canned Estimator"):
        estimator_optimizer("Adadelta", v2=False, default_lr=0.1)
    with pytest.raises(ValueError, match="EstimatorAdagrad: unknown settings.*'rho'"):
        estimator_optimizer({"name": "Adagrad", "rho": 0.9}, v2=False, default_lr=0.1)
    with pytest.raises(ValueError, match="TF1 Ftrl optimizer has no default learning rate"):
        estimator_optimizer("Ftrl", v2=False)
    with pytest.raises(ValueError, match="accum_name/linear_name"):
        estimator_optimizer(v1.train.FtrlOptimizer(0.1, accum_name="acc"), v2=False)
    with tf.Graph().as_default():
        rate = tf.constant(0.02) * 0.5
    with pytest.raises(ValueError, match="tensors of the Estimator's graph.*learning_rate"):
        estimator_optimizer(v1.train.AdagradOptimizer(rate), v2=False)


# ---- the Estimator's checkpoint, both ways (TF 2.15: tensorflow-estimator) -------------------
def _estimators():
    from estimator_setup import run_config

    def columns():
        return [tf.feature_column.numeric_column(k) for k in ("b", "a", "c")]

    kernels = optimizer_kernels.classes(keras)
    return run_config, {
        # V1: what estimator_optimizer gives on every stack (the TF1 flavor).
        "DNNClassifier V1, Adagrad": (
            lambda **k: v1.estimator.DNNClassifier([4], columns(), **k),
            lambda: estimator_optimizer("Adagrad", v2=False, default_lr=0.05),
        ),
        "LinearClassifier V1, Ftrl": (
            lambda **k: v1.estimator.LinearClassifier(columns(), **k),
            lambda: estimator_optimizer("Ftrl", v2=False, default_lr=0.2),
        ),
        # V2: the class estimator_optimizer gives on Keras 3 (here built on Keras 2.15).
        "DNNClassifier V2, Adagrad": (
            lambda **k: tf.estimator.DNNClassifier([4], columns(), **k),
            lambda: kernels["Adagrad"](flavor="keras"),
        ),
        "LinearClassifier V2, Ftrl": (
            lambda **k: tf.estimator.LinearClassifier(columns(), **k),
            lambda: kernels["Ftrl"](0.2, flavor="keras"),
        ),
    }


#: CI runs both optimizers and both flavors (V1: the TF1 flavor; V2: the keras flavor) through
#: the Estimator; the other two pairings are the deep profile's (each optimizer x flavor is
#: checked bit for bit against its TF1 / legacy Keras update above, on every stack).
ESTIMATOR_CASES = [
    "DNNClassifier V1, Adagrad",
    pytest.param("LinearClassifier V1, Ftrl", marks=pytest.mark.deep),
    pytest.param("DNNClassifier V2, Adagrad", marks=pytest.mark.deep),
    "LinearClassifier V2, Ftrl",
]


def checkpoint_slots(model_dir, twin):
    """The checkpoint's optimizer slots arranged as the twin's weights: ``{TF1 name the weight
    answers to: {slot: array}}`` (the names the twin declares, ``tf1_names``)."""
    from hookbridge._hook_callback.graph import tf1_names
    from hookbridge._migrate.optimizer_state import classify

    reader = tf.train.load_checkpoint(str(model_dir))
    names = list(reader.get_variable_to_shape_map())
    state = classify(names, set(names))
    by_var = {}
    for s in state.slots:
        by_var.setdefault(s.var, {})[s.slot] = reader.get_tensor(s.name)
    declared = tf1_names(twin)
    out = {}
    for w in twin.trainable_weights:
        name = declared[next(i for i, v in enumerate(twin.weights) if v is w)]
        out[name] = {s: value.reshape(w.shape) for s, value in by_var[name].items()}
    assert out and all(out.values()), (sorted(by_var), sorted(declared.values()))
    return out


def assert_twin_slots(twin, expected):
    from hookbridge._hook_callback.graph import tf1_names

    declared = tf1_names(twin)
    optimizer = twin.optimizer
    for w in twin.trainable_weights:
        name = declared[next(i for i, v in enumerate(twin.weights) if v is w)]
        for slot, value in expected[name].items():
            np.testing.assert_array_equal(optimizer.slot(w, slot).numpy(), value, err_msg=name)


@pytest.mark.parametrize("which", ESTIMATOR_CASES)
def test_the_estimators_slots_go_into_the_twins_optimizer_and_back(which, tmp_path):
    pytest.importorskip(
        "tensorflow_estimator",
        exc_type=ImportError,
        reason="TF 2.15 stack only: needs tensorflow-estimator",
    )
    import warnings

    from estimator_setup import BATCH as EST_BATCH
    from estimator_setup import dataset_fn, keras_fit, linear_data, train

    import hookbridge

    run_config, cases = _estimators()
    make, optimizer = cases[which]
    config = {"save_checkpoints_steps": 4, "save_summary_steps": 100, "log_step_count_steps": 100}
    x, score = linear_data(seed=2)
    features = {"b": x[:, :1], "a": x[:, 1:2], "c": x[:, 2:]}
    labels = (score > 0).astype("int64")
    input_fn = dataset_fn(features, labels)
    assert EST_BATCH == 16 and len(labels) == 64
    train(make(config=run_config(tmp_path, config)), input_fn, 8)

    twin = hookbridge.keras_twin(make(config=run_config(tmp_path, config)))
    twin.compile(optimizer=optimizer(), loss=twin.loss)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hookbridge.restore_checkpoint(twin, tmp_path, "auto") == 8
    assert [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)] == []
    assert_twin_slots(twin, checkpoint_slots(tmp_path, twin))  # the switch: slots equal

    keras_fit(
        twin,
        features,
        labels,
        8,
        12,
        lambda: hookbridge.estimator_hooks(tmp_path, model=twin, **config),
    )
    assert tf.train.load_checkpoint(str(tmp_path)).get_tensor("global_step") == 12
    assert_twin_slots(twin, checkpoint_slots(tmp_path, twin))  # written back: equal
    # The Estimator continues from the twin's checkpoint as the twin goes on in memory.
    back = train(make(config=run_config(tmp_path, config)), input_fn, 16)
    keras = keras_fit(twin, features, labels, 12, 16, lambda: [])
    assert len(back) == len(keras) == 4
    np.testing.assert_allclose(back, keras, rtol=2e-5, atol=1e-7)
    from hookbridge._hook_callback.graph import tf1_names

    declared = tf1_names(twin)
    at_16 = checkpoint_slots(tmp_path, twin)
    for w in twin.trainable_weights:  # and their slots at step 16 (float rounding of the forward)
        name = declared[next(i for i, v in enumerate(twin.weights) if v is w)]
        for slot, value in at_16[name].items():
            np.testing.assert_allclose(
                twin.optimizer.slot(w, slot).numpy(), value, rtol=1e-5, atol=1e-7, err_msg=name
            )


# ---- a TF1 checkpoint both ways on every stack (no Estimator needed) ---------------------------
def tf1_checkpoint_run(kind, model_dir, init, ids, y, batches, restore=False):
    """TF1 training :class:`Embedded`'s network (``emb/table``, ``emb/kernel``) with
    ``kind``'s TF1 optimizer over ``batches`` (start, end) rows, from ``init`` or from the
    checkpoint of ``model_dir`` (``restore``), saving ``model.ckpt-<step>``; the batch losses."""
    with tf.Graph().as_default():
        step = v1.train.get_or_create_global_step()
        table = v1.get_variable("emb/table", initializer=init[0], use_resource=True)
        kernel = v1.get_variable("emb/kernel", initializer=init[1], use_resource=True)
        x, t = v1.placeholder(tf.int64, [None, 3]), v1.placeholder(tf.float32, [None, 1])
        out = tf.matmul(tf.reduce_mean(tf.gather(table, x), axis=1), kernel)
        loss = tf.reduce_mean(tf.square(t - out))
        tf1 = v1.train.AdagradOptimizer(0.05) if kind == "Adagrad" else v1.train.FtrlOptimizer(0.05)
        train = tf1.minimize(loss, global_step=step)
        saver = v1.train.Saver()
        losses = []
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            if restore:
                saver.restore(session, tf.train.latest_checkpoint(str(model_dir)))
            for start, end in batches:
                losses.append(session.run([train, loss], {x: ids[start:end], t: y[start:end]})[1])
            saver.save(session, str(model_dir / "model.ckpt"), global_step=step)
        return losses


@pytest.mark.parametrize("kind", ["Adagrad", "Ftrl"])
def test_a_tf1_checkpoints_slots_load_and_are_written_back(kind, tmp_path):
    """TF1 trains 6 steps (an embedding: sparse updates with duplicate ids) and saves; the Keras
    model with the twins' optimizer restores it ("auto"): slots equal the checkpoint's; it trains
    6 steps under ``estimator_hooks``: the checkpoint holds its slots; TF1 continues from that
    checkpoint as Keras goes on, loss by loss."""
    import hookbridge

    ids, y = embedding_data()
    init = [
        np.asarray(w, "float32")
        for w in (
            np.random.default_rng(3).normal(size=(VOCAB, DIM)),
            np.random.default_rng(4).normal(size=(DIM, 1)),
        )
    ]
    batches = [(k, k + BATCH) for k in range(0, len(y), BATCH)]
    tf1_checkpoint_run(kind, tmp_path, init, ids, y, batches)
    model = keras.Sequential([keras.Input((3,), dtype="int64"), Embedded()])
    optimizer = estimator_optimizer(kind, v2=False, default_lr=0.05)
    model.compile(optimizer=optimizer, loss="mse")
    slot_names = {
        "Adagrad": {"accumulator": "Adagrad"},
        "Ftrl": {"accumulator": "Ftrl", "linear": "Ftrl_1"},
    }[kind]

    def assert_slots_are_the_checkpoints():
        reader = tf.train.load_checkpoint(str(tmp_path))
        for weight, name in zip(model.weights, ("emb/table", "emb/kernel")):
            np.testing.assert_array_equal(weight.numpy(), reader.get_tensor(name))
            for slot, leaf in slot_names.items():
                np.testing.assert_array_equal(
                    optimizer.slot(weight, slot).numpy(),
                    reader.get_tensor(f"{name}/{leaf}"),
                    err_msg=f"{name}/{leaf}",
                )

    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert hookbridge.restore_checkpoint(model, tmp_path, "auto") == 6
    assert [str(w.message) for w in caught if "restore_checkpoint" in str(w.message)] == []
    assert_slots_are_the_checkpoints()

    model.fit(
        ids,
        y,
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=1,
        epochs=2,
        verbose=0,
        callbacks=[
            hookbridge.HookCallback(
                lambda: hookbridge.estimator_hooks(
                    tmp_path,
                    model=model,
                    save_checkpoints_steps=6,
                    log_step_count_steps=None,
                    backup=None,
                )
            )
        ],
    )
    assert tf.train.load_checkpoint(str(tmp_path)).get_tensor("global_step") == 12
    assert_slots_are_the_checkpoints()  # written back under TF1's names

    from estimator_setup import LossRecorder

    native = tf1_checkpoint_run(kind, tmp_path, init, ids, y, batches, restore=True)
    recorder = LossRecorder()  # Keras going on: each batch's loss
    model.fit(
        ids,
        y,
        batch_size=BATCH,
        shuffle=False,
        initial_epoch=2,
        epochs=3,
        verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: [recorder])],
    )
    assert len(native) == len(recorder.losses) == 6
    np.testing.assert_allclose(recorder.losses, native, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", ["Adagrad", "Ftrl"])
def test_the_twins_optimizer_config_round_trips(kind):
    settings = {
        "Adagrad": {"initial_accumulator_value": 0.3},
        "Ftrl": {"beta": 0.2, "l1_regularization_strength": 0.01},
    }[kind]
    optimizer = estimator_optimizer({"name": kind, **settings}, v2=False, default_lr=0.05)
    config = optimizer.get_config()
    clone = type(optimizer).from_config(config)
    assert clone.get_config() == config
    assert (clone.flavor, clone.lr_value) == ("tf1", 0.05)
    assert {k: getattr(clone, k) for k in settings} == settings
