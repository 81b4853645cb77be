"""Fails loudly, naming the symbol, when TensorFlow/Keras moves a private API hookbridge uses."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from hookbridge import _tfcompat


def _all_private_symbols():
    """(module, name) pairs; modules given by name are Keras 3 ones, checked on that stack only."""
    import importlib

    import conftest

    symbols = list(_tfcompat.PRIVATE_SYMBOLS)
    for module, name in getattr(_tfcompat, "PRIVATE_SYMBOLS_CALLBACK_HOOK", ()):
        if isinstance(module, str):
            if not conftest.KERAS3:
                continue
            module = importlib.import_module(module)
        symbols.append((module, name))
    return symbols


@pytest.mark.parametrize(
    "module, name", _all_private_symbols(), ids=lambda v: getattr(v, "__name__", str(v))
)
def test_private_symbol_still_exists(module, name):
    assert hasattr(module, name), (
        f"TensorFlow {tf.__version__} moved {module.__name__}.{name}: update hookbridge/_tfcompat/"
    )


def test_fetch_mapper_round_trip():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        mapper = _tfcompat.fetch_mapper({"x": [a, "a:0"], "y": (a,)})
        assert mapper.unique_fetches() == [a]
        assert mapper.build_results([5.0]) == {"x": [5.0, 5.0], "y": (5.0,)}


def test_global_step_read_tensor_is_cached():
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.train.get_or_create_global_step()
        first = _tfcompat.global_step_read_tensor(g)
        assert first is _tfcompat.global_step_read_tensor(g)
        assert first.dtype == tf.int64


def test_eager_context_inside_a_v1_graph():
    with tf.Graph().as_default():
        assert not tf.executing_eagerly()
        with _tfcompat.eager():
            assert tf.executing_eagerly()
            assert float(tf.constant(2.0).numpy()) == 2.0


def test_profiler_hook_output_file(tmp_path):
    with tf.Graph().as_default():
        hook = tf.compat.v1.train.ProfilerHook(save_steps=1, output_dir=str(tmp_path))
    assert _tfcompat.profiler_hook_output_file(hook) == str(tmp_path / "timeline-{}.json")
    assert _tfcompat.profiler_hook_output_file(tf.compat.v1.train.SessionRunHook()) is None


def test_logging_hook_formatter_and_hook_summary_writer(tmp_path):
    train = tf.compat.v1.train
    with tf.Graph().as_default():
        train.get_or_create_global_step()
        loss = tf.constant(1.0, name="loss")
        logging = train.LoggingTensorHook({"loss": loss}, every_n_iter=1, formatter=str)
        assert _tfcompat.logging_hook_formatter(logging) is str
        plain = train.LoggingTensorHook({"loss": loss}, every_n_iter=1)
        assert _tfcompat.logging_hook_formatter(plain) is None
        counter = train.StepCounterHook(every_n_steps=1, output_dir=str(tmp_path))
        assert _tfcompat.hook_summary_writer(counter) is None  # until begin()
        counter.begin()
        writer = _tfcompat.hook_summary_writer(counter)
        assert type(writer) is tf.compat.v1.summary.FileWriter
        assert writer.get_logdir() == str(tmp_path)


def test_no_private_tf_imports_outside_tfcompat():
    import pathlib

    import hookbridge

    root = pathlib.Path(hookbridge.__file__).parent
    package = pathlib.Path(_tfcompat.__file__).parent
    assert package.name == "_tfcompat" and package.parent == root, package
    offenders = []
    for path in root.rglob("*.py"):
        if package in path.parents:
            continue
        text = path.read_text()
        for marker in ("tensorflow.python", "keras.src", "tf_keras.src", "tensorflow.core"):
            if marker in text:
                offenders.append(f"{path.relative_to(root)}: {marker}")
    assert not offenders, offenders


def _state():
    return (
        tf.compat.v1.get_default_graph(),
        tf.executing_eagerly(),
        len(_tfcompat._eager_context.context().context_switches.stack),
    )


def test_graph_default_does_what_as_default_does():
    g = tf.Graph()
    outside = _state()
    with g.as_default():
        reference = _state()
        ref_const = tf.constant(1.0)
    assert _state() == outside
    with _tfcompat.graph_default(g) as entered:
        assert entered is g
        assert _state() == reference
        assert tf.constant(2.0).graph is g and ref_const.graph is g
        assert tf.compat.v1.get_default_graph() is g
        with tf.Graph().as_default() as inner:  # nests both ways
            assert tf.compat.v1.get_default_graph() is inner
            with _tfcompat.graph_default(g):
                assert tf.compat.v1.get_default_graph() is g
            assert tf.compat.v1.get_default_graph() is inner
        with _tfcompat.eager():
            assert tf.executing_eagerly()
        assert _state() == reference
    assert _state() == outside and tf.executing_eagerly()


def test_reused_scopes_nest_and_restore():
    """GraphScope / EagerScope objects are reused every step, and nest (hooks run sessions)."""
    g = tf.Graph()
    scope, eager = _tfcompat.GraphScope(g), _tfcompat.EagerScope()
    with g.as_default():
        reference = _state()
    outside = _state()
    for _ in range(2):
        with scope as entered:
            assert entered is g and _state() == reference
            with eager:
                assert tf.executing_eagerly()
                with eager:  # the same object, nested
                    assert tf.executing_eagerly()
                assert tf.executing_eagerly()
                with scope:
                    assert tf.compat.v1.get_default_graph() is g and not tf.executing_eagerly()
                    with tf.init_scope():  # the recorded switch re-enters g
                        assert tf.compat.v1.get_default_graph() is g
                assert tf.executing_eagerly()
            with g.device("/cpu:0"), scope:
                assert tf.constant(1.0).device.endswith("CPU:0")
            assert _state() == reference
        with pytest.raises(ValueError), scope:
            raise ValueError
        assert _state() == outside and tf.executing_eagerly()


def test_graph_default_restores_on_error():
    g = tf.Graph()
    outside = _state()
    with pytest.raises(ValueError), _tfcompat.graph_default(g):
        raise ValueError
    assert _state() == outside
    assert float(tf.constant(3.0).numpy()) == 3.0  # eager again


def test_eager_does_what_eager_mode_does():
    g = tf.Graph()
    with g.as_default():
        with _tfcompat._eager_context.eager_mode():
            reference = _state()
        with _tfcompat.eager():
            assert _state() == reference
            with tf.init_scope():  # lifts to the same outer context
                assert tf.executing_eagerly()
        with pytest.raises(KeyError), _tfcompat.eager():
            raise KeyError
        assert not tf.executing_eagerly() and tf.compat.v1.get_default_graph() is g


def test_keras_private_markers_still_exist():
    """The attribute markers hookbridge reads on Keras objects (via _tfcompat) are still there."""
    import conftest

    keras = tf.keras
    base = keras.callbacks.Callback()
    if conftest.KERAS3:
        assert _tfcompat.keras_is_default(base.on_train_batch_end), "Keras 3 moved _is_default"
        assert not _tfcompat.keras_is_default(keras.callbacks.TerminateOnNaN().on_batch_end)
        assert _tfcompat.metric_direction(keras.metrics.get("mae")) == "down"
    else:
        assert _tfcompat.implements_train_batch_hooks(base) is False, (
            "tf_keras moved Callback._implements_train_batch_hooks"
        )
        assert _tfcompat.implements_train_batch_hooks(keras.callbacks.TerminateOnNaN()) is True
        for kind in ("train", "test", "predict"):
            assert _tfcompat.implements_batch_hooks(base, kind) is False, (
                f"tf_keras moved Callback._implements_{kind}_batch_hooks"
            )
        nan = keras.callbacks.TerminateOnNaN()
        assert _tfcompat.implements_batch_hooks(nan, "train") is True
        assert _tfcompat.implements_batch_hooks(nan, "test") is False


def test_tf1_optimizer_settings_still_found():
    """CallbackHook's optimizer.get_config reads a TF1 optimizer's arguments from private
    attributes: each built-in optimizer still keeps them under the expected names."""
    train = tf.compat.v1.train
    cases = {
        train.GradientDescentOptimizer(0.1): {"learning_rate": 0.1, "use_locking": False},
        train.MomentumOptimizer(0.1, 0.9, use_nesterov=True): {
            "learning_rate": 0.1,
            "momentum": 0.9,
            "use_nesterov": True,
        },
        train.AdamOptimizer(0.01, beta1=0.8): {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.999},
        train.RMSPropOptimizer(0.1, decay=0.8): {"learning_rate": 0.1, "decay": 0.8},
        train.AdagradOptimizer(0.1, initial_accumulator_value=0.2): {
            "learning_rate": 0.1,
            "initial_accumulator_value": 0.2,
        },
    }
    for optimizer, expected in cases.items():
        settings = _tfcompat.tf1_optimizer_settings(optimizer)
        for key, value in expected.items():
            assert settings.get(key) == value, (
                f"TF {tf.__version__} moved {type(optimizer).__name__}'s private attribute for "
                f"{key!r}: update _tfcompat.tf1_optimizer_settings"
            )
        assert settings["name"] == optimizer.get_name()


def test_unbound_summary_op_name_still_left_by_tf_summary():
    """CallbackHook warns about tf.summary calls built without a writer by finding this op."""
    g = tf.Graph()
    with g.as_default():
        tf.summary.scalar("inside", tf.constant(1.0), step=0)
        tf.identity(tf.constant(2.0), name="other")
    assert _tfcompat.unbound_summary_ops(g) == ["inside"], (
        f"TF {tf.__version__} no longer leaves '<name>/{_tfcompat.UNBOUND_SUMMARY_OP_SUFFIX}' "
        "for a tf.summary call without a writer: update _tfcompat.unbound_summary_ops"
    )


def test_session_run_values_is_a_plain_namedtuple():
    """The bridge builds ``SessionRunValues`` with ``tuple.__new__``
    (``_tfcompat.new_session_run_values``), as the namedtuple's generated ``__new__`` does: this
    fails if TensorFlow gives the class a constructor of its own (defaults, validation) that the
    bridge would skip.

    Importing ``tensorflow_estimator`` (TF 2.15) marks the class deprecated, which wraps
    ``__new__`` in TF's deprecation notice: a log line once per process, then the namedtuple's
    own ``__new__``. The bridge does not print that line."""
    cls = tf.compat.v1.train.SessionRunValues
    assert cls._fields == ("results", "options", "run_metadata")
    assert "__init__" not in cls.__dict__ and cls.__init__ is object.__init__
    new = cls.__dict__.get("__new__")
    if new is not None:
        from tensorflow.python.util import tf_decorator

        decorators, new = tf_decorator.unwrap(new)
        assert [d.decorator_name for d in decorators] == ["deprecated"]
    else:
        new = cls.__new__
    assert new.__qualname__ == "SessionRunValues.__new__"  # collections.namedtuple's
    assert new.__defaults__ is None
    built = _tfcompat.new_session_run_values((1, 2, 3))
    assert type(built) is cls and built == cls(1, 2, 3) and built.run_metadata == 3


def test_hook_output_dir_of_the_file_writing_hooks(tmp_path):
    """The directory each built-in file-writing hook writes to, read from its private
    attributes (HookCallback names it when such a hook runs on a non-chief worker)."""
    train = tf.compat.v1.train
    with tf.Graph().as_default():
        train.get_or_create_global_step()
        loss = tf.constant(1.0, name="loss")
        summary = tf.compat.v1.summary.scalar("loss", loss)
        d = str(tmp_path)
        writer = tf.compat.v1.summary.FileWriter(str(tmp_path / "w"))
        cases = [
            (train.CheckpointSaverHook(d, save_steps=1), d),
            (train.SummarySaverHook(save_steps=1, output_dir=d, summary_op=summary), d),
            (train.SummarySaverHook(save_steps=1, summary_writer=writer, summary_op=summary),
             str(tmp_path / "w")),
            (train.StepCounterHook(every_n_steps=1, output_dir=d), d),
            (train.StepCounterHook(every_n_steps=1, summary_writer=writer), str(tmp_path / "w")),
            (train.StepCounterHook(every_n_steps=1), None),
            (train.ProfilerHook(save_steps=1, output_dir=d), d),
            (train.NanTensorHook(loss), None),
        ]
        writer.close()
    for hook, expected in cases:
        assert _tfcompat.hook_output_dir(hook) == expected, type(hook).__name__


@pytest.mark.parametrize(
    "make, slots",
    [
        (lambda k: k.optimizers.Adam(0.1), ("m", "v")),
        (lambda k: k.optimizers.SGD(0.1, momentum=0.9), ("momentum",)),
        (lambda k: k.optimizers.Adagrad(0.1), ("accumulator",)),
        (
            lambda k: k.optimizers.RMSprop(0.1, momentum=0.5, centered=True),
            ("rms", "momentum", "mg"),
        ),
        (lambda k: k.optimizers.Ftrl(0.1), ("accumulator", "linear")),
    ],
)
def test_keras_optimizer_slots_are_the_ones_the_update_uses(make, slots):
    """``build_keras_optimizer`` / ``keras_optimizer_slot`` (hookbridge/_migrate/
    optimizer_state.py) reach the slot lists Keras optimizers keep privately (``_momentums``,
    ``_accumulators``, ...; ``get_slot`` on ``optimizers.legacy``): each slot found is one of the
    optimizer's variables with its model variable's shape, and an Adam update reads ``m``."""
    keras = tf.keras
    optimizer = make(keras)
    var = tf.Variable(np.ones((3, 2), "float32"))
    _tfcompat.build_keras_optimizer(optimizer, [var])
    tracked = {id(v) for v in optimizer.variables}
    for slot in slots:
        found = _tfcompat.keras_optimizer_slot(optimizer, var, slot)
        assert found is not None, f"{type(optimizer).__name__} keeps its {slot!r} elsewhere"
        assert id(found) in tracked and tuple(found.shape) == (3, 2)
    if "m" in slots:
        m = _tfcompat.keras_optimizer_slot(optimizer, var, "m")
        m.assign(np.full((3, 2), 2.0, "float32"))
        optimizer.apply_gradients([(tf.zeros((3, 2)), var)])
        np.testing.assert_allclose(m.numpy(), 2.0 * 0.9, rtol=1e-6)  # m = beta_1 * m + 0


@pytest.mark.skipif(
    not str(getattr(tf.keras, "__version__", "2")).startswith("3"),
    reason="Keras 3's CompileMetrics container",
)
def test_compile_metrics_by_key_names_metrics_as_keras_logs_them():
    """``compile_metrics_by_key`` (issue 24 item 12) maps each of Keras 3's compiled metrics to
    the key Keras logs it under, from ``CompileMetrics._flat_metrics`` /
    ``_flat_weighted_metrics``: output prefixes, a repeated name, a weighted twin. Each mapped
    metric's ``result()`` is the value Keras logged under that key."""
    import numpy as np

    keras = tf.keras
    inputs = keras.Input((2,))
    model = keras.Model(
        inputs,
        {
            "out_a": keras.layers.Dense(1, name="out_a")(inputs),
            "out_b": keras.layers.Dense(1, name="out_b")(inputs),
        },
    )
    model.compile(
        "sgd",
        loss="mse",
        metrics={"out_a": ["mae", "mae"], "out_b": ["mse"]},
        weighted_metrics={"out_a": ["mae"], "out_b": ["mae"]},
    )
    x = np.random.default_rng(0).normal(size=(6, 2)).astype("float32")
    y = {"out_a": x[:, :1], "out_b": x[:, 1:]}
    logs = model.fit(x, y, sample_weight=np.linspace(0.5, 2, 6), epochs=1, verbose=0).history
    compiled = next(m for m in model.metrics if m.name == "compile_metrics")
    by_key = _tfcompat.compile_metrics_by_key(compiled)
    assert set(by_key) == {k for k in logs if not k.endswith("loss")}
    assert {"out_a_mae_1", "out_a_weighted_mae", "out_b_mae"} <= set(by_key)
    for key, metric in by_key.items():
        np.testing.assert_allclose(float(metric.result()), logs[key][-1], rtol=1e-6)
    assert _tfcompat.compile_metrics_by_key(model.metrics[0]) is None  # the loss tracker


