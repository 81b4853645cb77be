"""``TPUEstimatorSpec.host_call`` under ``fit``, as ``TPUEstimator(use_tpu=False)`` ran it.

With ``use_tpu=False``, ``as_estimator_spec`` called ``host_fn(*tensors)`` (``**tensors`` for a
dict) in the TRAIN graph, and its ``_OutfeedHostCallHook`` ran the graph's v2 summary writers'
initializers after the session was created, fetched the ``host_fn``'s ops in the SAME
``session.run`` as the ``train_op`` and flushed the writers at ``end()``. In that run nothing
orders a read of a variable after the ``train_op``'s write: a host tensor reading the global step
(``tf.reshape(tf.train.get_global_step(), [1])``, made after the ``train_op``) saw the step
before the increment (measured on TF 2.15: ``tests/test_model_fn_host_call.py``).

Here the ``host_fn`` is called once per tensor signature, in a ``tf.Graph`` of its own with a
placeholder per tensor, run by a ``tf.compat.v1.Session`` through one callable. The TRAIN step
returns the host tensors beside its logs (keys ``KEY<i>``); the model's ``train_function``
(wrapped by :meth:`HostCall.wrap`) takes them out of the logs and runs the callable on them, so
no Keras callback sees them. A ``tf.function`` orders a read made after a write of the same
variable after it; the host tensors' reads of a variable the step wrote before them are taken
from a read made before the ``model_fn`` call instead (learned at the model's first TRAIN
trace, which ``model_fn_model`` makes when it builds), as TensorFlow's session read them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

#: The ops that create a v2 summary writer (``tf.summary.create_file_writer`` in graph mode).
_WRITER_OPS = ("CreateSummaryFileWriter", "CreateSummaryDbWriter")
#: Log-key prefix of the host tensors the TRAIN step returns (taken out before any callback).
KEY = "_mfn_host_call/"
#: Ops that only read the variable they take (not writes for the order of the reads).
_READ_ONLY = ("ReadVariableOp", "VarIsInitializedOp", "VariableShape", "ResourceGather")
#: The host session runs a few summary writes a step in the caller's thread (-1: deterministic;
#: 1 still hands ops to a pool thread beside the caller, measured racing; half the cost of the default
#: pools beside fit's, measured: benchmarks/README.md).
_ONE_THREAD = tf.compat.v1.ConfigProto(
    inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1
)


class _Runner:
    """The ``host_fn`` in its own TF1 graph, on placeholders of one tensor signature."""

    def __init__(self, fn: Callable[..., Any], tensors: Any) -> None:
        self.graph = tf.Graph()
        with tf.init_scope(), self.graph.as_default():  # out of the step being traced
            holders = tf.nest.map_structure(
                lambda t: tf.compat.v1.placeholder(t.dtype, t.shape), tensors
            )
            out = fn(**holders) if isinstance(holders, dict) else fn(*holders)
            self._init = [op for op in self.graph.get_operations() if op.type in _WRITER_OPS]
            self._flush = [tf.raw_ops.FlushSummaryWriter(writer=op.inputs[0]) for op in self._init]
            # the hook fetched the host_fn's ops and dropped their values: one target, no fetch
            self._target = tf.group(*tf.nest.flatten(out))
        self._holders = tf.nest.flatten(holders)
        self._session: Any = None
        self._call: Any = None

    def start(self) -> None:
        """The hook's ``after_create_session``: a session, its writers made, one callable."""
        if self._session is None:
            self._session = tf.compat.v1.Session(graph=self.graph, config=_ONE_THREAD)
            self._session.run(self._init)
            self._call = self._session.make_callable(self._target, feed_list=self._holders)

    def run(self, values: list) -> None:
        self._call(*values)

    def close(self) -> None:
        """The hook's ``end``: the writers flushed, the session closed."""
        if self._session is not None:
            session, self._session = self._session, None
            try:
                session.run(self._flush)
            finally:
                session.close()


