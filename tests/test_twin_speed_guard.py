"""The census twin's traced training step: its per-step cost structure, pinned (issue 33, item 6).

What a step costs beyond the model's own math is mostly variable reads: 8f71b4f took the twin's
optimizers from 73 ``ReadVariableOp`` a step to 15 on TF 2.15 (Keras 2's ``weight_decay``
default left two dangling reads per variable; the learning rate was read once per variable).
Nothing else would notice if either came back (the weights stay bit-equal), so this traces the
twin's ``train_function`` once, as ``fit`` runs it, and counts the op kinds in its graph and the
functions it calls: the exact ``ReadVariableOp`` count, one learning-rate read per optimizer, no
Python op (``py_function``/``numpy_function``) in the step.
"""

from __future__ import annotations

import collections

import pytest
import tensorflow as tf
from fixtures.census_twin import columns, data

import hookbridge

KERAS3 = str(getattr(tf.keras, "__version__", "2")).startswith("3")
#: The reads the census twin's step makes. The forward pass: the 4 hidden layers' and the logits
#: layer's kernel and bias (10) and the linear model's bias (1); its embedding and linear
#: weights are read by ``ResourceGather`` (sparse ids) and are not counted here. The optimizers:
#: the learning rate once per optimizer (Adagrad for the DNN, Ftrl for the linear part: 2).
#: The loss metric: Keras 2 (TF 2.15, tf_keras) reads its total and count once each for the
#: logged mean after its ``AssignAddVariableOp``s (2); Keras 3's loss tracker and the two
#: optimizers' ``iterations`` are read-add-assign (4 reads), then total and count read for the
#: mean (2). Keras 2 with ``weight_decay=0`` / the rate read per variable: 73 (TF 2.15).
READS = 11 + 2 + (6 if KERAS3 else 2)
#: The op kinds that would run Python inside the step.
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


@pytest.fixture(scope="module")
def step_ops() -> tuple[collections.Counter, list[str]]:
    """The op kinds of the census twin's traced train step (its graph and every function it
    calls) and the names of its ``ReadVariableOp``s."""
    twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    features, labels = data.rows(data.CONTINUE_SEED, data.BATCH)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(data.BATCH)
    twin.make_train_function()
    # The tf.function fit calls with the iterator (hookbridge's flat call runs its graph).
    traced = twin.train_function._traced
    graph = traced.get_concrete_function(iter(dataset)).graph
    kinds = collections.Counter(op.type for op in graph.get_operations())
    reads = [op.name for op in graph.get_operations() if op.type == "ReadVariableOp"]
    for function in graph.as_graph_def().library.function:
        kinds.update(node.op for node in function.node_def)
        reads += [node.name for node in function.node_def if node.op == "ReadVariableOp"]
    return kinds, reads


def test_the_twin_step_reads_each_variable_it_needs_once(step_ops):
    kinds, reads = step_ops
    assert kinds["ReadVariableOp"] == READS, sorted(reads)


def test_the_twin_step_reads_each_optimizers_learning_rate_once(step_ops):
    _, reads = step_ops
    for optimizer in ("Adagrad", "Ftrl"):
        assert len([r for r in reads if r.split("/")[0] == optimizer]) == 1, sorted(reads)


def test_the_twin_step_runs_no_python(step_ops):
    kinds, _ = step_ops
    assert not PYTHON_OPS & set(kinds), sorted(PYTHON_OPS & set(kinds))
