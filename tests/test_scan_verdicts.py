"""``hookbridge scan`` verdicts a team gates on (issue 31 item 16), each beside what the bridge
really does.

The fixture ``tests/fixtures/census_project`` has the shapes of tensorflow/models' census job
(hooks built by name through ``hooks_helper.get_train_hooks(names, **kwargs)``, tensor names
passed as keyword arguments) and of BERT's ``model_fn`` (hooks given objects of the model graph);
the bridge's behaviour each verdict states is measured here: the bridge's real graph
(``SideGraph``), ``HookCallback`` in Keras ``fit`` next to ``MonitoredSession``, and
``keras_twin`` on real canned Estimators (TF 2.15).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hookbridge._migrate.scan import bridge_graph, findings, scan

ROOT = Path(__file__).resolve().parent.parent
CENSUS = ROOT / "tests" / "fixtures" / "census_project"
C, U, N, R, V, E = (
    findings.CONFORMS,
    findings.CUSTOM,
    findings.NEEDS_TENSOR,
    findings.REMOVED_API,
    findings.UNVERIFIED,
    findings.ENTRY_POINT,
)


@pytest.fixture(scope="module")
def census():
    return scan(CENSUS)


def _by(result, location: str, name: str, kind: str | None = None):
    (match,) = [
        x
        for x in result.findings
        if f"{x.path}:{x.line}" == location and x.name == name and kind in (None, x.kind)
    ]
    return match


def _write(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.py").write_text(source)
    return folder


# ------------------------------------------------------------ 1. the worst of its parts
def test_a_hook_is_never_better_than_what_it_reads(census):
    # BERT's shape: LoggingTensorHook({"total_loss": total_loss}) in a model_fn.
    hook = _by(census, "census/tagger.py:14", "LoggingTensorHook", "hook")
    assert _by(census, "census/tagger.py:14", "total_loss").status == N
    assert hook.status == N
    assert "conforms in fit (HookCallback)" in hook.detail  # the class itself does
    assert "from what it reads: total_loss needs-tensor (census/tagger.py:14)" in hook.detail
    assert hook.action.startswith("log it from Keras as a metric")
    # Every hook row, wherever it is: never better than a tensor row it reads.
    by_line = {}
    for x in census.findings:
        by_line.setdefault((x.path, x.line), []).append(x)
    for x in census.findings:
        if x.kind == "tensor" and x.path == "census/tagger.py":
            (hook,) = [h for h in by_line[(x.path, x.line)] if h.kind == "hook"] or [
                h for h in by_line[(x.path, x.line - 1)] if h.kind == "hook"
            ]
            assert findings.exit_code_of(hook.status) >= findings.exit_code_of(x.status)


def test_the_per_entry_point_summary_and_the_exit_code_follow(census, tmp_path):
    spec = census.by_entry()["census/tagger.py:22 tf.estimator.EstimatorSpec"]
    assert [(x.line, x.status) for x in spec] == [(14, N), (15, N), (19, N), (20, N)]
    # The same model_fn with every hook reading what fit has: exit 0.
    source = (CENSUS / "census" / "tagger.py").read_text()
    good = (
        "import tensorflow.compat.v1 as tf\n"
        "def hooks():\n"
        "    return [tf.train.LoggingTensorHook({'loss': 'loss:0'}, every_n_iter=1),\n"
        "            tf.train.CheckpointSaverHook('dir', save_steps=10)]\n"
    )
    assert scan(_write(tmp_path / "good", good)).exit_code() == findings.EXIT_OK
    bad = good.replace("'loss:0'", "'dense/BiasAdd:0'")
    result = scan(_write(tmp_path / "bad", bad))
    assert _by(result, "job.py:3", "LoggingTensorHook").status == N
    assert result.exit_code() == findings.EXIT_ATTENTION
    assert "total_loss" in source


# ------------------------------------------------ 2. summary ops and Savers, as tensors are
TAGGER_JOB = """
import tensorflow as tf
v1 = tf.compat.v1

