"""Diagnostics, never verdicts: where a bridge case's time goes.

``attribute`` measures the wall time spent inside the bridge's per-step entry points during a
real run (``HookCallback``'s batch methods, ``CallbackHook``'s ``before_run``/``after_run``), split
into the hooks' own code and the bridge's machinery, with ``perf_counter`` wrappers (about
0.2–0.5 µs each). It is an upper bound that moves with the machine's load as much as the
end-to-end figures do (a preempted moment inside the bridge is charged to it), and it leaves out
what happens outside the entry points (Keras calling one more callback, colder caches after it,
TF's side of a fetch in a MonitoredSession run). ``profile`` adds a cProfile of one run per case.
"""

from __future__ import annotations

import cProfile
import functools
import io
import pstats
import time

import tensorflow as tf

from .cases import Case
from .timing import Timings
from .workloads import callback_classes, hook_classes

v1 = tf.compat.v1
HOOKS_OWN = "hooks' own before_run/after_run"
CALLBACKS_OWN = "callbacks' own on_* methods"
#: The Keras callback methods CallbackHook may call while a session runs (per step or at an
#: epoch's end, both inside its after_run).
_CALLBACK_METHODS = (
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_batch_begin",
    "on_batch_end",
)
#: Cases whose time inside the bridge is attributed, with the reference shown beside them.
ATTRIBUTED = {
    "idle_1": "bare",
    "nan": "bare",
    "standard": "bare",
    "idle_10": "bare",
    "idle_100": "bare",
    "cnn_standard": "cnn_bare",
    "ms_callback_hook": "ms_bare",
    "ms_callback_hook_epoch": "ms_bare",
}


def direct_timing(case: Case, steps: int, epochs: int = 1) -> dict[str, float]:
    """Seconds spent in the bridge's per-step entry points during ``case.run(steps, epochs)``,
    and, under ``HOOKS_OWN`` / ``CALLBACKS_OWN``, inside the hooks' ``before_run``/``after_run``
    and the Keras callbacks' own methods (called from those entry points)."""
    from hookbridge._callback_hook.hook import CallbackHook
    from hookbridge._hook_callback.callback import HookCallback

    spent: dict[str, float] = {}
    patched = []
    base = v1.train.SessionRunHook
    targets = [
        (HookCallback, ("on_train_batch_begin", "on_train_batch_end"), None),
        (CallbackHook, ("before_run", "after_run"), None),
    ]
    targets += [(cls, ("before_run", "after_run"), HOOKS_OWN) for cls in hook_classes()]
    # Only the methods a callback class defines itself: those are the ones it overrides, so
    # wrapping them changes nothing of which methods CallbackHook dispatches.
    targets += [
        (cls, tuple(m for m in _CALLBACK_METHODS if m in vars(cls)), CALLBACKS_OWN)
        for cls in callback_classes()
    ]
    clock = time.perf_counter
    for cls, names, group in targets:
        for attr in names:
            original = getattr(cls, attr)
            if group is not None and original is getattr(base, attr, None):
                continue  # not overridden: the bridge never calls it
            label = group or f"{cls.__name__}.{attr}"

            # wraps: the name and Keras's default marks stay (CallbackHook decides by them
            # which methods to call, and in which mode)
            @functools.wraps(original)
            def wrapper(*a, _f=original, _label=label, **k):
                t0 = clock()
                try:
                    return _f(*a, **k)
                finally:
                    spent[_label] = spent.get(_label, 0.0) + clock() - t0

            patched.append((cls, attr, cls.__dict__.get(attr)))
            setattr(cls, attr, wrapper)
    try:
        case.run(steps, epochs)
    finally:
        for cls, attr, original in reversed(patched):
            if original is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, original)
    return spent


def attribute(
    cases: dict[str, Case], timings: Timings, steps: int, epochs: int, own_sizes: bool = True
) -> str:
    """A Markdown table: µs per step inside the bridge, per attributed case (one more run each,
    of the sizes ``timing.measure`` used)."""
    rows = [
        (
            "| case | in the bridge, µs/step | of which the hooks' / callbacks' own code "
            "| bridge machinery "
            "| reference's fastest epoch, µs/step |"
        ),
        "|---|---|---|---|---|",
    ]
    for name, ref in ATTRIBUTED.items():
        if name not in cases or ref not in timings.samples:
            continue
        case = cases[name]
        n_steps, n_epochs = steps, epochs
        if own_sizes:
            n_steps, n_epochs = case.steps or steps, case.epochs or epochs
        spent = direct_timing(case, n_steps, 1 + n_epochs)
        n = n_steps * (1 + n_epochs)
        entry = sum(v for k, v in spent.items() if k not in (HOOKS_OWN, CALLBACKS_OWN)) / n * 1e6
        own = (spent.get(HOOKS_OWN, 0.0) + spent.get(CALLBACKS_OWN, 0.0)) / n * 1e6
        rows.append(
            f"| {name} | {entry:.1f} | {own:.1f} | {entry - own:.1f} "
            f"| {ref} {timings.low_us(ref):.0f} |"
        )
    return "\n".join(rows)


def profile(cases: dict[str, Case], names: list[str], steps: int, top: int) -> None:
    """cProfile of one run of each named case: hookbridge's (and the hook machinery's) functions
    by cumulative µs per step, then the process's top functions by own time."""
    for name in names:
        case = cases[name]
        case.run(50)  # trace and warm up outside the profile
        spent = direct_timing(case, steps)
        print(
            f"\n{name}: {steps} steps, time inside the bridge's per-step entry points (no profiler):"
        )
        for where, seconds in spent.items():
            print(f"{seconds / steps * 1e6:9.1f} µs/step  {where}")
        prof = cProfile.Profile()
        prof.enable()
        case.run(steps)
        prof.disable()
        stats = pstats.Stats(prof)
        rows = []
        for (file, line, func), (_, calls, tt, ct, _) in stats.stats.items():
            if any(m in file for m in ("hookbridge", "session_run_hook", "monitored_session")):
                where = f"{_short(file)}:{line}({func})"
                rows.append((ct / steps * 1e6, tt / steps * 1e6, calls, where))
        rows.sort(reverse=True)
        print(
            f"\ncProfile, {name}, {steps} steps (µs per step under cProfile, which inflates them):"
        )
        print(f"{'cum µs/step':>12} {'own µs/step':>12} {'calls':>8}  function")
        for cum, own, calls, where in rows[:top]:
            print(f"{cum:12.1f} {own:12.1f} {calls:8d}  {where}")
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
        print(f"\ncProfile, {name}: top functions by own time, whole process")
        print("\n".join(buf.getvalue().splitlines()[6:]))


def _short(path: str) -> str:
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    if "/hookbridge/" in path:
        return "hookbridge/" + path.rsplit("/hookbridge/", 1)[1]
    return path
