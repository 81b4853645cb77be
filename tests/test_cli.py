"""The ``hookbridge`` command: ``hookbridge demo`` end to end, in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import pytest

from hookbridge import cli

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


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


def test_demo_end_to_end(tmp_path):
    out = tmp_path / "demo"
    proc = _run("demo", "--out", str(out), "--steps", "12")
    assert proc.returncode == 0, proc.stderr[-3000:]
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


def test_demo_writes_into_default_directory(tmp_path):
    proc = _run("demo", "--steps", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "hookbridge_demo" / "loss.png").exists()
    assert (tmp_path / "hookbridge_demo" / "checkpoints" / "model.ckpt-2.index").exists()
