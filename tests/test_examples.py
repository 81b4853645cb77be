"""Every script in examples/ runs (in a subprocess, as a user runs it) and does what it says.

TensorFlow's start-up (6-8 s of CPU a process) once per stack is enough: one subprocess runs the
examples in turn (:func:`shared_run`: each as ``python examples/<name> ARGS`` runs it, ``__main__``
with its own ``sys.argv`` and its own stdout and stderr). On keras3 (the primary stack) every
example runs there; on tfkeras and tf215 the ones that write to a folder do, and the ones that
only print run in this process (:func:`example_output`)."""

from __future__ import annotations

import csv
import os
import re
import runpy
import sys
import tempfile
from importlib import resources
from pathlib import Path

import conftest
import pytest
from one_process import Job, Ran, run_scripts

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}

#: Examples that only print (their stdout is their whole trace) -> whether they write to a
#: temporary folder (``TMPDIR``). On tfkeras and tf215 they run in this process.
PRINTING = {
    "loss_hook.py": False,
    "summary_saver.py": True,
    "examples_per_second.py": False,
    "history_saver.py": False,
    "callbacks_in_monitored_session.py": True,
}
#: Examples given an output folder, run in the shared subprocess on every stack; the conformance
#: kit's script on keras3 only (``test_conformance_kit_example_checks_a_hook_and_a_callback``).
WRITING = ("estimator_to_fit.py", "custom_loop_gan.py")


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory) -> dict[str, tuple[Ran, Path]]:
    """This stack's share of the examples, run in turn in one subprocess
    (:func:`one_process.run_scripts`): each one's run, and the folder it was given (its
    argument, or its ``TMPDIR``)."""
    base = tmp_path_factory.mktemp("examples")
    names = list(WRITING)
    if conftest.STACK == "keras3":
        names = [*PRINTING, "conformance_kit.py", *WRITING]
    jobs, folders = [], {}
    for name in names:
        folders[name] = folder = base / name.removesuffix(".py")
        folder.mkdir()
        args = (str(folder),) if name in WRITING else ()
        tmpdir = folder if PRINTING.get(name) else None
        jobs.append(Job(name, EXAMPLES / name, args, tmpdir))
    ran = run_scripts(jobs, base, ENV, timeout=900)
    return {name: (ran[name], folders[name]) for name in names}


def example_output(name: str, request, capsys, monkeypatch, tmpdir: Path | None = None):
    """The stdout of ``examples/<name>`` run without arguments, and the temporary folder it was
    given (``TMPDIR``, for examples that write to one). On keras3 (the primary stack) as a user
    runs it, in a subprocess (:func:`shared_run`); on tfkeras and tf215 its ``__main__`` runs in
    this process (``runpy``): the stack's differences are the bridge's, the same in process, and
    a subprocess adds only TensorFlow's start-up (6-8 s of CPU). For examples whose only trace
    is stdout (each sets the global seed, as every test's model does); one that writes to a
    temporary folder gets ``tmpdir`` as its ``TMPDIR`` (in process: ``tempfile``'s ``tempdir``,
    what ``TemporaryDirectory`` reads)."""
    if conftest.STACK == "keras3":
        ran, folder = request.getfixturevalue("shared_run")[name]
        return ran.check().stdout, folder
    if tmpdir is not None:
        monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    monkeypatch.setattr(sys, "argv", [str(EXAMPLES / name)])
    capsys.readouterr()
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return capsys.readouterr().out, tmpdir


