"""The team's code: a BERT-shaped classifier ``model_fn`` (after google-research/bert's
``modeling.py``, ``optimization.py`` and ``run_classifier.py``) with two tiny transformer layers,
as ``hookbridge upgrade --model-fn`` left it.

Variables under BERT's names (``bert/embeddings/word_embeddings``,
``bert/encoder/layer_0/attention/self/query/kernel``, ``output_weights``, ...), made with
``tf.compat.v1.get_variable`` and ``layers.dense``; BERT's ``AdamWeightDecayOptimizer`` (its
``adam_m``/``adam_v`` next to each weight, decoupled weight decay, no bias correction); a learning
rate that warms up linearly then decays polynomially, read from the global step its own train op
assigns; an ``init_from_checkpoint`` warm start. The same file trains under the ``TPUEstimator``
on TF 2.15 (``estimator_tf215.py``) and under ``hookbridge.model_fn_model`` on TF 2.21
(``fit_tf221.py``): ``upgrade --model-fn`` pointed its ``tf.estimator.ModeKeys``,
``TPUEstimatorSpec`` and ``tf.compat.v1.layers.dense`` at ``hookbridge.estimator_compat``.
The oracle tests load this very file as their BERT subject (``tests/fixtures/model_fns/bert.py``).
"""

from __future__ import annotations

import math
import re

import numpy as np
import tensorflow as tf

import hookbridge.estimator_compat

v1 = tf.compat.v1
BATCH = 8
SEQUENCE = 8
PARAMS = {
    "vocab_size": 24,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 16,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "hidden_dropout_prob": 0.0,  # a random dropout mask could not be compared step by step
    "attention_probs_dropout_prob": 0.0,
    "num_labels": 2,
    "learning_rate": 5e-3,
    "num_train_steps": 80,
    "num_warmup_steps": 8,
    "init_checkpoint": None,
}


