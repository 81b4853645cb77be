"""``"auto"`` never pairs same-shaped weights by order; the way back writes with the restore's map.

The native side is a BERT-shaped TF1 graph (one encoder layer named as
google-research/bert names it: ``bert/encoder/layer_0/attention/self/query/kernel``, ``key``,
``value``, ``attention/output/dense``, ``bert/pooler/dense``, all ``[H, H]``, two ``LayerNorm``
of ``[H]``) trained a few steps and saved by a ``Saver``; the Keras model is written by hand with
Keras's own layer names. Names cannot tell which ``dense_N`` is the query: ``"auto"`` must refuse
and list the candidates; with the explicit map the Keras model predicts what the graph predicts.
"""

from __future__ import annotations

import ast
import io
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
keras = tf.keras
H, T, LABELS = 4, 3, 2
X = np.random.default_rng(1).normal(size=(5, T, H)).astype("float32")
Y = np.random.default_rng(2).normal(size=(5, LABELS)).astype("float32")
EPS = 1e-3
#: role -> (TF1 scope, units); the order a BERT layer is built in, as the Keras model builds it.
DENSE = {
    "query": ("bert/encoder/layer_0/attention/self/query", H),
    "key": ("bert/encoder/layer_0/attention/self/key", H),
    "value": ("bert/encoder/layer_0/attention/self/value", H),
    "attention_out": ("bert/encoder/layer_0/attention/output/dense", H),
    "intermediate": ("bert/encoder/layer_0/intermediate/dense", 2 * H),
    "out": ("bert/encoder/layer_0/output/dense", H),
    "pooler": ("bert/pooler/dense", H),
    "classifier": ("cls/dense", LABELS),
}
NORMS = {
    "attention_norm": "bert/encoder/layer_0/attention/output/LayerNorm",
    "out_norm": "bert/encoder/layer_0/output/LayerNorm",
}
ORDER = ["query", "key", "value", "attention_out", "attention_norm", "intermediate", "out",
         "out_norm", "pooler", "classifier"]


def _encoder(x, dense, norm):
    """One BERT encoder layer, pooler and classifier over ``x`` [B, T, H] (the same ops both
    sides: ``dense(role, h)``, ``norm(role, h)`` are each side's layers)."""
    q, k, v = dense("query", x), dense("key", x), dense("value", x)
    scores = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / np.sqrt(H).astype("float32"))
    h = norm("attention_norm", x + dense("attention_out", tf.matmul(scores, v)))
    h = norm("out_norm", h + dense("out", tf.nn.relu(dense("intermediate", h))))
    return dense("classifier", tf.tanh(dense("pooler", h[:, 0])))


def _tf1_norm(scope, h):
    with v1.variable_scope(scope):
        beta = v1.get_variable("beta", [H], initializer=v1.random_normal_initializer(0.0, 0.1))
        gamma = v1.get_variable("gamma", [H],
                                initializer=v1.random_normal_initializer(1.0, 0.1))
    mean, var = tf.nn.moments(h, axes=[-1], keepdims=True)
    return (h - mean) * tf.math.rsqrt(var + EPS) * gamma + beta


def _tf1_dense(scope, h, units):
    with v1.variable_scope(scope):
        kernel = v1.get_variable("kernel", [h.shape[-1], units])
        bias = v1.get_variable("bias", [units], initializer=v1.random_normal_initializer())
    return tf.tensordot(h, kernel, 1) + bias


def _tf1_graph():
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(3)
        step = v1.train.get_or_create_global_step()
        x = v1.placeholder(tf.float32, [None, T, H])
        logits = _encoder(
            x,
            lambda role, h: _tf1_dense(DENSE[role][0], h, DENSE[role][1]),
            lambda role, h: _tf1_norm(NORMS[role], h),
        )
        loss = tf.reduce_mean(tf.square(logits - Y))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return graph, x, logits, loss, train


def _tf1_checkpoint(directory, steps=2):
    """Trains the TF1 graph ``steps`` steps; returns (prefix, its predictions on X)."""
    graph, x, logits, _, train = _tf1_graph()
    with graph.as_default(), v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            sess.run(train, {x: X})
        prefix = v1.train.Saver().save(sess, str(directory / "model.ckpt"), global_step=2)
        return prefix, sess.run(logits, {x: X})


