"""Recorders: a hook and a callback that append normalized events to a shared trace.

Events are tuples ``(actor, method, *details)``:

* hooks: ``(name, "begin")``, ``(name, "after_create_session")``, ``(name, "before_run", step)``,
  ``(name, "after_run", step, results, stop_requested_before, global_step_now)``,
  ``(name, "end", global_step)``; ``results`` is :func:`normalize`-d (the global step fetched in
  the run is the pre-step value, ``global_step_now`` a fresh read);
* callbacks: ``(name, "train_begin", {"epochs", "steps"})``, ``(name, "epoch_begin", epoch)``,
  ``(name, "batch_begin", batch)``, ``(name, "batch_end", batch, logs, stop_training)``,
  ``(name, "epoch_end", epoch, logs, stop_training)``, ``(name, "train_end", logs)``; ``logs`` map
  each key to its value rounded to 4 digits.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import tensorflow as tf

from hookbridge._conform.scenarios import CallbackSpec, HookSpec, ScenarioError
from hookbridge._conform.trace import Event, normalize

SessionRunArgs = tf.compat.v1.train.SessionRunArgs
Pair = collections.namedtuple("Pair", ["step", "loss"])


def make_error(kind: str, where: str) -> BaseException:
    """The exception a scripted hook/callback raises: ``error``, ``out_of_range``, ``stop_iteration``."""
    message = f"scripted {kind} in {where}"
    if kind == "out_of_range":
        return tf.errors.OutOfRangeError(None, None, message)
    if kind == "stop_iteration":
        return StopIteration(message)
    return ScenarioError(message)


def _fetches(kind: str, gs: Any, loss: Any, op: Any) -> Any:
    return {
        "none": None,
        "gs": gs,
        "loss": loss,
        "name": "loss:0",
        "op": op,
        "dict": {"gs": gs, "loss": loss},
        "list": [gs, loss],
        "tuple": (loss, gs),
        "nested": {"a": [gs, {"b": loss}], "c": (loss,)},
        "namedtuple": Pair(gs, loss),
    }[kind]


class RecordingHook(tf.compat.v1.train.SessionRunHook):
    """A ``SessionRunHook`` that records its calls into ``trace`` and acts out a :class:`HookSpec`.

    It needs a global step and a float scalar tensor named ``loss`` in the graph (both worlds'
    runners provide them).
    """

    def __init__(self, name: str, trace: list[Event], spec: HookSpec | None = None) -> None:
        self.name = name
        self.trace = trace
        self.spec = spec if spec is not None else HookSpec()
        self._step = -1

    def _maybe(self, method: str, step: int = 0) -> None:
        spec = self.spec
        if spec.raise_in == method and (
            method not in ("before_run", "after_run") or spec.raise_at == step
        ):
            self.trace.append((self.name, "raise", method, spec.error))
            raise make_error(spec.error, f"{self.name}.{method}")

    def begin(self) -> None:
        self.trace.append((self.name, "begin"))
        graph = tf.compat.v1.get_default_graph()
        self._gs = tf.compat.v1.train.get_global_step()
        self._loss = graph.get_tensor_by_name("loss:0")
        self._op = tf.no_op(name=f"recording_hook_{self.name}_op")
        self._step = -1
        self._maybe("begin")

    def after_create_session(self, session: Any, coord: Any) -> None:
        self.trace.append((self.name, "after_create_session"))
        self._maybe("after_create_session")

    def before_run(self, run_context: Any) -> Any:
        self._step += 1
        step = self._step
        spec = self.spec
        self.trace.append((self.name, "before_run", step))
        self._maybe("before_run", step)
        if spec.stop_in == "before_run" and spec.stop_at == step:
            run_context.request_stop()
        fetches = _fetches(spec.fetch, self._gs, self._loss, self._op)
        feeds = {self._loss: np.float32(spec.feed + step)} if spec.feed is not None else None
        if fetches is None and feeds is None:
            return None
        return SessionRunArgs(fetches, feed_dict=feeds)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        step = self._step
        stop_before = bool(run_context.stop_requested)
        now = int(run_context.session.run(self._gs))
        self.trace.append(
            (self.name, "after_run", step, normalize(run_values.results), stop_before, now)
        )
        self._maybe("after_run", step)
        if self.spec.stop_in == "after_run" and self.spec.stop_at == step:
            run_context.request_stop()

    def end(self, session: Any) -> None:
        self.trace.append((self.name, "end", int(session.run(self._gs))))
        self._maybe("end")


def _logs(logs: Any) -> dict:
    return {str(k): normalize(v) for k, v in sorted((logs or {}).items())}


class RecordingCallback(tf.keras.callbacks.Callback):
    """A Keras callback that records its calls into ``trace`` and acts out a :class:`CallbackSpec`.

    Subclasses ``tf.keras.callbacks.Callback`` (Keras 3, or tf_keras with
    ``TF_USE_LEGACY_KERAS=1``, or Keras 2 on TF 2.15).
    """

    def __init__(self, name: str, trace: list[Event], spec: CallbackSpec | None = None) -> None:
        super().__init__()
        self.name = name
        self.trace = trace
        self.spec = spec if spec is not None else CallbackSpec()
        self._global = -1

    def _act(self, method: str, index: int = 0) -> None:
        spec = self.spec
        hit = method == "train_begin" or method == "train_end"
        if spec.stop_in == method and (hit or spec.stop_at == index):
            self.model.stop_training = True
        if spec.raise_in == method and (hit or spec.raise_at == index):
            self.trace.append((self.name, "raise", method, spec.error))
            raise make_error(spec.error, f"{self.name}.on_{method}")

    def on_train_begin(self, logs: Any = None) -> None:
        self._global = -1
        params = {k: (self.params or {}).get(k) for k in ("epochs", "steps")}
        self.trace.append((self.name, "train_begin", params))
        self._act("train_begin")

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.trace.append((self.name, "epoch_begin", epoch))
        self._act("epoch_begin", epoch)

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._global += 1
        self.trace.append((self.name, "batch_begin", batch))
        self._act("batch_begin", self._global)

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._act_record("batch_end", batch, logs, self._global)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        self._act_record("epoch_end", epoch, logs, epoch)

    def _act_record(self, method: str, index: int, logs: Any, at: int) -> None:
        event = [self.name, method, index, _logs(logs), bool(self.model.stop_training)]
        self.trace.append(tuple(event))
        self._act(method, at)

    def on_train_end(self, logs: Any = None) -> None:
        self.trace.append((self.name, "train_end", _logs(logs)))
        self._act("train_end")
