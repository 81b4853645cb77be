"""``prediction_hooks`` of a ``model_fn``'s PREDICT spec under ``model_fn_model.predict``, against
``Estimator.predict``.

The subject is the r1 MNIST ``model_fn`` (``tests/fixtures/model_fns/mnist.py``) whose PREDICT
spec also returns a recording hook: it resolves a named intermediate tensor of the PREDICT graph
(``mean_logit``) in ``begin``, holds another as a tensor object (the batch's top probability),
fetches them and the global step at every ``before_run``, reads the global step in
``after_create_session`` and ``end``, and may ask to stop after N runs. What it saw natively
(``Estimator.predict`` on the fixture's checkpoint, TF 2.15, ``yield_single_examples=False``),
with the batches' logits, is ``mnist/predict_hooks.json``, written by ``python
tests/test_model_fn_predict_hooks.py`` on tf215 and checked against a fresh native run there in
the deep profile.
"""

from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from fixture_modules import assert_json_as_recorded

import hookbridge
from hookbridge._migrate.model_fn import compat

HERE = Path(__file__).resolve().parent / "fixtures" / "model_fns"
FIXTURE = json.loads((HERE / "fixtures.json").read_text())["subjects"]["mnist"]
HOOKS_FILE = HERE / "mnist" / "predict_hooks.json"
#: Four batches of 16, 16, 16 and 8 rows.
ROWS = 56
KERAS3 = str(getattr(tf.keras, "__version__", "2")).startswith("3")
#: What the recording hooks saw, one entry a call; the stop case (read at each model_fn call).
RECORD: list = []
STOP: dict = {"after": None}


def _mnist():
    if str(HERE.parent.parent) not in sys.path:  # run as a script
        sys.path.insert(0, str(HERE.parent.parent))
    from fixtures.model_fns import mnist

    return mnist


class RecordingHook(tf.compat.v1.train.SessionRunHook):
    """Records what a prediction hook sees: a tensor by name, one as an object, the step."""

    def __init__(self, tag, names, tensors, stop_after=None):
        self.tag = tag
        self.names = names  # tensor names, resolved in begin()
        self.tensors = tensors  # {key: tensor object of the model_fn's graph}
        self.stop_after = stop_after
        self.runs = 0

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        self._step = tf.compat.v1.train.get_global_step()
        self._named = [graph.get_tensor_by_name(name) for name in self.names]
        RECORD.append([self.tag, "begin", [t.name for t in self._named]])

    def after_create_session(self, session, coord):
        RECORD.append([self.tag, "session", int(session.run(self._step))])

    def before_run(self, run_context):
        fetches = {"named": self._named, "tensors": self.tensors, "step": self._step}
        return tf.compat.v1.train.SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        results = run_values.results
        RECORD.append(
            [
                self.tag,
                "run",
                [_value(v) for v in results["named"]],
                {k: _value(v) for k, v in results["tensors"].items()},
                int(results["step"]),
            ]
        )
        self.runs += 1
        if self.stop_after is not None and self.runs >= self.stop_after:
            run_context.request_stop()

    def end(self, session):
        RECORD.append([self.tag, "end", int(session.run(self._step))])


def _value(value):
    """A fetched value as recorded: a float, or the batch's array as nested lists with its dtype."""
    if np.ndim(value) == 0:
        return float(value)
    return [str(np.asarray(value).dtype), np.asarray(value).tolist()]


def predict_model_fn(features, labels, mode, params):
    """The MNIST model_fn; in PREDICT mode its spec also has the recording hook."""
    from hookbridge.estimator_compat import EstimatorSpec

    spec = _mnist().model_fn(features, labels, mode, {**params, "log": False})
    if mode != "infer":
        return spec
    tf.reduce_mean(spec.predictions["logits"], name="mean_logit")
    tf.reduce_min(spec.predictions["logits"], name="min_logit")  # what the caller's hook reads
    top = tf.reduce_max(spec.predictions["probabilities"])
    tf.identity(spec.predictions["probabilities"], name="probs")  # [batch, 4], by name
    # Whole tensors of the batch too: per-example logits [batch, 4] and classes (int64 [batch]).
    tensors = {
        "top": top,
        "logits": spec.predictions["logits"],
        "classes": spec.predictions["classes"],
    }
    names = ["mean_logit:0", "probs:0"]
    hook = RecordingHook("spec", names, tensors, stop_after=STOP["after"])
    return EstimatorSpec(mode, predictions=spec.predictions, prediction_hooks=[hook])


def _features():
    mnist = _mnist()
    features, _ = mnist.rows(FIXTURE["seeds"]["predict"], ROWS)
    return tf.data.Dataset.from_tensor_slices(features).batch(mnist.BATCH)


#: The cases: every batch, the spec's hook stopping predict after two runs, and a caller's hook
#: (``Estimator.predict(hooks=...)``; ``predict(callbacks=[HookCallback(...)])``) beside it.
CASES = {"all": None, "stop": 2, "caller": None}


def _caller_hook():
    return RecordingHook("caller", ["min_logit:0", "mean_logit:0", "probs:0"], {})


