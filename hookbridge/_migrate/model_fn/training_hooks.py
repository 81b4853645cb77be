"""The spec's training hooks in the caller's ``HookCallback``: one session, as ``Estimator.train``.

``Estimator.train`` ran its caller's ``hooks=``, its own hooks and the ``EstimatorSpec``'s
``training_hooks`` / ``training_chief_hooks`` in ONE ``MonitoredTrainingSession``, in the order
``hookbridge.estimator_hooks`` reproduces (chief: its CheckpointSaverHook, unless one is among
the others, then the spec's chief hooks; then StepCounter, SummarySaver; workers: the caller's
hooks, NanTensor, LoggingTensor, the spec's ``training_hooks``). Under ``fit`` with one
``HookCallback`` of the caller's, the spec's hooks join that callback for the call:

* when its hooks callable calls ``estimator_hooks``, that call takes them (``claim``) and places
  them where the Estimator did, a CheckpointSaverHook among them replacing the Estimator's own;
* otherwise they run after the caller's hooks (``training_hooks``) and after its chief-only
  hooks (``training_chief_hooks``, on the chief), as the Estimator ran them after ``hooks=``.

The callback's ``log_names`` gain the keys of the ``model_fn`` tensors the hooks name
(``model_fn/spec.py``) for the call; everything is put back after it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: The spec's hooks waiting for ``estimator_hooks`` while the joined callback makes its hooks.
_PENDING: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar(
    "hookbridge_model_fn_spec_hooks", default=None
)


class _Pending:
    def __init__(self, chief: list, hooks: list, summaries: Any) -> None:
        self.chief = chief
        self.hooks = hooks
        self.summaries = summaries
        self.claimed = False


def claim(model_dir: str, save_summary_steps: int | None) -> tuple[list, list]:
    """For ``estimator_hooks``: the (chief-only, other) hooks of the ``model_fn`` spec whose
    ``fit`` is making this callback's hooks, once; ``([], [])`` outside such a call. The
    ``model_fn``'s own summaries are written into ``model_dir`` every ``save_summary_steps``
    (``model_fn/summaries.py``), as the Estimator's ``SummarySaverHook`` wrote them."""
    pending = _PENDING.get()
    if pending is None or pending.claimed:
        return [], []
    pending.claimed = True
    if pending.summaries is not None:
        pending.summaries.start(model_dir, save_summary_steps)
    return list(pending.chief), list(pending.hooks)


def user_hook_callbacks(callbacks: Any) -> list:
    """The caller's ``HookCallback`` instances among ``callbacks``."""
    from hookbridge._hook_callback.callback import HookCallback

    return [c for c in callbacks or () if isinstance(c, HookCallback)]


@contextlib.contextmanager
def joined(
    bridge: Any,
    fresh_hooks: Callable[[], tuple[list, list]],
    log_names: Sequence[str],
    summaries: Any = None,
) -> Iterator[None]:
    """For one ``fit``: ``bridge`` (the caller's ``HookCallback``) runs the spec's hooks too.

    Args:
        bridge: the caller's ``HookCallback``.
        fresh_hooks: the spec's hooks of a new ``model_fn`` call: (chief-only hooks, hooks).
        log_names: the log keys of the ``model_fn`` tensors the hooks name.
        summaries: the model's ``SummaryWrites`` (started if ``estimator_hooks`` takes them).
    """
    from hookbridge._hook_callback.workers import is_chief

    make, names = bridge._make_hooks, bridge._log_names

    def make_joined() -> list:
        pending = _Pending(*fresh_hooks(), summaries)  # fresh hooks at each run, as train()
        token = _PENDING.set(pending)
        try:
            hooks = list(make())
        finally:
            _PENDING.reset(token)
        if pending.claimed:  # estimator_hooks placed them
            return hooks
        # hooks_for puts the callback's chief-only hooks first: the spec's chief hooks follow.
        chief = pending.chief if is_chief(bridge.model) else []
        return [*chief, *hooks, *pending.hooks]

    bridge._make_hooks = make_joined
    bridge._log_names = [*names, *(k for k in log_names if k not in names)]
    try:
        yield
    finally:
        bridge._make_hooks, bridge._log_names = make, names
