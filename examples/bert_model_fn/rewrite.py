"""The BERT walk, last step: the model rewritten in Keras, proven equal to the ``model_fn``.

``KerasBert`` is the classifier of ``classifier.py`` written by hand with Keras layers and
Keras's own weight names (``embedding/embeddings``, ``dense_3/kernel``, ...). It takes the
``model_fn``'s weights from OUT/model_dir's latest checkpoint: ``restore_checkpoint(rewritten,
model_dir, "auto")`` refuses (BERT's ``query``, ``key``, ``value``, attention output and pooler
kernels are all ``[hidden, hidden]``: shapes cannot tell them apart, and it lists the candidates
instead of picking), and ``checkpoint_names(rewritten)``, the explicit ``{checkpoint name:
weight}`` map written beside the model, loads every weight. Its predictions are then those of
``model_fn_model`` restored from the same checkpoint (1e-5).

Run (any stack), after fit_tf221.py (or estimator_tf215.py): python rewrite.py [OUT]
"""

from __future__ import annotations

import math

import classifier
import numpy as np
import tensorflow as tf
import walk

import hookbridge

keras = tf.keras


def gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


class Classifier(keras.layers.Layer):
    """BERT's ``output_weights`` are ``[labels, hidden]``: logits = pooled @ weights^T + bias."""

    def __init__(self, labels, **kwargs):
        super().__init__(**kwargs)
        self.labels = labels

    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(self.labels, int(input_shape[-1])))
        self.bias = self.add_weight(name="bias", shape=(self.labels,), initializer="zeros")

    def call(self, x):
        return tf.nn.bias_add(tf.matmul(x, self.kernel, transpose_b=True), self.bias)


class KerasBert(keras.Model):
    """The rewritten classifier; ``self.scopes`` says which BERT scope each layer stands for."""

    def __init__(self, params):
        super().__init__()
        hidden, self.heads = params["hidden_size"], params["num_attention_heads"]
        dense = keras.layers.Dense
        norm = keras.layers.LayerNormalization
        self.words = keras.layers.Embedding(params["vocab_size"], hidden)
        self.types = keras.layers.Embedding(params["type_vocab_size"], hidden)
        self.positions = keras.layers.Embedding(params["max_position_embeddings"], hidden)
        self.embedding_norm = norm(epsilon=1e-12)
        self.blocks = []
        for _ in range(params["num_hidden_layers"]):
            block = [
                dense(hidden),
                dense(hidden),
                dense(hidden),
                dense(hidden),
                norm(epsilon=1e-12),
            ]
            block += [dense(params["intermediate_size"], activation=gelu), dense(hidden)]
            self.blocks.append([*block, norm(epsilon=1e-12)])
        self.pooler = dense(hidden, activation="tanh")
        self.classifier = Classifier(params["num_labels"])
        self.scopes = {
            "bert/embeddings/word_embeddings": self.words,
            "bert/embeddings/token_type_embeddings": self.types,
            "bert/embeddings/position_embeddings": self.positions,
            "bert/embeddings/LayerNorm": self.embedding_norm,
            "bert/pooler/dense": self.pooler,
        }
        parts = ["attention/self/query", "attention/self/key", "attention/self/value"]
        parts += ["attention/output/dense", "attention/output/LayerNorm"]
        parts += ["intermediate/dense", "output/dense", "output/LayerNorm"]
        for index, block in enumerate(self.blocks):
            for part, layer in zip(parts, block, strict=True):
                self.scopes[f"bert/encoder/layer_{index}/{part}"] = layer

    def call(self, features):
        ids, mask = features["input_ids"], features["input_mask"]
        length = ids.shape[1]
        x = self.words(ids) + self.types(features["segment_ids"])
        x = self.embedding_norm(x + self.positions(tf.range(length))[None])
        bias = (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
        for query, key, value, out, norm1, inner, out2, norm2 in self.blocks:
            width = x.shape[-1] // self.heads

            def split(y, width=width):
                return tf.transpose(tf.reshape(y, [-1, length, self.heads, width]), [0, 2, 1, 3])

            scores = tf.matmul(split(query(x)), split(key(x)), transpose_b=True)
            probs = tf.nn.softmax(scores * (1.0 / math.sqrt(width)) + bias)
            context = tf.transpose(tf.matmul(probs, split(value(x))), [0, 2, 1, 3])
            x = norm1(out(tf.reshape(context, [-1, length, self.heads * width])) + x)
            x = norm2(out2(inner(x)) + x)
        logits = self.classifier(self.pooler(x[:, 0]))
        return {"probabilities": tf.nn.softmax(logits), "logits": logits}


# --8<-- [start:names]
def checkpoint_names(model):
    """``{checkpoint name: weight}`` for ``restore_checkpoint``: each layer's BERT scope."""
    names = {"output_weights": model.classifier.kernel, "output_bias": model.classifier.bias}
    for scope, layer in model.scopes.items():
        if isinstance(layer, keras.layers.Embedding):
            names[scope] = layer.embeddings
        elif isinstance(layer, keras.layers.LayerNormalization):
            names.update({f"{scope}/gamma": layer.gamma, f"{scope}/beta": layer.beta})
        else:
            names.update({f"{scope}/kernel": layer.kernel, f"{scope}/bias": layer.bias})
    return names


# --8<-- [end:names]


def run(out, reference=None):
    """``reference``: a ``model_fn_model`` of ``classifier.model_fn`` already at model_dir's
    latest checkpoint (``fit_tf221.run``'s); default: one restored here."""
    model_dir = str(out / "model_dir")
    features = walk.predict_features()
    if reference is None:
        reference = hookbridge.model_fn_model(
            classifier.model_fn, params=dict(classifier.PARAMS), features=features
        )
        hookbridge.restore_checkpoint(reference, model_dir)
    step = int(reference.optimizer.iterations.numpy())
    latest = tf.train.latest_checkpoint(model_dir)
    assert latest.endswith(f"-{step}"), f"the reference is at step {step}, {latest} is not"
    # --8<-- [start:rewrite]
    rewritten = KerasBert(classifier.PARAMS)
    rewritten(features)  # builds its weights
    try:
        hookbridge.restore_checkpoint(rewritten, model_dir, "auto")
    except ValueError as refused:  # shapes cannot tell query from key: it lists the candidates
        print(str(refused).splitlines()[0])
    hookbridge.restore_checkpoint(rewritten, model_dir, checkpoint_names(rewritten))
    # --8<-- [end:rewrite]
    expected, got = reference(features), rewritten(features)
    off = {k: float(np.max(np.abs(np.asarray(got[k]) - np.asarray(expected[k])))) for k in got}
    print(
        f"rewritten Keras BERT at step {step}: {len(rewritten.weights)} weights; predictions "
        f"within {max(off.values()):.2g} of model_fn_model's"
    )
    return off


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    run(walk.out_dir())
