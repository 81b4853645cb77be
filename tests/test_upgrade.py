"""``hookbridge upgrade``: stage 0 on BERT- and census-shaped TF1 projects.

``tests/fixtures/upgrade/`` holds the projects as TF1 wrote them; ``tests/fixtures/upgrade_expected/``
the tree the upgrade must produce, the same whichever TensorFlow runs it (2.15 or 2.21: their
own upgraders differ, hookbridge's rules make the result one). The upgraded BERT-shaped job
trains and evaluates on TF 2.15 with no hand edit; the census job trains its canned V1 Estimator
(its checkpoint keeps the V1 names) with the hooks of ``hooks_helper``; those hook modules import
and run in a MonitoredSession on TF 2.21, where the original stops at ``tf.train.SessionRunHook``.
"""

from __future__ import annotations

import ast
import contextlib
import filecmp
import importlib
import io
import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hookbridge import cli
from hookbridge._migrate.upgrade import command, engine, fast, tree

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.per_tensorflow("the rewrite is tf_upgrade_v2's tables and hookbridge's rules")
FIXTURES = ROOT / "tests" / "fixtures" / "upgrade"
EXPECTED = ROOT / "tests" / "fixtures" / "upgrade_expected"
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
}
PROJECTS = ("bert_like", "census_like")


def _hookbridge(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command line as a user runs it: ``python -m hookbridge``, a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "hookbridge", *args],
        capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600,
    )


def _hookbridge_here(capsys, *args: str) -> subprocess.CompletedProcess:
    """The same command through ``hookbridge.cli.main`` in this process (its argument parsing,
    its exit status, its output): what a second process adds is TensorFlow's import, seconds a
    run, which the ``upgraded`` fixture's process already proves."""
    capsys.readouterr()
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["hookbridge", *args], status, out, err)


def _copy(tmp_path: Path, project: str) -> Path:
    target = tmp_path / project
    shutil.copytree(FIXTURES / project, target)
    return target


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and tree.BACKUP_DIR not in p.parts
    }


def _upgrade_both(root: Path, run) -> Path:
    """Both projects copied under ``root``, then ``hookbridge upgrade ROOT --write`` by ``run``
    (:func:`_hookbridge` or :func:`_hookbridge_in_process`)."""
    for project in PROJECTS:
        shutil.copytree(FIXTURES / project, root / project)
    done = run("upgrade", str(root), "--write")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "8 of 8 files changed" in done.stdout
    return root