def test_keras_private_model_attributes_still_read_by_tensorboard():
    """CallbackHook's proxy answers the private attributes tf_keras / Keras 2's TensorBoard
    reads (``_tfcompat.KERAS_*_ATTRIBUTE``): they must still be the names its code reads."""
    import inspect

    import conftest

    if conftest.KERAS3:
        pytest.skip("Keras 3's TensorBoard reads optimizer.learning_rate and iterations only")
    board = tf.keras.callbacks.TensorBoard
    source = inspect.getsource(board._collect_learning_rate)
    assert f'"{_tfcompat.KERAS_OPTIMIZER_SCHEDULE_ATTRIBUTE}"' in source
    assert "LearningRateSchedule" in source
    source = inspect.getsource(board)
    assert f"self.model.{_tfcompat.KERAS_TRAIN_COUNTER_ATTRIBUTE}" in source
    assert f"self.model.{_tfcompat.KERAS_TEST_COUNTER_ATTRIBUTE}" in source


def test_stop_deciders_settings_still_found(tmp_path):
    """What the multi-worker stop agreement reads of the hooks that decide alike on every
    worker (hookbridge/_hook_callback/deciders.py), from their private attributes."""
    train = tf.compat.v1.train
    with tf.Graph().as_default():
        step = train.get_or_create_global_step()
        loss = tf.constant(1.0, name="loss")
        assert _tfcompat.stop_at_step_last_step(train.StopAtStepHook(last_step=7)) == 7
        by_count = train.StopAtStepHook(num_steps=3)
        assert _tfcompat.stop_at_step_last_step(by_count) is None
        by_count.begin()
        with tf.compat.v1.Session() as sess:
            sess.run(step.initializer)
            by_count.after_create_session(sess, None)
        assert _tfcompat.stop_at_step_last_step(by_count) == 3
        assert _tfcompat.nan_tensor_hook_settings(train.NanTensorHook(loss)) == (loss, True)
        quiet = train.NanTensorHook(loss, fail_on_nan_loss=False)
        assert _tfcompat.nan_tensor_hook_settings(quiet) == (loss, False)
        listener = train.CheckpointSaverListener()
        saver = train.CheckpointSaverHook(str(tmp_path), save_steps=1, listeners=[listener])
        assert _tfcompat.checkpoint_saver_listeners(saver) == [listener]
        plain = train.CheckpointSaverHook(str(tmp_path), save_steps=1)
        assert _tfcompat.checkpoint_saver_listeners(plain) == []


