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

from hookbridge import cli
from hookbridge._migrate import check as check_mod
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
    request = check_mod.CheckRequest(
        ns.target,
        ns.steps,
        ns.steps_per_epoch,
        ns.callback,
        ns.fmt,
        replaced_by=ns.replaced_by,
        model=ns.model,
    )
    status = check_mod.main(request, out, err)
    return status, out.getvalue(), err.getvalue()


#: Each check below runs ``hookbridge check`` as a user does (a subprocess: the entry point, argv,
#: exit status and stdout) and in process (``check_mod.main``, what the entry point calls). The
#: verdict depends on the stack: in process it runs on every stack. The subprocess adds only the
#: wiring, which has no TensorFlow/Keras version branch, and the entry point passes the status
#: ``check_mod.main`` returns, whatever it is (``cli.main``: ``int(args.handler(args))``): in CI
#: the entry point runs in test_cli.py (``python -m hookbridge check
#: check_targets:make_loss_every_2``, its exit 0 and its verdict line, on keras3 and tf215);
#: here the subprocess form runs in the deep profile (each is a TensorFlow start-up: 14-18 s
#: under CI load).
HOW_DEEP_SUBPROCESS = pytest.mark.parametrize(
    "how", [pytest.param("subprocess", marks=pytest.mark.deep), "in_process"]
)


def _check(how: str, *args: str) -> tuple[int, str, str]:
    """``hookbridge check ARGS`` in a subprocess or in process: (exit status, stdout, stderr)."""
    if how == "in_process":
        return _in_process(*args)
    proc = _cli(*args)
    return proc.returncode, proc.stdout, proc.stderr


@HOW_DEEP_SUBPROCESS
def test_conforming_hook(how):
    code, out, err = _check(
        how, "check_targets:make_loss_every_2", "--steps", "4", "--steps-per-epoch", "2"
    )
    assert code == 0, err[-3000:]
    first = out.splitlines()[0]
    assert first == "check_targets:make_loss_every_2 (hook, 4 steps, 2 per epoch): conforms"
    # begin + (before_run, after_run) x 4 + the runner's outcome, in both worlds.
    assert "gave the same 10 events" in out


@HOW_DEEP_SUBPROCESS
def test_non_conforming_hook_shows_the_diff(how):
    code, out, err = _check(how, "check_targets:DenseWatcher")
    assert code == 1, err[-3000:]
    assert "check_targets:DenseWatcher (hook, 6 steps, 3 per epoch): does NOT conform" in out
    assert "first difference at event 1" in out
    # Side by side: natively two float tensors (dense/kernel, dense/bias), bridged none.
    marked = next(line for line in out.splitlines() if line.lstrip().startswith(">>"))
    assert "'fetches': ['<tensor float32>', '<tenso" in marked
    assert marked.endswith(
        "DenseWatcher[0] before_run 0 {'fetches': [], 'feeds': 0, 'trace_level': 0}"
    )
    assert "native" in out and "HookCallback" in out


@HOW_DEEP_SUBPROCESS
def test_callback_json(how):
    code, out, err = _check(how, "check_targets:make_early_stopping", "--callback", "--format", "json")
    assert code == 0, err[-3000:]
    payload = json.loads(out)
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
        (
            ("check_targets:make_two", "--steps", "5", "--steps-per-epoch", "3"),
            "--steps 5 must be a multiple of --steps-per-epoch 3 (Keras runs whole epochs): use "
            "--steps 6 or 3, or drop --steps-per-epoch",
        ),
        (("check_targets:make_two", "--steps", "0"), "--steps must be at least 1, received 0"),
        (
            ("check_targets:make_two", "--model", "replacements:NOT_A_MODULE_ATTR"),
            "module 'replacements' has no attribute 'NOT_A_MODULE_ATTR'",
        ),
        (
            ("check_targets:make_two", "--model", "replacements:make_noop"),
            "--model replacements:make_noop returned Callback, not a Keras model",
        ),
        (
            ("check_targets:make_early_stopping", "--callback", "--model", "replacements:regression"),
            "--model and --replaced-by apply to hooks",
        ),
        (
            ("check_targets:make_two", "--replaced-by", "check_targets:make_two"),
            "returned LossEveryN, not a Keras callback",
        ),
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