@pytest.fixture(scope="module")
def _trained_once(tmp_path_factory):
    """:func:`_tf1_checkpoint`'s directory, written once for the module (the graph's build is
    most of a test's time here): (directory, the prefix's file name, its predictions)."""
    directory = tmp_path_factory.mktemp("tf1_bert")
    prefix, predictions = _tf1_checkpoint(directory)
    return directory, Path(prefix).name, predictions


@pytest.fixture
def tf1_checkpoint(_trained_once, tmp_path):
    """:func:`_tf1_checkpoint` into ``tmp_path``: a copy of the module's, its checkpoint state
    pointing at the copy; (prefix, predictions on X)."""
    directory, name, predictions = _trained_once
    shutil.copytree(directory, tmp_path, dirs_exist_ok=True)
    prefix = str(tmp_path / name)
    v1.train.update_checkpoint_state(str(tmp_path), prefix)
    return prefix, predictions.copy()


def _tf1_continue(model_dir):
    """What the TF1 job does with ``model_dir`` (as ``Estimator.train``: its ``Saver`` restores
    the latest checkpoint): (global step, predictions on X, the loss of its next step)."""
    graph, x, logits, loss, train = _tf1_graph()
    with graph.as_default(), v1.Session() as sess:
        v1.train.Saver().restore(sess, tf.train.latest_checkpoint(str(model_dir)))
        step = int(sess.run(v1.train.get_global_step()))
        predictions = sess.run(logits, {x: X})
        return step, predictions, float(sess.run([loss, train], {x: X})[0])


class KerasBert(keras.Model):
    """The same layer by hand, with Keras's own layer names (``dense_N``)."""

    def __init__(self):
        super().__init__(name="keras_bert")
        self.parts = {}
        for role in ORDER:  # built in BERT's order: model.weights follows it
            if role in NORMS:
                self.parts[role] = keras.layers.LayerNormalization(epsilon=EPS)
            else:
                self.parts[role] = keras.layers.Dense(DENSE[role][1])

    def call(self, x):
        return _encoder(x, lambda r, h: self.parts[r](h), lambda r, h: self.parts[r](h))


def _keras_model():
    model = KerasBert()
    model(X)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def _explicit_map(model):
    """``{TF1 name: Keras variable}``: the map a user writes from the two codes."""
    mapping = {}
    for role in ORDER:
        layer = model.parts[role]
        if role in NORMS:
            mapping[f"{NORMS[role]}/gamma"] = layer.gamma
            mapping[f"{NORMS[role]}/beta"] = layer.beta
        else:
            mapping[f"{DENSE[role][0]}/kernel"] = layer.kernel
            mapping[f"{DENSE[role][0]}/bias"] = layer.bias
    return mapping


def _suggested_map(message):
    """The ``assignment_map={...}`` the error suggests, read back as Python."""
    text = message[message.index("assignment_map={") + len("assignment_map=") :]
    lines = [line.split("#")[0] for line in text.splitlines()]
    return ast.literal_eval("\n".join(lines))


def test_auto_refuses_same_shaped_weights_names_cannot_pair(tmp_path, tf1_checkpoint):
    prefix, _ = tf1_checkpoint
    model = _keras_model()
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(ValueError) as e:
        hookbridge.restore_checkpoint(model, tmp_path, "auto")
    message = str(e.value)
    query = model.parts["query"].kernel
    label = hookbridge_label(model, query)
    # The query kernel's line lists every [H, H] kernel of the checkpoint: 5 candidates.
    line = next(s for s in message.splitlines() if s.startswith(f"  {label} [4, 4]: "))
    assert sorted(line.split(": ", 1)[1].split(", ")) == sorted(
        f"{DENSE[r][0]}/kernel" for r in ("query", "key", "value", "attention_out", "pooler")
    )
    assert "never pairs by order" in message
    # The two LayerNorms are undecided too; the intermediate, output and classifier are not.
    norm = hookbridge_label(model, model.parts["attention_norm"].gamma)
    assert f"  {norm} [4]: " in message
    assert hookbridge_label(model, model.parts["intermediate"].kernel) not in message
    for a, b in zip(before, model.get_weights()):  # refused: nothing changed
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="propose_assignment: assignment_map='auto' cannot"):
        hookbridge.propose_assignment(model, tmp_path)
    out = io.StringIO()
    hookbridge.restore_checkpoint(model, tmp_path, "auto", dry_run=out)
    assert f"UNDECIDED Keras weight {label} [4, 4]: candidates " in out.getvalue()
    # The suggested map is one a user can pass (its choices are placeholders to check).
    suggested = _suggested_map(message)
    assert suggested["*"] == "auto" and len(suggested) == 1 + 2 * 5 + 2 * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert hookbridge.restore_checkpoint(model, prefix, suggested) == 2


