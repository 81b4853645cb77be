"""What callbacks write at the end of training reaches the session's last checkpoint.

``MonitoredTrainingSession`` and ``Estimator.train`` run their own ``CheckpointSaverHook``
before the user's hooks: its ``after_run`` saves the step that closes an epoch before
CallbackHook's ``after_run`` calls ``on_epoch_end`` (a ``ReduceLROnPlateau`` cut), and its
``end()`` saves the final step before CallbackHook's ``end()`` calls ``on_train_end``
(``EarlyStopping(restore_best_weights=True)``). In ``fit`` the model keeps those writes; here
the checkpoint of that step would not, and a restart, ``Estimator.evaluate`` / ``predict`` /
``export`` would read the state from before them. So after ``on_train_end``, when a callback
wrote variables at the final global step and the session's Saver wrote a checkpoint of that
step, the checkpoint is written again, at the same path, with the variables as they are now.
"""

from __future__ import annotations

import re
from typing import Any

import tensorflow as tf

_STEP = re.compile(r"-(\d+)$")


def resave_final_checkpoint(state: Any, session: Any) -> str | None:
    """Writes the session's checkpoint of the final step again if a callback changed variables
    at that step (after it was written).

    Args:
        state: the hook's ``GraphState`` (``written_at``: the step of the latest write).
        session: the raw session ``end()`` received.

    Returns:
        The checkpoint path written again, or ``None`` (nothing written at the final step, no
        Saver of the graph wrote a checkpoint of it: no ``CheckpointSaverHook``, or not the
        chief).
    """
    if state.written_at is None or state.global_step is None or state.graph is None:
        return None
    step = int(session.run(state.global_step))
    if state.written_at != step:
        return None
    for saver in state.graph.get_collection(tf.compat.v1.GraphKeys.SAVERS):
        last = list(getattr(saver, "last_checkpoints", None) or [])
        if not last:
            continue
        match = _STEP.search(last[-1])
        if match is None or int(match.group(1)) != step:
            continue
        saver.save(session, last[-1], write_meta_graph=False)
        return last[-1]
    return None