def _hookbridge_in_process(*args: str) -> subprocess.CompletedProcess:
    """:func:`_hookbridge_here` for a module-scoped fixture (no ``capsys``): ``cli.main`` with
    its stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(args))
    return subprocess.CompletedProcess(["hookbridge", *args], status, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory) -> Path:
    """Both projects after ``hookbridge upgrade --write``, through ``cli.main`` in this process
    (its parsing, exit status and output: a process of its own adds only TensorFlow's import, 7 s
    of CPU a stack; :func:`test_the_command_line_writes_the_same_tree` runs the command line as a
    user runs it, in the deep profile)."""
    return _upgrade_both(tmp_path_factory.mktemp("upgraded"), _hookbridge_in_process)


@pytest.mark.deep
def test_the_command_line_writes_the_same_tree(upgraded, tmp_path):
    """``python -m hookbridge upgrade --write`` in a process of its own writes the tree the
    in-process :func:`upgraded` wrote (which the CI tests compare with the expected tree)."""
    by_process = _upgrade_both(tmp_path, _hookbridge)
    for project in PROJECTS:
        assert _snapshot(by_process / project) == _snapshot(upgraded / project), project


@pytest.mark.parametrize("project", PROJECTS)
def test_the_rewrite_is_the_expected_tree_on_this_tensorflow(upgraded, project):
    comparison = filecmp.dircmp(upgraded / project, EXPECTED / project, ignore=["__pycache__"])
    assert not comparison.left_only and not comparison.right_only
    for name in comparison.common_files:
        assert (upgraded / project / name).read_text() == (EXPECTED / project / name).read_text(), name


def test_a_second_upgrade_changes_nothing(upgraded, capsys):
    before = _snapshot(upgraded)
    again = _hookbridge_here(capsys, "upgrade", str(upgraded))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Stage 0 is clean" in again.stdout and "Left for a person" not in again.stdout
    assert _snapshot(upgraded) == before


def test_the_write_keeps_the_originals_and_a_patch_that_applies(upgraded, tmp_path):
    (backup,) = (upgraded / tree.BACKUP_DIR).iterdir()
    originals = backup / "originals"
    for project in PROJECTS:
        for path in (FIXTURES / project).glob("*.py"):
            assert (originals / project / path.name).read_bytes() == path.read_bytes()
    pristine = tmp_path / "pristine"
    shutil.copytree(originals, pristine)
    applied = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(backup / "upgrade.patch")],
        cwd=pristine, capture_output=True, text=True,
    )
    assert applied.returncode == 0, applied.stderr  # git apply works outside a repository too
    for project in PROJECTS:
        for path in (EXPECTED / project).glob("*.py"):
            assert (pristine / project / path.name).read_text() == path.read_text()


def test_the_report_names_each_rule_and_why(tmp_path, capsys):
    project = _copy(tmp_path, "census_like")
    shown = _hookbridge_here(capsys, "upgrade", str(project))
    assert shown.returncode == command.EXIT_PENDING
    out = shown.stdout
    assert "tf.train.SessionRunHook -> tf.compat.v1.train.SessionRunHook" in out
    assert "tf.estimator.DNNLinearCombinedClassifier -> tf.compat.v1.estimator." in out
    assert "V1 class" in out and "Apply with: hookbridge upgrade" in out
    assert "+++ b/wide_deep.py" in out  # the diff follows the report
    assert _snapshot(project) == _snapshot(FIXTURES / "census_like")  # shown, not written


def test_the_write_is_all_or_nothing(tmp_path, monkeypatch):
    project = _copy(tmp_path, "bert_like")
    before = _snapshot(project)
    planned = tree.plan(project)
    calls = []
    real_replace = os.replace

    def failing_replace(source, target):
        calls.append(target)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_replace(source, target)

    monkeypatch.setattr(tree.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        tree.write(planned)
    assert len(calls) == 2
    assert _snapshot(project) == before  # the file already replaced was put back
    assert not list(project.rglob("*.hookbridge-upgrade.tmp"))


def test_a_file_edited_after_the_plan_stops_the_write(tmp_path):
    project = _copy(tmp_path, "census_like")
    planned = tree.plan(project)
    (project / "hooks.py").write_text((project / "hooks.py").read_text() + "# edited\n")
    before = _snapshot(project)
    with pytest.raises(RuntimeError, match="changed since it was read"):
        tree.write(planned)
    assert _snapshot(project) == before


def test_formatting_comments_and_other_code_are_kept():
    source = (
        "import tensorflow as tf  # the TF1 alias\n"
        "\n"
        "class Hook(tf.train.SessionRunHook):   # odd   spacing kept\n"
        "  def begin(self):\n"
        "    self.n = x.shape[ -1 ].value  # a Dimension\n"
        "    return (tf.logging.info,\n"
        "            'tf.train.SessionRunHook in a string')\n"
    )
    result = engine.upgrade_source(source)
    assert result.text == (
        "import tensorflow as tf  # the TF1 alias\n"
        "\n"
        "class Hook(tf.compat.v1.train.SessionRunHook):   # odd   spacing kept\n"
        "  def begin(self):\n"
        "    self.n = tf.compat.v1.dimension_value(x.shape[ -1 ])  # a Dimension\n"
        "    return (tf.compat.v1.logging.info,\n"
        "            'tf.train.SessionRunHook in a string')\n"
    )


def test_the_code_is_never_imported(tmp_path):
    (tmp_path / "boom.py").write_text(
        "import tensorflow as tf\nraise SystemExit('imported!')\nh = tf.train.StopAtStepHook\n"
    )
    planned = tree.plan(tmp_path)
    assert "tf.compat.v1.train.StopAtStepHook" in planned.changed[0].text


@pytest.mark.parametrize(
    "source, expected",
    [
        # under the compat.v1 alias, hooks go to tf.train (compat.v1's), canned stay V1
        ("import tensorflow.compat.v1 as tf\nh = tf.estimator.NanTensorHook\n",
         "import tensorflow.compat.v1 as tf\nh = tf.train.NanTensorHook\n"),
        ("import tensorflow.compat.v1 as tf\ne = tf.estimator.LinearClassifier\n", None),
        # TF2 code needs nothing, and TF's dropout note on rate= is not a finding
        ("import tensorflow as tf\ny = tf.nn.dropout(x, rate=0.1)\n", None),
        ("import numpy as np\nx = np.zeros(3)\n", None),
        ("import tensorflow as tf\ntf.app.run()\n", "import tensorflow as tf\nimport absl.app\nabsl.app.run()\n"),
        ("import tensorflow as tf\ndef main(_):\n  pass\ntf.app.run()\n",
         "import tensorflow as tf\nimport absl.app\ndef main(_):\n  pass\nabsl.app.run(main)\n"),
    ],
)
def test_rules_at_their_edges(source, expected):
    result = engine.upgrade_source(source)
    assert result.text == expected
    assert not [f for f in result.findings if f.severity == "ERROR"]


def _both_paths(source: str) -> tuple[engine.FileResult, engine.FileResult]:
    spliced = engine.upgrade_source(source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast, "splice", lambda *args: None)  # TF's own engine, on every file
        full = engine.upgrade_source(source)
    return spliced, full


def _key(result: engine.FileResult):
    findings = sorted((f.line, f.severity, f.message) for f in result.findings)
    return result.text, result.changes, result.renamed_by_tensorflow, findings


def _package_sample(every: int) -> list[Path]:
    """Every ``every``-th of hookbridge's own modules, in path order."""
    return sorted((ROOT / "hookbridge").rglob("*.py"))[::every]


