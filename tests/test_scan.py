"""``hookbridge scan``: an AST inventory of a TF1 codebase, checked finding by finding.

The fixture ``tests/fixtures/tf1_project`` is shaped like a real TF1 project (a model_fn with its
hooks, custom hooks, an input_fn, an Estimator driver, a MonitoredTrainingSession loop); its
package raises on import, so a scan that imported it would fail.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookbridge import cli
from hookbridge._migrate.scan import catalog, findings, scan, spellings
from hookbridge._migrate.scan.report import render

ROOT = Path(__file__).resolve().parent.parent
#: The scan parses source text and never imports TensorFlow (test_scan_never_imports_what_it_scans_
#: nor_tensorflow); the statuses it gives come from the committed results of every stack.
pytestmark = pytest.mark.one_stack("the scan reads source text and never imports TensorFlow")
FIXTURE = ROOT / "tests" / "fixtures" / "tf1_project"
EXAMPLES = ROOT / "examples"
RESULTS = ROOT / "hookbridge" / catalog.RESULTS_PACKAGE_DIR
# PYTHONPATH: subprocesses run elsewhere than the repository root still use its hookbridge.
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
}

C, U, N, X, E, R, V = (
    findings.CONFORMS,
    findings.CUSTOM,
    findings.NEEDS_TENSOR,
    findings.UNSUPPORTED,
    findings.ENTRY_POINT,
    findings.REMOVED_API,
    findings.UNVERIFIED,
)
# (file:line, kind, name, status) of everything in the fixture.
EXPECTED = {
    ("trainer/hooks.py:7", "hook-class", "LossThresholdHook", U),
    ("trainer/hooks.py:14", "tensor", "'loss:0'", C),
    ("trainer/hooks.py:24", "hook-class", "VerboseLossThresholdHook", U),
    # Its methods read tensors fit will not have: the worst of its parts (issue 31 item 16).
    ("trainer/hooks.py:32", "hook-class", "GradientNormHook", N),
    ("trainer/hooks.py:37", "tensor", "'gradients/global_norm/global_norm:0'", N),
    ("trainer/hooks.py:38", "tensor", "collection 'update_ops'", N),
    ("trainer/hooks.py:41", "tensor", "'accuracy:0'", N),
    ("trainer/hooks.py:44", "hook-class", "LossHistoryHook", U),
    ("trainer/hooks.py:44", "spelling", "tf.estimator.SessionRunHook", R),
    ("trainer/hooks.py:48", "tensor", "collection 'losses'", C),
    ("trainer/legacy_loop.py:17", "callback", "EarlyStopping", C),
    ("trainer/legacy_loop.py:18", "callback", "BackupAndRestore", X),
    ("trainer/legacy_loop.py:20", "entry-point", "hookbridge.CallbackHook", E),
    ("trainer/legacy_loop.py:23", "hook", "SummaryAtEndHook", X),
    ("trainer/legacy_loop.py:24", "hook", "LocalCLIDebugHook", V),
    ("trainer/legacy_loop.py:25", "hook", "LossThresholdHook", U),
    ("trainer/legacy_loop.py:27", "entry-point", "tf.compat.v1.train.MonitoredTrainingSession", E),
    ("trainer/legacy_loop.py:31", "hook", "CheckpointSaverHook", C),
    ("trainer/model.py:13", "spelling", "tf.estimator.ModeKeys", R),
    # One row per constructor: the entry point carries its removed spelling.
    ("trainer/model.py:14", "entry-point", "tf.estimator.EstimatorSpec", R),
    ("trainer/model.py:17", "hook", "LossHistoryHook", U),
    ("trainer/model.py:24", "hook", "LoggingTensorHook", N),
    ("trainer/model.py:25", "tensor", "'dense_1/BiasAdd:0'", N),
    ("trainer/model.py:25", "tensor", "'loss:0'", C),
    ("trainer/model.py:25", "tensor", "global_step", N),
    ("trainer/model.py:28", "hook", "NanTensorHook", N),
    ("trainer/model.py:28", "tensor", "loss", N),
    ("trainer/model.py:29", "hook", "LossThresholdHook", U),
    ("trainer/model.py:30", "hook", "GradientNormHook", N),
    ("trainer/model.py:32", "entry-point", "tf.estimator.EstimatorSpec", R),
    # summary_op=tf.summary.merge_all() of the model_fn: no such op in fit.
    ("trainer/model.py:39", "hook", "SummarySaverHook", N),
    ("trainer/model.py:40", "tensor", "tf.summary.merge_all()", N),
    ("trainer/task.py:13", "spelling", "tf.estimator.RunConfig", R),
    ("trainer/task.py:14", "entry-point", "tf.estimator.Estimator", R),
    ("trainer/task.py:17", "entry-point", "estimator.train", E),
    ("trainer/task.py:20", "hook", "StopAtStepHook", C),
    ("trainer/task.py:21", "hook", "ProfilerHook", C),
    ("trainer/task.py:22", "hook", "VerboseLossThresholdHook", U),
    ("trainer/task.py:25", "entry-point", "estimator.evaluate", E),
    ("trainer/task.py:26", "hook", "stop_if_no_decrease_hook", R),
    ("trainer/task.py:29", "entry-point", "tf.estimator.TrainSpec", R),
    ("trainer/task.py:30", "entry-point", "tf.estimator.EvalSpec", R),
    ("trainer/task.py:30", "hook", "ExternalEvalHook", U),
    ("trainer/task.py:31", "entry-point", "tf.estimator.train_and_evaluate", R),
}


@pytest.fixture(scope="module")
def result():
    return scan(FIXTURE)


def _by(result, location: str, name: str, kind: str | None = None):
    (match,) = [
        x
        for x in result.findings
        if f"{x.path}:{x.line}" == location and x.name == name and kind in (None, x.kind)
    ]
    return match


def test_every_expected_finding_and_nothing_else(result):
    got = {(f"{x.path}:{x.line}", x.kind, x.name, x.status) for x in result.findings}
    assert got - EXPECTED == set(), "unexpected findings"
    assert EXPECTED - got == set(), "missing findings"
    assert len(result.findings) == len(EXPECTED)  # no duplicates either
    assert result.files == 6  # trainer/{__init__,hooks,input,model,task,legacy_loop}.py


def test_summary_counts_and_exit_code(result):
    assert result.counts() == {
        "conforms": 7,
        "custom": 8,
        "needs-tensor": 12,
        "removed-api": 10,
        "unverified": 1,
        "unsupported": 2,
        "entry-point": 4,
        "parse-error": 0,
    }
    assert result.exit_code() == findings.EXIT_UNSUPPORTED


def test_builtin_status_lists_the_stacks_of_the_conformance_results(result):
    stacks = sorted(json.loads(p.read_text())["stack"] for p in RESULTS.glob("*.json"))
    passed_everywhere = [
        name
        for name in ("LoggingTensorHook", "NanTensorHook", "CheckpointSaverHook", "ProfilerHook")
        if all(
            json.loads(p.read_text())["results"][f"hook:{name}"]["status"] == "passed"
            for p in RESULTS.glob("*.json")
        )
    ]
    assert len(passed_everywhere) == 4
    logging = _by(result, "trainer/model.py:24", "LoggingTensorHook")
    assert logging.detail.startswith(f"conforms in fit (HookCallback) on {', '.join(stacks)}; ")
    early = _by(result, "trainer/legacy_loop.py:17", "EarlyStopping")
    assert early.detail == f"conforms in MonitoredSession (CallbackHook) on {', '.join(stacks)}"
    backup = _by(result, "trainer/legacy_loop.py:18", "BackupAndRestore")
    notes = {
        json.loads(p.read_text())["results"]["callback:BackupAndRestore"]["note"]
        for p in RESULTS.glob("*.json")
    }
    assert backup.detail in notes


def test_custom_hooks_say_which_check_to_run(result):
    needs_args = _by(result, "trainer/hooks.py:7", "LossThresholdHook")
    assert needs_args.action.startswith("hookbridge check trainer.hooks:<factory>")
    assert "LossThresholdHook(...)" in needs_args.action
    # Inherits the required argument from its parent in the same scanned tree.
    child = _by(result, "trainer/hooks.py:24", "VerboseLossThresholdHook")
    assert "subclass of LossThresholdHook (trainer/hooks.py:7)" in child.detail
    assert child.action.startswith("hookbridge check trainer.hooks:<factory>")
    no_args = _by(result, "trainer/hooks.py:32", "GradientNormHook")
    # It reads tensors fit will not have: expose them first, then check it.
    assert no_args.action.endswith("; then hookbridge check trainer.hooks:GradientNormHook")
    assert "overrides begin, before_run" in no_args.detail
    used = _by(result, "trainer/model.py:30", "GradientNormHook")
    assert "defined at trainer/hooks.py:32" in used.detail
    external = _by(result, "trainer/task.py:30", "ExternalEvalHook")
    assert "team_tools.eval_hooks.ExternalEvalHook" in external.detail


def test_missing_tensors_say_how_to_expose_them(result):
    metric = _by(result, "trainer/hooks.py:41", "'accuracy:0'")
    assert "metric named 'accuracy'" in metric.action and "log_names=['accuracy']" in metric.action
    model_op = _by(result, "trainer/model.py:25", "'dense_1/BiasAdd:0'")
    assert "op of the TF1 model graph" in model_op.detail
    assert "'dense_1_BiasAdd:0'" in model_op.action
    collection = _by(result, "trainer/hooks.py:38", "collection 'update_ops'")
    assert "not 'update_ops'" in collection.detail
    assert _by(result, "trainer/hooks.py:14", "'loss:0'").detail.startswith(
        "the bridge's batch loss"
    )


def test_unsupported_findings_give_the_reason(result):
    assert _by(result, "trainer/legacy_loop.py:23", "SummaryAtEndHook").detail.startswith(
        "tf.contrib was removed"
    )


def test_a_hook_without_measured_results_is_unverified_not_a_hand_written_status(result):
    # tfdbg's LocalCLIDebugHook is in no stack's conformance results: unverified, never a
    # status written by hand (issue 26 item 5).
    debug = _by(result, "trainer/legacy_loop.py:24", "LocalCLIDebugHook")
    assert (debug.status, debug.detail) == (V, "not in the conformance results of any stack")
    assert not hasattr(catalog, "UNSUPPORTED_HOOKS")


def test_entry_points_count_their_hooks(result):
    assert _by(result, "trainer/task.py:17", "estimator.train").detail.endswith("(hooks: 3)")
    mts = _by(result, "trainer/legacy_loop.py:27", "tf.compat.v1.train.MonitoredTrainingSession")
    # `hooks=hooks`, `training_hooks=training_hooks`: the names are followed to their lists.
    assert mts.detail.endswith("(hooks: 4; chief_only_hooks: 1)")
    spec = _by(result, "trainer/model.py:32", "tf.estimator.EstimatorSpec")
    assert spec.detail.endswith("(training_hooks: 4; evaluation_hooks: 1)")


def test_native_keras_callbacks_are_not_reported():
    text = (FIXTURE / "trainer" / "legacy_loop.py").read_text()
    assert "CSVLogger" in text  # in model.evaluate(callbacks=...): native Keras, not TF1 code
    assert not [x for x in scan(FIXTURE).findings if x.name == "CSVLogger"]


def test_the_fixture_raises_when_imported():
    # What makes the never-imports tests below able to fail.
    proc = subprocess.run(
        [sys.executable, "-c", "import trainer.hooks"],
        cwd=FIXTURE,
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    assert proc.returncode != 0 and "hookbridge scan must only parse it" in proc.stderr


def test_scan_never_imports_what_it_scans_nor_tensorflow():
    code = (
        "import sys\n"
        "from hookbridge.cli import main\n"
        f"rc = main(['scan', {str(FIXTURE)!r}, '--format', 'json'])\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('trainer', 'tensorflow', 'keras', 'team_tools'))\n"
        "print('LOADED', loaded, 'RC', rc, file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=FIXTURE,  # `trainer` would be importable from here
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "LOADED [] RC 3" in proc.stderr
    assert json.loads(proc.stdout)["exit_code"] == 3


def test_fixture_scans_in_under_a_second():
    scan(FIXTURE)  # the shipped results are read once per process
    start = time.perf_counter()
    scan(FIXTURE)
    assert time.perf_counter() - start < 1.0


def test_a_thousand_files_in_under_thirty_seconds(tmp_path):
    sources = sorted((FIXTURE / "trainer").glob("*.py"))
    sources = [p for p in sources if p.name != "__init__.py"]
    for i in range(1000):
        source = sources[i % len(sources)]
        package = tmp_path / f"pkg{i // 100:02d}"
        package.mkdir(exist_ok=True)
        (package / f"{source.stem}_{i:04d}.py").write_text(source.read_text())
    start = time.perf_counter()
    result = scan(tmp_path)
    elapsed = time.perf_counter() - start
    assert result.files == 1000
    assert elapsed < 30.0, f"{elapsed:.1f} s"

    # Each of the 5 modules is copied 200 times; what a copy finds on its own (classes, entry
    # points, tensors, callbacks) is found 200 times. (Uses of a custom hook imported from
    # `trainer` resolve by name, which 200 same-named copies make ambiguous: those are left out.)
    def per_kind(res):
        counts = {}
        for x in res.findings:
            if x.kind in ("hook-class", "entry-point", "tensor", "callback"):
                counts[x.kind] = counts.get(x.kind, 0) + 1
        return counts

    assert per_kind(result) == {k: 200 * n for k, n in per_kind(scan(FIXTURE)).items()}


def test_formats_carry_the_same_findings(result):
    data = json.loads(render(result, "json"))
    assert data["summary"] == result.counts()
    assert data["exit_code"] == 3 and data["files"] == 6
    assert [tuple(d.values()) for d in data["findings"]] == [
        tuple(x.as_dict().values()) for x in result.findings
    ]
    markdown = render(result, "markdown").splitlines()
    rows = [line for line in markdown if line.startswith("| `trainer/")]
    assert len(rows) == len(result.findings)
    assert "| unsupported | 2 |" in markdown
    table = render(result, "table").splitlines()
    assert table[0].split()[:5] == ["LOCATION", "KIND", "NAME", "STATUS", "DETAIL"]
    assert len([line for line in table if line.startswith("trainer/")]) == len(result.findings)
    assert (
        "Summary: 44 findings in 6 files: 7 conforms, 8 custom, 12 needs-tensor, "
        "10 removed-api, 1 unverified, 2 unsupported, 4 entry-point. Exit code 3."
    ) in table


def _write(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.py").write_text(source)
    return folder


HEADER = "import tensorflow as tf\nv1 = tf.compat.v1\n"


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (HEADER + "hooks = [v1.train.StopAtStepHook(last_step=3)]\n", findings.EXIT_OK),
        (
            HEADER + "class H(v1.train.SessionRunHook):\n    pass\nhooks = [H()]\n",
            findings.EXIT_ATTENTION,
        ),
        (HEADER + "h = tf.estimator.experimental.InMemoryEvaluatorHook(e, i)\n", 1),
        (
            HEADER + "import hookbridge\n"
            "hookbridge.CallbackHook([v1.keras.callbacks.TensorBoard('logs')], logs={})\n",
            3,
        ),
        ("print 'a Python 2 file'\n", findings.EXIT_PARSE_ERROR),
    ],
    ids=["conforms", "custom", "removed-api", "v1-tensorboard", "parse-error"],
)
def test_exit_codes(tmp_path, capsys, source, code):
    assert cli.main(["scan", str(_write(tmp_path, source))]) == code
    assert f"Exit code {code}." in capsys.readouterr().out


def test_parse_error_is_reported_with_its_line(tmp_path):
    result = scan(_write(tmp_path, "x = 1\nprint 'py2'\n"))
    (finding,) = result.findings
    assert (finding.path, finding.line, finding.status) == ("job.py", 2, "parse-error")
    assert "Python 3" in finding.action


def test_missing_path_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["scan", str(tmp_path / "nowhere")]) == findings.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("hookbridge scan: error: ") and "nowhere' does not exist" in err
    with pytest.raises(SystemExit) as exc:  # argparse's own usage errors: 2 as well
        cli.main(["scan", str(tmp_path), "--format", "xml"])
    assert exc.value.code == findings.EXIT_USAGE


def test_skips_hidden_folders_and_virtual_environments(tmp_path):
    hook = HEADER + "hooks = [v1.train.StopAtStepHook(last_step=3)]\n"
    for folder in (".git", "venv", "__pycache__", "src"):
        _write(tmp_path / folder, hook)
    assert [x.path for x in scan(tmp_path).findings] == ["src/job.py"]


def test_scan_a_single_file():
    result = scan(FIXTURE / "trainer" / "task.py")
    assert result.files == 1
    assert {x.path for x in result.findings} == {"task.py"}


EXAMPLE_FILES = sorted(EXAMPLES.glob("**/*.py"))


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=[p.name for p in EXAMPLE_FILES])
def test_scan_runs_on_every_example(example):
    result = scan(example)
    assert result.files == 1
    assert result.exit_code() in (findings.EXIT_OK, findings.EXIT_ATTENTION), result.findings
    tree = ast.parse(example.read_text())
    # Every bridge in the example is found as an entry point, on its line.
    for name in ("hookbridge.HookCallback", "hookbridge.CallbackHook"):
        calls = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and ast.unparse(node.func) == name
        ]
        assert sorted(x.line for x in result.findings if x.name == name) == sorted(calls)
    for x in result.findings:
        assert x.status in findings.STATUSES and x.detail


def test_fixture_is_a_copyable_project(tmp_path):
    # The scan reads any copy the same way: paths are relative to the root given.
    copy = tmp_path / "project"
    shutil.copytree(FIXTURE, copy)
    got = {(x.path, x.line, x.name, x.status) for x in scan(copy).findings}
    assert got == {(x.path, x.line, x.name, x.status) for x in scan(FIXTURE).findings}


def test_a_builtin_the_results_do_not_cover_everywhere_is_unverified(tmp_path):
    source = (
        "import keras\nimport hookbridge\n"
        "hookbridge.CallbackHook([keras.callbacks.OrbaxCheckpoint('ckpt')], logs={})\n"
    )
    (finding,) = [x for x in scan(_write(tmp_path, source)).findings if x.kind == "callback"]
    assert finding.status == findings.UNVERIFIED
    notes = {
        f"skipped on {r['stack']} ({r['results']['callback:OrbaxCheckpoint']['note']})"
        for r in (json.loads(p.read_text()) for p in RESULTS.glob("*.json"))
        if "callback:OrbaxCheckpoint" in r["results"]
    }
    assert notes and finding.detail == "; ".join(sorted(notes))
    assert cli.main(["scan", str(tmp_path)]) == findings.EXIT_ATTENTION


def test_estimator_hooks_is_an_entry_point_whose_hooks_run_in_fit(tmp_path):
    source = (
        "import tensorflow as tf\n"
        "from hookbridge import HookCallback, estimator_hooks\n"
        "cb = HookCallback(lambda: estimator_hooks(\n"
        "    'model_dir', hooks=[tf.compat.v1.train.StopAtStepHook(last_step=10)],\n"
        "    save_checkpoints_steps=100))\n"
    )
    result = scan(_write(tmp_path, source))
    entry = _by(result, "job.py:3", "estimator_hooks")
    assert entry.status == E
    assert "CheckpointSaverHook" in entry.detail and entry.detail.endswith("(hooks: 1)")
    (hook,) = [x for x in result.findings if x.kind == "hook"]
    assert (hook.name, hook.status, hook.line) == ("StopAtStepHook", C, 4)
    assert "in fit (HookCallback)" in hook.detail


# ------------------------------------------------------------------ issue 26: real TF1 shapes
TPU = ROOT / "tests" / "fixtures" / "tpu_project"


@pytest.fixture(scope="module")
def tpu():
    return scan(TPU, exclude=["tests"])


def _rows(result, path: str) -> set[tuple[int, str, str, str]]:
    return {(x.line, x.kind, x.name, x.status) for x in result.findings if x.path == path}


def test_a_tpu_estimator_project_is_not_a_false_pass(tpu):
    # The BERT shape: TPUEstimator from tf.contrib.tpu, one TPUEstimatorSpec per mode, an
    # Estimator object's train/evaluate/predict. It used to scan to 0 findings, exit 0.
    entries = {
        (x.line, x.name)
        for x in tpu.findings
        if x.path == "textcls/classifier.py" and x.kind == "entry-point"
    }
    assert entries == {
        (27, "tf.contrib.tpu.TPUEstimatorSpec"),
        (35, "tf.contrib.tpu.TPUEstimatorSpec"),
        (42, "tf.contrib.tpu.TPUEstimatorSpec"),
        (51, "tf.contrib.tpu.RunConfig"),
        (57, "tf.contrib.tpu.TPUEstimator"),
        (64, "estimator.train"),
        (65, "estimator.evaluate"),
        (66, "estimator.predict"),
    }
    train_spec = _by(tpu, "textcls/classifier.py:27", "tf.contrib.tpu.TPUEstimatorSpec", E)
    assert "training_hooks: 2" in train_spec.detail and "scaffold_fn" in train_spec.detail
    # Every other way of reaching TPUEstimator (t2t's helper module, the two TF spellings).
    assert {
        x.name for x in tpu.findings if x.path == "textcls/registry.py" and x.kind == "entry-point"
    } == {
        "contrib.tpu().TPUEstimator",
        "tf.compat.v1.estimator.tpu.TPUEstimator",
        "tf.estimator.tpu.TPUEstimator",
    }
    # One row for the constructor: the entry point carries its removed spelling.
    assert not [x for x in tpu.findings if x.kind == "spelling" and x.line == 57]
    spelling = _by(tpu, "textcls/classifier.py:57", "tf.contrib.tpu.TPUEstimator", "entry-point")
    assert spelling.status == R
    assert spelling.action.startswith("tf.compat.v1.estimator.tpu.TPUEstimator on TF <= 2.15")
    assert tpu.exit_code() == findings.EXIT_ATTENTION
    assert cli.main(["scan", str(TPU), "--exclude", "tests"]) == findings.EXIT_ATTENTION


def test_a_tensor_object_of_the_model_graph_needs_a_tensor(tpu):
    # LoggingTensorHook({"total_loss": total_loss}): the object does not exist in fit.
    hook = _by(tpu, "textcls/classifier.py:26", "LoggingTensorHook")
    assert hook.status == N  # the hook conforms, but what it logs does not exist in fit
    tensor = _by(tpu, "textcls/classifier.py:26", "total_loss")
    assert (tensor.kind, tensor.status) == ("tensor", N)
    assert "tensor object of the TF1 model graph (computed in model_fn)" in tensor.detail
    assert "HookCallback's hooks callable" in tensor.action


def test_tensor_names_in_a_module_constant_are_resolved(tpu):
    # dict((x, x) for x in [...]) and {k: k for k in [...]} in module constants: read, each
    # name judged against the bridge's graph, on the line the hook is built.
    assert {(n, s) for (line, k, n, s) in _rows(tpu, "textcls/digits.py") if k == "tensor"} == {
        ("'learning_rate'", N),
        ("'cross_entropy'", N),
        ("'loss'", C),
        ("extra_names", V),
        # training_hooks(["accuracy"]): what the caller gives extra_names, where it is written.
        ("'accuracy'", N),
    }
    assert {x.line for x in tpu.findings if x.name == "'cross_entropy'"} == {11}
    loss = {x.line for x in tpu.findings if x.name == "'loss'" and x.path.endswith("digits.py")}
    assert loss == {11, 12}


def test_what_the_tree_cannot_resolve_is_unverified_and_the_exit_code_says_so(tmp_path):
    source = (
        "import tensorflow as tf\n"
        "def hooks(names):\n"
        "    return [tf.compat.v1.train.LoggingTensorHook(names, every_n_iter=1)]\n"
    )
    result = scan(_write(tmp_path, source))
    tensor = _by(result, "job.py:3", "names")
    assert tensor.status == V and "parameter" in tensor.detail
    assert _by(result, "job.py:3", "LoggingTensorHook").status == V  # the worst of its parts
    assert result.exit_code() == findings.EXIT_UNVERIFIED != findings.EXIT_OK
    # The same hook with its names written as strings: nothing left to verify.
    literal = source.replace("(names,", '({"loss": "loss:0"},')
    assert scan(_write(tmp_path / "b", literal)).exit_code() == findings.EXIT_OK


def test_tf_estimator_spellings_are_flagged_with_their_replacement(tpu):
    hook = _by(tpu, "textcls/digits.py:11", "LoggingTensorHook")
    assert hook.status == R
    assert hook.detail.startswith("tf.estimator.LoggingTensorHook does not import on TF >= 2.16")
    assert hook.action == "spell it tf.compat.v1.train.LoggingTensorHook"
    estimator = _by(tpu, "textcls/digits.py:18", "tf.estimator.Estimator", "entry-point")
    assert estimator.status == R and "tensorflow-estimator" in estimator.action
    modes = _by(tpu, "textcls/classifier.py:24", "tf.estimator.ModeKeys")
    assert modes.status == R and "(2 uses: lines 24, 34)" in modes.detail


@pytest.mark.per_tensorflow("the names must exist in the installed TensorFlow")
def test_the_tf_compat_v1_train_replacements_exist():
    # What the scan tells users to write must import on current TensorFlow.
    import tensorflow as tf

    missing = [n for n in spellings.V1_TRAIN_NAMES if not hasattr(tf.compat.v1.train, n)]
    assert missing == []
    assert not hasattr(tf, "estimator") or tf.__version__ < "2.16"


def test_keras_callbacks_of_a_graph_mode_fit_are_inventoried(tpu, tmp_path):
    assert _rows(tpu, "textcls/keras_side.py") == {
        (10, "callback", "EarlyStopping", C),
        (11, "callback", "CSVLogger", C),
        (13, "entry-point", "model.fit", E),
    }
    assert "graph-mode tf.keras fit" in _by(tpu, "textcls/keras_side.py:13", "model.fit").detail
    # Without disable_eager_execution the same fit is native Keras: nothing to list.
    source = (TPU / "textcls" / "keras_side.py").read_text()
    eager = source.replace("tf.disable_eager_execution()\n", "")
    assert scan(_write(tmp_path, eager)).findings == ()


def test_exclude_skips_folders_and_files(tpu, capsys):
    everything = scan(TPU)
    assert everything.files == 7 and tpu.files == 6
    assert {x.path for x in everything.findings} - {x.path for x in tpu.findings} == {
        "tests/check_classifier.py"
    }
    fewer = scan(TPU, exclude=["tests", "*_side.py", "textcls/registry.py"])
    assert fewer.files == 4
    assert cli.main(["scan", str(TPU), "--exclude", "tests", "--exclude", "*_side.py"]) == 1
    assert "in 5 files" in capsys.readouterr().out


def test_an_existing_zero_argument_factory_is_named(tpu):
    cls = _by(tpu, "textcls/hooks.py:6", "StepLossHook")
    assert cls.action.startswith("hookbridge check textcls.hooks:make_step_loss_hook ")
    built = _by(tpu, "textcls/classifier.py:31", "StepLossHook")
    assert "built by make_step_loss_hook()" in built.detail


def test_hooks_grouped_by_entry_point_one_group_per_spec_call(tpu):
    groups = tpu.by_entry()
    train = groups["textcls/classifier.py:27 tf.contrib.tpu.TPUEstimatorSpec"]
    assert [(x.line, x.name, x.entry.split(": ")[1]) for x in train] == [
        (26, "LoggingTensorHook", "training_hooks -> fit"),
        (31, "StepLossHook", "training_hooks -> fit"),
    ]
    evaluation = groups["textcls/classifier.py:35 tf.contrib.tpu.TPUEstimatorSpec"]
    assert [x.entry.split(": ")[1] for x in evaluation] == ["evaluation_hooks -> evaluate"]
    # hooks=training_hooks([...]): the list that function of the module returns.
    digits = groups["textcls/digits.py:19 classifier.train"]
    assert [x.line for x in digits] == [11, 12, 13]
    assert _by(tpu, "textcls/digits.py:19", "classifier.train").detail.endswith("(hooks: 3)")
    table = render(tpu, "table")
    assert "Hooks and callbacks by entry point" in table
    assert "  textcls/classifier.py:27 tf.contrib.tpu.TPUEstimatorSpec\n" in table


def test_a_summary_per_migration_stage(tpu):
    stages = tpu.stages()
    assert list(stages) == list(findings.STAGES)
    assert stages["0 imports"] == {R: sum(x.status == R for x in tpu.findings)}
    assert stages["1 callbacks"] == {C: 2}
    assert sum(sum(c.values()) for c in stages.values()) == len(tpu.findings)
    assert json.loads(render(tpu, "json"))["stages"] == stages


@pytest.mark.parametrize(
    ("name", "status", "words"),
    [
        # tf.estimator.* does not import on TF >= 2.16: the row carries the spelling.
        ("DNNClassifier", R, "keras_twin builds its Keras model (0 feature columns"),
        ("LinearRegressor", R, "keras_twin builds its Keras model (0 feature columns"),
        ("DNNEstimator", R, "keras_twin does not build: write its Keras model"),
        ("BaselineClassifier", R, "keras_twin does not build: write its Keras model"),
        ("BoostedTreesClassifier", X, "no Keras twin"),
    ],
)
def test_canned_estimators_say_what_they_need(tmp_path, name, status, words):
    source = f"import tensorflow as tf\nest = tf.estimator.{name}(feature_columns=[])\n"
    entry = _by(scan(_write(tmp_path, source)), "job.py:2", f"tf.estimator.{name}", "entry-point")
    assert entry.status == status and words in entry.detail


def test_the_speed_benchmark_runs():
    # benchmarks/scan_speed.py reports files/s (docs/scan.md); no timing is asserted here.
    bench = ROOT / "benchmarks" / "scan_speed.py"
    proc = subprocess.run(
        [sys.executable, str(bench), "--files", "4", "--repeats", "1"],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "5 files, 1090 lines" in proc.stdout  # 4 generated modules and an __init__.py
    assert "files/s" in proc.stdout and "parse alone" in proc.stdout


def test_every_hook_status_is_the_measured_one():
    # Issue 26 item 5: InMemoryEvaluatorHook and the stop_if_* hooks were "unsupported" by a
    # hand-written table; tests/conformance/test_builtins.py now runs them through fit on the
    # stack that has tensorflow-estimator, and the scan reads what it measured.
    measured = {}
    for p in RESULTS.glob("*.json"):
        data = json.loads(p.read_text())
        for row in data["results"].values():
            if row["kind"] == "hook":
                measured.setdefault(row["name"], {})[data["stack"]] = row["status"]
    for name in sorted(catalog.KNOWN_HOOKS | catalog.known_names("hook")):
        bridged = catalog.builtin_status("hook", name)
        stacks = measured.get(name, {})
        if stacks and set(stacks.values()) == {"passed"}:
            assert bridged.status == C, name
            assert bridged.detail.endswith(", ".join(sorted(stacks))), name
        else:
            assert bridged.status != C, name
    for name in ("InMemoryEvaluatorHook", "stop_if_no_decrease_hook", "make_early_stopping_hook"):
        assert measured[name] == {"tf2.15-keras2": "passed"}
    assert catalog.builtin_status("hook", "LocalCLIDebugHook").status == V  # never measured


def test_tensor_names_imported_from_another_scanned_module_are_resolved(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "names.py").write_text('LOGGED = dict((n, n) for n in ["loss", "acc"])\n')
    (package / "job.py").write_text(
        "import tensorflow as tf\n"
        "from pkg.names import LOGGED\n"
        "from pkg import names\n"
        "LOSS = tf.constant(1.0)\n"
        "def hooks():\n"
        "    return [\n"
        "        tf.compat.v1.train.LoggingTensorHook(LOGGED, every_n_iter=1),\n"
        "        tf.compat.v1.train.LoggingTensorHook(names.LOGGED, every_n_iter=1),\n"
        "        tf.compat.v1.train.NanTensorHook(LOSS),\n"
        "    ]\n"
    )
    tensors = {
        (x.line, x.name, x.status) for x in scan(tmp_path).findings if x.kind == "tensor"
    }
    assert tensors == {
        (7, "'loss'", C),
        (7, "'acc'", N),
        (8, "'loss'", C),
        (8, "'acc'", N),
        # A module-level tensor object: computed at import time, the tree cannot tell.
        (9, "LOSS", V),
    }


def test_which_graph_a_tensor_object_belongs_to(tmp_path):
    source = (
        "import tensorflow as tf\n"
        "import hookbridge\n"
        "v1 = tf.compat.v1\n"
        "def make_hooks(every):\n"
        "    graph = v1.get_default_graph()\n"
        "    a, b = graph.get_tensor_by_name('loss:0'), graph.get_tensor_by_name('acc:0')\n"
        "    return [v1.train.LoggingTensorHook({'a': a, 'b': b, 's': v1.train.get_global_step()},"
        " every_n_iter=every)]\n"
        "callback = hookbridge.HookCallback(lambda: make_hooks(10))\n"
        "def helper(total):\n"
        "    return v1.train.NanTensorHook(total)\n"
        "def other(x):\n"
        "    y = tf.reduce_sum(x)\n"
        "    return v1.train.NanTensorHook(y)\n"
    )
    tensors = {
        (x.line, x.name, x.status) for x in scan(_write(tmp_path, source)).findings
        if x.kind == "tensor"
    }
    assert tensors == {
        # make_hooks is a hooks callable (HookCallback calls it): its tensor reads are listed...
        (6, "'loss:0'", C),
        (6, "'acc:0'", N),
        # ... and a, b = get_tensor_by_name(...), ...: the hook logs the names they read.
        (7, "'loss:0'", C),
        (7, "'acc:0'", N),
        # make_hooks is called by HookCallback's hooks callable: the bridge's global step.
        (7, "v1.train.get_global_step()", C),
        # A parameter, and an object built outside a model_fn: the tree cannot tell.
        (10, "total", V),
        (13, "y", V),
    }


def test_a_log_name_the_hook_callback_exposes_is_a_tensor_of_the_bridge(tmp_path):
    source = (
        "import tensorflow as tf\n"
        "import hookbridge\n"
        "def tf1_hooks():\n"
        "    g = tf.compat.v1.get_default_graph().get_tensor_by_name('g_loss:0')\n"
        "    return [tf.compat.v1.train.LoggingTensorHook({'g': g, 'd': 'd_loss:0'}, 10)]\n"
        "a = hookbridge.HookCallback(tf1_hooks, log_names=['g_loss'])\n"
    )
    rows = {(x.line, x.name, x.status) for x in scan(_write(tmp_path, source)).findings}
    assert {r for r in rows if r[1] in ("'g_loss:0'", "'d_loss:0'")} == {
        (4, "'g_loss:0'", C),  # log_names=['g_loss'] puts it on the bridge's graph
        (5, "'g_loss:0'", C),
        (5, "'d_loss:0'", N),  # not exposed: still to do
    }


GAN_JOB = '''"""A TF1 GAN job: two train ops, run alternately (written for this test)."""
import tensorflow as tf
import tensorflow_gan as tfgan

v1 = tf.compat.v1


def train(g_loss, d_loss, g_vars, d_vars, model_dir):
    d_train = v1.train.AdamOptimizer(1e-3).minimize(d_loss, var_list=d_vars)
    g_train = v1.train.AdamOptimizer(1e-3).minimize(
        g_loss, var_list=g_vars, global_step=v1.train.get_or_create_global_step()
    )
    hooks = [v1.train.StopAtStepHook(last_step=100)]
    with v1.train.MonitoredTrainingSession(checkpoint_dir=model_dir, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(d_train)
            sess.run(g_train)


def train_with_tfgan(train_ops):
    hooks = [tfgan.RunTrainOpsHook(train_ops.discriminator_train_op, 1)]
    return hooks


def one_train_op(loss):
    return v1.train.AdamOptimizer(1e-3).minimize(loss)
'''


def test_jobs_fit_cannot_hold_point_to_a_custom_loop(tmp_path):
    """Several train ops in one function, and tensorflow-gan's RunTrainOpsHook (which runs
    train ops itself), are pointed to a custom loop with CallbackLoop (issue 27); one train op
    is not."""
    result = scan(_write(tmp_path, GAN_JOB))
    several = [x for x in result.findings if x.name == "several train ops"]
    assert len(several) == 1 and several[0].line == 9, result.findings  # one_train_op: none
    assert several[0].status == findings.ENTRY_POINT
    assert "lines 9, 10" in several[0].detail and "CallbackLoop" in several[0].action
    (run_ops,) = [x for x in result.findings if x.name.endswith("RunTrainOpsHook")]
    assert run_ops.status == findings.UNSUPPORTED and "custom training loop" in run_ops.detail
    assert "docs/custom-loops.md" in run_ops.action
    assert result.exit_code() == findings.EXIT_UNSUPPORTED
