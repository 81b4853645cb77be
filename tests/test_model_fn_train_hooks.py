"""The spec's training hooks and the caller's ``HookCallback``: ONE hook session, as train().

``Estimator.train`` ran the caller's ``hooks=``, its own hooks and the spec's ``training_hooks`` /
``training_chief_hooks`` in one ``MonitoredTrainingSession`` (chief hooks first). The subject is the
r1 MNIST ``model_fn`` (``tests/fixtures/model_fns/mnist.py``) with a recording hook in each
position: the caller's (``hooks=``), the spec's ``training_hooks`` (reading the ``model_fn``'s
``cross_entropy`` tensor) and ``training_chief_hooks``. The Estimator on TF 2.15 continues from
the fixture's checkpoint; ``fit`` of ``model_fn_model`` does the same with one ``HookCallback``
(through ``estimator_hooks``, and with plain hooks): the same calls in the same order, the same
global steps and values. CI holds ``fit`` to the native record, ``mnist/train_hooks.json``,
written by the same native run (``python tests/test_model_fn_train_hooks.py`` on tf215; the deep
profile reruns it there).
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

import hookbridge
from hookbridge._migrate.model_fn import compat

v1 = tf.compat.v1
HERE = Path(__file__).resolve().parent / "fixtures" / "model_fns"
FIXTURE = json.loads((HERE / "fixtures.json").read_text())["subjects"]["mnist"]
RECORD_FILE = HERE / "mnist" / "train_hooks.json"
STEPS = 5
#: What the recording hooks saw, in call order.
EVENTS: list[list] = []


def _mnist():
    if str(HERE.parent.parent) not in sys.path:  # run as a script
        sys.path.insert(0, str(HERE.parent.parent))
    from fixtures.model_fns import mnist

    return mnist


class Recorder(v1.train.SessionRunHook):
    """Records each call with the global step (and ``tensor``'s value) it sees."""

    def __init__(self, name: str, tensor=None) -> None:
        self.name = name
        self.tensor = tensor

    def begin(self):
        self._step = v1.train.get_global_step()
        EVENTS.append([self.name, "begin"])

    def after_create_session(self, session, coord):
        EVENTS.append([self.name, "after_create_session", int(session.run(self._step))])

    def before_run(self, run_context):
        fetches = {"step": self._step}
        if self.tensor is not None:
            fetches["tensor"] = self.tensor
        return v1.train.SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        results = run_values.results
        entry = [self.name, "after_run", int(results["step"])]
        if "tensor" in results:
            entry.append(float(results["tensor"]))
        EVENTS.append(entry)

    def end(self, session):
        EVENTS.append([self.name, "end", int(session.run(self._step))])


def model_fn(features, labels, mode, params):
    """MNIST's, with a recording hook among the training hooks and the chief hooks."""
    spec = _mnist().model_fn(features, labels, mode, {**params, "log": False})
    if mode != "train":
        return spec
    entropy = v1.get_default_graph().get_tensor_by_name("cross_entropy:0")
    return spec._replace(
        training_hooks=[Recorder("spec", entropy)], training_chief_hooks=[Recorder("chief")]
    )


def _dataset():
    mnist = _mnist()
    rows = mnist.rows(FIXTURE["seeds"]["continue"], STEPS * mnist.BATCH)
    return tf.data.Dataset.from_tensor_slices(rows).batch(mnist.BATCH, drop_remainder=True)


def native_record(tmp: Path) -> list:
    """``Estimator.train(hooks=[Recorder("user")])`` continuing from the fixture, one thread."""
    mnist = _mnist()
    model_dir = tmp / "native"
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)
    config = v1.ConfigProto(inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1)
    run_config = mnist._run_config(model_dir, {"session_config": config})
    estimator = v1.estimator.Estimator(model_fn, params=dict(mnist.PARAMS), config=run_config)
    del EVENTS[:]
    estimator.train(_dataset, steps=STEPS, hooks=[Recorder("user")])
    record = [list(e) for e in EVENTS]
    del EVENTS[:]
    return record


@pytest.fixture(scope="module")
def native() -> list:
    """The native record (``train_hooks.json``), on every stack."""
    return json.loads(RECORD_FILE.read_text())


#: The native run beside the recorded file: the deep profile's, on TF 2.15 (an Estimator train of
#: 5 steps). CI holds fit's record to the file on every stack, tf215 included.
@pytest.mark.deep
@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_recorded_hook_calls_are_the_estimators(native, tmp_path):
    _check(native_record(tmp_path), native)