@pytest.mark.parametrize(
    "package, least_spliced",
    [
        # CI: a fifth of hookbridge's modules (TF's engine reads 650 kB of them: 85 % of the
        # test's time, 43 s of 50 on TF 2.15 under load); the deep profile reads them all
        pytest.param(5, 25, id="package-sample"),
        pytest.param(1, 30, id="package-all", marks=pytest.mark.deep),
    ],
)
def test_the_splicing_path_gives_what_tensorflows_engine_gives(tmp_path, package, least_spliced):
    """Renames spliced into the text equal TF's engine's output, notes and counts, file by file
    (the fixtures before and after, a generated TF1 corpus, the examples' and hookbridge's code);
    files TF's engine cannot read (pasta predates Python 3.9 syntax) are left as they are."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import upgrade_speed
    finally:
        sys.path.pop(0)
    upgrade_speed.generate(tmp_path, 24, 0.5)
    trees = [FIXTURES, EXPECTED, tmp_path, ROOT / "examples"]
    paths = sorted(p for t in trees for p in t.rglob("*.py")) + _package_sample(package)
    spliced_files = 0
    for path in paths:
        source = path.read_text()
        if "tensorflow" not in source:
            continue
        spliced, full = _both_paths(source)
        if any(f.message.startswith(engine.UNREADABLE) for f in full.findings):
            assert not spliced.changed, path
            continue
        assert _key(spliced) == _key(full), path
        spliced_files += fast.splice(source, ast.parse(source), engine._fast_spec(),
                                     engine._triggers()[3]) is not None
    assert spliced_files > least_spliced, spliced_files  # most files take the fast path


def test_what_no_rule_can_rewrite_stays_a_finding(tmp_path, capsys):
    (tmp_path / "job.py").write_text(
        "import tensorflow as tf\nopt = tf.contrib.opt.LazyAdamOptimizer(0.1)\n"
    )
    shown = _hookbridge_here(capsys, "upgrade", str(tmp_path), "--write")
    assert shown.returncode == command.EXIT_PENDING, shown.stdout + shown.stderr
    assert "Left for a person" in shown.stdout and "tf.contrib.opt.LazyAdamOptimizer" in shown.stdout


def test_bad_input_is_exit_2(tmp_path, capsys):
    missing = _hookbridge_here(capsys, "upgrade", str(tmp_path / "nope"))
    assert missing.returncode == command.EXIT_ERROR and "does not exist" in missing.stderr


def _run(script: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, script, *args], cwd=cwd, capture_output=True, text=True, env=ENV,
        timeout=900,
    )


@pytest.mark.parametrize(
    "project, script, name",
    [
        # CI: the hook module (in this process: a subprocess was a TensorFlow start-up, about 20 s
        # under load); the deep profile: the BERT-shaped job too (a process of its own)
        ("census_like", "hooks.py", "SessionRunHook"),
        pytest.param("bert_like", "run_classifier.py", "Optimizer", marks=pytest.mark.deep),
    ],
)
def test_the_originals_do_not_run_on_this_tensorflow(tmp_path, monkeypatch, project, script, name):
    """The reason for stage 0: as TF1 wrote them, neither project gets past its imports. The hook
    module (it imports TensorFlow alone) runs in this process as ``python hooks.py --help`` runs
    it (``runpy``, ``__main__``): it fails at its first TF1 name, before it changed anything; the
    job, which imports its own modules and defines flags, in a process of its own."""
    folder = _copy(tmp_path, project)
    if script == "hooks.py":
        monkeypatch.setattr(sys, "argv", [str(folder / script), "--help"])
        with pytest.raises(AttributeError, match=name):
            runpy.run_path(str(folder / script), run_name="__main__")
        return
    ran = _run(script, folder, "--help")
    assert ran.returncode != 0 and "AttributeError" in ran.stderr and name in ran.stderr


def test_the_upgraded_hook_modules_run_in_a_monitored_session(upgraded, monkeypatch):
    """In this process, imported as the job imports them (their folder on ``sys.path``): the
    hook modules the upgrade wrote run in a native MonitoredSession on this TensorFlow."""
    import tensorflow as tf

    modules = ("hooks_helper", "hooks", "metric_hook")
    for module in modules:
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.syspath_prepend(str(upgraded / "census_like"))
    try:
        hooks_helper = importlib.import_module("hooks_helper")
        v1 = tf.compat.v1
        with tf.Graph().as_default() as graph:
            step = v1.train.get_or_create_global_step()
            loss = tf.identity(v1.cast(step, tf.float32) * 2.0, name="loss")
            hooks = hooks_helper.get_train_hooks(
                ["LoggingTensorHook", "ExamplesPerSecondHook", "LoggingMetricHook"],
                batch_size=4, tensors_to_log={"loss": "loss"}, every_n_iter=2,
                every_n_steps=2, warm_steps=0,
            )
            read = graph.as_graph_element(step)
            with tf.control_dependencies([loss, read]):  # the hooks' reads come first
                train = v1.assign_add(step, 1)
            with v1.train.MonitoredSession(hooks=hooks) as session:
                for _ in range(5):
                    session.run(train)
    finally:
        for module in modules:  # the fixture's modules, not another test's
            sys.modules.pop(module, None)
    assert type(hooks[2]).__module__ == "metric_hook"
    # LoggingMetricHook logs the loss of steps 0, 2, 4 as LoggingTensorHook would (loss = 2*step)
    assert hooks[2].metrics == [("loss", 0.0, 0), ("loss", 4.0, 2), ("loss", 8.0, 4)]


#: Runs each upgraded job as ``python SCRIPT ARGS`` runs it (``__main__``, its folder first on
#: ``sys.path`` and as the working directory, ``sys.argv``), one after the other in one
#: interpreter; prints each job's outcome as JSON: null, or the traceback that ended it.
_JOBS_DRIVER = """
import json, os, runpy, sys, traceback
import absl.app
outcomes = {}
for name, folder, script, *args in json.loads(sys.argv[1]):
    # absl.app.run parses the command line once a process; each job is a fresh interpreter's
    absl.app._register_and_parse_flags_with_usage.done = False
    os.chdir(folder)
    sys.path.insert(0, folder)
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
        outcomes[name] = None
    except SystemExit as e:  # absl.app.run ends with sys.exit(main(argv))
        outcomes[name] = None if e.code in (None, 0) else f"SystemExit({e.code!r})"
    except BaseException:
        outcomes[name] = traceback.format_exc()
    sys.path.remove(folder)