def model_fn(features, labels, mode, params):
    x = v1.placeholder(tf.float32, [None, 2], name="x")
    w = v1.get_variable("dense/kernel", [2, 1])
    loss = tf.reduce_mean(tf.matmul(x, w), name="total_loss")
    v1.train.get_or_create_global_step()
    summary = v1.summary.scalar("total_loss", loss)
    saver = v1.train.Saver()
    return [
        v1.train.LoggingTensorHook({"loss": loss}, every_n_iter=1),
        v1.train.SummarySaverHook(save_steps=1, output_dir=params["dir"], summary_op=summary),
        v1.train.CheckpointSaverHook(params["dir"], save_steps=1, saver=saver),
    ]
"""


def test_summary_ops_and_savers_of_the_model_graph_are_judged_as_its_tensors(tmp_path):
    result = scan(_write(tmp_path, TAGGER_JOB))
    rows = {(x.line, x.kind, x.name): x.status for x in result.findings}
    assert rows[(13, "tensor", "loss")] == N
    assert rows[(14, "tensor", "summary")] == N
    assert rows[(15, "tensor", "saver")] == N
    assert {
        rows[(line, "hook", name)]
        for line, name in (
            (13, "LoggingTensorHook"),
            (14, "SummarySaverHook"),
            (15, "CheckpointSaverHook"),
        )
    } == {N}
    assert result.exit_code() == findings.EXIT_ATTENTION
    # Built outside a model_fn, the tree cannot tell the graph: unverified, for all three.
    loose = TAGGER_JOB.replace("model_fn(features, labels, mode, params)", "build(params)")
    rows = {(x.line, x.name): x.status for x in scan(_write(tmp_path / "b", loose)).findings}
    assert rows[(13, "loss")] == rows[(14, "summary")] == rows[(15, "saver")] == V


def _tagger_hooks(directory: str):
    """TAGGER_JOB's model_fn, run for real: its graph and the three hooks."""
    import tensorflow as tf

    namespace: dict = {}
    exec(TAGGER_JOB, namespace)  # the test's own source, the one the scan reads above
    graph = tf.Graph()
    with graph.as_default():
        hooks = namespace["model_fn"](None, None, None, {"dir": directory})
    return graph, hooks


def _fit(hook) -> None:
    import tensorflow as tf

    import hookbridge

    keras = tf.keras  # the stack's Keras (tf_keras under TF_USE_LEGACY_KERAS=1)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    model.fit(x, y, batch_size=4, verbose=0, callbacks=[hookbridge.HookCallback([hook])])


def test_what_the_bridge_does_with_them_is_what_the_rows_say(tmp_path):
    """Natively each hook runs on its model graph; in fit, the tensor and the summary op raise
    (not elements of the bridge's graph) and the Saver is refused (it would not save them)."""
    import tensorflow as tf

    native_dir, bridged_dir = str(tmp_path / "native"), str(tmp_path / "bridged")
    graph, hooks = _tagger_hooks(native_dir)
    with graph.as_default():
        x = graph.get_tensor_by_name("x:0")
        with tf.compat.v1.train.MonitoredSession(hooks=hooks) as session:
            session.run(graph.get_tensor_by_name("total_loss:0"), {x: np.ones((4, 2))})
    native = dict(tf.train.list_variables(native_dir))
    assert "dense/kernel" in native  # the Saver of the model graph saves the model's variables

    _, (logging, summary, saver) = _tagger_hooks(bridged_dir)
    for hook in (logging, summary):
        with pytest.raises(ValueError, match="graph"):
            _fit(hook)
    _, (_, _, saver) = _tagger_hooks(bridged_dir)
    with pytest.raises(ValueError, match="Saver built on another graph"):
        _fit(saver)  # what the row says: refused, not the model's variables
    assert tf.train.latest_checkpoint(bridged_dir) is None


