#!/usr/bin/env python
"""hookbridge per-step cost benchmark: prints a table of µs/step, ratios, targets, PASS/MISS.

Every case trains the same small MLP (32 -> 64 -> 1, batch 32, Adam, MSE) on the CPU from the same
``tf.data`` pipeline. A case's per-step cost is the slope between a long and a short run
(``(t_long - t_short) / (long - short)``), so fixed costs (iterator, side graph, session, hooks'
``begin``/``end``) cancel. All cases live in one process; repeats are interleaved (a shuffled
order per repeat) so load on the machine affects every case alike. Verdicts use the slope between
each length's fastest run (interference only slows a run down, so the fastest is the least
disturbed, as ``timeit`` reasons); the median of per-repeat paired ratios is printed beside it.

Usage::

    python benchmarks/bench.py            # full mode (several minutes), the table in docs/performance.md
    python benchmarks/bench.py --short    # < 60 s: only checks every case runs (CI); no verdicts
    python benchmarks/bench.py --memory   # 50,000-step soak with the standard hook set
    python benchmarks/bench.py --profile  # cProfile of one run per case, hookbridge lines
    py-spy record -o out.svg -- python benchmarks/bench.py --run standard --long 5000

The targets live here, never in timed tests.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import os
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def _pin_process(argv: list[str]) -> str:
    """``--cpus N`` pins this process to logical CPU N before TensorFlow starts its thread pools
    (which inherit the affinity); the default, ``all``, leaves the affinity alone.

    Pinning keeps the Python thread and TF's pool threads on one core, so no step waits for the
    other core to wake up; pair it with ``--threads 1``, or TF's spinning pool threads compete for
    that core.
    """
    value = "all"
    for i, arg in enumerate(argv):
        if arg == "--cpus" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--cpus="):
            value = arg.split("=", 1)[1]
    if value == "all" or not hasattr(os, "sched_setaffinity"):
        return "all"
    os.sched_setaffinity(0, {int(value)})
    return value


PINNED = _pin_process(sys.argv[1:]) if __name__ == "__main__" else "all"

import keras
import numpy as np
import tensorflow as tf

import hookbridge

v1 = tf.compat.v1
BATCH = 32
CLOCK = time.perf_counter  # --clock cpu: time.process_time (CPU time of the whole process)
#: What time inside the bridge's entry points is measured with: wall time, so a moment the thread
#: spends preempted inside the bridge is charged to it (``time.thread_time`` would not, but costs
#: 0.7 µs a call on this VM, more than the calls it would time).
ATTRIBUTION_CLOCK = time.perf_counter
IN, HIDDEN, OUT = 32, 64, 1
WIDE = 10 * HIDDEN


# ------------------------------------------------------------------------------------- data
def _arrays(n: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, IN)).astype(np.float32)
    w = rng.standard_normal((IN, OUT)).astype(np.float32)
    y = (np.tanh(x @ w) + 0.1 * rng.standard_normal((n, OUT))).astype(np.float32)
    return x, y


def _dataset() -> tf.data.Dataset:
    x, y = _arrays()
    return (
        tf.data.Dataset.from_tensor_slices((x, y))
        .repeat()
        .batch(BATCH, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )


def _keras_model(hidden: int) -> Any:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((IN,)),
            keras.layers.Dense(hidden, activation="relu"),
            keras.layers.Dense(OUT),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    return model


# ----------------------------------------------------------------------------------- hooks
class IdleHook(v1.train.SessionRunHook):
    """A hook that fetches nothing: ``before_run`` returns None, ``after_run`` does nothing."""

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass


def standard_hooks(outdir: str, num_steps: int) -> Callable[[], list]:
    """The standard TF1 hook set, in the hooks-callable form (built on the bridge's graph)."""

    def make() -> list:
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        summary_op = v1.summary.scalar("loss", loss)
        return [
            v1.train.StopAtStepHook(num_steps=num_steps),
            v1.train.NanTensorHook("loss:0"),
            v1.train.LoggingTensorHook({"loss": "loss:0"}, every_n_iter=100),
            v1.train.StepCounterHook(every_n_steps=100, output_dir=outdir),
            v1.train.SummarySaverHook(save_steps=100, output_dir=outdir, summary_op=summary_op),
            v1.train.CheckpointSaverHook(outdir, save_steps=500),
        ]

    return make


class _StepsPerSec(keras.callbacks.Callback):
    """Hand-written equivalent of StepCounterHook(100): logs steps/sec every 100 steps."""

    def __init__(self, every: int = 100) -> None:
        super().__init__()
        self.every = every
        self._t = None

    def on_train_batch_end(self, batch, logs=None):
        if batch % self.every == 0:
            now = time.perf_counter()
            if self._t is not None:
                v1.logging.info("global_step/sec: %g", self.every / (now - self._t))
            self._t = now


class _NoopCallback(keras.callbacks.Callback):
    """Overrides the batch hooks HookCallback overrides, and does nothing: Keras's own floor."""

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        pass


def keras_equivalents(outdir: str) -> list:
    """Hand-written Keras callbacks doing what the standard hook set does."""

    def log_loss(batch, logs):
        if batch % 100 == 0:
            v1.logging.info("loss = %s", logs.get("loss"))

    return [
        keras.callbacks.TerminateOnNaN(),
        keras.callbacks.LambdaCallback(on_train_batch_end=log_loss),
        _StepsPerSec(100),
        keras.callbacks.TensorBoard(
            os.path.join(outdir, "tb"), update_freq=100, write_graph=False, profile_batch=0
        ),
        keras.callbacks.ModelCheckpoint(
            os.path.join(outdir, "ckpt.weights.h5"), save_weights_only=True, save_freq=500
        ),
    ]


# ------------------------------------------------------------------------------------ cases
class Case:
    """A named way of training: ``run(steps, epochs)`` trains ``epochs`` epochs of ``steps`` steps
    in one run (one ``fit``, or one ``MonitoredSession``) and returns each epoch's seconds."""

    def __init__(self, name: str, description: str, run: Callable[..., list[float]]) -> None:
        self.name = name
        self.description = description
        self.run = run


@contextlib.contextmanager
def timed():
    """Runs its block as ``timeit`` runs a timing: the garbage collector is run, its survivors
    frozen, and collection disabled meanwhile, so a full collection of TF's and Keras's millions
    of objects (tens of ms) lands in no case's timing by chance."""
    gc.collect()
    gc.freeze()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()


class _EpochClock:
    """Times each epoch of a ``fit``: ``start`` goes first in the callback list and ``stop``
    last, so an epoch's time covers every callback's work in it (and nothing of ``fit``'s
    set-up, ``on_train_begin`` or ``on_train_end``)."""

    def __init__(self) -> None:
        self.epochs: list[float] = []
        self._t0 = 0.0
        clock = self

        class Start(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                clock._t0 = CLOCK()

        class Stop(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                clock.epochs.append(CLOCK() - clock._t0)

        self.start, self.stop = Start(), Stop()


def fit_case(name: str, description: str, model: Any, ds: Any, callbacks: Callable) -> Case:
    def run(steps: int, epochs: int = 1) -> list[float]:
        clock = _EpochClock()
        cbs = [clock.start, *callbacks(steps * epochs), clock.stop]
        with timed():
            history = model.fit(
                ds, steps_per_epoch=steps, epochs=epochs, verbose=0, callbacks=cbs, shuffle=False
            )
        if len(history.history.get("loss", ())) != epochs:
            raise RuntimeError(f"{name}: fit did not run {epochs} epochs: {history.history}")
        return clock.epochs

    return Case(name, description, run)


def _graph_mlp(hidden: int) -> tuple[Any, Any]:
    """A TF1 graph MLP of the same size as the Keras one, with a real Adam train op."""
    x, y = v1.data.make_one_shot_iterator(_dataset()).get_next()
    glorot = v1.glorot_uniform_initializer(seed=0)
    w1 = v1.get_variable("w1", [IN, hidden], initializer=glorot)
    b1 = v1.get_variable("b1", [hidden], initializer=v1.zeros_initializer())
    w2 = v1.get_variable("w2", [hidden, OUT], initializer=glorot)
    b2 = v1.get_variable("b2", [OUT], initializer=v1.zeros_initializer())
    pred = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    step = v1.train.get_or_create_global_step()
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, global_step=step)
    return train_op, loss


def session_case(name: str, description: str, hooks: Callable[[int], list]) -> Case:
    def run(steps: int, epochs: int = 1) -> list[float]:
        graph = tf.Graph()
        times = []
        with graph.as_default():
            train_op, _ = _graph_mlp(HIDDEN)
            hs = hooks(steps * epochs)
            with timed(), v1.train.MonitoredSession(hooks=hs) as sess:
                for _ in range(epochs):
                    t0 = CLOCK()
                    for _ in range(steps):
                        sess.run(train_op)
                    times.append(CLOCK() - t0)
        return times

    return Case(name, description, run)


def build_cases(workdir: str) -> dict[str, Case]:
    ds = _dataset()
    small = _keras_model(HIDDEN)
    wide = _keras_model(WIDE)

    def d(name: str) -> str:
        path = os.path.join(workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def idle(n: int) -> Callable[[int], list]:
        return lambda steps: [hookbridge.HookCallback([IdleHook() for _ in range(n)])]

    def standard(name: str) -> Callable[[int], list]:
        out = d(name)
        return lambda steps: [hookbridge.HookCallback(standard_hooks(out, steps + 10))]

    def callback_hook(with_batch_listener: bool) -> Callable[[int], list]:
        def make(steps: int) -> list:
            out = d("callback_hook")
            callbacks = [
                keras.callbacks.History(),
                keras.callbacks.EarlyStopping(monitor="loss", patience=10**9),
                keras.callbacks.CSVLogger(os.path.join(out, "log.csv")),
            ]
            if with_batch_listener:  # reads every batch's logs: the loss is fetched every step
                callbacks.append(keras.callbacks.TerminateOnNaN())
            logs = {"loss": "loss:0"}
            return [hookbridge.CallbackHook(callbacks, logs=logs, steps_per_epoch=100)]

        return make

    keras_out = d("keras")
    cases = [
        fit_case("bare", "bare fit, no callbacks", small, ds, lambda s: []),
        fit_case(
            "keras_noop",
            "a Keras callback doing nothing per batch (the floor)",
            small,
            ds,
            lambda s: [_NoopCallback()],
        ),
        fit_case("idle_1", "HookCallback, 1 hook fetching nothing", small, ds, idle(1)),
        fit_case(
            "nan",
            "HookCallback, NanTensorHook('loss:0')",
            small,
            ds,
            lambda s: [hookbridge.HookCallback([v1.train.NanTensorHook("loss:0")])],
        ),
        fit_case("standard", "HookCallback, standard hook set", small, ds, standard("standard")),
        fit_case(
            "keras_equiv",
            "hand-written Keras callbacks (same jobs)",
            small,
            ds,
            lambda s: keras_equivalents(keras_out),
        ),
        fit_case("idle_10", "HookCallback, 10 idle hooks", small, ds, idle(10)),
        fit_case("idle_100", "HookCallback, 100 idle hooks", small, ds, idle(100)),
        fit_case("wide_bare", f"bare fit, 10x wider ({WIDE} units)", wide, ds, lambda s: []),
        fit_case(
            "wide_standard", "10x wider, standard hook set", wide, ds, standard("wide_standard")
        ),
        session_case("ms_bare", "MonitoredSession, no hooks (TF1 graph MLP)", lambda s: []),
        session_case(
            "ms_nan_hook",
            "MonitoredSession + native NanTensorHook(loss): a hook's fetch every step",
            lambda s: [v1.train.NanTensorHook("loss:0")],
        ),
        session_case(
            "ms_standard",
            "MonitoredSession + the standard hook set, natively: what the hooks cost in TF1",
            lambda steps: standard_hooks(d("ms_standard"), steps + 10)(),
        ),
        session_case(
            "ms_callback_hook",
            "MonitoredSession + CallbackHook(History, EarlyStopping, CSVLogger, TerminateOnNaN)",
            callback_hook(with_batch_listener=True),
        ),
        session_case(
            "ms_callback_hook_epoch",
            "MonitoredSession + CallbackHook(History, EarlyStopping, CSVLogger): epoch-level "
            "callbacks only, so the epoch sums stay in the graph",
            callback_hook(with_batch_listener=False),
        ),
    ]
    return {c.name: c for c in cases}


# -------------------------------------------------------------------------------- verdicts
# (case, reference, kind, limit, target text). kind "ratio": median paired ratio <= limit;
# "per_hook": (case - reference) / hooks <= limit µs; "report": no target.
CHECKS = [
    ("bare", None, "report", None, "1.00 (reference)"),
    ("keras_noop", "bare", "report", None, "- (floor for any callback)"),
    ("idle_1", "bare", "ratio", 1.02, "<= 1.02x bare"),
    ("nan", "bare", "ratio", 1.05, "<= 1.05x bare"),
    ("standard", "bare", "ratio", 1.10, "<= 1.10x bare"),
    ("standard", "keras_equiv", "ratio", 1.05, "<= 1.05x keras_equiv"),
    ("keras_equiv", "bare", "report", None, "-"),
    ("idle_10", "bare", "per_hook", 5.0, "<= 5 µs/hook/step"),
    ("idle_100", "bare", "per_hook", 5.0, "<= 5 µs/hook/step"),
    ("wide_bare", "bare", "report", None, "-"),
    ("wide_standard", "wide_bare", "report", None, "-"),
    ("ms_bare", None, "report", None, "1.00 (reference)"),
    ("ms_nan_hook", "ms_bare", "report", None, "- (any fetching hook)"),
    ("ms_standard", "ms_bare", "report", None, "- (the standard set, native TF1)"),
    ("ms_callback_hook", "ms_bare", "ratio", 1.10, "<= 1.10x ms_bare"),
    ("ms_callback_hook_epoch", "ms_bare", "report", None, "- (no per-batch listener)"),
]
HOOK_COUNTS = {"idle_1": 1, "idle_10": 10, "idle_100": 100}


class Timings:
    """Per-step costs per case: ``samples[case][r]`` = µs/step of each timed epoch of repeat r.

    A case runs ``1 + epochs`` epochs of ``steps`` steps in one run; the first epoch (tracing
    caches, first summaries, the hooks' first-step work) is not timed, and neither is anything
    outside an epoch (building the side graph and session, ``begin``, ``end``). An epoch's time
    divided by its steps is the slope of cumulative time over steps inside one long run, so
    fixed costs cancel as in a long-minus-short slope, without a second run's noise.
    """

    def __init__(self, steps: int, epochs: int) -> None:
        self.steps, self.epochs = steps, epochs
        self.samples: dict[str, list[list[float]]] = {}

    def add(self, case: str, epoch_seconds: list[float]) -> None:
        per_step = [t / self.steps * 1e6 for t in epoch_seconds[1:]]
        self.samples.setdefault(case, []).append(per_step)

    def all_us(self, case: str) -> list[float]:
        return [x for repeat in self.samples[case] for x in repeat]

    def repeat_medians_us(self, case: str) -> list[float]:
        """One figure per repeat (the median of its epochs), for ratios paired within a repeat."""
        return [statistics.median(r) for r in self.samples[case]]

    def low_us(self, case: str) -> float:
        """The fastest epoch, µs/step: interference from the rest of the machine only ever
        slows an epoch down, so the fastest is the least disturbed (``timeit``'s reasoning)."""
        return min(self.all_us(case))


def measure(
    cases: dict[str, Case], steps: int, epochs: int, repeats: int, seed: int = 0
) -> Timings:
    """Runs every case ``repeats`` times, interleaved in a shuffled order per repeat."""
    rng = random.Random(seed)
    timings = Timings(steps, epochs)
    for case in cases.values():  # warm-up: tracing, imports, first writers
        case.run(min(steps, 50), 2)
    for r in range(repeats):
        order = list(cases.values())
        rng.shuffle(order)
        for case in order:
            timings.add(case.name, case.run(steps, 1 + epochs))
        print(
            f"  repeat {r + 1}/{repeats} done (load {os.getloadavg()[0]:.2f})",
            file=sys.stderr,
            flush=True,
        )
    return timings


def table(timings: Timings, verdicts: bool, checks: list) -> tuple[str, bool]:
    """The results table. Verdicts compare each case's fastest epoch (``Timings.low_us``); the
    median of per-repeat paired ratios is shown beside them."""
    us = {k: timings.repeat_medians_us(k) for k in timings.samples}
    low = {k: timings.low_us(k) for k in timings.samples}
    rows = []
    all_pass = True
    for name, ref, kind, limit, target in checks:
        every = timings.all_us(name)
        spread = f"{min(every):.0f}–{max(every):.0f}"
        if ref is None:
            value, at_min, median = 1.0, "1.00", "1.00"
        elif kind == "per_hook":
            n = HOOK_COUNTS[name]
            value = (low[name] - low[ref]) / n
            at_min = f"{value:.2f} µs/hook"
            per = [(a - b) / n for a, b in zip(us[name], us[ref])]
            median = f"{statistics.median(per):.2f} µs/hook"
        else:
            value = low[name] / low[ref]
            at_min = f"{value:.3f}x {ref} ({low[name] - low[ref]:+.0f} µs)"
            median = f"{statistics.median(a / b for a, b in zip(us[name], us[ref])):.3f}x"
        if kind == "report" or limit is None:
            result = ""
        elif not verdicts:
            result = "ran"
        else:
            ok = value <= limit
            all_pass &= ok
            result = "PASS" if ok else "MISS"
        rows.append(
            (
                name,
                f"{low[name]:.0f}",
                f"{statistics.median(us[name]):.0f}",
                spread,
                at_min,
                median,
                target,
                result,
            )
        )
    head = (
        "case",
        "µs/step (fastest epoch)",
        "median",
        "min–max",
        "ratio (fastest epochs)",
        "median paired ratio",
        "target",
        "result",
    )
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]

    def line(r: tuple) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out), all_pass


def machine() -> str:
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for ln in f:
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    version = getattr(hookbridge, "__version__", "dev")
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {cpu}, "
        f"{os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"TF {tf.__version__}, Keras {keras.__version__}, hookbridge {version}"
    )