def rows(seed: int, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """``n`` token sequences; the label is whether token 3 appears more often than token 5."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, PARAMS["vocab_size"], size=(n, SEQUENCE)).astype(np.int32)
    lengths = rng.integers(SEQUENCE // 2, SEQUENCE + 1, size=n)
    mask = (np.arange(SEQUENCE)[None, :] < lengths[:, None]).astype(np.int32)
    ids = ids * mask
    segments = (np.arange(SEQUENCE)[None, :] >= (lengths // 2)[:, None]).astype(np.int32) * mask
    labels = ((ids == 3).sum(1) > (ids == 5).sum(1)).astype(np.int32)
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}, labels


def _init(params):
    return v1.truncated_normal_initializer(stddev=params["initializer_range"])


def _dropout(x, rate):
    return x if not rate else tf.nn.dropout(x, rate=rate)


def _layer_norm(x, scope="LayerNorm"):
    """Layer normalization over the last axis, its ``beta``/``gamma`` in ``scope``."""
    with v1.variable_scope(scope):
        size = x.shape[-1]
        beta = v1.get_variable("beta", [size], initializer=v1.zeros_initializer())
        gamma = v1.get_variable("gamma", [size], initializer=v1.ones_initializer())
        mean, variance = tf.nn.moments(x, [-1], keepdims=True)
        return tf.nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def _gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * tf.pow(x, 3))))


def _attention(x, bias, params, batch, length):
    """Multi-head self-attention on ``x`` ``[batch * length, hidden]``."""
    heads = params["num_attention_heads"]
    width = params["hidden_size"] // heads

    def project(name):
        y = hookbridge.estimator_compat.layers.dense(
            x, heads * width, name=name, kernel_initializer=_init(params)
        )
        return tf.transpose(tf.reshape(y, [batch, length, heads, width]), [0, 2, 1, 3])

    query, key, value = project("query"), project("key"), project("value")
    scores = tf.matmul(query, key, transpose_b=True) * (1.0 / math.sqrt(width)) + bias
    probs = _dropout(tf.nn.softmax(scores), params["attention_probs_dropout_prob"])
    context = tf.transpose(tf.matmul(probs, value), [0, 2, 1, 3])
    return tf.reshape(context, [batch * length, heads * width])


def encode(features, params, training):
    """BERT's embeddings and encoder; returns the pooled ``[CLS]`` vector."""
    ids, mask = features["input_ids"], features["input_mask"]
    batch, length = tf.shape(ids)[0], ids.shape[1]
    hidden = params["hidden_size"]
    drop = params["hidden_dropout_prob"] if training else 0.0
    if not training:
        params = {**params, "attention_probs_dropout_prob": 0.0}
    with v1.variable_scope("bert"):
        with v1.variable_scope("embeddings"):
            words = v1.get_variable(
                "word_embeddings", [params["vocab_size"], hidden], initializer=_init(params)
            )
            types = v1.get_variable(
                "token_type_embeddings",
                [params["type_vocab_size"], hidden],
                initializer=_init(params),
            )
            positions = v1.get_variable(
                "position_embeddings",
                [params["max_position_embeddings"], hidden],
                initializer=_init(params),
            )
            x = tf.gather(words, ids)
            x += tf.reshape(
                tf.matmul(
                    tf.one_hot(
                        tf.reshape(features["segment_ids"], [-1]), params["type_vocab_size"]
                    ),
                    types,
                ),
                [batch, length, hidden],
            )
            x += positions[None, :length, :]
            x = _dropout(_layer_norm(x), drop)
        with v1.variable_scope("encoder"):
            bias = (1.0 - tf.cast(mask[:, None, None, :], tf.float32)) * -10000.0
            x = tf.reshape(x, [-1, hidden])
            for index in range(params["num_hidden_layers"]):
                with v1.variable_scope(f"layer_{index}"):
                    with v1.variable_scope("attention"):
                        with v1.variable_scope("self"):
                            context = _attention(x, bias, params, batch, length)
                        with v1.variable_scope("output"):
                            out = hookbridge.estimator_compat.layers.dense(
                                context, hidden, kernel_initializer=_init(params)
                            )
                            x = _layer_norm(_dropout(out, drop) + x)
                    with v1.variable_scope("intermediate"):
                        inner = hookbridge.estimator_compat.layers.dense(
                            x,
                            params["intermediate_size"],
                            activation=_gelu,
                            kernel_initializer=_init(params),
                        )
                    with v1.variable_scope("output"):
                        out = hookbridge.estimator_compat.layers.dense(
                            inner, hidden, kernel_initializer=_init(params)
                        )
                        x = _layer_norm(_dropout(out, drop) + x)
            x = tf.reshape(x, [batch, length, hidden])
        with v1.variable_scope("pooler"):
            return hookbridge.estimator_compat.layers.dense(
                x[:, 0], hidden, activation=tf.tanh, kernel_initializer=_init(params)
            )


class AdamWeightDecay(v1.train.Optimizer):
    """Adam with decoupled weight decay and no bias correction (BERT's
    ``AdamWeightDecayOptimizer``): its ``adam_m``/``adam_v`` made by ``get_variable`` as
    ``<weight>/adam_m``; LayerNorm and bias weights are not decayed."""

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude=("LayerNorm", "layer_norm", "bias"),
        name="AdamWeightDecay",
    ):
        super().__init__(False, name)
        self.learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.exclude = exclude

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        updates = []
        for grad, param in grads_and_vars:
            if grad is None or param is None:
                continue
            grad = tf.convert_to_tensor(grad)  # the embeddings' IndexedSlices, dense
            pname = re.sub(r":\d+$", "", param.name)
            m = v1.get_variable(
                pname + "/adam_m",
                param.shape.as_list(),
                tf.float32,
                trainable=False,
                initializer=v1.zeros_initializer(),
            )
            v = v1.get_variable(
                pname + "/adam_v",
                param.shape.as_list(),
                tf.float32,
                trainable=False,
                initializer=v1.zeros_initializer(),
            )
            next_m = self.beta_1 * m + (1.0 - self.beta_1) * grad
            next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(grad)
            step = next_m / (tf.sqrt(next_v) + self.epsilon)
            if self.weight_decay_rate and not any(re.search(e, pname) for e in self.exclude):
                step += self.weight_decay_rate * param
            updates += [
                param.assign(param - self.learning_rate * step),
                m.assign(next_m),
                v.assign(next_v),
            ]
        return tf.group(*updates, name=name)


def train_op(loss, params):
    """BERT's ``create_optimizer``: warmup then polynomial decay, clipping at global norm 1, the
    global step assigned beside the update."""
    global_step = v1.train.get_or_create_global_step()
    rate = v1.train.polynomial_decay(
        tf.constant(params["learning_rate"], tf.float32),
        global_step,
        params["num_train_steps"],
        end_learning_rate=0.0,
        power=1.0,
        cycle=False,
    )
    if params["num_warmup_steps"]:
        step = tf.cast(tf.cast(global_step, tf.int32), tf.float32)
        warmup = float(params["num_warmup_steps"])
        warming = tf.cast(step < warmup, tf.float32)
        rate = (1.0 - warming) * rate + warming * (params["learning_rate"] * step / warmup)
    optimizer = AdamWeightDecay(rate)
    weights = v1.trainable_variables()
    grads, _ = tf.clip_by_global_norm(tf.gradients(loss, weights), clip_norm=1.0)
    update = optimizer.apply_gradients(zip(grads, weights), global_step=global_step)
    return tf.group(update, [global_step.assign(global_step + 1)])


def _warm_start(path):
    """``init_from_checkpoint`` for every trainable variable the checkpoint has by name."""
    names = {name for name, _ in tf.train.list_variables(path)}
    mapping = {}
    for variable in v1.trainable_variables():
        name = re.sub(r":\d+$", "", variable.name)
        if name in names:
            mapping[name] = name
    v1.train.init_from_checkpoint(path, mapping)


def model_fn(features, labels, mode, params):
    """``run_classifier``'s model_fn: a TPUEstimatorSpec per mode."""
    training = mode == hookbridge.estimator_compat.ModeKeys.TRAIN
    pooled = encode(features, params, training)
    output_weights = v1.get_variable(
        "output_weights", [params["num_labels"], params["hidden_size"]], initializer=_init(params)
    )
    output_bias = v1.get_variable(
        "output_bias", [params["num_labels"]], initializer=v1.zeros_initializer()
    )
    if training:
        pooled = _dropout(pooled, params["hidden_dropout_prob"])
    logits = tf.nn.bias_add(tf.matmul(pooled, output_weights, transpose_b=True), output_bias)
    probabilities = tf.nn.softmax(logits)
    if params.get("init_checkpoint"):
        _warm_start(params["init_checkpoint"])
    if mode == hookbridge.estimator_compat.ModeKeys.PREDICT:
        return hookbridge.estimator_compat.TPUEstimatorSpec(
            mode, predictions={"probabilities": probabilities, "logits": logits}
        )
    one_hot = tf.one_hot(labels, params["num_labels"], dtype=tf.float32)
    per_example = -tf.reduce_sum(one_hot * tf.nn.log_softmax(logits), axis=-1)
    loss = tf.reduce_mean(per_example)
    if training:
        return hookbridge.estimator_compat.TPUEstimatorSpec(
            mode, loss=loss, train_op=train_op(loss, params)
        )

    def metric_fn(per_example, labels, logits):
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {
            "eval_accuracy": v1.metrics.accuracy(labels, predicted),
            "eval_loss": v1.metrics.mean(per_example),
        }

    return hookbridge.estimator_compat.TPUEstimatorSpec(
        mode, loss=loss, eval_metrics=(metric_fn, [per_example, labels, logits])
    )


def estimator(model_dir, config, params):
    """``run_classifier``'s TPUEstimator with ``use_tpu=False`` (it runs on CPU)."""
    run_config = v1.estimator.tpu.RunConfig(
        model_dir=str(model_dir),
        tf_random_seed=config.get("seed", 12),
        session_config=config.get("session_config"),
        save_checkpoints_steps=10_000,
        save_summary_steps=None,
        keep_checkpoint_max=1,
        log_step_count_steps=10_000,
        tpu_config=v1.estimator.tpu.TPUConfig(iterations_per_loop=1),
    )
    return v1.estimator.tpu.TPUEstimator(
        use_tpu=False,
        model_fn=model_fn,
        config=run_config,
        params=params,
        train_batch_size=BATCH,
        eval_batch_size=BATCH,
        predict_batch_size=BATCH,
    )