def test_the_explicit_map_predicts_as_the_tf1_graph(tf1_checkpoint):
    prefix, native = tf1_checkpoint
    model = _keras_model()
    assert hookbridge.restore_checkpoint(model, prefix, _explicit_map(model)) == 2
    np.testing.assert_allclose(model.predict(X, verbose=0), native, rtol=1e-5, atol=1e-6)
    # Only the undecided need entries: "*": "auto" pairs the rest (unique shapes decide).
    again = _keras_model()
    decided = tuple(DENSE[r][0] + "/" for r in ("intermediate", "out", "classifier"))
    partial = {k: w for k, w in _explicit_map(again).items() if not k.startswith(decided)}
    assert hookbridge.restore_checkpoint(again, prefix, {**partial, "*": "auto"}) == 2
    np.testing.assert_allclose(again.predict(X, verbose=0), native, rtol=1e-5, atol=1e-6)


def hookbridge_label(model, variable):
    from hookbridge._migrate.assignment import weight_labels

    index = next(i for i, w in enumerate(model.weights) if w is variable)
    return weight_labels(model)[index]


# ------------------------------------------------------------------ the way back (issue 31.2)
def _fit_writing(model, model_dir, **kwargs):
    model.fit(
        X, Y, batch_size=5, epochs=3, verbose=0,
        callbacks=[hookbridge.HookCallback(lambda: hookbridge.estimator_hooks(
            str(model_dir), model=model, save_checkpoints_steps=1, log_step_count_steps=None,
            save_summary_steps=0, backup=None, **kwargs))],
    )


def test_the_way_back_writes_with_the_map_of_the_restore(tmp_path, tf1_checkpoint):
    model = _keras_model()
    mapping = _explicit_map(model)
    hookbridge.restore_checkpoint(model, tmp_path, mapping)
    _fit_writing(model, tmp_path)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert int(reader.get_tensor("global_step")) == 5
    # Each TF1 name holds the Keras weight it was restored into, as trained by fit.
    for name, weight in mapping.items():
        np.testing.assert_array_equal(reader.get_tensor(name), weight.numpy(), err_msg=name)
    # The TF1 job takes the model_dir back where Keras left it: same predictions, and its next
    # step's loss is the loss of Keras's weights.
    step, predictions, loss = _tf1_continue(tmp_path)
    assert step == 5
    mine = model.predict(X, verbose=0)
    np.testing.assert_allclose(predictions, mine, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, np.mean(np.square(mine - Y)), rtol=1e-5)


def test_a_map_disagreeing_with_the_restore_is_refused(tmp_path, tf1_checkpoint):
    model = _keras_model()
    mapping = _explicit_map(model)
    hookbridge.restore_checkpoint(model, tmp_path, mapping)
    swapped = dict(mapping)
    q, k = (f"{DENSE[r][0]}/kernel" for r in ("query", "key"))
    swapped[q], swapped[k] = mapping[k], mapping[q]
    for wrong in ("auto", swapped):
        with pytest.raises(ValueError, match="otherwise than restore_checkpoint restored"):
            _fit_writing(model, tmp_path, assignment_map=wrong)
    _fit_writing(model, tmp_path, assignment_map=mapping)  # the same map: accepted
    assert int(tf.train.load_checkpoint(str(tmp_path)).get_tensor("global_step")) == 5


def test_many_candidates_are_shortened(tmp_path):
    # Eight same-shaped layers of eight families (as a 12-layer BERT's 48 [H, H] kernels): each
    # undecided weight lists six candidates and how many more.
    scopes = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    graph = tf.Graph()
    with graph.as_default(), v1.Session() as sess:
        for scope in scopes:
            v1.get_variable(f"{scope}/kernel", [2, 2])
        sess.run(v1.global_variables_initializer())
        prefix = v1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    model = keras.Sequential([keras.Input((2,))] + [
        keras.layers.Dense(2, use_bias=False) for _ in scopes])
    with pytest.raises(ValueError) as e:
        hookbridge.restore_checkpoint(model, prefix, "auto")
    first = hookbridge_label(model, model.weights[0])
    line = next(s for s in str(e.value).splitlines() if s.startswith(f"  {first} [2, 2]: "))
    assert line.endswith(": alpha/kernel, beta/kernel, delta/kernel, eps/kernel, eta/kernel, "
                         "gamma/kernel, ... (2 more)")