# --------------------------------------------------------------------------------- memory
def memory_soak(workdir: str, steps: int, epochs: int) -> bool:
    import psutil

    proc = psutil.Process()
    ds = _dataset()
    model = _keras_model(HIDDEN)
    out = os.path.join(workdir, "soak")
    samples: list[tuple[int, float, int]] = []

    class Sampler(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            gc.collect()
            samples.append((epoch + 1, proc.memory_info().rss / 2**20, proc.num_fds()))

    per_epoch = steps // epochs
    warm = [hookbridge.HookCallback(standard_hooks(out, 10**9))]
    model.fit(ds, steps_per_epoch=2000, epochs=1, verbose=0, callbacks=warm, shuffle=False)
    gc.collect()
    rss0, fds0 = proc.memory_info().rss / 2**20, proc.num_fds()
    t0 = time.perf_counter()
    cbs = [hookbridge.HookCallback(standard_hooks(out, steps)), Sampler()]
    model.fit(ds, steps_per_epoch=per_epoch, epochs=epochs, verbose=0, callbacks=cbs, shuffle=False)
    elapsed = time.perf_counter() - t0
    gc.collect()
    rss1, fds1 = proc.memory_info().rss / 2**20, proc.num_fds()
    steps_run = int(np.asarray(model.optimizer.iterations)) - 2000
    print(f"memory soak: {steps_run} steps with the standard hook set in {elapsed:.0f} s")
    print("| after epoch | steps | RSS (MiB) | open fds |")
    print("|---|---|---|---|")
    print(f"| before fit | 0 | {rss0:.1f} | {fds0} |")
    for epoch, rss, fds in samples:
        print(f"| {epoch} | {epoch * per_epoch} | {rss:.1f} | {fds} |")
    print(f"| after fit | {steps_run} | {rss1:.1f} | {fds1} |")
    in_run = samples[-1][1] - samples[0][1]
    growth = rss1 - rss0
    ok = growth < 10 and in_run < 10 and fds1 <= fds0 and samples[-1][2] <= samples[0][2]
    print(
        f"RSS growth over the fit: {growth:+.1f} MiB (epoch 1 -> {epochs}: {in_run:+.1f} MiB), "
        f"fds {fds0} -> {fds1} (in run {samples[0][2]} -> {samples[-1][2]}); "
        f"target < 10 MB, no fd growth: {'PASS' if ok else 'MISS'}"
    )
    return ok


# -------------------------------------------------------------------------------- profile
def profile(workdir: str, names: list[str], steps: int, top: int) -> None:
    """cProfile of one run of each named case: hookbridge's (and the hook machinery's) functions
    by cumulative µs per step, then the process's top functions by own time."""
    cases = build_cases(workdir)
    for name in names:
        case = cases[name]
        case.run(50)  # trace and warm up outside the profile
        spent = _direct_timing(case, steps)
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


def _hook_classes() -> tuple[type, ...]:
    """The hook classes bench cases run: ``attribute`` separates their own ``before_run`` /
    ``after_run`` time from the bridge's."""
    t = v1.train
    return (
        IdleHook,
        t.NanTensorHook,
        t.StopAtStepHook,
        t.LoggingTensorHook,
        t.StepCounterHook,
        t.SummarySaverHook,
        t.CheckpointSaverHook,
    )


def _direct_timing(case: Case, steps: int, epochs: int = 1) -> dict[str, float]:
    """Seconds spent in the bridge's per-step entry points during ``case.run(steps, epochs)``,
    and, under ``hooks' own code``, inside the hooks' ``before_run``/``after_run`` (called from
    those entry points), measured with perf_counter wrappers (about 0.2 µs each) instead of a
    profiler."""
    from hookbridge._callback_hook.hook import CallbackHook
    from hookbridge._hook_callback.callback import HookCallback

    spent: dict[str, float] = {}
    patched = []
    base = v1.train.SessionRunHook
    targets = [
        (HookCallback, ("on_train_batch_begin", "on_train_batch_end"), None),
        (CallbackHook, ("before_run", "after_run"), None),
    ]
    targets += [(cls, ("before_run", "after_run"), HOOKS_OWN) for cls in _hook_classes()]
    for cls, names, group in targets:
        for attr in names:
            original = getattr(cls, attr)
            if group is not None and original is getattr(base, attr):
                continue  # not overridden: the bridge never calls it
            label = group or f"{cls.__name__}.{attr}"

            def timed(*a, _f=original, _label=label, **k):
                t0 = ATTRIBUTION_CLOCK()
                try:
                    return _f(*a, **k)
                finally:
                    spent[_label] = spent.get(_label, 0.0) + ATTRIBUTION_CLOCK() - t0

            patched.append((cls, attr, cls.__dict__.get(attr)))
            setattr(cls, attr, timed)
    try:
        case.run(steps, epochs)
    finally:
        for cls, attr, original in reversed(patched):
            if original is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, original)
    return spent


