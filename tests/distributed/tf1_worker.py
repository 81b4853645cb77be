"""What the TF1 worker graphs of the cluster tests share (``ps_cluster.py``, a process of its own,
and ``tests/test_callback_hook_cluster.py``, workers in one process): the global step, made by
hand under the worker's name scope, and the hand-written TF1 shared stop the bridged stops are
compared with."""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf


def global_step() -> tf.compat.v1.Variable:
    """An int64 global step under the current name scope (``get_or_create_global_step`` ignores
    name scopes: two workers' graphs on one server would share it)."""
    return tf.compat.v1.Variable(
        np.int64(0),
        trainable=False,
        name="global_step",
        collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.GLOBAL_STEP],
    )


class NativeSharedStop(tf.compat.v1.train.SessionRunHook):
    """The TF1 way, written by hand: the chief sets a shared variable (on the global step's
    device) when the step reaches ``stop_at``, and notes the time in ``stop_time``; every worker
    fetches it with each run and stops its own session when it is set."""

    def __init__(self, is_chief, stop_at):
        self.is_chief, self.stop_at, self.stop_time = is_chief, stop_at, None

    def begin(self):
        self.gs = tf.compat.v1.train.get_global_step()
        scope = self.gs.op.name.rsplit("/", 1)[0]
        with tf.compat.v1.device(self.gs.device), tf.compat.v1.name_scope(scope + "/native/"):
            self.var = tf.compat.v1.Variable(False, collections=[], name="stop")
            self.ready = tf.compat.v1.is_variable_initialized(self.var)
            self.set = self.var.assign(True)

    def after_create_session(self, session, coord):
        if not session.run(self.ready):
            session.run(self.var.initializer)

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs([self.gs, self.var])

    def after_run(self, run_context, run_values):
        step, stop = run_values.results
        if self.is_chief and step + 1 >= self.stop_at:
            self.stop_time = time.time()
            run_context.session.run(self.set)
            run_context.request_stop()
        elif stop:
            run_context.request_stop()
