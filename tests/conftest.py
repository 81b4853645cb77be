"""Shared fixtures: real Keras models and a native TF1 MonitoredSession runner."""

from __future__ import annotations

import gc
import os
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np
import pytest
import reused_models
import tensorflow as tf
from hypothesis import HealthCheck, settings

keras = tf.keras

# "ci" (the default) is derandomized: every run draws the same examples (a seed derived from each
# test), so a CI run cannot fail on an example no earlier run drew; no example database either (a
# fresh CI clone has none, and a local one would replay other failures first). "deep" explores.
settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
    database=None,
)
settings.register_profile(
    "deep", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: ``HOOKBRIDGE_PROFILE=deep``: the suite's deep form. CI (the default, "ci") runs a short form
#: of the slowest tests (fewer generated examples, one representative of a family of variants);
#: "deep" runs every variant and the larger example counts as well (tests marked ``deep``, skipped
#: otherwise; ``pytest -m deep`` selects them, and runs them, without the variable).
DEEP = os.environ.get("HOOKBRIDGE_PROFILE", "ci") == "deep"


KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")

#: The stack this process runs (tox.ini): "keras3" (the primary: TF >= 2.16 with Keras 3),
#: "tfkeras" (the same TensorFlow with tf_keras, TF_USE_LEGACY_KERAS=1) or "tf215" (TF 2.15 with
#: Keras 2 and tensorflow-estimator).
STACK = "keras3" if KERAS3 else ("tf215" if tf.__version__.startswith("2.15.") else "tfkeras")


#: The conformance kit (tests/conformance/) on tfkeras in CI: half of it, the same half each run.
#: tf_keras 2.21 is Keras 2.15's code (run whole on tf215) on Keras 3's TensorFlow (run whole on
#: keras3): what the kit's other half would prove on tfkeras, the two other stacks prove for each
#: of its halves. Deep (and a run that writes the compatibility results) runs all of it.
TFKERAS_HALF = "tests/conformance/"


def _tfkeras_half(config, items):
    if STACK != "tfkeras" or os.environ.get("HOOKBRIDGE_UPDATE_RESULTS") == "1":
        return
    other = [
        item
        for item in items
        if item.nodeid.startswith(TFKERAS_HALF) and zlib.crc32(item.nodeid.encode()) % 2
    ]
    if other:
        chosen = set(map(id, other))
        items[:] = [item for item in items if id(item) not in chosen]
        config.hook.pytest_deselected(items=other)


def pytest_collection_modifyitems(config, items):
    if DEEP or "deep" in (config.getoption("markexpr", "") or "").replace("not deep", ""):
        return
    _tfkeras_half(config, items)
    skip = pytest.mark.skip(
        reason="deep profile only: HOOKBRIDGE_PROFILE=deep (or -m deep) runs it"
    )
    # Subjects that do not change with the stack run once in CI, not three times; every stack
    # runs them in the deep profile. Each marker carries the reason its subject qualifies; the
    # closest one decides (a test marked per_tensorflow in a one_stack module is per_tensorflow).
    for item in items:
        if item.get_closest_marker("deep") is not None:
            item.add_marker(skip)
            continue
        mark = next(
            (m for m in item.iter_markers() if m.name in ("one_stack", "per_tensorflow")), None
        )
        if mark is None:
            continue
        if mark.name == "one_stack" and STACK != "keras3":
            reason = f"CI runs it on keras3 only ({mark.args[0]}); deep runs it on every stack"
        elif mark.name == "per_tensorflow" and STACK == "tfkeras":
            reason = (
                f"CI runs it on keras3 and tf215; tfkeras has keras3's TensorFlow "
                f"({mark.args[0]}); deep runs it here too"
            )
        else:
            continue
        item.add_marker(pytest.mark.skip(reason=reason))


def make_data(n: int = 64, dim: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim)).astype("float32")
    y = (x @ rng.normal(size=(dim, 1)) + 0.1).astype("float32")
    return x, y


def make_model(
    lr: float = 0.01,
    metrics=("mae",),
    dim: int = 4,
    seed: int = 0,
    reuse: bool = False,
    **compile_kw,
):
    """Dense(8) -> Dense(1) on ``dim`` inputs, SGD(``lr``), mse. ``reuse=True``: the model an
    earlier test built with the same arguments, reset to its built state, its functions still
    traced (``tests/reused_models.py`` says when a test may ask for it)."""

    def build():
        keras.utils.set_random_seed(seed)
        model = keras.Sequential(
            [keras.Input((dim,)), keras.layers.Dense(8), keras.layers.Dense(1)]
        )
        model.compile(
            optimizer=keras.optimizers.SGD(lr), loss="mse", metrics=list(metrics), **compile_kw
        )
        return model

    if not reuse:
        return build()
    key = (lr, tuple(metrics), dim, seed, repr(sorted(compile_kw.items())))
    return reused_models.reused(key, seed, build)


