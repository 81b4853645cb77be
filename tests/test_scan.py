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
from hookbridge._migrate.scan import catalog, findings, scan
from hookbridge._migrate.scan.report import render

ROOT = Path(__file__).resolve().parent.parent
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

C, U, N, X, E = (
    findings.CONFORMS,
    findings.CUSTOM,
    findings.NEEDS_TENSOR,
    findings.UNSUPPORTED,
    findings.ENTRY_POINT,
)
# (file:line, kind, name, status) of everything in the fixture.
EXPECTED = {
    ("trainer/hooks.py:7", "hook-class", "LossThresholdHook", U),
    ("trainer/hooks.py:14", "tensor", "'loss:0'", C),
    ("trainer/hooks.py:24", "hook-class", "VerboseLossThresholdHook", U),
    ("trainer/hooks.py:32", "hook-class", "GradientNormHook", U),
    ("trainer/hooks.py:37", "tensor", "'gradients/global_norm/global_norm:0'", N),
    ("trainer/hooks.py:38", "tensor", "collection 'update_ops'", N),
    ("trainer/hooks.py:41", "tensor", "'accuracy:0'", N),
    ("trainer/hooks.py:44", "hook-class", "LossHistoryHook", U),
    ("trainer/hooks.py:48", "tensor", "collection 'losses'", C),
    ("trainer/legacy_loop.py:17", "callback", "EarlyStopping", C),
    ("trainer/legacy_loop.py:18", "callback", "BackupAndRestore", X),
    ("trainer/legacy_loop.py:20", "entry-point", "hookbridge.CallbackHook", E),
    ("trainer/legacy_loop.py:23", "hook", "SummaryAtEndHook", X),
    ("trainer/legacy_loop.py:24", "hook", "LocalCLIDebugHook", X),
    ("trainer/legacy_loop.py:25", "hook", "LossThresholdHook", U),
    ("trainer/legacy_loop.py:27", "entry-point", "tf.compat.v1.train.MonitoredTrainingSession", E),
    ("trainer/legacy_loop.py:31", "hook", "CheckpointSaverHook", C),
    ("trainer/model.py:14", "entry-point", "tf.estimator.EstimatorSpec", E),
    ("trainer/model.py:17", "hook", "LossHistoryHook", U),
    ("trainer/model.py:24", "hook", "LoggingTensorHook", C),
    ("trainer/model.py:25", "tensor", "'dense_1/BiasAdd:0'", N),
    ("trainer/model.py:25", "tensor", "'loss:0'", C),
    ("trainer/model.py:28", "hook", "NanTensorHook", C),
    ("trainer/model.py:29", "hook", "LossThresholdHook", U),
    ("trainer/model.py:30", "hook", "GradientNormHook", U),
    ("trainer/model.py:32", "entry-point", "tf.estimator.EstimatorSpec", E),
    ("trainer/model.py:39", "hook", "SummarySaverHook", C),
    ("trainer/task.py:14", "entry-point", "tf.estimator.Estimator", E),
    ("trainer/task.py:17", "entry-point", "estimator.train", E),
    ("trainer/task.py:20", "hook", "StopAtStepHook", C),
    ("trainer/task.py:21", "hook", "ProfilerHook", C),
    ("trainer/task.py:22", "hook", "VerboseLossThresholdHook", U),
    ("trainer/task.py:25", "entry-point", "estimator.evaluate", E),
    ("trainer/task.py:26", "hook", "stop_if_no_decrease_hook", X),
    ("trainer/task.py:29", "entry-point", "tf.estimator.TrainSpec", E),
    ("trainer/task.py:30", "entry-point", "tf.estimator.EvalSpec", E),
    ("trainer/task.py:30", "hook", "ExternalEvalHook", U),
    ("trainer/task.py:31", "entry-point", "tf.estimator.train_and_evaluate", E),
}


@pytest.fixture(scope="module")
def result():
    return scan(FIXTURE)


def _by(result, location: str, name: str):
    (match,) = [x for x in result.findings if f"{x.path}:{x.line}" == location and x.name == name]
    return match


def test_every_expected_finding_and_nothing_else(result):
    got = {(f"{x.path}:{x.line}", x.kind, x.name, x.status) for x in result.findings}
    assert got - EXPECTED == set(), "unexpected findings"
    assert EXPECTED - got == set(), "missing findings"
    assert len(result.findings) == len(EXPECTED)  # no duplicates either
    assert result.files == 6  # trainer/{__init__,hooks,input,model,task,legacy_loop}.py


def test_summary_counts_and_exit_code(result):
    assert result.counts() == {
        "conforms": 10,
        "custom": 10,
        "needs-tensor": 4,
        "unverified": 0,
        "unsupported": 4,
        "entry-point": 10,
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
    assert logging.detail == f"conforms in fit (HookCallback) on {', '.join(stacks)}"
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
    assert no_args.action == "hookbridge check trainer.hooks:GradientNormHook"
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
    reasons = {
        "SummaryAtEndHook": "tf.contrib was removed",
        "LocalCLIDebugHook": "tfdbg v1",
        "stop_if_no_decrease_hook": "keras.callbacks.EarlyStopping",
    }
    for x in result.findings:
        if x.status == findings.UNSUPPORTED and x.name in reasons:
            assert reasons.pop(x.name) in x.detail
    assert reasons == {}


def test_entry_points_count_their_hooks(result):
    assert _by(result, "trainer/task.py:17", "estimator.train").detail.endswith("(hooks: 3)")
    mts = _by(result, "trainer/legacy_loop.py:27", "tf.compat.v1.train.MonitoredTrainingSession")
    assert mts.detail.endswith("(hooks: hooks; chief_only_hooks: 1)")
    spec = _by(result, "trainer/model.py:32", "tf.estimator.EstimatorSpec")
    assert spec.detail.endswith("(training_hooks: training_hooks; evaluation_hooks: 1)")


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
    assert "| unsupported | 4 |" in markdown
    table = render(result, "table").splitlines()
    assert table[0].split()[:5] == ["LOCATION", "KIND", "NAME", "STATUS", "DETAIL"]
    assert len([line for line in table if line.startswith("trainer/")]) == len(result.findings)
    assert table[-1] == (
        "Summary: 38 findings in 6 files: 10 conforms, 10 custom, 4 needs-tensor, "
        "4 unsupported, 10 entry-point. Exit code 3."
    )


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
        (HEADER + "h = tf.estimator.experimental.InMemoryEvaluatorHook(e, i)\n", 3),
        (
            HEADER + "import hookbridge\n"
            "hookbridge.CallbackHook([v1.keras.callbacks.TensorBoard('logs')], logs={})\n",
            3,
        ),
        ("print 'a Python 2 file'\n", findings.EXIT_PARSE_ERROR),
    ],
    ids=["conforms", "custom", "unsupported", "v1-tensorboard", "parse-error"],
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