class HostCall:
    """A ``model_fn_model``'s TRAIN ``host_call``: its step outputs and its host graph.

    Args:
        owner: how errors name the model.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.found: Any = None  # (host_call, graph, first op index) of the TRAIN call traced
        self.traced: Any = None  # (graph, first op index) of the TRAIN model_fn call traced
        #: The variables (by TF1 name) host tensors read after the step wrote them.
        self.late: dict[str, Any] = {}
        self._runners: dict[tuple, _Runner] = {}
        self._runner: _Runner | None = None  # of the last TRAIN trace
        self._keys: list[str] = []
        self._started: list[_Runner] = []

    def pre_reads(self) -> dict[str, tf.Tensor]:
        """In the step, before the ``model_fn`` call: the reads its host tensors take."""
        return {name: variable.read_value() for name, variable in self.late.items()}

    def outputs(self, pre: dict[str, tf.Tensor], variables: dict[str, Any]) -> dict[str, Any]:
        """In the step, after the ``model_fn`` call: the host tensors as step outputs.

        Args:
            pre: :meth:`pre_reads` of this trace.
            variables: the model's variables by TF1 name (the global step included).
        """
        if self.found is None:
            return {}
        (fn, tensors), graph, first = self.found
        self.found = None
        if tf.executing_eagerly() or not isinstance(graph, tf.Graph):
            raise NotImplementedError(
                f"{self.owner}: the TPUEstimatorSpec's host_call runs in fit's traced step; "
                "compile(run_eagerly=False)."
            )
        flat = _read_before(tf.nest.flatten(tensors), graph, first, variables, pre, self.late)
        signature = tuple((t.dtype, tuple(t.shape.as_list())) for t in flat)
        if signature not in self._runners:
            self._runners[signature] = _Runner(fn, tf.nest.pack_sequence_as(tensors, flat))
        self._runner = self._runners[signature]
        self._keys = [f"{KEY}{i}" for i in range(len(flat))]
        return {key: tf.identity(t) for key, t in zip(self._keys, flat)}

    def hook_tensors(
        self, extras: dict[str, Any], pre: dict[str, tf.Tensor], variables: dict[str, Any]
    ) -> dict[str, Any]:
        """The TRAIN spec's hook tensors (``LoggingTensorHook``'s), read as the host tensors:
        the Estimator fetched them in the ``train_op``'s own ``Session.run``, so a read of a
        variable the step wrote before it (a learning rate decayed from the global step, made
        after the ``train_op``) saw the value before the write. Arguments as :meth:`outputs`."""
        traced, self.traced = self.traced, None
        if traced is None or not extras or not isinstance(traced[0], tf.Graph):
            return extras
        keys = list(extras)
        flat = _read_before([extras[k] for k in keys], *traced, variables, pre, self.late)
        return dict(zip(keys, flat))

    @contextlib.contextmanager
    def running(self, model: Any) -> Iterator[None]:
        """For one ``fit``: the host session made at its start, flushed and closed at its end."""
        if self._runner is not None:
            steps = _tfcompat.keras_steps_per_execution(model)
            if steps != 1:
                raise NotImplementedError(
                    f"{self.owner}: the TPUEstimatorSpec's host_call runs on every step's own "
                    f"tensors; fit runs {steps} steps per execution and returns the last one's. "
                    "compile(steps_per_execution=1)."
                )
            self._start()
        try:
            yield
        finally:
            started, self._started = self._started, []
            for runner in started:
                runner.close()

    def _start(self) -> None:
        runner = self._runner
        if runner is not None and runner not in self._started:
            runner.start()
            self._started.append(runner)

    def wrap(self, function: Any) -> Any:
        """``train_function`` that takes the host tensors out of its logs and runs the
        ``host_fn`` on them (``function`` itself when there is no ``host_call``)."""
        if function is None or self._runner is None or getattr(function, "_mfn_host", False):
            return function

        def train_function(*args: Any, **kwargs: Any) -> Any:
            logs = function(*args, **kwargs)
            values = [logs.pop(key).numpy() for key in self._keys]
            if self._runner not in self._started:  # retraced in this fit
                self._start()
            self._runner.run(values)
            return logs

        train_function._mfn_host = True  # type: ignore[attr-defined]
        return train_function


def _read_before(
    flat: list, graph: tf.Graph, first: int, variables: dict, pre: dict, late: dict
) -> list:
    """``flat`` with each read of a variable that the step wrote before it (in op order) taken
    from ``pre`` instead; such variables are added to ``late`` (read early at the next trace).

    Natively the host tensors run in the train op's own ``Session.run``: a read nothing orders
    after a write sees the value before it; ``fit``'s ``tf.function`` orders by creation. Two
    reads are left as the step orders them: one the model_fn ordered after the write itself (a
    data or control path from the write: natively after it too, e.g. a second train op's loss
    under ``control_dependencies([first_train_op])``), and any op the step's training also uses
    (rewired, it would change what ``fit`` trains, not only what the host_fn sees).
    """
    ops = graph.get_operations()[first:]
    order = {id(op): i for i, op in enumerate(ops)}
    first_write: dict[int, int] = {}  # id(handle tensor): index of its first write
    for i, op in enumerate(ops):
        if op.type not in _READ_ONLY:
            for t in op.inputs:
                if t.dtype == tf.resource:
                    first_write.setdefault(id(t), i)
    seen = _ancestors([t.op for t in flat], order)  # the host tensors' ops made in the call
    trained = _ancestors(  # what the rest of the step uses
        [i.op for op in ops if id(op) not in seen for i in op.inputs]
        + [c for op in ops if id(op) not in seen for c in op.control_inputs],
        order,
    )
    reads = []
    for op in ops:
        if id(op) not in seen or op.type != "ReadVariableOp":
            continue
        write = first_write.get(id(op.inputs[0]))
        if write is None or write >= order[id(op)] or id(ops[write]) in _ancestors([op], order):
            continue
        reads.append(op)
    if not reads:
        return flat
    names = {}
    for name, variable in variables.items():
        for handle in _tfcompat.captured_handles(graph, [variable]):
            names[handle] = name
    swap: dict[int, tf.Tensor] = {}
    for op in reads:
        name = names.get(id(op.inputs[0]))
        if name is None:
            continue  # not a variable of the model's (left as the step orders it)
        late.setdefault(name, variables[name])
        if name in pre:
            swap[id(op.outputs[0])] = pre[name]
    for op in ops:
        if id(op) in seen and id(op) not in trained:
            for index, t in enumerate(op.inputs):
                if id(t) in swap:
                    _tfcompat.update_op_input(op, index, swap[id(t)])
    return [swap.get(id(t), t) for t in flat]


def _ancestors(start: list, order: dict) -> set:
    """The ids of ``start``'s ops and every op of the call they depend on (data or control)."""
    seen: set = set()
    stack = list(start)
    while stack:
        op = stack.pop()
        if id(op) in seen or id(op) not in order:
            continue
        seen.add(id(op))
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen
