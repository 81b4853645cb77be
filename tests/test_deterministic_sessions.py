"""The sessions said to be deterministic run their ops in the caller's thread.

``inter_op_parallelism_threads=1`` is not one thread: the session still hands ready ops to a pool
thread beside the caller, and reads racing a write in the same run come out in either order
(measured: 4-6 orders over 300 runs, and BERT's learning rate read of the global step once took
the step after the last in CI, moving the walk's predictions by 2e-4). ``-1`` runs every op in the
caller's thread: one order. The Estimator runs of the walk and the fixtures, and the ``host_call``
session, rely on that.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tensorflow as tf

from hookbridge._migrate.model_fn import host_call

v1 = tf.compat.v1
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "bert_model_fn"


def _orders(config: v1.ConfigProto, runs: int = 150) -> set[tuple[int, ...]]:
    """The orders seen between eight reads of a variable and its increment in one run, with a
    few matmuls beside them to keep a second thread busy."""
    graph = tf.Graph()
    with graph.as_default():
        step = v1.Variable(0, dtype=tf.int64, use_resource=True)
        reads = [tf.identity(step.read_value()) for _ in range(8)]
        work = [tf.reduce_sum(tf.ones([120, 120]) @ tf.ones([120, 120])) for _ in range(4)]
        increment = tf.group(work, step.assign_add(1))
        with v1.Session(graph=graph, config=config) as session:
            session.run(step.initializer)
            seen = set()
            for before in range(runs):
                values, _ = session.run([reads, increment])
                seen.add(tuple(int(v) - before for v in values))
    return seen


def _walk_config() -> v1.ConfigProto:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import walk

        return walk.one_thread()
    finally:
        sys.path.remove(str(EXAMPLE))
        sys.modules.pop("walk", None)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(_walk_config, id="bert_walk"),
        pytest.param(lambda: host_call._ONE_THREAD, id="host_call"),
    ],
)
def test_a_deterministic_session_sees_one_order(config):
    assert len(_orders(config())) == 1
