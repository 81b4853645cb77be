"""``hookbridge check MODULE:ATTR``: the real CLI in a subprocess, and its exit statuses.

The fixture module (``tests/check_fixtures/check_targets.py``) holds a conforming hook, a hook that
watches variables only the TF1 graph has, a callback, and bad targets. The native and bridged
traces the command compares are the conformance kit's own (``hook_traces``/``callback_traces``);
the JSON test checks the command reports exactly those.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookbridge._migrate import check as check_mod
from hookbridge import cli
from hookbridge.testing import conform

FIXTURES = Path(__file__).resolve().parent / "check_fixtures"
ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "PYTHONPATH": os.pathsep.join([str(ROOT), str(FIXTURES)]),
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hookbridge", "check", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        env=ENV,
        cwd=ROOT,
    )


@pytest.fixture(autouse=True)
def _fixtures_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))


def _in_process(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    parser = cli._parser()
    ns = parser.parse_args(["check", *args])
    request = check_mod.CheckRequest(ns.target, ns.steps, ns.steps_per_epoch, ns.callback, ns.fmt)
    status = check_mod.main(request, out, err)
    return status, out.getvalue(), err.getvalue()


def test_conforming_hook_subprocess():
    proc = _cli("check_targets:make_loss_every_2", "--steps", "4", "--steps-per-epoch", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = proc.stdout.splitlines()[0]
    assert first == "check_targets:make_loss_every_2 (hook, 4 steps, 2 per epoch): conforms"
    # begin + (before_run, after_run) x 4 + the runner's outcome, in both worlds.
    assert "gave the same 10 events" in proc.stdout


def test_non_conforming_hook_shows_the_diff_subprocess():
    proc = _cli("check_targets:DenseWatcher")
    assert proc.returncode == 1, proc.stderr[-3000:]
    out = proc.stdout
    assert "check_targets:DenseWatcher (hook, 6 steps, 3 per epoch): does NOT conform" in out
    assert "first difference at event 1" in out
    # Side by side: natively two float tensors (dense/kernel, dense/bias), bridged none.
    marked = next(line for line in out.splitlines() if line.lstrip().startswith(">>"))
    assert "'fetches': ['<tensor float32>', '<tenso" in marked
    assert marked.endswith(
        "DenseWatcher[0] before_run 0 {'fetches': [], 'feeds': 0, 'trace_level': 0}"
    )
    assert "native" in out and "HookCallback" in out


def test_callback_json_subprocess():
    proc = _cli("check_targets:make_early_stopping", "--callback", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads(proc.stdout)
    assert payload["direction"] == "callback" and payload["conforms"] is True
    assert payload["first_difference"] is None and payload["diff"] is None
    assert payload["native"] == payload["bridged"]
    methods = [event[1] for event in payload["native"]]
    # Two epochs of 3 steps (tf_keras's EarlyStopping also overrides on_epoch_begin).
    assert methods[0] == "on_train_begin" and methods[-2:] == ["on_train_end", "outcome"]
    assert methods.count("on_epoch_end") == 2


def test_json_reports_the_kits_traces():
    status, out, _ = _in_process("check_targets:DenseWatcher", "--format", "json", "--steps", "3")
    assert status == 1
    payload = json.loads(out)
    import check_targets

    kit = conform.hook_traces(check_targets.DenseWatcher, steps=3, steps_per_epoch=3)
    assert not kit.conforms
    assert payload["native"] == json.loads(json.dumps(kit.native))
    assert payload["bridged"] == json.loads(json.dumps(kit.bridged))
    assert payload["first_difference"] == 1
    assert payload["native"][1][3]["fetches"] == ["<tensor float32>", "<tensor float32>"]
    assert payload["bridged"][1][3]["fetches"] == []
    assert "first difference at event 1" in payload["diff"]


def test_a_list_of_hooks_that_stops():
    status, out, _ = _in_process("check_targets:make_two", "--format", "json")
    assert status == 0
    payload = json.loads(out)
    # StopAtStepHook(last_step=4) stops both worlds after 4 steps of the 6 asked for.
    runs = [e for e in payload["native"] if e[0] == "LossEveryN[0]" and e[1] == "after_run"]
    assert [e[2] for e in runs] == [0, 1, 2, 3]
    assert [e[4] for e in runs] == [False] * 4  # LossEveryN runs before the stop request
    stops = [e for e in payload["native"] if e[0] == "StopAtStepHook[1]" and e[1] == "after_run"]
    assert [e[4] for e in stops] == [False, False, False, True]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nosuchmodule:x",), "module not found: 'nosuchmodule'"),
        (("check_targets:nope",), "module 'check_targets' has no attribute 'nope'"),
        (("check_targets",), "expected MODULE:ATTR"),
        (
            ("check_targets:NOT_CALLABLE",),
            "check_targets:NOT_CALLABLE is not callable (it is a int)",
        ),
        (("check_targets:A_HOOK_INSTANCE",), "is a LossEveryN instance, not a factory"),
        (
            ("check_targets:make_early_stopping",),
            "returned EarlyStopping, not a SessionRunHook: add --callback",
        ),
        (
            ("check_targets:make_loss_every_2", "--callback"),
            "returned LossEveryN, not a Keras callback: drop --callback",
        ),
        (("check_targets:broken_factory",), "raised RuntimeError: the factory itself is broken"),
        (("check_targets:make_two", "--steps", "5"), "--steps 5 must be a positive multiple"),
        (("missing/dir/hooks.py:make",), "module file not found"),
        (
            ("check_targets:callback_failing_the_second_time", "--callback"),
            (
                "the check could not run check_targets:callback_failing_the_second_time: "
                "RuntimeError: second call"
            ),
        ),
    ],
)
def test_bad_input_exits_2(args, message):
    status, out, err = _in_process(*args)
    assert status == 2
    assert message in err
    assert out == ""


def test_bad_input_subprocess_and_json():
    proc = _cli("check_targets:nope", "--format", "json")
    assert proc.returncode == 2
    assert "hookbridge check: error: module 'check_targets' has no attribute 'nope'" in proc.stderr
    assert json.loads(proc.stdout) == {
        "target": "check_targets:nope",
        "error": "module 'check_targets' has no attribute 'nope'.",
    }


EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize(
    ("target", "callback"),
    [
        ("loss_hook.py:LossHook('loss:0', threshold=0.5)", False),
        ("examples_per_second.py:ExamplesPerSecondHook(1, every_n_steps=2)", False),
        ("history_saver.py:HistorySaverCustomHook(2)", False),
        ("conformance_kit.py:LossThresholdHook(1.5)", False),
        ("conformance_kit.py:EpochCounter(1)", True),
    ],
)
def test_check_on_every_examples_hooks(target, callback):
    # Every hook and callback class of examples/ conforms (examples/migration: test_migration).
    args = [f"{EXAMPLES}/{target}"] + (["--callback"] if callback else [])
    status, out, err = _in_process(*args)
    assert status == 0, out + err
    assert out.splitlines()[0].endswith(": conforms")


def test_a_call_expression_is_built_per_world():
    status, out, _ = _in_process("check_targets:LossEveryN(n=3)", "--format", "json")
    assert status == 0
    payload = json.loads(out)
    assert payload["target"] == "check_targets:LossEveryN(n=3)"
    assert payload["native"][0] == ["LossEveryN[0]", "begin"]
    status, _, err = _in_process("check_targets:LossEveryN(n=")
    assert status == 2 and "is not a Python call expression" in err
    status, _, err = _in_process("check_targets:LossEveryN(nope=1)")
    assert status == 2 and "raised TypeError" in err


def test_a_file_path_target():
    status, out, _ = _in_process(
        f"{FIXTURES / 'check_targets.py'}:make_loss_every_2", "--steps", "3"
    )
    assert status == 0
    assert out.splitlines()[0].endswith("(hook, 3 steps, 3 per epoch): conforms")


def test_imports_only_the_named_module(tmp_path):
    pkg = tmp_path / "project"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hooks.py").write_text(
        "import tensorflow as tf\n"
        "def make():\n    return tf.compat.v1.train.StopAtStepHook(last_step=2)\n"
    )
    (pkg / "train.py").write_text("raise SystemExit('the training driver must not run')\n")
    code = (
        "import json, sys; from hookbridge._migrate import check as _check; before = set(sys.modules); "
        "_check.resolve('project.hooks:make'); "
        "print(json.dumps(sorted(m for m in set(sys.modules) - before "
        "if m.startswith('project'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])},
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["project", "project.hooks"]