def test_checkpoint_saver_hook_saver_and_saver_var_list(tmp_path):
    """The Saver a CheckpointSaverHook holds (``_saver`` / ``_scaffold``), forgetting the one
    it cached from the SAVERS collection, and what a Saver saves (``_var_list``): HookCallback
    refuses a Saver of another graph with them."""
    train = tf.compat.v1.train
    with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("v", initializer=1.0)
        saver = train.Saver()
        assert _tfcompat.saver_var_list(saver) == [v]
        assert _tfcompat.saver_var_list(train.Saver({"x": v})) == {"x": v}
        d = str(tmp_path)
        assert _tfcompat.checkpoint_saver_hook_saver(
            train.CheckpointSaverHook(d, save_steps=1, saver=saver)
        ) == (saver, "saver=")
        scaffold = train.Scaffold(saver=saver)
        assert _tfcompat.checkpoint_saver_hook_saver(
            train.CheckpointSaverHook(d, save_steps=1, scaffold=scaffold)
        ) == (saver, "scaffold=")
        plain = train.CheckpointSaverHook(d, save_steps=1)
        assert _tfcompat.checkpoint_saver_hook_saver(plain) == (None, "")
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
        assert plain._get_saver() is saver  # TF caches it in the attribute read above
        assert _tfcompat.checkpoint_saver_hook_saver(plain) == (saver, "saver=")
        _tfcompat.forget_checkpoint_saver_hook_saver(plain)
        assert _tfcompat.checkpoint_saver_hook_saver(plain) == (None, "")


