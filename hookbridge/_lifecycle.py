"""The two lifecycles hookbridge translates between, as pseudocode (this docstring is the spec).

TF1 ``MonitoredSession`` with hooks (``tensorflow/python/training/session_run_hook.py``)::

    for hook in hooks: hook.begin()                 # graph is default, not finalized
    graph.finalize()
    session = create_session()
    for hook in hooks: hook.after_create_session(session, coord)
    while not stop_requested:                       # one iteration per MonitoredSession.run()
        for hook in hooks: request = hook.before_run(run_context)
        results = session.run(caller_fetches + every hook's fetches, merged feeds, merged options)
        for hook in hooks: hook.after_run(run_context, run_values)   # all of them, even after a stop
    for hook in hooks: hook.end(session)            # also after OutOfRange/StopIteration,
                                                    # never after any other exception
    On AbortedError the session is re-created and every after_create_session runs again.

Keras ``fit`` with callbacks::

    on_train_begin()
    for epoch in epochs:
        on_epoch_begin(epoch)
        for batch in epoch:                         # batch index restarts every epoch
            on_train_batch_begin(batch)
            logs = train_step()                     # running means over the epoch so far
            on_train_batch_end(batch, logs)
            if model.stop_training: break
        [validation: on_test_begin / on_test_batch_* / on_test_end]
        on_epoch_end(epoch, logs + val_logs)
        if model.stop_training: break
    on_train_end(logs)                              # never after an exception

HookCallback maps ``on_train_begin`` to ``begin`` + session creation + ``after_create_session``,
each Keras batch to one ``before_run``/``after_run`` pair, and ``on_train_end`` to ``end``.
CallbackHook maps the other way, synthesizing epochs from ``steps_per_epoch``.
"""

from __future__ import annotations

from typing import Final

HOOK_EVENTS: Final = ("begin", "after_create_session", "before_run", "after_run", "end")
CALLBACK_TRAIN_EVENTS: Final = (
    "on_train_begin",
    "on_epoch_begin",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_epoch_end",
    "on_train_end",
)
