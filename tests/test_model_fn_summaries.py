"""A TRAIN ``model_fn``'s own summaries under ``fit``, written as the Estimator's SummarySaverHook.

``Estimator.train`` merged the ``model_fn``'s ``SUMMARIES`` collection (``tf.compat.v1.summary.
scalar`` / ``histogram``) with its ``loss`` summary and wrote it into ``model_dir`` every
``save_summary_steps`` (and on the first step of each ``train`` call). The subject is the r1 MNIST
``model_fn`` (``tests/fixtures/model_fns/mnist.py``) with a scalar and a histogram summary. The
Estimator on TF 2.15 continues from the fixture's checkpoint; ``fit`` of ``model_fn_model``
continues from it with ``HookCallback(estimator_hooks(model_dir, ...))``; both event files are read
with EventAccumulator: the same tags at the same steps, scalars within 2e-5, histograms' counts
and sums. Elsewhere the native values are ``mnist/summaries.json``, written by the same native run
(``python tests/test_model_fn_summaries.py`` on tf215).
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
VALUES_FILE = HERE / "mnist" / "summaries.json"
STEPS, EVERY = 7, 3


def _mnist():
    if str(HERE.parent.parent) not in sys.path:  # run as a script
        sys.path.insert(0, str(HERE.parent.parent))
    from fixtures.model_fns import mnist

    return mnist


def model_fn(features, labels, mode, params):
    """MNIST's, with a scalar summary of its cross entropy and a histogram of its logits."""
    spec = _mnist().model_fn(features, labels, mode, {**params, "log": False})
    if mode == "train":
        graph = v1.get_default_graph()
        v1.summary.scalar("entropy", graph.get_tensor_by_name("cross_entropy:0"))
        v1.summary.histogram("logits", graph.get_tensor_by_name("dense_1/BiasAdd:0"))
    return spec


def _dataset():
    mnist = _mnist()
    rows = mnist.rows(FIXTURE["seeds"]["continue"], STEPS * mnist.BATCH)
    return tf.data.Dataset.from_tensor_slices(rows).batch(mnist.BATCH, drop_remainder=True)


def _copy(tmp: Path, name: str) -> Path:
    model_dir = tmp / name
    shutil.copytree(HERE / "mnist" / "model_dir", model_dir)
    return model_dir


def read_events(model_dir: Path) -> dict:
    """{tag: [[step, value]]} for scalars, {tag: [[step, count, sum]]} for histograms."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(model_dir), size_guidance={"scalars": 0, "histograms": 0})
    events.Reload()
    tags = events.Tags()
    found = {t: [[e.step, e.value] for e in events.Scalars(t)] for t in tags["scalars"]}
    for tag in tags["histograms"]:
        histograms = events.Histograms(tag)
        found[tag] = [[e.step, e.histogram_value.num, e.histogram_value.sum] for e in histograms]
    return found


def native_values(tmp: Path) -> dict:
    """The Estimator continuing from the fixture for ``STEPS`` steps, one thread."""
    mnist = _mnist()
    model_dir = _copy(tmp, "native")
    config = v1.estimator.RunConfig(
        model_dir=str(model_dir),
        tf_random_seed=12,
        session_config=v1.ConfigProto(
            inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1
        ),
        save_checkpoints_steps=10_000,
        save_summary_steps=EVERY,
        keep_checkpoint_max=1,
        log_step_count_steps=10_000,
    )
    estimator = v1.estimator.Estimator(model_fn, params=dict(mnist.PARAMS), config=config)
    estimator.train(_dataset, steps=STEPS)
    return read_events(model_dir)


def bridged_values(tmp: Path, **kwargs) -> tuple[dict, list]:
    mnist = _mnist()
    rows = mnist.rows(0, mnist.BATCH)
    model = hookbridge.model_fn_model(
        model_fn, params=dict(mnist.PARAMS), features=rows[0], labels=rows[1]
    )
    hookbridge.restore_checkpoint(model, str(HERE / "mnist" / "model_dir"))
    model_dir = _copy(tmp, "bridged")

    def hooks():
        return hookbridge.estimator_hooks(
            model_dir,
            model=model,
            save_checkpoints_steps=10_000,
            save_summary_steps=EVERY,
            log_step_count_steps=10_000,
            keep_checkpoint_max=1,
            backup=None,
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback = hookbridge.HookCallback(hooks)
        model.fit(_dataset(), epochs=1, verbose=0, callbacks=[callback], **kwargs)
    return read_events(model_dir), [str(w.message) for w in caught]


def _check(values: dict, reference: dict) -> None:
    for tag in ("entropy", "logits", "loss"):
        assert tag in values, sorted(values)
        got, want = np.array(values[tag]), np.array(reference[tag])
        assert got.shape == want.shape, (tag, got[:, 0], want[:, 0])
        np.testing.assert_array_equal(got[:, 0], want[:, 0], err_msg=f"{tag} steps")
        np.testing.assert_allclose(got[:, 1:], want[:, 1:], rtol=2e-5, atol=0, err_msg=tag)


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(VALUES_FILE.read_text())


# Deep: one CI run on tf215 (2026-11-28) saw the Estimator itself write its summaries at steps
# 31, 33, 36 (its global step read 32 twice) instead of the recorded 31, 34, 37, even with one
# inter-op thread; until that is understood, CI compares fit with the recorded native run.
@pytest.mark.deep
@pytest.mark.skipif(not compat.NATIVE, reason="the Estimator runs on TF 2.15 only")
def test_the_estimator_reproduces_the_recorded_summaries(reference, tmp_path):
    _check(native_values(tmp_path / "native"), reference)


def test_the_model_fn_summaries_are_written_at_the_estimators_steps(reference, tmp_path):
    values, said = bridged_values(tmp_path)
    _check(values, reference)
    assert [row[0] for row in reference["entropy"]] == [31, 34, 37]
    assert not [m for m in said if "summaries" in m], said


if __name__ == "__main__":  # writes the native values (tf215: the Estimator)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        values = native_values(Path(tmp))
    VALUES_FILE.write_text(json.dumps({k: values[k] for k in ("entropy", "logits", "loss")}) + "\n")
    print(f"wrote {VALUES_FILE}: {sorted(values)}")