def test_keras2_builtin_callback_names_follow_callback_list_module():
    """tf_keras / Keras 2 time the batch methods of lists holding a callback whose class name
    is not in the module defining ``CallbackList`` (the slow-callback warning)."""

    class Mine(tf.keras.callbacks.Callback):
        pass

    names = _tfcompat.keras2_builtin_callback_names(Mine())
    if hasattr(Mine(), "_implements_train_batch_hooks"):
        assert "History" in names and "ProgbarLogger" in names and "CallbackList" in names
        assert "Mine" not in names
    else:  # Keras 3: no such check
        assert names is None


def test_canned_estimator_arguments_and_head_settings():
    """``canned_estimator_arguments`` (the variables a canned Estimator's private ``_model_fn``
    closes over) and ``canned_head_settings`` (its head's private settings), read by
    ``hookbridge.keras_twin``: tensorflow-estimator 2.15 (TF 2.15 stack only)."""
    pytest.importorskip("tensorflow_estimator")
    columns = [tf.feature_column.numeric_column("x")]
    for est, reduction in (
        (tf.estimator.DNNClassifier([3], columns, n_classes=4), "sum_over_batch_size"),
        (tf.compat.v1.estimator.DNNClassifier([3], columns, n_classes=4), "weighted_sum"),
    ):
        args = _tfcompat.canned_estimator_arguments(est)
        assert list(args["hidden_units"]) == [3] and args["optimizer"] == "Adagrad"
        assert [c.key for c in args["feature_columns"]] == ["x"]
        assert args["dropout"] is None and args["batch_norm"] is False
        head = _tfcompat.canned_head_settings(args["head"])
        assert head["logits_dimension"] == 4 and head["n_classes"] == 4
        assert str(head["loss_reduction"]) == reduction
        assert head["weight_column"] is None and head["label_vocabulary"] is None


def test_default_session_makes_any_session_object_the_default():
    """``_tfcompat.default_session`` is what ``Session.as_default()`` returns; the bridge's
    session proxy (which has no session machinery) uses it so that ``Tensor.eval()`` reaches
    the proxy."""
    with tf.Graph().as_default():
        value = tf.constant(3.0)
        real = tf.compat.v1.Session()

        class Proxy:
            graph = real.graph

            def run(self, fetches, feed_dict=None):
                return real.run(fetches, feed_dict) * 2

        proxy = Proxy()
        with _tfcompat.default_session(proxy):
            assert tf.compat.v1.get_default_session() is proxy
            assert value.eval() == 6.0
        assert tf.compat.v1.get_default_session() is None
        real.close()


def test_keras_optimizer_counter_and_gradient_accumulators():
    """``keras_optimizer_counter`` / ``keras_gradient_accumulators`` (hookbridge/_migrate/
    optimizer_state.py ``set_step``): Keras 3 under ``gradient_accumulation_steps=k`` computes
    ``iterations`` from the private ``_iterations`` (batches) and sums gradients in the private
    ``_accumulated_gradients``; elsewhere the counter is ``iterations`` and there are none."""
    keras = tf.keras
    var = tf.Variable(np.ones((3, 2), "float32"))
    plain = keras.optimizers.Adam(0.1)
    _tfcompat.build_keras_optimizer(plain, [var])
    assert _tfcompat.keras_optimizer_counter(plain) == (plain.iterations, 1)
    assert _tfcompat.keras_gradient_accumulators(plain) == []
    if not str(getattr(keras, "__version__", "2")).startswith("3"):
        return
    optimizer = keras.optimizers.Adam(0.1, gradient_accumulation_steps=3)
    _tfcompat.build_keras_optimizer(optimizer, [var])
    counter, per_update = _tfcompat.keras_optimizer_counter(optimizer)
    (accumulator,) = _tfcompat.keras_gradient_accumulators(optimizer)
    assert per_update == 3 and tuple(accumulator.shape) == (3, 2)
    optimizer.apply_gradients([(tf.ones((3, 2)), var)])
    assert int(counter.numpy()) == 1 and int(optimizer.iterations.numpy()) == 0
    np.testing.assert_array_equal(accumulator.numpy(), np.ones((3, 2)))
    counter.assign(6)  # the counter Keras derives iterations from
    assert int(optimizer.iterations.numpy()) == 2