HOOKS_OWN = "hooks' own before_run/after_run"
#: Cases whose time inside the bridge is attributed, with the reference they are compared to.
ATTRIBUTED = {
    "idle_1": ("bare", 1.02),
    "nan": ("bare", 1.05),
    "standard": ("bare", 1.10),
    "idle_10": ("bare", None),
    "idle_100": ("bare", None),
    "ms_callback_hook": ("ms_bare", None),
    "ms_callback_hook_epoch": ("ms_bare", None),
}


def attribute(
    cases: dict[str, Case], timings: Timings, steps: int, epochs: int, verdicts: bool = True
) -> str:
    """Where each bridge case's time goes, measured where it is spent: µs per step inside the
    bridge's entry points (split into the hooks' own code and the bridge's machinery), and that
    time over the reference's fastest epoch. Immune to the machine's noise between runs, it
    leaves out only what happens outside the entry points (Keras calling one more callback,
    colder caches after it, and TF's side of a fetch in a MonitoredSession run)."""
    rows = [
        (
            "| case | in the bridge, µs/step | of which hooks' own code | bridge machinery "
            "| (reference + in-bridge) / reference | target |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for name, (ref, limit) in ATTRIBUTED.items():
        if name not in cases or ref not in timings.samples:
            continue
        spent = _direct_timing(cases[name], steps, 1 + epochs)
        n = steps * (1 + epochs)
        entry = sum(v for k, v in spent.items() if k != HOOKS_OWN) / n * 1e6
        own = spent.get(HOOKS_OWN, 0.0) / n * 1e6
        reference = timings.low_us(ref)
        ratio = (reference + entry) / reference
        if limit is None:
            verdict = ""
        else:
            verdict = " ran" if not verdicts else " PASS" if ratio <= limit else " MISS"
        rows.append(
            f"| {name} | {entry:.1f} | {own:.1f} | {entry - own:.1f} | {ratio:.3f}x {ref} "
            f"| {'-' if limit is None else f'<= {limit:.2f}x' + verdict} |"
        )
    return "\n".join(rows)


def _short(path: str) -> str:
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    if "/hookbridge/" in path:
        return "hookbridge/" + path.rsplit("/hookbridge/", 1)[1]
    return path


# ----------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--short", action="store_true", help="quick run: only checks every case runs")
    mode.add_argument(
        "--memory", action="store_true", help="50,000-step soak with the standard set"
    )
    mode.add_argument("--profile", action="store_true", help="cProfile one run per case (--only)")
    mode.add_argument(
        "--run", metavar="CASE", help="run one case once for --steps steps (for py-spy)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="interleaved repeats (full: 8)")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="steps per timed epoch (full: 500, a multiple of every hook's period)",
    )
    parser.add_argument(
        "--epochs", type=int, default=None, help="timed epochs per run, after one untimed (full: 3)"
    )
    parser.add_argument(
        "--only", default=None, help="comma-separated case names (and their references)"
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: perf_counter (default); cpu: process CPU time (steadier on a loaded machine)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="TF intra-/inter-op thread pools of this size (default: TF's, one per core); "
        "1 keeps TF's pool threads off the Python thread's core (steadier on 2 cores)",
    )
    parser.add_argument(
        "--cpus",
        default="all",
        help="the logical CPU to pin this process to (default: all, no pinning); applied before "
        "TensorFlow starts (see _pin_process)",
    )
    parser.add_argument("--soak-steps", type=int, default=50_000)
    args = parser.parse_args(argv)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    print(f"machine: {machine()}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"TF thread pools: {args.threads or 'default (one thread per core)'}")
    print(f"CPU affinity: {'pinned to CPU ' + PINNED if PINNED != 'all' else 'all CPUs'}")
    with tempfile.TemporaryDirectory(prefix="hookbridge-bench-") as workdir:
        if args.memory:
            ok = memory_soak(workdir, args.soak_steps, epochs=10)
            return 0 if ok else 1
        if args.profile:
            names = (
                args.only.split(",")
                if args.only
                else ["idle_1", "nan", "standard", "ms_callback_hook"]
            )
            profile(workdir, names, args.steps or 2000, top=25)
            return 0
        if args.run:
            case = build_cases(workdir)[args.run]
            case.run(50)  # trace / warm up
            steps = args.steps or 3000
            elapsed = sum(case.run(steps))
            print(
                f"{args.run}: {steps} steps in {elapsed:.2f} s ({elapsed / steps * 1e6:.0f} µs/step)"
            )
            return 0
        if args.short:
            repeats, steps, epochs = args.repeats or 1, args.steps or 20, args.epochs or 1
        else:
            repeats, steps, epochs = args.repeats or 8, args.steps or 500, args.epochs or 3
        cases = build_cases(workdir)
        if args.only:
            wanted = set(args.only.split(","))
            wanted |= {ref for name, ref, *_ in CHECKS if name in wanted and ref}
            cases = {k: c for k, c in cases.items() if k in wanted}
        print(
            f"mode: {'short (runs only, no verdicts)' if args.short else 'full'}; "
            f"clock {args.clock}; {repeats} interleaved repeats of 1 + {epochs} epochs x {steps} "
            f"steps (the first epoch untimed); batch {BATCH}; "
            f"MLP {IN}->{HIDDEN}->{OUT} (wide: {IN}->{WIDE}->{OUT})",
            flush=True,
        )
        t0 = time.perf_counter()
        timings = measure(cases, steps, epochs, repeats)
        ran = timings.samples
        checks = [c for c in CHECKS if c[0] in ran and (c[1] is None or c[1] in ran)]
        text, all_pass = table(timings, verdicts=not args.short, checks=checks)
        print(text)
        print("\nTime inside the bridge's per-step entry points (one run per case, perf_counter):")
        print(attribute(cases, timings, steps, epochs, verdicts=not args.short))
        print(
            f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
            f"measured in {time.perf_counter() - t0:.0f} s"
        )
        if args.short:
            print("short mode: every case ran (timings are not meaningful)")
            return 0
        print("all targets met" if all_pass else "some targets MISSED")
        return 0 if all_pass else 1


if __name__ == "__main__":
    sys.exit(main())