@pytest.fixture
def data():
    return make_data()


@pytest.fixture(autouse=True)
def _collect_each_tests_garbage():
    """After every test: collect its cyclic garbage, then freeze what survives.

    A ``fit`` that stops mid-epoch (a hook's stop, an error: much of this suite) leaves Keras 3's
    epoch iterator in a reference cycle, with a tf.data autotune thread attached. Left to the
    interpreter's own collections, those iterators died in bulk inside unrelated later tests,
    each destruction waiting for its thread (measured: single collections of 18-72 s, 148 s of
    collection in 395 s of tests on keras3; 44 s in a 0.5 s test). Collected right after their
    test they die at once; frozen (``gc.freeze``), what outlives its test (modules, caches,
    fixtures) is not traversed again, so each collection costs only the last test's objects.
    Keras 3 only (tf_keras and Keras 2 leave no such cycle; on TF 2.15 the frozen heap made
    test_a_hooks_thread_never_sees_the_global_step_go_backwards 102 s for 5.6 s).
    """
    yield
    reused_models.release_all()
    if KERAS3:
        gc.collect()
        gc.freeze()


def step_reads(gs):
    """Every read a hook's fetch of the global step ``gs`` maps to, for a native oracle's train
    op to wait for: Estimator's cached read tensor (what the built-in hooks fetch) and the
    variable's own graph element (what fetching the variable, or ``gs.read_value()``'s sibling,
    runs). TF1 leaves their order against the increment to the scheduler: ordered after only one
    of them, a fetch of the other raced the increment, and native runs in CI fetched the new value
    (tfkeras once saw 3 at the first run; keras3 once saw (1, 1) for (0, 1)): the oracle flaked,
    not the bridge. Every native oracle that increments the step orders it after these.
    """
    from hookbridge import _tfcompat

    graph = gs.graph
    return [_tfcompat.global_step_read_tensor(graph), graph.as_graph_element(gs)]


def run_native(make_hooks, steps: int, loss_values=None):
    """Runs hooks in a native TF1 MonitoredSession whose train op increments the global step.

    ``loss`` is a tensor named ``loss`` that takes ``loss_values[i]`` at run i. Returns the number
    of runs made before the session asked to stop.
    """
    loss_values = list(loss_values) if loss_values is not None else [1.0] * steps
    graph = tf.Graph()
    with graph.as_default():
        gs = tf.compat.v1.train.get_or_create_global_step()
        loss_in = tf.compat.v1.placeholder_with_default(
            np.float32(loss_values[0]), [], name="loss_in"
        )
        loss = tf.identity(loss_in, name="loss")
        tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.LOSSES, loss)
        with tf.control_dependencies([*step_reads(gs), loss]):
            train_op = tf.compat.v1.assign_add(gs, 1)
        hooks = make_hooks() if callable(make_hooks) else make_hooks
        runs = 0
        with tf.compat.v1.train.MonitoredSession(hooks=hooks) as sess:
            while not sess.should_stop() and runs < steps:
                sess.run(train_op, feed_dict={loss_in: loss_values[runs]})
                runs += 1
    return runs


@pytest.fixture(autouse=True)
def _keras2_v2_classes():
    """Keras 2 (TF 2.15, tf_keras) swaps a layer class's bases to their v1 ones, process-wide,
    whenever a layer of that class is made in a v1 graph (``version_utils.swap_class``: a
    ``model_fn``'s ``tf.compat.v1.layers`` under an Estimator, a Keras layer made under
    ``tf.Graph().as_default()``). Layers of that class made eagerly before, the reused models
    (``reused_models.py``, the conformance kit's shared model), then fail when called: "Your
    Layer or Model is in an invalid state". It depended on which test files shared an xdist
    worker (seen on tf215: the kit's custom-loop runs and test_hook_callback_boundary). Making
    an ``Input``, a ``Dense`` and a ``Sequential`` eagerly after each test swaps their classes
    back, as Keras's next eager construction would."""
    yield
    if not KERAS3 and tf.executing_eagerly():
        keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