# ---------------------------------------------------------- 3. only real mirrors conform
def test_every_name_of_the_bridges_graph_conforms_and_no_other_model_name(census):
    import tensorflow as tf

    from hookbridge._hook_callback.graph import SideGraph

    keras = tf.keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    side = SideGraph(log_keys=["loss"], weights=model.weights)
    names = {op.name for op in side.graph.get_operations()}
    mirrors = {n for n in names if n.startswith("model/")}
    assert len(mirrors) == 4 * len(model.weights)  # the variable, its read, assign, check
    for name in mirrors | {"running_mean/loss", "loss", "global_step"}:
        assert bridge_graph.tensor_status(f"{name}:0").status == C, name
    # Names under the same scopes that the graph does not have.
    for name in (
        "model/logits/BiasAdd",
        "model/000/kernel/Adam",
        "model/dense/kernel",
        "running_mean/accuracy",
        "model/00/kernel",
    ):
        assert name not in names
        assert bridge_graph.tensor_status(f"{name}:0").status == N, name
    # The fixture: the activation needs a tensor, the mirror conforms, the hook is the worse.
    assert _by(census, "census/tagger.py:16", "'model/logits/BiasAdd:0'").status == N
    assert (
        _by(census, "census/tagger.py:16", "'model/000/kernel/Read/ReadVariableOp:0'").status == C
    )
    assert _by(census, "census/tagger.py:15", "LoggingTensorHook").status == N


def test_a_name_under_model_that_is_no_mirror_fails_in_fit_and_a_mirror_runs():
    import tensorflow as tf

    from hookbridge._hook_callback.names import MissingTensorError

    v1 = tf.compat.v1
    with pytest.raises(MissingTensorError, match="model/logits/BiasAdd:0"):
        _fit(v1.train.LoggingTensorHook({"b": "model/logits/BiasAdd:0"}, every_n_iter=1))
    _fit(v1.train.LoggingTensorHook({"k": "model/000/kernel/Read/ReadVariableOp:0"}, 1))


# ------------------------------------------ 4, 5. keyword arguments into a hook factory
def test_tensors_passed_through_a_hook_factorys_keywords_are_reported(census):
    # census: run_census -> run_loop(tensors_to_log=...) -> get_train_hooks(**options)
    # -> REGISTRY.get(name)(**options) -> LoggingTensorHook(tensors=tensors_to_log).
    rows = {(x.line, x.name): x for x in census.findings if x.path == "census/main.py"}
    truediv = rows[(34, "'{scope}head/truediv'")]
    assert truediv.status == N and truediv.kind == "tensor"
    assert "passed as tensors_to_log= to run_loop()" in truediv.detail
    assert "LoggingTensorHook(tensors=) at census/utils/hooks_helper.py:26" in truediv.detail
    assert rows[(34, "'{scope}head/weighted_loss/Sum'")].status == N
    # In run_loop the names are a parameter reformatted: its callers' values are listed above.
    passed = _by(census, "census/run_loop.py:15", "tensors_to_log")
    assert passed.status == V and "listed where they pass it" in passed.detail
    # The hook in hooks_helper is the worse for what its callers give it.
    hook = _by(census, "census/utils/hooks_helper.py:26", "LoggingTensorHook", "hook")
    assert "'{scope}head/truediv' needs-tensor (census/main.py:34)" in hook.detail


def test_a_hook_factory_of_the_scanned_code_is_resolved(census):
    factory = _by(census, "census/run_loop.py:14", "hooks_helper.get_train_hooks")
    assert "outside the scanned code" not in factory.detail
    assert factory.detail.startswith(
        "hooks built by get_train_hooks() at census/utils/hooks_helper.py:10: "
    )
    for part in (
        "LoggingTensorHook removed-api",
        "StepCounterHook removed-api",
        "MetricLoggerHook custom",
        "'learning_rate' needs-tensor",
    ):
        assert part in factory.detail, part
    assert factory.status == R  # the worst: spellings first (tf.estimator.LoggingTensorHook)
    assert census.by_entry()["census/run_loop.py:18 model.train"] == [factory]
    assert census.exit_code() == findings.EXIT_ATTENTION


