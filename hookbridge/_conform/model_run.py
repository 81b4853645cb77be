"""A hook's two traces on the user's own model (``hookbridge check --model``).

Bridged: the hook under :class:`hookbridge.HookCallback` in ``fit`` on the user's model and data,
so its graph holds what it holds for that model: the global step, one float scalar per Keras log
key named after it (``loss``, each compiled metric: ``mae:0``), ``running_mean/<key>``, and the
weight mirrors ``model/NNN/<name>``. A probe hook after the user's records every log tensor's
batch value at each step.

Native: a ``MonitoredSession`` over a TF1 graph holding the same names a ``model_fn`` graph of
that model would expose to hooks: the global step, one float scalar per log key (``loss`` in the
``LOSSES`` collection) fed with the batch values the bridged run measured, and a train op
incrementing the step after every read. The model's weights are not in it (they change inside
Keras, with no TF1 train op to mirror): a hook reading them fails natively, and check says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._conform.conform import Conformance, _as_list, _instrument_hook, _last
from hookbridge._conform.replacement import Training
from hookbridge._conform.runners import _outcome
from hookbridge._conform.trace import Trace

v1 = tf.compat.v1


class _Probe(v1.train.SessionRunHook):
    """Fetches every Keras log tensor of the bridge's graph each step (batch values)."""

    def __init__(self) -> None:
        self.values: list[dict[str, float]] = []
        self.keys: list[str] = []

    def begin(self) -> None:
        graph = v1.get_default_graph()
        ops = [
            op
            for op in graph.get_operations()
            if op.type == "PlaceholderWithDefault" and "/" not in op.name
        ]
        self.keys = [op.name for op in ops]
        self._fetches = {op.name: op.outputs[0] for op in ops}

    def before_run(self, run_context: Any) -> Any:
        return v1.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.values.append({k: float(v) for k, v in run_values.results.items()})


def hook_traces_on_model(
    make_hook: Callable[[], Any], make_training: Callable[[], Training], steps: int
) -> Conformance:
    """The native and bridged traces of ``make_hook``'s hooks on the user's model.

    Args:
        make_hook: zero-argument factory of a hook or a list of hooks (called once per world).
        make_training: the user's model and data (see ``replacement.user_training``).
        steps: the most steps the native run takes (the bridged run's ``fit`` decides its own).
    """
    from hookbridge import HookCallback

    def hooks(trace: Trace) -> list[Any]:
        made = _as_list(make_hook())
        return [_instrument_hook(h, f"{type(h).__name__}[{i}]", trace) for i, h in enumerate(made)]

    training = make_training()
    probe = _Probe()
    bridged: Trace = []
    bridged_errors: list[BaseException] = []
    bridge = HookCallback(lambda: hooks(bridged) + [probe])
    try:
        _outcome(lambda: training.fit([bridge]), bridged, bridged_errors)
    finally:
        bridge.close()  # it calls no hook: the outcome stays the trace's last event

    native: Trace = []
    native_errors: list[BaseException] = []
    _drive_replay(lambda: hooks(native), probe, steps, native, native_errors)
    return Conformance(native, bridged, _last(native_errors), _last(bridged_errors))


def _drive_replay(
    make_hooks: Callable[[], list[Any]],
    probe: _Probe,
    steps: int,
    trace: Trace,
    errors: list[BaseException],
) -> None:
    graph = tf.Graph()
    keys = probe.keys or ["loss"]

    def replay() -> None:
        with graph.as_default():
            global_step = v1.train.get_or_create_global_step()
            inputs = {k: v1.placeholder(tf.float32, [], name=f"{k}_in") for k in keys}
            tensors = {k: tf.identity(inputs[k], name=k) for k in keys}
            if "loss" in tensors:
                v1.add_to_collection(v1.GraphKeys.LOSSES, tensors["loss"])
            deps = [_tfcompat.global_step_read_tensor(graph), graph.as_graph_element(global_step)]
            with tf.control_dependencies(deps):
                train_op = v1.assign_add(global_step, 1, name="train_op")
            made = make_hooks()
            with v1.train.MonitoredSession(hooks=made) as sess:
                for i in range(steps):
                    if sess.should_stop():
                        break
                    row = probe.values[min(i, len(probe.values) - 1)] if probe.values else {}
                    sess.run(train_op, {inputs[k]: np.float32(row.get(k, 0.0)) for k in keys})

    _outcome(replay, trace, errors)
