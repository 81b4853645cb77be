"""``hookbridge upgrade --model-fn``: a TF1 model_fn's tf.estimator / tf.layers names pointed at
hookbridge.estimator_compat, after stage 0; the result runs on this stack."""

from __future__ import annotations

import sys

import tensorflow as tf

from hookbridge._migrate.upgrade import engine, model_fn_rules

ORIGINAL = """import tensorflow as tf


def model_fn(features, labels, mode, params):
    x = tf.layers.dense(features, 4, activation=tf.nn.relu)
    x = tf.layers.batch_normalization(x, training=mode == tf.estimator.ModeKeys.TRAIN)
    x = tf.layers.dropout(x, rate=0.0, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.layers.dense(x, 2)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.contrib.tpu.TPUEstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=step)


def estimator(model_dir):
    return tf.estimator.Estimator(model_fn, model_dir=model_dir)
"""


def test_the_names_a_model_fn_uses_point_at_estimator_compat():
    result = engine.upgrade_source(ORIGINAL, model_fn=True)
    text = result.text
    assert "import tensorflow as tf\nimport hookbridge.estimator_compat\n" in text
    assert text.count("hookbridge.estimator_compat.layers.dense(") == 2
    assert "hookbridge.estimator_compat.layers.batch_normalization(" in text
    assert "hookbridge.estimator_compat.layers.dropout(" in text
    assert text.count("hookbridge.estimator_compat.ModeKeys.") == 3
    assert "hookbridge.estimator_compat.TPUEstimatorSpec(mode" in text
    assert "hookbridge.estimator_compat.EstimatorSpec(mode, loss" in text
    # the Estimator itself and the rest are stage 0's: left to run under tf.estimator (2.15)
    assert "tf.estimator.Estimator(model_fn" in text
    assert "tf.compat.v1.train.GradientDescentOptimizer" in text
    ours = [c for c in result.changes if c.new.startswith("hookbridge.")]
    assert len(ours) == 9 and all("model_fn_model" in c.why for c in ours)
    again = engine.upgrade_source(text, model_fn=True)
    assert again.text is None or again.text == text  # a second run changes nothing


def test_without_the_flag_nothing_points_at_hookbridge():
    text = engine.upgrade_source(ORIGINAL).text
    assert "hookbridge" not in text and "tf.compat.v1.layers.dense(" in text


def test_the_compat_v1_alias_and_what_is_left_alone():
    source = (
        "import tensorflow.compat.v1 as tf\n"
        "a = tf.layers.conv2d\nb = tf.layers.Dense\nc = tf.estimator.RunConfig\n"
        "d = tf.estimator.tpu.TPUEstimatorSpec\n"
    )
    text, changes = model_fn_rules.rewrite(source)
    assert text == (
        "import tensorflow.compat.v1 as tf\nimport hookbridge.estimator_compat\n"
        "a = hookbridge.estimator_compat.layers.conv2d\nb = tf.layers.Dense\n"
        "c = tf.estimator.RunConfig\nd = hookbridge.estimator_compat.TPUEstimatorSpec\n"
    )
    assert [c.line for c in changes] == [2, 5]


def test_the_upgraded_model_fn_runs_on_this_stack(tmp_path):
    """The rewritten module imports and its model_fn builds its TRAIN and PREDICT graphs here
    (Keras 3 included: no tf.compat.v1.layers, no tf.estimator)."""
    (tmp_path / "job.py").write_text(engine.upgrade_source(ORIGINAL, model_fn=True).text)
    sys.path.insert(0, str(tmp_path))
    try:
        import job
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("job", None)
    with tf.Graph().as_default():
        features = tf.zeros([3, 5])
        spec = job.model_fn(features, tf.zeros([3], tf.int32), "train", {})
        assert spec.train_op is not None and spec.loss.shape == []
        names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert "dense/kernel" in names and "dense_1/kernel" in names
    assert "batch_normalization/moving_mean" in names
    with tf.Graph().as_default():
        spec = job.model_fn(tf.zeros([3, 5]), None, "infer", {})
        spec = spec.as_estimator_spec()
        assert sorted(spec.predictions) == ["logits"]


def test_the_command_takes_the_flag(tmp_path, capsys):
    """``hookbridge upgrade PATH --model-fn`` (its parser and report, in this process)."""
    from hookbridge import cli

    (tmp_path / "job.py").write_text(ORIGINAL)
    assert cli.main(["upgrade", str(tmp_path), "--model-fn", "--no-diff"]) == 1
    assert "hookbridge.estimator_compat.EstimatorSpec" in capsys.readouterr().out
    assert cli.main(["upgrade", str(tmp_path), "--no-diff"]) == 1
    assert "hookbridge.estimator_compat" not in capsys.readouterr().out