def test_a_factory_whose_hooks_all_conform_conforms(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helper.py").write_text(
        "import tensorflow as tf\n"
        "def make(names, **options):\n"
        "    return [REGISTRY[n](**options) for n in names]\n"
        "def logging(tensors=None, **unused):\n"
        "    if tensors is None:\n"
        "        tensors = {'l': 'loss'}\n"
        "    return tf.compat.v1.train.LoggingTensorHook(tensors, 10)\n"
        "REGISTRY = {'logging': logging}\n"
    )
    (tmp_path / "pkg" / "job.py").write_text(
        "import tensorflow as tf\nfrom pkg import helper\n"
        "def run(est, fn):\n"
        "    est.train(fn, hooks=helper.make(['logging'], tensors={'g': 'global_step'}))\n"
    )
    result = scan(tmp_path)
    factory = _by(result, "pkg/job.py:4", "helper.make")
    assert factory.status == C and result.exit_code() == findings.EXIT_OK
    (tmp_path / "pkg" / "job.py").write_text(
        (tmp_path / "pkg" / "job.py").read_text().replace("'global_step'", "'acc'")
    )
    result = scan(tmp_path)
    assert _by(result, "pkg/job.py:4", "helper.make").status == N
    assert _by(result, "pkg/job.py:4", "'acc'").status == N


# --------------------------------------------------------- 6. one row per constructor
def test_each_estimator_constructor_is_one_row(census):
    entries = [x for x in census.findings if x.kind == "entry-point"]
    for x in entries:
        same_line = [y for y in census.findings if (y.path, y.line) == (x.path, x.line)]
        assert not [y for y in same_line if y.kind == "spelling"], x
    estimator = _by(census, "census/tagger.py:22", "tf.estimator.EstimatorSpec")
    assert estimator.status == R
    assert estimator.detail.startswith("tf.estimator.EstimatorSpec does not import on TF >= 2.16")
    assert "model_fn's hooks" in estimator.detail


# ------------------------------------------------- 7. what keras_twin does with the columns
def test_canned_rows_say_what_keras_twin_does(census):
    # Per column: its type and whether keras_twin builds it (tests/test_scan_columns.py has
    # the details); here the fixture's rows, the census ones read across three modules.
    quick = {x.line: x for x in census.findings if x.path == "census/quick.py"}
    assert "builds its Keras model (2 feature columns" in quick[9].detail
    assert "categorical_column_with_vocabulary_list (color), numeric_column (size, z)" in (
        quick[18].detail
    )
    assert "keras_twin refuses weight_column='w'" in quick[22].detail
    main = {x.line: x for x in census.findings if x.path == "census/main.py"}
    for line in (11, 13, 16):
        assert "builds its Keras model" in main[line].detail, main[line].detail
        assert all(c.builds for c in main[line].columns)
    assert [c.type for c in main[13].columns] == [
        "numeric_column",
        "numeric_column",
        "indicator_column",
        "embedding_column",
    ]


def test_keras_twin_refuses_what_the_rows_say():
    """On TF 2.15 (tensorflow-estimator): what census/quick.py's rows say keras_twin refuses."""
    tf = pytest.importorskip("tensorflow")
    if not hasattr(tf, "estimator"):
        pytest.skip("tf.estimator: TF <= 2.15 only")
    import hookbridge

    fc = tf.feature_column
    weighted = tf.estimator.LinearRegressor(
        feature_columns=[fc.numeric_column("x")], weight_column="w"
    )
    with pytest.raises(ValueError, match="weight_column"):
        hookbridge.keras_twin(weighted)


def test_a_factory_imported_under_a_longer_path_than_the_scanned_root_is_resolved(tmp_path):
    # tensorflow/models imports `from official.r1.utils.logs import hooks_helper`; a scan of
    # `official/` names that module `r1.utils.logs.hooks_helper`.
    import shutil

    shutil.copytree(CENSUS / "census", tmp_path / "official" / "census")
    for path in (tmp_path / "official").rglob("*.py"):
        path.write_text(path.read_text().replace("from census", "from official.census"))
    result = scan(tmp_path / "official")
    factory = _by(result, "census/run_loop.py:14", "hooks_helper.get_train_hooks")
    assert factory.detail.startswith("hooks built by get_train_hooks()")
    assert _by(result, "census/main.py:34", "'{scope}head/truediv'").status == N