print(json.dumps(outcomes))
"""


@pytest.fixture(scope="module")
def upgraded_jobs(upgraded, tmp_path_factory) -> dict[str, Path]:
    """Both upgraded jobs trained (and the BERT-shaped one evaluated) on this TensorFlow with no
    hand edit: their output folders. One interpreter runs them one after the other (a process
    each was TensorFlow's and the Estimator's import twice, 7 s of CPU each); the jobs share no
    module, flag or output folder (BERT's ``modeling``/``optimization``, census's
    ``census_data``/``hooks_helper``; each Estimator builds its own graph)."""
    pytest.importorskip("tensorflow_estimator", reason="the Estimator runs on TF <= 2.15 only")
    pytest.importorskip("tf_slim", reason="the upgraded BERT-shaped model uses tf-slim")
    out = tmp_path_factory.mktemp("jobs")
    jobs = [
        ["bert", str(upgraded / "bert_like"), "run_classifier.py", f"--output_dir={out / 'bert_out'}",
         "--num_train_steps=4", "--save_checkpoints_steps=2"],
        ["census", str(upgraded / "census_like"), "wide_deep.py",
         f"--model_dir={out / 'census_out'}", "--train_steps=10"],
    ]
    ran = subprocess.run(
        [sys.executable, "-c", _JOBS_DRIVER, json.dumps(jobs)], capture_output=True, text=True,
        env=ENV, timeout=900,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    outcomes = json.loads(ran.stdout.strip().splitlines()[-1])
    return {name: (out / f"{name}_out", outcomes[name], ran.stderr) for name in ("bert", "census")}


def _job(upgraded_jobs, name: str) -> Path:
    """The job's output folder, once it ran to its end (else its traceback and the log's end)."""
    out, failure, stderr = upgraded_jobs[name]
    assert failure is None, f"{failure}\n{stderr[-3000:]}"
    return out


def test_the_upgraded_bert_job_trains_and_evaluates_on_tf215(upgraded_jobs):
    import tensorflow as tf

    out = _job(upgraded_jobs, "bert")
    assert tf.train.load_checkpoint(str(out)).get_tensor("global_step") == 4
    reader = tf.train.load_checkpoint(str(out))
    assert "bert/encoder/layer_1/output/LayerNorm/gamma" in reader.get_variable_to_shape_map()
    assert "bert/encoder/layer_1/output/dense/kernel/adam_m" in reader.get_variable_to_shape_map()
    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    assert results["global_step"] == "4" and 0.0 <= float(results["eval_accuracy"]) <= 1.0


def test_the_upgraded_census_job_keeps_its_v1_estimator_on_tf215(upgraded_jobs):
    import tensorflow as tf

    out = _job(upgraded_jobs, "census")
    names = tf.train.load_checkpoint(str(out)).get_variable_to_shape_map()
    # V1's optimizers: per-variable slots beside the variable (V2 writes training/Adagrad/...)
    assert "dnn/hiddenlayer_0/kernel/t_0/Adagrad" in names or "dnn/hiddenlayer_0/kernel/Adagrad" in names
    assert not any(n.startswith("training/") for n in names)
    logged = [line.split() for line in (out / "hook_metrics.txt").read_text().splitlines()]
    # census's own LoggingMetricHook found the V1 head's tensors (V2 has no head/truediv)
    assert [(tag, int(step)) for tag, step, _ in logged] == [
        ("average_loss", 0), ("loss", 0), ("average_loss", 5), ("loss", 5)
    ]
    # V1's loss is the SUM over the batch: 16 examples times the mean
    for (_, _, mean), (_, _, total) in zip(logged[0::2], logged[1::2]):
        assert float(total) == pytest.approx(16 * float(mean), rel=1e-5)
