"""The ``hookbridge`` command: ``hookbridge demo`` end to end (in process; in a subprocess in the
deep profile), ``hookbridge check`` in a subprocess (the entry point), what it imports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from hookbridge import cli

ROOT = Path(__file__).resolve().parent.parent
# PYTHONPATH: subprocesses started in another folder (cwd=tmp_path) still use this hookbridge.
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
}


def _run(*args: str, cwd=None, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hookbridge", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        cwd=cwd,
    )


def test_entry_point_is_declared():
    scripts = {ep.name: ep.value for ep in metadata.entry_points(group="console_scripts")}
    assert scripts.get("hookbridge") == "hookbridge.cli:main"


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_steps_must_be_positive(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["demo", "--steps", "0"])
    assert exc.value.code == 2
    assert "--steps must be at least 1" in capsys.readouterr().err


def _demo_run(tmp_path_factory):
    """A run of ``hookbridge demo --steps 12`` into a folder of its own: (folder, process)."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    proc = _run("demo", "--out", str(out), "--steps", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def _demo_in_process(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``hookbridge demo ARGS`` through ``cli.main`` in this process, in the working directory
    ``cwd``: its stdout, and its stderr with TensorFlow's log records (what LoggingTensorHook
    logs; a handler of its own on TensorFlow's logger, whose handlers keep the stream they were
    made with); the working directory, the environment and the log level the demo sets for its
    hooks (INFO) restored after."""
    import logging
    import tempfile

    import tensorflow as tf

    level = tf.compat.v1.logging.get_verbosity()
    with tempfile.TemporaryFile("w+") as o, tempfile.TemporaryFile("w+") as e:
        handler, logger = logging.StreamHandler(e), tf.get_logger()
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(cwd)
            mp.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
            mp.setattr(sys, "stdout", o)
            mp.setattr(sys, "stderr", e)
            logger.addHandler(handler)
            try:
                status = cli.main(["demo", *args])
            finally:
                logger.removeHandler(handler)
                tf.compat.v1.logging.set_verbosity(level)
        o.seek(0), e.seek(0)
        stdout, stderr = o.read(), e.read()
    assert status == 0, stderr[-3000:]
    return subprocess.CompletedProcess(["hookbridge", "demo", *args], status, stdout, stderr)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo's run for the tests below: ``hookbridge demo --out DIR --steps 12`` through
    ``cli.main`` in this process (:func:`_demo_in_process`), on every stack: the stack's
    differences are the demo's and the bridge's, the same in process, and a process of its own
    adds only TensorFlow's start-up (7-8 s of CPU). The entry point in a process of its own runs
    in CI in the ``hookbridge check`` tests below (keras3, tf215), and for the demo in the deep
    profile (:func:`test_demo_in_a_process_of_its_own`)."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    return out, _demo_in_process(out.parent, "--out", str(out), "--steps", "12")


@pytest.fixture(scope="module")
def demo_here(tmp_path_factory):
    """``hookbridge demo --steps 12`` without ``--out`` in this process (:func:`_demo_in_process`),
    in a working directory of its own: (the folder it wrote, the run)."""
    cwd = tmp_path_factory.mktemp("demo_here")
    return cwd / "hookbridge_demo", _demo_in_process(cwd, "--steps", "12")


def test_demo_end_to_end(demo_run):
    _assert_demo_end_to_end(*demo_run)


def _assert_demo_end_to_end(out: Path, proc: subprocess.CompletedProcess) -> None:
    """What a run of ``hookbridge demo --steps 12`` into ``out`` printed and wrote."""
    stdout = proc.stdout
    for hook in (
        "StopAtStepHook",
        "NanTensorHook",
        "LoggingTensorHook",
        "CheckpointSaverHook",
        "SummarySaverHook",
        "StepCounterHook",
    ):
        assert f"- {hook}" in stdout
    assert "stopped fit at global step 12" in stdout
    # Checkpoints: every 3 steps (12 // 4), read back with tf.train.load_checkpoint.
    for step in (0, 3, 6, 9, 12):
        assert f"- model.ckpt-{step}\n" in stdout
        assert (out / "checkpoints" / f"model.ckpt-{step}.index").exists()
    assert "model/000/kernel             shape=[3, 8]" in stdout
    assert "global_step = 12" in stdout
    # Events, read back with EventAccumulator: one batch_loss per step.
    assert "batch_loss: 12 points, steps 1..12" in stdout
    assert "global_step/sec:" in stdout
    # Restored into a fresh model: same step, same predictions.
    assert "restored global step 12; optimizer.iterations = 12" in stdout
    assert "max |prediction difference| vs the trained model: 0;" in stdout
    png = out / "loss.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # LoggingTensorHook logged the batch loss and the global step to stderr.
    assert "loss = " in proc.stderr and "step = 0" in proc.stderr


@pytest.mark.one_stack(
    "the demo's seeding is its own (one SEED, no TensorFlow/Keras version branch in _demo.py); "
    "the demo itself runs end to end on every stack"
)
def test_demo_is_reproducible(demo_run, demo_here):
    """The run of :func:`demo_run` and a second run in this process (:func:`demo_here`:
    ``cli.main``, after whatever other tests ran here, into the default folder): the same
    figures and checkpoint, bit for bit."""
    _assert_same_run(demo_run, demo_here)


def _assert_same_run(first_run, second_run) -> None:
    """Two demo runs of 12 steps, (folder, process) each: the same figures and checkpoint."""
    import numpy as np
    import tensorflow as tf

    (out1, proc1), (out2, proc2) = first_run, second_run

    def figures(out, proc):
        # Every line but the output folder and StepCounterHook's global_step/sec (a timing).
        text = proc.stdout.replace(str(out), "<out>")
        return [line for line in text.splitlines() if "global_step/sec" not in line]

    assert figures(out1, proc1) == figures(out2, proc2)
    assert "seed 0" in proc1.stdout and re.search(r"batch_loss: 12 points.*last \d", proc1.stdout)
    # The checkpoints hold the same weights, bit for bit (read with the real reader).
    first = tf.train.load_checkpoint(str(out1 / "checkpoints" / "model.ckpt-12"))
    second = tf.train.load_checkpoint(str(out2 / "checkpoints" / "model.ckpt-12"))
    keys = sorted(first.get_variable_to_shape_map())
    assert keys == sorted(second.get_variable_to_shape_map()) and "model/000/kernel" in keys
    for key in keys:
        np.testing.assert_array_equal(first.get_tensor(key), second.get_tensor(key), err_msg=key)


@pytest.mark.deep
def test_demo_in_a_process_of_its_own(demo_run, tmp_path_factory):
    """``python -m hookbridge demo --steps 12`` as a user runs it, in a fresh interpreter: it
    runs end to end, and prints and saves what the in-process :func:`demo_run` did, bit for bit
    (CI runs the entry point in a process of its own in the ``hookbridge check`` tests)."""
    by_process = _demo_run(tmp_path_factory)
    _assert_demo_end_to_end(*by_process)
    _assert_same_run(by_process, demo_run)


def _modules_loaded(*steps: str) -> list[list[str]]:
    """Runs each piece of code of ``steps`` in turn in one fresh interpreter; returns the
    TensorFlow/Keras modules loaded after each (so far: the first list that is not empty names
    the step that loaded them; what a step loads alone is in the list after it)."""
    probe = [
        "import sys",
        "roots = ('tensorflow', 'keras', 'tf_keras', 'tensorboard')",
        "def loaded():",
        "    print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in roots))",
    ]
    for code in steps:
        probe += [code, "loaded()"]
    proc = subprocess.run(
        [sys.executable, "-c", "\n".join(probe)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lists = [line[len("LOADED ") :] for line in proc.stdout.splitlines() if line.startswith("LOADED ")]
    assert len(lists) == len(steps), proc.stdout[-3000:]
    return [eval(names) for names in lists]  # printed lists of module names


@pytest.mark.one_stack("hookbridge's lazy imports: no TensorFlow/Keras version branch")
def test_pytest_plugin_and_help_load_no_tensorflow():
    # One interpreter for the five (what each loads alone is in the list after it).
    steps = ["import hookbridge.testing.pytest_plugin", "import hookbridge, hookbridge.testing"]
    for argv in (["--help"], ["scan", "--help"], ["demo", "--help"]):
        steps.append(
            "from hookbridge.cli import main\n"
            "try:\n"
            f"    main({argv!r})\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
        )
    loaded = _modules_loaded(*steps)
    assert loaded == [[]] * len(steps), list(zip(steps, loaded))


@pytest.mark.one_stack("hookbridge's lazy imports: no TensorFlow/Keras version branch")
def test_tensorflow_is_imported_on_first_use(tensorflow_import_noise):
    # The probe above can see TensorFlow: a public name that needs it loads it (the fixture's
    # interpreter: ``import hookbridge``, then ``hookbridge.HookCallback``).
    _, loaded = tensorflow_import_noise
    assert "tensorflow" in loaded


def test_lazy_exports_are_the_public_names():
    import hookbridge
    import hookbridge.testing

    for module in (hookbridge, hookbridge.testing):
        assert sorted(module.__all__) == sorted(module._EXPORTS)
        assert set(module.__all__) <= set(dir(module))
        for name in module.__all__:
            assert getattr(module, name) is not None
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            module.nope  # noqa: B018


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "scan" in out


@pytest.mark.one_stack("the default folder is argparse's; the demo itself runs on every stack")
def test_demo_writes_into_default_directory(demo_here):
    """In process: ``cli.main`` in a working directory of its own (:func:`demo_here`), the
    environment restored after."""
    out, _ = demo_here
    assert out.parent / "hookbridge_demo" == out
    assert (out / "loss.png").exists()
    assert (out / "checkpoints" / "model.ckpt-12.index").exists()


def test_version(capsys):
    import hookbridge

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"hookbridge {hookbridge.__version__}\n"


# TensorFlow's start-up lines, as TF 2.21 prints them on x86 (the CPU-feature line at INFO, the
# oneDNN notice before absl's logging honours TF_CPP_MIN_LOG_LEVEL).
_TF_NOISE = ("oneDNN custom operations", "cpu_feature_guard", "absl::InitializeLog")
CHECK_TARGETS = ROOT / "tests" / "check_fixtures"


def _env_without_tf_settings(**extra: str) -> dict:
    env = {k: v for k, v in ENV.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(CHECK_TARGETS)])
    return {**env, **extra}


@pytest.fixture(scope="module")
def tensorflow_import_noise() -> tuple[list[str], list[str]]:
    """What TensorFlow's import prints here at its default log level (0: the variable unset, as
    in the first test below, or set to "0" by the user, as in the second), and the TensorFlow and
    Keras modules loaded (:func:`_modules_loaded`'s list). One interpreter imports ``hookbridge``
    and asks for ``hookbridge.HookCallback``, which imports TensorFlow (hookbridge leaves its
    log level alone: only the command line sets it)."""
    code = (
        "import hookbridge\n"
        "hookbridge.HookCallback\n"
        "import sys\n"
        "roots = ('tensorflow', 'keras', 'tf_keras', 'tensorboard')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in roots))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, env=_env_without_tf_settings(TF_CPP_MIN_LOG_LEVEL="0"),
        check=False, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    noise = [line for line in proc.stderr.splitlines() if any(n in line for n in _TF_NOISE)]
    return noise, eval(proc.stdout.strip().splitlines()[-1])  # a printed list of module names


@pytest.mark.per_tensorflow("the start-up lines are TensorFlow's")
def test_check_prints_its_verdict_without_tensorflows_start_up_lines(tensorflow_import_noise):
    env = _env_without_tf_settings()
    noisy, _ = tensorflow_import_noise
    proc = subprocess.run(
        [sys.executable, "-m", "hookbridge", "check", "check_targets:make_loss_every_2"],
        capture_output=True, text=True, env=env, check=False, timeout=240, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[0].endswith(": conforms")
    assert [line for line in proc.stderr.splitlines() if any(n in line for n in _TF_NOISE)] == []
    if not noisy:
        pytest.skip("this TensorFlow prints nothing on import here: nothing was filtered")


@pytest.mark.per_tensorflow("the start-up lines are TensorFlow's")
def test_a_log_level_the_user_set_is_kept(tensorflow_import_noise):
    env = _env_without_tf_settings(TF_CPP_MIN_LOG_LEVEL="0")
    noisy, _ = tensorflow_import_noise
    if not noisy:
        pytest.skip("this TensorFlow prints nothing on import here")
    proc = subprocess.run(
        [sys.executable, "-m", "hookbridge", "check", "check_targets:make_loss_every_2"],
        capture_output=True, text=True, env=env, check=False, timeout=240, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The user asked for TensorFlow's INFO lines: they are all there.
    assert [line for line in proc.stderr.splitlines() if any(n in line for n in _TF_NOISE)]


def test_quiet_tensorflow_keeps_other_lines():
    from hookbridge.cli import _IMPORT_NOISE

    assert _IMPORT_NOISE.match(
        b"I0000 00:00:1795507697.549265     883 port.cc:153] oneDNN custom operations are on. "
        b"You may see slightly different numerical results."
    )
    assert _IMPORT_NOISE.match(
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
    )
    assert not _IMPORT_NOISE.match(b"E0000 00:00:1.0  1 port.cc:153] something else failed")
    assert not _IMPORT_NOISE.match(b"Traceback (most recent call last):")


@pytest.mark.one_stack("TensorFlow is made unfindable: no stack is involved")
def test_check_without_tensorflow_says_how_to_install_it(tmp_path):
    # TensorFlow made unfindable in this interpreter only (the environment has it installed).
    code = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'tensorflow' else real(name, *a)\n"
        "from hookbridge.cli import main\n"
        "sys.exit(main(['check', 'check_targets:make_loss_every_2']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=False,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        'hookbridge check needs TensorFlow, which is not installed here: pip install '
        '"tf-hookbridge[tensorflow-cpu]" (or [tensorflow])'
    )