def test_keras_fit_start_reads_what_backup_and_restore_restored(tmp_path):
    """Where fit starts after BackupAndRestore's on_train_begin: Keras 3's model._initial_epoch,
    tf_keras / Keras 2's model._maybe_load_initial_counters_from_ckpt (a mid-epoch backup: the
    next step)."""
    keras = tf.keras

    class Interrupt(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 2:
                raise RuntimeError("interrupted")

    def model():
        built = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        built.compile(optimizer="sgd", loss="mse")
        return built

    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    first = model()
    assert _tfcompat.keras_fit_start(first, 2, 0) == (0, 0)
    assert _tfcompat.keras_fit_start(first, 2, 1) == (1, 0)
    with pytest.raises(RuntimeError, match="interrupted"):
        first.fit(x, y, batch_size=4, epochs=4, verbose=0,
                  callbacks=[keras.callbacks.BackupAndRestore(str(tmp_path)), Interrupt()])  # fmt: skip
    resumed = model()
    backup = keras.callbacks.BackupAndRestore(str(tmp_path))
    backup.set_model(resumed)
    backup.on_train_begin()
    assert _tfcompat.keras_fit_start(resumed, 2, 0) == (2, 0)
    assert _tfcompat.keras_fit_start(keras.layers.Dense(1), 2, 1) == (1, 0)  # no fit runs it


def test_keras_optimizer_owns_the_variables_it_was_built_on():
    """``keras_optimizer_owns`` (hookbridge/_migrate/optimizer_owner.py): a Keras optimizer
    built on some variables (Keras 3 ``_get_variable_index``, Keras 2.11+ ``_index_dict``,
    ``optimizers.legacy`` slots) says which; unbuilt, it cannot say (None)."""
    keras = tf.keras
    makes = [keras.optimizers.Adam]
    if not str(getattr(keras, "__version__", "2")).startswith("3"):  # Keras 3 has no legacy
        makes.append(keras.optimizers.legacy.Adam)
    for make in makes:
        optimizer = make(0.1)
        mine, other = tf.Variable(np.ones((2,), "float32")), tf.Variable(np.ones((3,), "float32"))
        assert _tfcompat.keras_optimizer_owns(optimizer, mine) is None, make
        _tfcompat.build_keras_optimizer(optimizer, [mine])
        assert _tfcompat.keras_optimizer_owns(optimizer, mine) is True, make
        assert _tfcompat.keras_optimizer_owns(optimizer, other) is False, make
        assert _tfcompat.keras_optimizer_slot(optimizer, other, "m") is None, make
        assert _tfcompat.keras_optimizer_slot(optimizer, mine, "m") is not None, make


def test_tensorflows_upgrader_is_where_upgrade_reads_it():
    tf_upgrade_v2, ast_edits = _tfcompat.tf_upgrader()
    spec = tf_upgrade_v2.TFAPIChangeSpec()
    for field in ("symbol_renames", "function_transformers", "module_deprecations"):
        assert isinstance(getattr(spec, field), dict), field
    assert spec.symbol_renames["tf.get_variable"] == "tf.compat.v1.get_variable"
    count, text, _logs, _errors = ast_edits.ASTCodeUpgrader(spec).update_string_pasta(
        "import tensorflow as tf\ntf.get_variable('v', [1])\n", "x.py"
    )
    assert (count, text.splitlines()[1]) == (1, "tf.compat.v1.get_variable('v', [1])")
    assert ast_edits.ERROR == "ERROR" and ast_edits.WARNING == "WARNING"
    assert ("tensorflow", None) in tf_upgrade_v2.TFAPIImportAnalysisSpec().imports_to_detect


def test_keras_optimizer_config_reads_the_hyperparameters_of_a_gone_graph():
    """keras_twin reads a canned Estimator's Keras optimizer's settings from its private
    ``_hyper``: after training they are variables of the Estimator's graph."""
    try:
        optimizer = tf.keras.optimizers.legacy.Adam(0.01, beta_1=0.8, epsilon=1e-6)
    except (AttributeError, ImportError):  # Keras 3's legacy classes raise ImportError
        pytest.skip("Keras 3 has no legacy OptimizerV2, which canned Estimators (TF 2.15) take")
    with tf.Graph().as_default():
        variable = tf.Variable(1.0)
        optimizer.apply_gradients([(tf.constant(1.0), variable)])
    assert not isinstance(optimizer._hyper["learning_rate"], float), (
        f"TF {tf.__version__}: OptimizerV2 no longer keeps its hyperparameters as variables in "
        "_hyper: update _tfcompat.keras_optimizer_config"
    )
    config = _tfcompat.keras_optimizer_config(optimizer)
    assert {k: config[k] for k in ("learning_rate", "beta_1", "beta_2", "epsilon")} == {
        "learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.999, "epsilon": 1e-6}


# ---- model_fn: mfnsubjects ----
def test_default_export_outputs_is_the_default_serving_predict_output():
    """hookbridge's EstimatorSpec (TF 2.21) validates a PREDICT spec's export_outputs with
    TensorFlow's private export_utils.get_export_outputs, as tensorflow-estimator does."""
    with tf.Graph().as_default():
        predictions = {"y": tf.constant([1.0])}
        outputs = _tfcompat.default_export_outputs(None, predictions)
        assert list(outputs) == ["serving_default"]
        assert type(outputs["serving_default"]).__name__ == "PredictOutput"
        assert outputs["serving_default"].outputs == predictions
        with pytest.raises(TypeError, match="ExportOutput"):
            _tfcompat.default_export_outputs({"a": 1}, predictions)


# ---- twins: twinopt ----
def test_keras_optimizer_subclass_hooks_of_the_twins_optimizers():
    """The Keras 3 / Keras 2.11+ private hooks the twins' optimizers use
    (``twins/optimizer_kernels.py``): the index of a variable in the slot lists, a slot created
    like a variable, the Keras 2 learning rate set, the Keras 2 built flag."""
    keras = tf.keras

    class Probe(keras.optimizers.Optimizer):
        def __init__(self):
            if str(getattr(keras, "__version__", "2")).startswith("3"):
                super().__init__(learning_rate=0.25, name="probe")
            else:
                super().__init__(name="probe", jit_compile=False)
                _tfcompat.keras2_optimizer_set_learning_rate(self, 0.25)

        def build(self, var_list):
            super().build(var_list)
            self._accumulators = [
                _tfcompat.keras_optimizer_slot_variable(self, v, "accumulator", 0.5)
                for v in var_list]
            _tfcompat.mark_keras_optimizer_built(self)

        def update_step(self, gradient, variable, learning_rate=None):
            pass

    a, b = tf.Variable([1.0, 2.0]), tf.Variable([[3.0]])
    probe = Probe()
    probe.build([a, b])
    assert np.isclose(float(np.asarray(probe.learning_rate)), 0.25)
    assert _tfcompat.keras_optimizer_variable_index(probe, b) == 1, (
        "the Keras optimizer's variable index moved: update keras_optimizer_variable_index")
    slot = probe._accumulators[_tfcompat.keras_optimizer_variable_index(probe, a)]
    np.testing.assert_array_equal(np.asarray(slot.numpy()), [0.5, 0.5])
    assert _tfcompat.keras_optimizer_owns(probe, a) is True, (
        "the Keras 2 built flag moved: update mark_keras_optimizer_built")
    assert _tfcompat.keras_optimizer_slot(probe, b, "accumulator") is probe._accumulators[1]


# ---- twins: fclayers ----
def test_feature_column_internals_are_tf_own_feature_column_code():
    """The column layers run fc's private code: each piece is there, with the signature used."""
    import inspect

    fc = _tfcompat.feature_column_internals()
    assert list(inspect.signature(fc.weighted_sum).parameters) == [
        "column", "transformation_cache", "state_manager", "sparse_combiner", "weight_var"]
    assert fc.scope_name("temp max") == "temp_max"
    for name in ("create_variable", "get_variable", "add_resource", "has_resource", "get_resource"):
        assert hasattr(fc.state_manager, name), f"fc StateManager lost {name}"
    column = tf.feature_column.embedding_column(
        tf.feature_column.categorical_column_with_identity("a", 3), 2)
    assert isinstance(column, (fc.embedding, fc.dense, fc.feature_column))
    assert isinstance(column.categorical_column, fc.categorical)
    seq = tf.feature_column.sequence_categorical_column_with_identity("s", 3)
    assert isinstance(seq, fc.sequence)
    cache = fc.cache({"a": tf.constant([[1, -1]], tf.int64)})
    ids = column.categorical_column.get_sparse_tensors(cache, None).id_tensor
    assert ids.values.numpy().tolist() == [1]  # -1 dropped
    assert "max_norm" in inspect.signature(fc.lookup_sparse).parameters
    assert "max_norm" in inspect.signature(fc.lookup_sparse_unsafe).parameters
    assert fc.shared_v1.__name__ == "_SharedEmbeddingColumn"
    assert "shared_embedding_column_creator" in fc.shared_v2._fields


def test_keras_weight_variable_is_the_tf_variable():
    layer = tf.keras.layers.Dense(1)
    layer.build((None, 2))
    variable = _tfcompat.keras_weight_variable(layer.kernel)
    assert isinstance(variable, tf.Variable)
    layer.kernel.assign([[1.0], [2.0]])
    assert variable.numpy().tolist() == [[1.0], [2.0]]


# ---- model_fn: mfncore ----
def test_fresh_tf1_graph_state_gives_a_graph_its_own_variable_store_and_collections():
    """model_fn_model runs each model_fn call with a TF1 variable store and collections of its
    own (a FuncGraph shares both with the eager graph): Graph._collections and
    variable_scope._VariableStore / with_variable_store."""
    v1 = tf.compat.v1
    with tf.Graph().as_default() as graph:
        outer = v1.get_variable("v", [1])
        with _tfcompat.fresh_tf1_graph_state(graph):
            assert v1.global_variables() == []
            inner = v1.get_variable("v", [1])  # no "already exists": a store of its own
            assert v1.global_variables() == [inner]
        assert v1.global_variables() == [outer]
        with pytest.raises(ValueError, match="already exists"):
            v1.get_variable("v", [1])


def test_keras3_weights_made_outside_add_weight_are_tracked_and_hold_a_tf_variable():
    """Keras 3's private Layer._track_variable and Variable._value (model_fn_model's weights)."""
    if not str(getattr(tf.keras, "__version__", "2")).startswith("3"):
        pytest.skip("Keras 3 only: tf_keras weights are tf.Variables")
    keras = tf.keras
    layer = keras.layers.Layer()
    weight = keras.Variable(initializer=np.zeros(2, "float32"), name="kernel")
    _tfcompat.keras3_track_weight(layer, weight)
    assert layer.weights == [weight] and layer.trainable_weights == [weight]
    variable = _tfcompat.keras3_tf_variable(weight)
    assert isinstance(variable, tf.Variable)
    variable.assign([1.0, 2.0])
    np.testing.assert_array_equal(weight.numpy(), [1.0, 2.0])

# ---- twins: twinbuild ----
def test_keras3_track_loss_counts_a_custom_train_steps_loss_as_keras_logs_it():
    """keras_twin's two-optimizer train_step counts its loss as Keras 3's own train_step does
    (private ``_loss_tracker``); Keras 2 / tf_keras count it in ``compute_loss``."""
    keras = tf.keras

    class Custom(keras.Model):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
                _tfcompat.keras3_track_loss(self, loss, x)
            grads = tape.gradient(loss, self.trainable_variables)
            self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
            return self.compute_metrics(x, y, y_pred, None)

    inputs = keras.Input((2,))
    x = np.arange(8, dtype="float32").reshape(4, 2)
    y = np.ones((4, 1), "float32")
    logs = {}
    for cls in (Custom, keras.Model):
        model = cls(inputs, keras.layers.Dense(1, kernel_initializer="ones")(inputs))
        model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
        logs[cls] = model.fit(x, y, batch_size=2, epochs=1, verbose=0).history["loss"]
    assert logs[Custom] == logs[keras.Model] and logs[Custom][0] > 0, (
        f"{logs}: Keras moved the loss tracker: update _tfcompat.keras3_track_loss")


def test_keras_tensor_inputs_traces_a_branch_to_the_models_inputs():
    """The order check reads which named inputs a Concatenate input is computed from."""
    keras = tf.keras
    a = keras.Input((1,), name="a", dtype="string")
    b = keras.Input((1,), name="b", dtype="string")
    one_hot = keras.layers.StringLookup(vocabulary=["x", "y"], output_mode="one_hot")(a)
    cross = keras.layers.HashedCrossing(5, output_mode="one_hot")((a, b))
    dense = keras.layers.Dense(2)(keras.layers.Concatenate()([one_hot, cross]))
    assert _tfcompat.keras_tensor_inputs(one_hot) == {"a"}
    assert _tfcompat.keras_tensor_inputs(cross) == {"a", "b"}, "Keras moved _keras_history"
    assert _tfcompat.keras_tensor_inputs(dense) == {"a", "b"}
    assert _tfcompat.keras_tensor_inputs(tf.constant(1.0)) is None


# ---- model_fn: mfngan ----
def test_tf1_name_scope_starts_a_cond_branch_at_the_root_as_a_tf1_graph_does():
    """In a tf.function a cond branch inherits its op's name scope (TF2); the TF1 graph's branch
    starts at the root: under init_scope too (where an optimizer makes beta1_power)."""
    seen = {}

    def branch():
        assert getattr(tf.compat.v1.get_default_graph(), "is_control_flow_graph", False), (
            "TF moved ControlFlowFuncGraph.is_control_flow_graph: update _tfcompat.tf1_name_scope"
        )
        seen["tf2"] = tf.get_current_name_scope()
        seen["branch"] = _tfcompat.tf1_name_scope()
        with tf.name_scope("inner"), tf.init_scope():
            seen["lifted"] = _tfcompat.tf1_name_scope()
        return tf.constant(1.0)

    @tf.function
    def traced():
        with tf.name_scope("train"):
            seen["outside"] = _tfcompat.tf1_name_scope()
            return tf.cond(tf.constant(True), branch, lambda: tf.constant(0.0))

    traced()
    assert seen["tf2"].startswith("train/cond"), seen
    assert seen == {**seen, "outside": "train/", "branch": "", "lifted": "inner/"}, seen
    with tf.Graph().as_default():  # a TF1 graph: its own scopes, nothing dropped
        with tf.name_scope("train"):
            tf.cond(tf.constant(True), branch, lambda: tf.constant(0.0))
    assert seen["tf2"] == "" and seen["branch"] == "" and seen["lifted"] == "inner/", seen


# ---- mfnspec ----
def test_tf1_graph_equality_makes_function_graph_variables_hashable_for_the_block():
    variable = tf.Variable(1.0)

    @tf.function
    def traced():
        with pytest.raises(TypeError, match="unhashable"):
            hash(variable)
        with _tfcompat.tf1_graph_equality():
            assert {variable, variable} == {variable}  # hashable, by identity
            x = tf.constant(1.0)
            assert (x == tf.constant(1.0)) is False  # identity, as in a TF1 graph
        with pytest.raises(TypeError, match="unhashable"):
            hash(variable)
        return variable.read_value()

    traced()


def test_captured_handles_names_the_placeholders_a_function_writes_a_variable_through():
    variable, other = tf.Variable(1.0), tf.Variable(2.0)
    seen = {}

    @tf.function
    def traced():
        variable.assign_add(1.0)
        other.assign_add(1.0)
        graph = tf.compat.v1.get_default_graph()
        handles = _tfcompat.captured_handles(graph, [variable])
        writes = [op for op in graph.get_operations() if op.type == "AssignAddVariableOp"]
        seen["local"] = [id(op.inputs[0]) in handles for op in writes]

    traced()
    assert seen["local"] == [True, False]


# ---- mfnspec2 ----
def test_export_output_classes_are_tensorflows_own():
    classes = _tfcompat.export_output_classes()
    assert sorted(classes) == ["ClassificationOutput", "PredictOutput", "RegressionOutput"]
    with tf.Graph().as_default():
        scores = tf.compat.v1.placeholder(tf.float32, [None, 3])
        serialized = tf.compat.v1.placeholder(tf.string, [None])
        sdef = classes["ClassificationOutput"](scores=scores).as_signature_def(
            {"inputs": serialized}
        )
    assert sdef.method_name == "tensorflow/serving/classify"
    assert sorted(sdef.outputs) == ["scores"]


# ---- twinflat ----
def test_concrete_call_flat_runs_the_traced_function_on_tf_own_binding():
    assert hasattr(type(tf.function(lambda: 0).get_concrete_function()), "_call_flat"), (
        f"TensorFlow {tf.__version__} moved ConcreteFunction._call_flat: update "
        "hookbridge/_tfcompat/functions.py (concrete_call_flat)"
    )
    total = tf.Variable(0.0)
    dataset = tf.data.Dataset.from_tensor_slices({"a": [1.0, 2.0, 3.0], "b": [10.0, 20.0, 30.0]})

    @tf.function
    def step(iterator):
        batch = next(iterator)
        total.assign_add(batch["a"] * batch["b"])
        return {"total": total.read_value(), "a": batch["a"]}

    iterator = iter(dataset)
    concrete = step.get_concrete_function(iterator)
    flat = _tfcompat.concrete_flat_inputs(concrete, iterator)
    assert len(flat) == 1 and flat[0].dtype == tf.resource  # the iterator's own handle
    out = _tfcompat.concrete_call_flat(concrete, flat, concrete.captured_inputs)
    assert sorted(out) == ["a", "total"] and float(out["total"]) == 10.0  # structured outputs
    assert float(step(iterator)["total"]) == 50.0  # the same iterator, the same variable
    out = _tfcompat.concrete_call_flat(concrete, flat, concrete.captured_inputs)
    assert float(out["total"]) == 140.0 and float(out["a"]) == 3.0
    with pytest.raises(tf.errors.OutOfRangeError):  # the end of the data, as step() raises it
        _tfcompat.concrete_call_flat(concrete, flat, concrete.captured_inputs)
    with pytest.raises(TypeError):
        _tfcompat.concrete_flat_inputs(concrete, iterator, iterator)


def test_keras3_iterator_function_is_the_tf_function_inside_train_function():
    import conftest

    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(np.ones((4, 2), "float32"), np.ones((4, 1), "float32"), verbose=0)
    inner = _tfcompat.keras3_iterator_function(model.train_function)
    if not conftest.KERAS3:  # Keras 2.15 / tf_keras: train_function is the tf.function itself
        assert inner is None and hasattr(model.train_function, "get_concrete_function")
        return
    freevars = model.train_function.__code__.co_freevars
    assert _tfcompat.KERAS3_ITERATOR_FUNCTION in freevars, (
        f"Keras {tf.keras.__version__} moved train_function's {_tfcompat.KERAS3_ITERATOR_FUNCTION}"
        f" (its closure holds {freevars}): update hookbridge/_tfcompat/functions.py"
    )
    assert inner is not None and hasattr(inner, "get_concrete_function")
    iterator = iter(
        tf.data.Dataset.from_tensor_slices((np.ones((2, 2), "f"), np.ones((2, 1), "f"))).batch(2)
    )
    concrete = inner.get_concrete_function(iterator)
    assert isinstance(concrete.structured_outputs, tf.experimental.Optional)
    eager = model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    assert eager is None
    model.make_train_function()
    assert _tfcompat.keras3_iterator_function(model.train_function) is None  # run eagerly


# ---- ordertrap ----
def test_keras_concatenated_reads_every_last_axis_concatenation_and_no_other():
    keras = tf.keras
    a, b, c = (keras.Input((n,), name=k) for n, k in [(1, "a"), (2, "b"), (3, "c")])
    layer = keras.layers.Concatenate(name="cat")([b, a])
    op = keras.ops.concatenate([c, a], axis=1) if hasattr(keras, "ops") else tf.concat([c, a], 1)
    opaque = keras.layers.Lambda(lambda t: tf.concat(t, -1))([a, b])
    first_axis = keras.layers.Concatenate(axis=0)([a, a])

    def names(tensor):
        return [t.name.split(":")[0] for t in _tfcompat.keras_concatenated(tensor)]

    assert names(layer) == ["b", "a"], "Keras moved _keras_history/_inbound_nodes"
    assert names(op) == ["c", "a"], "the functional concatenate op's node moved"
    assert _tfcompat.keras_concatenated(opaque) is None
    assert _tfcompat.keras_concatenated(first_axis) is None
    assert _tfcompat.keras_concatenated(a) is None
    assert _tfcompat.keras_tensor_layer(layer).name == "cat"
    assert _tfcompat.keras_tensor_layer(tf.constant(1.0)) is None


# ---- hostcall2 ----
def test_update_op_input_rewires_one_input_of_a_traced_op():
    seen = {}

    @tf.function
    def traced():
        a, b = tf.constant(1.0), tf.constant(5.0)
        total = tf.add(a, tf.constant(2.0))
        _tfcompat.update_op_input(total.op, 0, b)
        seen["inputs"] = [t.name for t in total.op.inputs]
        return total

    assert float(traced()) == 7.0, "Operation._update_input no longer rewires the edge"
    assert len(seen["inputs"]) == 2


def test_keras_steps_per_execution_reads_what_compile_set():
    model = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=3)
    assert _tfcompat.keras_steps_per_execution(model) == 3
    model.compile(optimizer="sgd", loss="mse")
    assert _tfcompat.keras_steps_per_execution(model) == 1