def native_runs(tmp: Path) -> dict:
    """``Estimator.predict`` with the hook in the spec: its record and the batches' logits."""
    mnist = _mnist()
    model_dir = tmp / "native_predict_hooks"
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)
    estimator = tf.compat.v1.estimator.Estimator(
        predict_model_fn, params=dict(mnist.PARAMS), config=mnist._run_config(model_dir, {})
    )
    out = {}
    for case, stop in CASES.items():
        STOP["after"], RECORD[:] = stop, []
        hooks = [_caller_hook()] if case == "caller" else None
        batches = list(estimator.predict(_features, hooks=hooks, yield_single_examples=False))
        logits = np.concatenate([b["logits"] for b in batches]).tolist()
        out[case] = {"record": list(RECORD), "logits": logits}
    STOP["after"], RECORD[:] = None, []
    return out


@pytest.fixture(scope="module")
def model():
    mnist = _mnist()
    features, _ = mnist.rows(FIXTURE["seeds"]["continue"], mnist.BATCH)
    model = hookbridge.model_fn_model(
        predict_model_fn, params=dict(mnist.PARAMS), features=features
    )
    hookbridge.restore_checkpoint(model, str(HERE / "mnist" / "model_dir"))
    return model


def _check_record(got: list, want: list) -> None:
    assert [entry[:2] for entry in got] == [entry[:2] for entry in want]
    for mine, theirs in zip(got, want):
        if mine[1] != "run":
            assert mine == theirs
            continue
        assert len(mine[2]) == len(theirs[2])
        for i, (value, want) in enumerate(zip(mine[2], theirs[2])):
            _check_value(value, want, f"named {i}")
        assert sorted(mine[3]) == sorted(theirs[3])
        for key in theirs[3]:
            _check_value(mine[3][key], theirs[3][key], key)
        assert mine[4] == theirs[4], "global step"


def _check_value(value, want, what):
    """A scalar within 1e-6; an array of the same dtype and shape (the batch's own rows)."""
    if isinstance(want, float):
        np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6, err_msg=what)
        return
    assert value[0] == want[0], f"{what}: dtype {value[0]}, natively {want[0]}"
    assert np.shape(value[1]) == np.shape(want[1]), what
    np.testing.assert_allclose(value[1], want[1], rtol=1e-6, atol=1e-6, err_msg=what)


def _predict(model, stop, **kwargs):
    STOP["after"], RECORD[:] = stop, []
    try:
        return model.predict(_features(), verbose=0, **kwargs)
    finally:
        STOP["after"] = None


#: The native run beside the recorded file: the deep profile's, on TF 2.15 (three Estimator.predict calls). CI holds
#: the bridged runs to the file on every stack, tf215 included; the script below writes it.
@pytest.mark.deep
@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_recorded_prediction_hooks_are_the_estimators(tmp_path):
    # Within float32 roundings, not bit for bit: another CPU rounds differently.
    assert_json_as_recorded(native_runs(tmp_path), json.loads(HOOKS_FILE.read_text()))


def test_prediction_hooks_see_the_estimators_predict_tensors_batch_by_batch(model):
    reference = json.loads(HOOKS_FILE.read_text())
    want = reference["all"]
    assert [e[1] for e in want["record"]] == ["begin", "session", *["run"] * 4, "end"]
    for _ in range(2):  # each predict builds fresh hooks, as each Estimator.predict did
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing left unrun to warn about
            got = _predict(model, None)
        _check_record(list(RECORD), want["record"])
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
    RECORD[:] = []


def test_a_prediction_hook_that_asks_to_stop_ends_predict_as_the_estimators(model):
    want = json.loads(HOOKS_FILE.read_text())["stop"]
    assert [e[1] for e in want["record"]] == ["begin", "session", "run", "run", "end"]
    assert len(want["logits"]) == 32  # the batch of the stopping run was still yielded
    if not KERAS3:  # tf_keras / Keras 2 predict has no stop flag: said (docs/limits.md)
        with pytest.warns(UserWarning, match="cannot stop evaluate/predict early"):
            got = _predict(model, 2)
        assert len(got["logits"]) == ROWS
        RECORD[:] = []
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _predict(model, 2)
    _check_record(list(RECORD), want["record"])
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
    RECORD[:] = []


def test_a_callers_hook_callback_runs_with_the_spec_hooks_in_one_session_as_the_estimators(model):
    want = json.loads(HOOKS_FILE.read_text())["caller"]
    # One session: the caller's hook, then the spec's, at every call (Estimator.predict's order).
    assert [e[:2] for e in want["record"][:4]] == [
        ["caller", "begin"],
        ["spec", "begin"],
        ["caller", "session"],
        ["spec", "session"],
    ]
    mine = hookbridge.HookCallback([_caller_hook()])
    for _ in range(2):  # the same caller hook again, as a second Estimator.predict(hooks=...)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = _predict(model, None, callbacks=[mine])
        _check_record(list(RECORD), want["record"])
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
    RECORD[:] = []


if __name__ == "__main__":  # writes the native fixture (tf215: the Estimator)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        HOOKS_FILE.write_text(json.dumps(native_runs(Path(tmp)), indent=0) + "\n")
    print(f"wrote {HOOKS_FILE}")
