"""The session hooks get under HookCallback (its fetches are answered by ``resolver.py``)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from hookbridge._hook_callback.resolver import Resolver


class BridgeSession(tf.compat.v1.Session):
    """The ``tf.compat.v1.Session`` hooks receive: a real session on the bridge's graph.

    ``run`` answers fetches of values the bridge holds (log tensors, global step) from Python and
    runs everything else on the side graph, with the current step's values fed. The global step
    it reports is the current (post-step) value, as a ``session.run(global_step)`` in ``after_run``
    would in TF1. A run that assigns the global step or restores/assigns the weight mirrors
    writes them through to ``optimizer.iterations`` and the Keras model.
    """

    def __init__(self, resolver: Resolver, config: Any = None) -> None:
        super().__init__(graph=resolver.side.graph, config=config)
        self._resolver = resolver
        resolver.session_created(self)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        return self._resolver.resolve(fetches, feed_dict, options, run_metadata)