@HOW_DEEP_SUBPROCESS
def test_bad_input_subprocess_and_json(how):
    """Exit 2 with the error in JSON. ``check_mod.main`` writes both and returns the status the
    entry point passes on (test_cli.py runs the entry point in CI)."""
    code, out, err = _check(how, "check_targets:nope", "--format", "json")
    assert code == 2
    assert "hookbridge check: error: module 'check_targets' has no attribute 'nope'" in err
    assert json.loads(out) == {
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


@pytest.mark.one_stack("resolve() is importlib: no TensorFlow/Keras version branch")
def test_imports_only_the_named_module(tmp_path, monkeypatch):
    """In process: the package is new to ``sys.modules`` (a name no other test imports), so what
    ``resolve`` adds to it is what it imported; those modules are removed afterwards."""
    name = "check_resolve_project"
    assert not any(m == name or m.startswith(name + ".") for m in sys.modules)
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hooks.py").write_text(
        "import tensorflow as tf\n"
        "def make():\n    return tf.compat.v1.train.StopAtStepHook(last_step=2)\n"
    )
    (pkg / "train.py").write_text("raise SystemExit('the training driver must not run')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    try:
        hook = check_mod.resolve(f"{name}.hooks:make")
        added = sorted(m for m in set(sys.modules) - before if m.startswith(name))
    finally:
        for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[m]
    assert added == [name, f"{name}.hooks"]
    assert callable(hook)


# ------------------------------------------------------------------ defaults adapt (item 8)
@pytest.mark.parametrize(
    ("steps", "per_epoch", "shape"),
    [
        (None, None, (6, 3)),
        (10, None, (10, 5)),
        (9, None, (9, 3)),
        (12, None, (12, 6)),
        (7, None, (7, 7)),
        (2, None, (2, 2)),
        (1, None, (1, 1)),
        (None, 4, (8, 4)),
        (8, 4, (8, 4)),
        (3, 3, (3, 3)),
    ],
)
def test_defaults_adapt_to_what_the_user_gives(steps, per_epoch, shape):
    assert check_mod.CheckRequest("m:f", steps, per_epoch).shape() == shape


@HOW_DEEP_SUBPROCESS
def test_steps_alone_is_not_refused(how):
    # The report of issue 26: `--steps 10` failed on a --steps-per-epoch the user never set.
    code, out, err = _check(how, "check_targets:make_loss_every_2", "--steps", "10")
    assert code == 0, err[-3000:]
    assert out.splitlines()[0] == (
        "check_targets:make_loss_every_2 (hook, 10 steps, 5 per epoch): conforms"
    )
    # begin + (before_run, after_run) x 10 + outcome: all ten steps ran in both worlds.
    assert "gave the same 22 events" in out


# ------------------------------------------------------------- --replaced-by (item 9)
def _native_hook_csv(tmp_path, make_hook, steps=6, per_epoch=3):
    """The hook natively: a MonitoredSession over check's batch losses, in its own folder."""
    from hookbridge._conform.runners import drive_session
    from hookbridge._conform.scenarios import EXACT_LOSSES, _Run

    run = _Run(epochs=steps // per_epoch, steps_per_epoch=per_epoch, losses=EXACT_LOSSES[:per_epoch])
    folder = tmp_path / "native"
    folder.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(folder)
        trace = drive_session(lambda g: [make_hook()], run, [])
    finally:
        os.chdir(cwd)
    assert trace[-1] == ("runner", "outcome", "ok")
    return (folder / "loss.csv").read_text().splitlines()


def _native_callback_csv(tmp_path, make_callback, steps=6, per_epoch=3):
    """The callback natively in Keras fit over the same batch losses, in its own folder."""
    from hookbridge._conform.runners import drive_fit
    from hookbridge._conform.scenarios import EXACT_LOSSES, _Run

    run = _Run(epochs=steps // per_epoch, steps_per_epoch=per_epoch, losses=EXACT_LOSSES[:per_epoch])
    folder = tmp_path / "keras"
    folder.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(folder)
        trace = drive_fit([make_callback()], run, [])
    finally:
        os.chdir(cwd)
    assert trace[-1] == ("runner", "outcome", "ok")
    return (folder / "loss.csv").read_text().splitlines()


@pytest.fixture(scope="module")
def make_hook_csv(tmp_path_factory):
    """``replacements.make_hook``'s CSV natively (:func:`_native_hook_csv`), for the two tests
    below that compare a callback's with it: one MonitoredSession run."""
    sys.path.insert(0, str(FIXTURES))
    try:
        import replacements
    finally:
        sys.path.remove(str(FIXTURES))
    return _native_hook_csv(tmp_path_factory.mktemp("make_hook"), replacements.make_hook)


def test_a_no_op_callback_does_not_replace_a_hook():
    status, out, err = _in_process(
        "replacements:make_hook", "--replaced-by", "replacements:make_noop"
    )
    assert status == 1, out + err
    lines = out.splitlines()
    assert lines[0] == (
        "replacements:make_hook replaced by replacements:make_noop (6 steps, 3 per epoch): "
        "does NOT replace"
    )
    # Everything the hook does is missing: the stop at step 5, its log line, its CSV.
    assert "    - fit stopped at step 5 with the hook, 6 with the callback" in lines
    assert (
        "    - log/stdout line 1 (2 lines vs 0): the hook 'INFO: loss = 1.0, step = 2', "
        "the callback '(no line)'"
    ) in lines
    assert "    - loss.csv (csv): written only by the hook" in lines


def test_a_faithful_callback_replaces_the_hook(tmp_path, make_hook_csv):
    status, out, err = _in_process(
        "replacements:make_hook", "--replaced-by", "replacements:make_faithful"
    )
    assert status == 0, out + err
    assert out.splitlines()[0].endswith("(6 steps, 3 per epoch): replaces")
    assert "compared: the step fit stopped at (5)" in out and "1 files (1 the same)" in out
    # Beside check: the hook natively in a MonitoredSession writes the CSV the callback writes
    # natively in fit (rows at steps 2 and 4; the stop at 5 ends both before step 6).
    import replacements

    keras = _native_callback_csv(tmp_path, replacements.make_faithful)
    assert make_hook_csv == keras == ["step,loss", "2,1.0", "4,0.25"]


def test_the_running_mean_is_not_the_batch_loss(tmp_path, make_hook_csv):
    # The usual first replacement writes Keras's running mean: check shows the first row where
    # it differs from what the hook wrote natively.
    import replacements

    keras = _native_callback_csv(tmp_path, replacements.make_running_mean)
    assert make_hook_csv[1] == "2,1.0" and keras[1] == "2,0.625"
    status, out, _ = _in_process(
        "replacements:make_hook", "--replaced-by", "replacements:make_running_mean", "--format",
        "json",
    )
    assert status == 1
    payload = json.loads(out)
    assert payload["replaces"] is False and payload["status"] == "does NOT replace"
    assert payload["differences"] == [
        "log/stdout line 1 (2 lines vs 2): the hook 'INFO: loss = 1.0, step = 2', the callback "
        "'INFO: loss = 0.625, step = 2'",
        "loss.csv (csv): first difference at line 2: the hook [2, 1.0], the callback [2, 0.625] "
        "(3 lines vs 3)",
    ]
    assert payload["hook"]["stopped_at"] == payload["callback"]["stopped_at"] == 5
    assert payload["hook"]["files"] == payload["callback"]["files"] == ["loss.csv"]


def test_what_check_cannot_observe_is_unknown_not_replaced():
    status, out, _ = _in_process(
        "replacements:SilentHook", "--replaced-by", "replacements:make_noop"
    )
    assert status == 3
    assert out.splitlines()[0].endswith(": cannot tell")
    assert "not something check can observe" in out


def test_checkpoints_and_events_are_read_back(tmp_path):
    # A CheckpointSaverHook "replaced" by nothing: every file it wrote is named, read back.
    status, out, _ = _in_process(
        "replacements:make_checkpoint_hook", "--replaced-by", "replacements:make_noop",
        "--format", "json",
    )
    assert status == 1
    payload = json.loads(out)
    assert {
        "ckpt/model.ckpt-0 (checkpoint): written only by the hook",
        "ckpt/model.ckpt-3 (checkpoint): written only by the hook",
        "ckpt/model.ckpt-6 (checkpoint): written only by the hook",
        "ckpt/events.out.tfevents.* (events): written only by the hook",
    } <= set(payload["differences"])


def test_compare_outputs_reads_checkpoints_events_and_csv(tmp_path):
    import numpy as np
    import tensorflow as tf

    from hookbridge._conform.outputs import compare_outputs, read_outputs

    def write(folder, kernel, scalar, row):
        folder.mkdir()
        g = tf.Graph()
        with g.as_default():
            v = tf.compat.v1.get_variable("dense/kernel", initializer=np.float32(kernel))
            saver = tf.compat.v1.train.Saver()
            with tf.compat.v1.Session() as sess:
                sess.run(v.initializer)
                saver.save(sess, str(folder / "model.ckpt"), global_step=3)
        writer = tf.summary.create_file_writer(str(folder / "logs"))
        with writer.as_default():
            tf.summary.scalar("loss", scalar, step=3)
        writer.close()
        (folder / "rows.csv").write_text(f"step,loss\n3,{row}\n")
        return read_outputs(str(folder), {str(folder): "<dir>"})

    a = write(tmp_path / "a", 1.0, 0.5, 0.25)
    same = write(tmp_path / "b", 1.0, 0.5, 0.25)
    other = write(tmp_path / "c", 2.0, 0.75, 0.5)
    assert compare_outputs(a, same, left_name="L", right_name="R")[0] == []
    differences, _unknown, _equal = compare_outputs(a, other, left_name="L", right_name="R")
    assert "model.ckpt-3 (checkpoint): dense/kernel: L 1.0, R 2.0" in differences, differences
    # tf.summary.scalar (a tensor) is read as the scalar TensorBoard charts.
    assert "logs/events.out.tfevents.* (events): scalar loss: at step 3: L 0.5, R 0.75" in (
        differences
    ), differences
    assert "rows.csv (csv): first difference at line 2: L [3, 0.25], R [3, 0.5] (2 lines vs 2)" in (
        differences
    )


def test_a_checkpoint_that_cannot_be_read_is_unknown(tmp_path):
    import numpy as np
    import tensorflow as tf

    from hookbridge._conform.outputs import compare_outputs, read_outputs

    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        checkpoint = tf.train.Checkpoint(v=tf.Variable(np.float32(1.0)))
        checkpoint.write(str(tmp_path / side / "model.ckpt-3"))
    (tmp_path / "b" / "model.ckpt-3.data-00000-of-00001").write_bytes(b"truncated")
    a, b = (read_outputs(str(tmp_path / side)) for side in ("a", "b"))
    assert a["model.ckpt-3"].kind == "checkpoint" and b["model.ckpt-3"].kind == "unread"
    differences, unknown, same = compare_outputs(a, b, left_name="L", right_name="R")
    assert differences == [] and same == []
    (line,) = unknown
    assert line.startswith("model.ckpt-3: a checkpoint TensorFlow cannot read ("), line


# ------------------------------------------------------------------ --model (item 10)
def test_a_tensor_missing_from_checks_graph_is_not_a_divergence():
    status, out, _ = _in_process("replacements:MaeWatcher")
    assert status == 3, out
    assert out.splitlines()[0] == "replacements:MaeWatcher (hook, 6 steps, 3 per epoch): cannot tell"
    assert "it fails the same way natively and under the bridge" in out
    assert "The tensor is in neither" in out and "pass --model MODULE:ATTR" in out
    assert "does NOT conform" not in out


def test_the_users_model_gives_the_hook_its_tensors():
    status, out, _ = _in_process(
        "replacements:MaeWatcher", "--model", "replacements:regression", "--format", "json"
    )
    assert status == 0, out
    payload = json.loads(out)
    assert payload["native"] == payload["bridged"] and payload["model"] == "replacements:regression"
    maes = [e[3] for e in payload["bridged"] if e[1] == "after_run"]
    assert len(maes) == 6 and len(set(maes)) > 1  # the model trains: the batch MAE moves
    # The batch MAE the hook read is the model's own: recompute it by training the same model.
    import numpy as np
    import replacements
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    model, x, y = replacements.regression()
    expected = []
    for _epoch in range(2):
        for b in range(3):
            xb, yb = x[b * 4 : (b + 1) * 4], y[b * 4 : (b + 1) * 4]
            expected.append(float(np.mean(np.abs(model.predict_on_batch(xb) - yb))))
            model.train_on_batch(xb, yb)
    np.testing.assert_allclose(maes, expected, rtol=1e-3, atol=1e-4)


def test_a_replacement_on_the_users_model():
    status, out, err = _in_process(
        "replacements:make_hook", "--replaced-by", "replacements:make_faithful", "--model",
        "replacements:regression", "--format", "json",
    )
    assert status == 0, out + err
    payload = json.loads(out)
    assert payload["hook"]["files"] == ["loss.csv"] and payload["hook"]["stopped_at"] == 5
    status, out, _ = _in_process(
        "replacements:make_hook", "--replaced-by", "replacements:make_noop", "--model",
        "replacements:regression",
    )
    assert status == 1
    # The hook stopped training at step 5: the weights differ from the 6-step run.
    assert "    - the model's final weights differ" in out.splitlines()


def test_the_migration_guides_replacement_report_is_what_check_prints(monkeypatch):
    # docs/migration.md, stage 3, quotes check's report on the team's hook: it must stay true.
    migration = ROOT / "examples" / "migration"
    monkeypatch.syspath_prepend(str(migration))
    page = (ROOT / "docs" / "migration.md").read_text()
    command = "hookbridge check team_hooks:make_history_hook_csv --replaced-by "
    block = page[page.index(f"$ {command}") :]
    block = block[: block.index("```")].splitlines()[1:]
    status, out, _ = _in_process(
        "team_hooks:make_history_hook_csv", "--replaced-by", "team_hooks:make_history_callback_csv"
    )
    assert status == 1
    assert out.splitlines() == block


def test_a_model_alone_gets_inputs_and_its_own_predictions_as_targets():
    import numpy as np
    import replacements

    from hookbridge._conform.replacement import user_training

    training = user_training(replacements.regression_model_only, 6, 3, "m")()
    assert training.x.shape == (3, 3) and training.batch_size == 1 and training.epochs == 2
    np.testing.assert_allclose(training.model(training.x), training.y, rtol=1e-6)
    status, out, _ = _in_process(
        "replacements:MaeWatcher", "--model", "replacements:regression_model_only"
    )
    assert status == 0, out
    assert out.splitlines()[0].endswith("on replacements:regression_model_only): conforms")


def test_the_default_graphs_hold_what_check_says():
    import replacements

    from hookbridge._conform import conform

    replacements.GraphLister.seen.clear()
    conform.hook_traces(replacements.GraphLister, steps=3)
    native, bridged = replacements.GraphLister.seen
    said_native, said_bridged = check_mod.DEFAULT_GRAPH.split("; under HookCallback: ")
    for names, said in ((native, said_native), (bridged, said_bridged)):
        for name in names:
            if name != "loss_in":  # the placeholder feeding loss natively
                assert name in said, (name, said)
    page = (ROOT / "docs" / "conformance.md").read_text()
    for name in set(native + bridged) - {"loss_in"}:
        assert f"`{name}" in page, name


# ---------------------------------------- what --replaced-by compares (issue 31 item 15)
def _replacement(hook: str, callback: str) -> tuple[int, dict]:
    status, out, err = _in_process(
        f"replacement_contents:{hook}", "--replaced-by", f"replacement_contents:{callback}",
        "--format", "json",
    )
    assert status in (0, 1, 3), err
    payload = json.loads(out)
    assert payload["status"] == {0: "replaces", 1: "does NOT replace", 3: "cannot tell"}[status]
    return status, payload


def _native(tmp_path, name: str, *, hook=None, callback=None):
    """A hook natively in a MonitoredSession, or a callback natively in Keras fit, in its own
    folder over check's batch losses (2 epochs of 3 steps); returns the folder and the lines
    printed."""
    import contextlib

    from hookbridge._conform.runners import drive_fit, drive_session
    from hookbridge._conform.scenarios import EXACT_LOSSES, _Run

    run = _Run(epochs=2, steps_per_epoch=3, losses=EXACT_LOSSES[:3])
    folder = tmp_path / name
    folder.mkdir()
    cwd, printed = os.getcwd(), io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(printed):
            if hook is not None:
                trace = drive_session(lambda g: [hook()], run, [])
            else:
                trace = drive_fit([callback()], run, [])
    finally:
        os.chdir(cwd)
    assert trace[-1] == ("runner", "outcome", "ok")
    return folder, printed.getvalue().splitlines()


def test_tensorflows_noise_on_one_side_does_not_change_the_verdict(tmp_path):
    # The hook's begin() calls a deprecated TF function: TF logs a deprecation notice once per
    # process, on the hook's side only, and the bridge's session logs "Graph was finalized.".
    # Both print the same six lines: the same as the hook natively.
    status, payload = _replacement("PrintingHook", "make_printing_callback")
    assert status == 0, payload
    expected = [f"step {i} done" for i in range(6)]
    assert payload["hook"]["logs"] == payload["callback"]["logs"] == [
        f"stdout: {line}" for line in expected
    ]
    ignored = "\n".join(payload["hook"]["ignored"])
    assert "checkpoint_exists (from tensorflow.python." in ignored, ignored
    assert "is deprecated and will be removed" in ignored, ignored
    assert "INFO: Graph was finalized." in payload["hook"]["ignored"]
    assert not any("deprecated" in line for line in payload["callback"]["ignored"])
    # A callback printing other lines does not replace it, noise or not.
    status, payload = _replacement("PrintingHook", "make_other_printing_callback")
    assert status == 1
    assert payload["differences"] == [
        "log/stdout line 1 (6 lines vs 6): the hook 'stdout: step 0 done', the callback "
        "'stdout: step 0 finished'"
    ]
    import replacement_contents as rc

    assert _native(tmp_path, "native", hook=rc.PrintingHook)[1] == expected
    assert _native(tmp_path, "keras", callback=rc.make_printing_callback)[1] == expected


def test_a_teams_own_logger_is_compared(tmp_path):
    import logging

    import replacement_contents as rc

    root, team = logging.getLogger(), logging.getLogger("team.hooks")
    before = (root.level, list(root.handlers), team.level, list(team.handlers), team.propagate)
    # Natively the hook logs 6 INFO lines and 2 DEBUG lines through the team's logger.
    records: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda r: records.append(f"{r.levelname}: {r.getMessage()}")
    team.addHandler(handler)
    team.setLevel(logging.DEBUG)
    try:
        _native(tmp_path, "native", hook=rc.TeamLogHook)
    finally:
        team.removeHandler(handler)
        team.setLevel(before[2])
    assert len(records) == 8 and records[:2] == ["INFO: step 0: checked", "DEBUG: step 0: detail"]

    status, payload = _replacement("TeamLogHook", "make_team_log_callback")
    assert status == 0, payload
    assert payload["hook"]["logs"] == payload["callback"]["logs"] == records
    # Writing the same file without the log lines is not a replacement (it was, exit 0, when
    # only TensorFlow's logger was heard at INFO).
    status, payload = _replacement("TeamLogHook", "make_silent_team_callback")
    assert status == 1
    assert payload["differences"] == [
        "log/stdout line 1 (8 lines vs 0): the hook 'INFO: step 0: checked', the callback "
        "'(no line)'"
    ]
    # The process's logging configuration is as it was.
    assert before == (root.level, root.handlers, team.level, team.handlers, team.propagate)


def _summaries(folder) -> dict:
    """What the event files under ``folder`` hold, read with summary_iterator: per (tag, step),
    a text's string, a histogram's fields, an image's decoded pixels."""
    import numpy as np
    import tensorflow as tf

    content = {}
    for path in sorted(folder.glob("**/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "tensor":
                    data = tf.make_ndarray(value.tensor).item().decode()
                elif kind == "histo":
                    h = value.histo
                    data = (h.min, h.max, h.num, h.sum, h.sum_squares, list(h.bucket_limit),
                            list(h.bucket))
                else:
                    pixels = tf.io.decode_png(value.image.encoded_image_string).numpy()
                    data = np.asarray(pixels).tolist()
                content[(value.tag, event.step)] = data
    return content


def test_summary_contents_natively(tmp_path):
    # The ground truth for the next test: the hook natively (MonitoredSession) and each callback
    # natively (fit), their event files read back with summary_iterator.
    import replacement_contents as rc

    native = _summaries(_native(tmp_path, "native", hook=rc.SummaryHook)[0])
    assert len(native) == 18 and native[("note", 4)] == "step 4"
    assert native[("values", 2)][2:4] == (4.0, 22.0)  # num, sum of [2, 4, 6, 10]
    assert native[("picture/image/0", 3)] == [[[30], [30]], [[30], [30]]]
    for differs in (None, "text", "histogram", "image"):
        keras = _summaries(
            _native(tmp_path, f"keras-{differs}", callback=lambda d=differs: rc.SummaryCallback(d))[0]
        )
        tags = {tag for (tag, step) in native if native[(tag, step)] != keras[(tag, step)]}
        assert keras.keys() == native.keys()
        assert tags == (
            set() if differs is None
            else {{"text": "note", "histogram": "values", "image": "picture/image/0"}[differs]}
        )


@pytest.mark.parametrize(
    ("callback", "kind"),
    [
        ("make_summary_callback", None),
        ("make_summary_callback_text_differs", "text note: at step 0: the hook 'step 0', the "
         "callback 'step 1'"),
        ("make_summary_callback_histogram_differs", "histogram values: at step 1: the hook "
         "{'min': 1.0, 'max': 5.0, 'num': 4.0, 'sum': 11.0, "),
        ("make_summary_callback_image_differs", "image picture/image/0: at step 0: the hook (2, "
         "2, array([[[0], [0]], [[0], [0]]], dtype=uint8)), the callback (2, 2, array([[[1], "),
    ],
)
def test_summary_contents_are_compared(callback, kind):
    # Text as decoded strings, histograms by every field, images by decoded pixels: the same
    # tags at the same steps with other contents do not replace (they did: text was "<bytes>",
    # a histogram its count, an image its step). The callback's side has TF's "Cannot activate
    # TF2 compatibility support for TF1 summary ops" warning: noise, left out.
    status, payload = _replacement("SummaryHook", callback)
    assert any("Cannot activate TF2 compatibility" in x for x in payload["callback"]["ignored"])
    if kind is None:
        assert status == 0, payload
        assert payload["compared"][-1] == "1 files (1 the same)"
        return
    assert status == 1
    (difference,) = payload["differences"]
    assert difference.startswith(f"events/events.out.tfevents.* (events): {kind}"), difference


def test_a_graph_check_does_not_decode_is_unknown_never_replaced():
    status, payload = _replacement("GraphHook", "make_graph_callback")
    assert status == 3 and payload["differences"] == []
    (unknown,) = payload["unknown"]
    assert unknown.startswith("events/events.out.tfevents.* (events): graph: the hook <graph, ")
    assert unknown.endswith("(not decoded: cannot tell whether they are equivalent)")
    status, out, _ = _in_process(
        "replacement_contents:GraphHook", "--replaced-by", "replacement_contents:make_graph_callback"
    )
    assert status == 3 and out.splitlines()[0].endswith("(6 steps, 3 per epoch): cannot tell")