@pytest.fixture(scope="module")
def model():
    mnist = _mnist()
    rows = mnist.rows(0, mnist.BATCH)
    built = hookbridge.model_fn_model(
        model_fn, params=dict(mnist.PARAMS), features=rows[0], labels=rows[1]
    )
    return built


def _bridged(model, callback) -> list:
    hookbridge.restore_checkpoint(model, str(HERE / "mnist" / "model_dir"))
    del EVENTS[:]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(_dataset(), epochs=1, verbose=0, callbacks=[callback])
    said = [str(w.message) for w in caught if "training hooks" in str(w.message)]
    assert not said, said  # one session: nothing to say
    record = [list(e) for e in EVENTS]
    del EVENTS[:]
    return record


def _check(record: list, reference: list) -> None:
    assert [e[:3] for e in record] == [e[:3] for e in reference]
    got = np.array([e[3] for e in record if len(e) == 4])
    want = np.array([e[3] for e in reference if len(e) == 4])
    assert len(want) == STEPS
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=0)


def test_estimator_hooks_run_the_spec_hooks_in_one_session_in_the_estimators_order(
    native, model, tmp_path
):
    model_dir = tmp_path / "model_dir"
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)

    def hooks():
        return hookbridge.estimator_hooks(
            model_dir,
            hooks=[Recorder("user")],
            model=model,
            save_checkpoints_steps=10_000,
            save_summary_steps=0,
            log_step_count_steps=10_000,
            keep_checkpoint_max=1,
            backup=None,
        )

    callback = hookbridge.HookCallback(hooks)
    record = _bridged(model, callback)
    _check(record, native)
    names = [type(h).__name__ for h in callback.hooks]
    # MonitoredTrainingSession's order: chief (the Estimator's saver, the spec's chief hooks),
    # then the worker hooks (the caller's, NanTensor, LoggingTensor, the spec's).
    assert names == [
        "CheckpointSaverHook",
        "Recorder",
        "StepCounterHook",
        "Recorder",
        "NanTensorHook",
        "LoggingTensorHook",
        "Recorder",
    ], names
    assert [h.name for h in callback.hooks if isinstance(h, Recorder)] == ["chief", "user", "spec"]
    # The callback is the caller's again after fit: its own hooks only at the next run.
    assert callback._log_names == []


def test_plain_hooks_run_with_the_spec_hooks_in_one_session(native, model):
    callback = hookbridge.HookCallback([Recorder("user")])
    record = _bridged(model, callback)
    _check(record, native)
    assert [h.name for h in callback.hooks] == ["chief", "user", "spec"]


def test_what_a_host_call_cannot_run_is_refused_naming_it_on_every_stack():
    # TRAIN host_call runs under fit (test_model_fn_host_call.py). TPUEstimator (use_tpu=False)
    # also ran it as an evaluation hook, and on every step's own tensors: an EVAL host_call and
    # fit running several steps per execution (only the last step's logs come back) are refused.
    from hookbridge.estimator_compat import TPUEstimatorSpec

    def model_fn(features, labels, mode):
        logits = tf.reduce_sum(features, axis=1, keepdims=True) * v1.get_variable("w", [])
        if mode == "infer":
            return TPUEstimatorSpec(mode, predictions=logits)
        loss = tf.reduce_mean((logits - labels) ** 2)
        step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)

        def host_call(loss):
            return [tf.identity(loss)]

        return TPUEstimatorSpec(
            mode, loss=loss, train_op=train_op, host_call=(host_call, [tf.reshape(loss, [1])])
        )

    x, y = np.ones((4, 3), "float32"), np.ones((4, 1), "float32")
    model = hookbridge.model_fn_model(model_fn, features=x, labels=y)
    with pytest.raises(NotImplementedError, match=r"host_call in EVAL mode.*not under evaluate"):
        model.evaluate(x, y, verbose=0)
    model.compile(steps_per_execution=2)
    with pytest.raises(NotImplementedError, match=r"host_call.*2 steps per execution"):
        model.fit(x, y, verbose=0)


if __name__ == "__main__":  # writes the native record (tf215: the Estimator)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        RECORD_FILE.write_text(json.dumps(native_record(Path(tmp)), indent=0) + "\n")
    print(f"wrote {RECORD_FILE}")