def test_every_example_is_tested():
    tested = {
        "loss_hook.py",
        "summary_saver.py",
        "estimator_to_fit.py",
        "examples_per_second.py",
        "history_saver.py",
        "callbacks_in_monitored_session.py",
        "conformance_kit.py",
        "custom_loop_gan.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_loss_hook_logs_every_step_and_stops_below_threshold(request, capsys, monkeypatch):
    out = example_output("loss_hook.py", request, capsys, monkeypatch)[0].splitlines()
    assert out[:2] == ["begin", "session created"]
    steps = [re.fullmatch(r"step=(\d+) loss=([\d.]+)", line) for line in out[2:-2]]
    assert all(steps), out
    numbers = [int(m.group(1)) for m in steps]
    losses = [float(m.group(2)) for m in steps]
    assert numbers == list(range(1, len(numbers) + 1))
    # Stopped at the first loss below the threshold, mid-epoch (8 steps per epoch), not before.
    assert losses[-1] < 0.01 and all(v >= 0.01 for v in losses[:-1])
    assert out[-2] == "end"
    assert out[-1].startswith(f"fit stopped after {numbers[-1]} steps")
    assert numbers[-1] < 20 * 8


def assert_wrote_to_a_removed_temporary_folder(out: str, tmp_path: Path) -> None:
    """Without a folder argument an example says where it writes, and removes it at exit."""
    written = re.match(r"writing to (\S+) \(temporary, removed at exit", out)
    assert written and Path(written.group(1)).parent == tmp_path, out[:300]
    assert not Path(written.group(1)).exists()
    # TF's autograph writes its generated modules (and their bytecode, tf_keras, Keras 2) under
    # the temporary directory too: TensorFlow's, not the example's, removed at the process's exit
    # (atexit), so still there when the example ran in this process (:func:`example_output`).
    tf_own = ("__pycache__", "__autograph_generated_file")
    assert [p for p in tmp_path.iterdir() if not p.name.startswith(tf_own)] == []


def test_summary_saver_writes_every_save_steps(tmp_path, request, capsys, monkeypatch):
    out, folder = example_output("summary_saver.py", request, capsys, monkeypatch, tmpdir=tmp_path)
    assert_wrote_to_a_removed_temporary_folder(out, folder)
    # 320 examples / 32 = 10 steps per epoch, 3 epochs, save_steps=5: steps 1, 6, ..., 26.
    assert re.findall(r"batch_loss step=(\d+)", out) == ["1", "6", "11", "16", "21", "26"]
    kernels = re.findall(r"dense/kernel step=(\d+) num=(\d+) sum=(-?[\d.]+)", out)
    assert [k[0] for k in kernels] == ["1", "6", "11", "16", "21", "26"]
    assert {k[1] for k in kernels} == {"32"}  # the 4x8 kernel
    assert len({k[2] for k in kernels}) == 6  # real weights, changing with training


def test_estimator_to_fit_resumes_from_checkpoint(shared_run):
    proc, tmp_path = shared_run["estimator_to_fit.py"]
    out = proc.check().stdout
    assert out.startswith(f"writing to {tmp_path}\n")
    assert "stopped at global step 20" in out
    assert "resumed from model.ckpt-20 at global step 20" in out
    assert "stopped at global step 40" in out
    assert "checkpoints: ['model.ckpt-20', 'model.ckpt-30', 'model.ckpt-40']" in out
    mse = [float(v) for v in re.findall(r"mse ([\d.]+)", out)]
    assert mse[1] < mse[0]  # the resumed run continued training, not from scratch
    # LoggingTensorHook, every 10 steps, with the global step the bridge holds.
    logged = re.findall(r"loss = [\d.]+, step = (\d+)", proc.stderr)
    assert logged == ["0", "10", "20", "30"]
    assert (tmp_path / "model.ckpt-40.index").exists()


def test_examples_per_second_hook_triggers_on_the_global_step(request, capsys, monkeypatch):
    out = example_output("examples_per_second.py", request, capsys, monkeypatch)[0]
    # 2048 / 64 = 32 steps per epoch, 2 epochs; the hook sees the stale (pre-step) global step
    # 0..63; the timer first triggers after warm_steps=5 at 6 (no interval yet, nothing logged),
    # then every 10 steps.
    steps = re.findall(r"global_step=(\d+) average_examples_per_sec=[\d.]+ current", out)
    assert steps == ["16", "26", "36", "46", "56"]
    assert "5 measurements over 64 steps" in out


def test_history_saver_reads_losses_collection(request, capsys, monkeypatch):
    out = example_output("history_saver.py", request, capsys, monkeypatch)[0]
    assert re.findall(r"Running step: (\d+)", out) == ["1", "2", "3", "4"]
    history = re.search(r"mean_losses_history: (.*)", out).group(1).split()
    assert len(history) == 4
    means = re.search(r"batch losses: ([\d.]+); Keras epoch loss: ([\d.]+)", out)
    # Batch values, whose mean Keras logs (both printed to 4 decimals: equal to the last digit).
    assert abs(float(means.group(1)) - float(means.group(2))) <= 1.5e-4


def test_callbacks_in_monitored_session_early_stopping(tmp_path, request, capsys, monkeypatch):
    out, folder = example_output(
        "callbacks_in_monitored_session.py", request, capsys, monkeypatch, tmpdir=tmp_path
    )
    assert_wrote_to_a_removed_temporary_folder(out, folder)  # history.csv was read back below
    epochs = re.findall(r"epoch (\d+) loss ([\d.]+)", out)
    stopped = int(re.search(r"stopped the session at epoch (\d+)", out).group(1))
    assert stopped > 0 and len(epochs) == stopped + 1  # CSVLogger wrote every synthesized epoch
    assert [int(e) for e, _ in epochs] == list(range(stopped + 1))
    losses = [float(v) for _, v in epochs]
    assert losses[-1] < losses[0]
    final_lr = float(re.search(r"learning rate at ([\d.e-]+)", out).group(1))
    assert final_lr < 0.1  # ReduceLROnPlateau assigned the graph variable


@pytest.mark.one_stack(
    "the kit on these classes runs in process on every stack: "
    "test_check.py::test_check_on_every_examples_hooks; here, the script's own main"
)
def test_conformance_kit_example_checks_a_hook_and_a_callback(shared_run):
    out = shared_run["conformance_kit.py"][0].check().stdout
    assert re.search(r"LossThresholdHook conforms \(\d+ events\)", out), out
    assert re.search(r"EpochCounter conforms \(\d+ events\)", out), out


def test_shipped_mtcars_is_the_real_table():
    with resources.files("hookbridge").joinpath("data/mtcars.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 32
    assert rows[0]["model"] == "Mazda RX4" and rows[-1]["model"] == "Volvo 142E"
    sums = {c: round(sum(float(r[c]) for r in rows), 3) for c in ("mpg", "cyl", "drat", "wt", "hp")}
    assert sums == {"mpg": 642.9, "cyl": 198.0, "drat": 115.09, "wt": 102.952, "hp": 4694.0}
    assert sorted({r["cyl"] for r in rows}) == ["4", "6", "8"]


def test_custom_loop_gan_keeps_its_hooks_and_gains_callbacks(shared_run):
    """The GAN's custom loop: StopAtStepHook stops at global step 60 (the generator optimizer's
    iterations), CheckpointSaverHook wrote every 20 steps, CSVLogger one row per epoch, the
    LoggingTensorHook lines every 20 steps, and the checkpoint restores into a fresh model."""
    proc, tmp_path = shared_run["custom_loop_gan.py"]
    out = proc.check().stdout
    assert "stopped at global step 60 (StopAtStepHook last_step=60), 3 epochs" in out, out
    assert "restored step 60; generator outputs equal after restore: True" in out, out
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(str(tmp_path))
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths)
    assert steps == [0, 20, 40, 60]
    assert tf.train.load_checkpoint(str(tmp_path)).get_tensor("global_step") == 60
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    assert all(float(r["g_loss"]) > 0 and float(r["d_loss"]) > 0 for r in rows)
    logged = re.findall(r"d_loss = [\d.]+, g_loss = [\d.]+", proc.stderr)
    assert len(logged) == 3, proc.stderr[-2000:]  # steps 0, 20, 40 (every_n_iter=20)
