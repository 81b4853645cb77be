"""The census twin's training step against the census Estimator's, on the same batches (issue 33).

    python benchmarks/twin_step.py                  # tf215: Estimator and twin, interleaved
    python benchmarks/twin_step.py --repeats 8 --steps 600
    python benchmarks/twin_step.py --short          # seconds: every case runs (no verdict)
    python benchmarks/twin_step.py --calls          # also: Python calls per step, 40 vs 400 rows
    python benchmarks/twin_step.py --clock cpu      # process CPU time (a loaded machine)
    python benchmarks/twin_step.py --steps-per-execution 10   # the twin 10 steps a call

The model is census's wide & deep ``DNNLinearCombinedClassifier`` (V1; ``tests/fixtures/
census_twin``), continued from the checked-in step-300 ``model_dir`` on the same batches of 40
seeded rows (repeated): on the TF 2.15 stack, ``estimator`` (``Estimator.train``, the canned
model's own graph and session) and ``twin`` (``hookbridge.keras_twin(estimator)`` restored
``"auto"``, plain ``fit``) in one process; on TF 2.21 (Keras 3 or tf_keras, no Estimator),
``twin`` alone (``keras_twin("DNNLinearCombinedClassifier", ...)``), in steps per second.

The ``twin`` case runs hookbridge's default, Keras's ``train_function`` called flat
(``hookbridge._keras_call``: the same traced graph without ``tf.function``'s per-call
dispatch); ``twin_keras_call`` is the same twin with Keras's own call
(``twin.flat_train_function = False``): the before and after of that lever in one process.
Two more cases beside them, to tell where a step's time goes. ``twin_hooks``: the twin's ``fit``
with what ``Estimator.train`` runs per step besides the model (``estimator_hooks`` for the
Estimator's ``RunConfig``, under ``HookCallback``): like with like, since the ``estimator``
case's step includes those hooks (NanTensor, LoggingTensor, StepCounter, CheckpointSaver).
``keras_floor``: a native Keras model with next to no computation (the numeric features into one
``Dense``) on the same batches: what Keras's loop, its callbacks and the ``tf.function`` call
cost per call on this input, whatever the model. Beside each step the time inside the call is
printed (``Session.run`` for the Estimator; the ``train_function`` call between the batch
callbacks for ``fit``).

Method (as ``bench.py``): a case's per-step time is the slope inside one long run (its first
``--skip`` steps, tracing and session start-up, left out), timed at each step's end by a hook or
callback; the cases alternate ``--repeats`` times in one process with gc frozen while timed; each
case's fastest run decides (interference only slows a run down), the median of the paired ratios
is printed beside it.

Threads (``--threads``). ``caller`` (the default) runs both sides as census's fixture runs its
Estimator: every op in the calling thread, one intra-op thread. The Estimator's session has that
from ``inter_op_parallelism_threads=-1``; an eager context has no such setting (there -1 means
TensorFlow's default pool, whose threads were seen running the step's ops), so the Keras cases
run their ``fit`` under TensorFlow's single-threaded executor
(``tf.experimental.function_executor_type("SINGLE_THREADED_EXECUTOR")``: each op of the traced
step runs in the calling thread), with one inter-op and one intra-op thread. ``twin_pool``
beside them is the same twin on the default executor, which hands the step's ops to the one
inter-op thread: what this benchmark compared with the Estimator before 2026-11-28 21:40 UTC.
``default``: TensorFlow's defaults on both sides (the ``RunConfig``'s default session config;
the eager context's default thread pools and executor), what a team gets without setting any.
``--calls`` counts the Python function calls ``fit`` makes per step (``sys.setprofile`` over 20
steps) with batches of 40 and of 400 rows: equal counts mean the feature-column layers do
no per-example Python work. Prints figures; asserts nothing. Log: ``twin_step.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tensorflow as tf
from fixtures.census_twin import columns, data

FIXTURE = ROOT / "tests" / "fixtures" / "census_twin" / "model_dir"
#: The clock stamping each step's end: wall time, or the process's CPU time (``--clock cpu``:
#: what the step costs, without the waits for a core a loaded machine adds).
CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}
ROWS = 100 * data.BATCH  # 100 distinct batches, repeated


def has_estimator() -> bool:
    try:
        import tensorflow_estimator  # noqa: F401
    except ImportError:
        return False
    return True


def dataset(batch: int = data.BATCH) -> tf.data.Dataset:
    features, labels = data.rows(data.CONTINUE_SEED, ROWS)
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch).repeat()


def slope(stamps: list[float], skip: int) -> float:
    """Seconds per step between the end of step ``skip`` and the end of the last step."""
    return (stamps[-1] - stamps[skip]) / (len(stamps) - 1 - skip)


def inside(begins: list[float], ends: list[float], skip: int) -> float:
    """Mean seconds from each timed call's start to its end (``Session.run``, or the
    ``train_function`` call between the batch callbacks)."""
    pairs = list(zip(begins, ends))[skip + 1 :]
    return sum(end - begin for begin, end in pairs) / len(pairs)


class _Frozen:
    """gc collected, frozen and disabled while a run is timed (as ``timeit`` does)."""

    def __enter__(self):
        gc.collect()
        gc.freeze()
        gc.disable()

    def __exit__(self, *exc):
        gc.enable()
        gc.unfreeze()


#: ``--threads``: the Estimator's session config (None: the RunConfig's default) and the
#: executor the Keras cases' ``fit`` runs under (None: the default executor).
THREADS = {
    "caller": ("fixture", "SINGLE_THREADED_EXECUTOR"),
    "default": (None, None),
}


THREAD_WORDS = {
    "caller": "every op in the calling thread (the Keras cases on the single-threaded executor), "
    "one intra-op thread",
    "default": "TensorFlow's defaults",
}


def executor(name: str | None):
    """The context a Keras case's ``fit`` runs in: TensorFlow's executor ``name`` for the
    ``tf.function`` calls made inside it, or the default one."""
    if name is None:
        return contextlib.nullcontext()
    return tf.experimental.function_executor_type(name)


def estimator_run(
    root: Path, steps: int, skip: int, clock, config: str | None = "fixture"
) -> tuple[float, float]:
    """``Estimator.train`` of ``steps`` steps from a fresh copy of the fixture: seconds per
    step, and per ``Session.run`` (timed from the last hook's ``before_run`` to its
    ``after_run``: the graph and the session's own Python, none of the hooks'). ``config``:
    ``"fixture"`` (census's session config) or None (the RunConfig's default)."""
    from fixtures.census_twin import native

    class Stamp(tf.compat.v1.train.SessionRunHook):
        def __init__(self):
            self.stamps: list[float] = []
            self.begins: list[float] = []

        def before_run(self, run_context):
            self.begins.append(clock())

        def after_run(self, run_context, run_values):
            self.stamps.append(clock())

    model_dir = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(FIXTURE, model_dir, dirs_exist_ok=True)
    stamp = Stamp()
    with _Frozen():
        settings = {} if config == "fixture" else {"session_config": None}
        native.estimator(model_dir, **settings).train(dataset, hooks=[stamp], steps=steps)
    shutil.rmtree(model_dir)
    return slope(stamp.stamps, skip), inside(stamp.begins, stamp.stamps, skip)


def make_twin(root: Path, flat: bool = True):
    """The census twin restored from a copy of the fixture's step-300 model_dir; ``flat``:
    its ``train_function`` called flat (hookbridge's default), else Keras's own call."""
    import hookbridge

    model_dir = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(FIXTURE, model_dir, dirs_exist_ok=True)
    if has_estimator():
        from fixtures.census_twin import native

        twin = hookbridge.keras_twin(native.estimator(model_dir))
    else:
        twin = hookbridge.keras_twin("DNNLinearCombinedClassifier", **columns.estimator_arguments())
    hookbridge.restore_checkpoint(twin, model_dir, "auto")
    twin.flat_train_function = flat
    return twin


class _StampCallback(tf.keras.callbacks.Callback):
    def __init__(self, clock):
        super().__init__()
        # The stamp reads no logs: Keras 2 and tf_keras then leave them as tensors, as they do
        # for their own callbacks, instead of converting them to numpy every step because of
        # the instrument (the Estimator's stamp hook fetches nothing either).
        self._supports_tf_logs = True
        self.clock = clock
        self.stamps: list[float] = []
        self.begins: list[float] = []

    def on_train_batch_begin(self, batch, logs=None):
        self.begins.append(self.clock())

    def on_train_batch_end(self, batch, logs=None):
        self.stamps.append(self.clock())

    def result(self, skip: int, per_execution: int) -> tuple[float, float]:
        """Seconds per step: the slope, and inside the ``train_function`` calls."""
        skip //= per_execution
        return (
            slope(self.stamps, skip) / per_execution,
            inside(self.begins, self.stamps, skip) / per_execution,
        )


def twin_run(
    twin, steps: int, skip: int, clock, per_execution: int = 1, executor_type: str | None = None
) -> tuple[float, float]:
    """``fit`` of ``steps`` steps (one epoch) on the same batches, under :func:`executor`
    ``executor_type``; seconds/step. With ``per_execution`` steps a call
    (``compile(steps_per_execution=)``), the callback stamps once a call: the slope is divided
    by it."""
    stamp = _StampCallback(clock)
    with _Frozen(), executor(executor_type):
        twin.fit(
            dataset(), steps_per_epoch=steps, epochs=1, shuffle=False, verbose=0, callbacks=[stamp]
        )
    return stamp.result(skip, per_execution)


def twin_hooks_run(
    twin,
    root: Path,
    steps: int,
    skip: int,
    clock,
    per_execution: int = 1,
    executor_type: str | None = None,
) -> tuple[float, float]:
    """As :func:`twin_run`, with what ``Estimator.train`` runs per step beside the model: the
    hooks ``estimator_hooks`` builds for the Estimator's ``RunConfig`` (``native.estimator``'s:
    a checkpoint only every 10,000 steps, no summaries, step logging every 10,000; NanTensor,
    LoggingTensor, StepCounter, CheckpointSaver) under ``HookCallback``, the like-with-like of
    the ``estimator`` case."""
    import hookbridge

    model_dir = Path(tempfile.mkdtemp(dir=root))
    shutil.copytree(FIXTURE, model_dir, dirs_exist_ok=True)
    bridge = hookbridge.HookCallback(
        lambda: hookbridge.estimator_hooks(
            model_dir,
            model=twin,
            save_checkpoints_steps=10_000,
            save_summary_steps=0,
            log_step_count_steps=10_000,
            keep_checkpoint_max=1,
            backup=None,
        )
    )
    stamp = _StampCallback(clock)
    with _Frozen(), executor(executor_type):
        twin.fit(
            dataset(),
            steps_per_epoch=steps,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[bridge, stamp],
        )
    shutil.rmtree(model_dir)
    return stamp.result(skip, per_execution)


def keras_floor(per_execution: int = 1):
    """A native Keras model on the same batches with next to no computation: the five numeric
    features, read by name, into one ``Dense`` logit (Adagrad, sigmoid cross-entropy). Its
    ``fit`` step is what Keras's loop, callbacks and ``tf.function`` call cost per call on
    this input (the same dict of 14 features and the label), whatever the model computes."""
    from fixtures.census_twin.columns import NUMERIC

    keras = tf.keras

    class Floor(keras.Model):
        def __init__(self):
            super().__init__()
            self.logit = keras.layers.Dense(1)

        def call(self, features):
            return self.logit(tf.stack([tf.cast(features[k], "float32") for k in NUMERIC], 1))

    model = Floor()
    model.compile(
        optimizer=keras.optimizers.Adagrad(0.05),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        steps_per_execution=per_execution,
    )
    return model


class _CountCalls(tf.keras.callbacks.Callback):
    """Python function calls (``sys.setprofile`` 'call' events) from the start of batch
    ``first`` to the end of batch ``last``, per step."""

    def __init__(self, first: int, last: int):
        super().__init__()
        self.first, self.last, self.calls = first, last, 0

    def _count(self, frame, event, arg):
        if event == "call":
            self.calls += 1

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.first:
            sys.setprofile(self._count)

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.last:
            sys.setprofile(None)

    def per_step(self) -> float:
        return self.calls / (self.last - self.first + 1)


def calls_per_step(twin, batch: int) -> float:
    counter = _CountCalls(10, 29)
    twin.fit(
        dataset(batch), steps_per_epoch=30, epochs=1, shuffle=False, verbose=0, callbacks=[counter]
    )
    return counter.per_step()


def machine() -> str:
    import numpy as np

    keras_version = getattr(tf.keras, "__version__", None)
    if keras_version is None:  # TF 2.21: Keras 3, or tf_keras with TF_USE_LEGACY_KERAS=1
        import importlib

        legacy = os.environ.get("TF_USE_LEGACY_KERAS", "") in ("1", "true", "True")
        keras_version = importlib.import_module("tf_keras" if legacy else "keras").__version__
        keras_version += " (tf_keras)" if legacy else ""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, load {load:.2f}; Python {platform.python_version()}, "
        f"TF {tf.__version__}, Keras {keras_version}, numpy {np.__version__}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="steps per run (default 500)")
    parser.add_argument("--skip", type=int, default=50, help="untimed first steps (default 50)")
    parser.add_argument("--repeats", type=int, default=5, help="alternated runs (default 5)")
    parser.add_argument("--clock", choices=sorted(CLOCK), default="wall", help="default wall")
    parser.add_argument("--short", action="store_true", help="60 steps, 1 repeat, no verdict")
    parser.add_argument("--calls", action="store_true", help="Python calls per step, 40/400 rows")
    parser.add_argument(
        "--steps-per-execution",
        type=int,
        default=1,
        help="the twin runs this many steps a tf.function call (Keras's compile argument; "
        "default 1, plain fit)",
    )
    parser.add_argument(
        "--threads",
        choices=sorted(THREADS),
        default="caller",
        help="caller: every op in the calling thread, one intra-op thread, both sides (default); "
        "default: TensorFlow's default threads, both sides",
    )
    args = parser.parse_args(argv)
    if args.short:
        args.steps, args.skip, args.repeats = 60, 10, 1
    session_config, executor_type = THREADS[args.threads]
    if args.threads == "caller":
        tf.config.threading.set_inter_op_parallelism_threads(1)
        tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.get_logger().setLevel("ERROR")
    print(f"machine: {machine()}")
    root = Path(tempfile.mkdtemp(prefix="twin_step_"))
    try:
        twin, keras_call = make_twin(root), make_twin(root, flat=False)
        k = args.steps_per_execution
        if k > 1:  # the same optimizers and loss (and their state), k steps a call
            for model in (twin, keras_call):
                model.compile(optimizer=model.optimizer, loss=model.loss, steps_per_execution=k)
        clock = CLOCK[args.clock]
        floor = keras_floor(k)
        run = (args.steps, args.skip, clock, k, executor_type)
        cases = {
            "twin": lambda: twin_run(twin, *run),
            "twin_keras_call": lambda: twin_run(keras_call, *run),
            "twin_hooks": lambda: twin_hooks_run(twin, root, *run),
            "keras_floor": lambda: twin_run(floor, *run),
        }
        if executor_type is not None:  # the twin as this benchmark ran it before --threads
            cases["twin_pool"] = lambda: twin_run(twin, *run[:-1], None)
        if has_estimator():
            cases["estimator"] = lambda: estimator_run(
                root, args.steps, args.skip, clock, session_config
            )
        times: dict[str, list[float]] = {name: [] for name in cases}
        inner: dict[str, list[float]] = {name: [] for name in cases}
        for case in cases.values():  # warm-up: tracing, the first session
            case()
        for _ in range(args.repeats):
            for name, case in cases.items():
                step, call = case()
                times[name].append(step)
                inner[name].append(call)
        print(
            f"\n{args.steps} steps a run ({args.skip} untimed), {args.repeats} repeats, "
            f"batch {data.BATCH}, threads: {THREAD_WORDS[args.threads]}, {args.clock} clock\n"
        )
        print(
            "| case | fastest ms/step | median ms/step | steps/s (fastest) "
            "| inside the call, ms/step (fastest) |"
        )
        print("|---|---|---|---|---|")
        for name, t in times.items():
            print(
                f"| {name} | {min(t) * 1e3:.3f} | {statistics.median(t) * 1e3:.3f} "
                f"| {1 / min(t):.0f} | {min(inner[name]) * 1e3:.3f} |"
            )
        if "estimator" in times:
            ratio = min(times["twin"]) / min(times["estimator"])
            paired = statistics.median(a / b for a, b in zip(times["twin"], times["estimator"]))
            print(f"\ntwin / estimator: {ratio:.3f} (fastest), {paired:.3f} (median of pairs)")
            if not args.short:
                print("verdict (twin no slower):", "PASS" if ratio <= 1.0 else "MISS")
            for name in ("twin_keras_call", "twin_hooks", "keras_floor", "twin_pool"):
                if name not in times:
                    continue
                ratio = min(times[name]) / min(times["estimator"])
                paired = statistics.median(a / b for a, b in zip(times[name], times["estimator"]))
                print(f"{name} / estimator: {ratio:.3f} (fastest), {paired:.3f} (median of pairs)")
        graph = min(times["twin"]) - min(times["keras_floor"])
        print(f"twin - keras_floor (the twin's own share of a step): {graph * 1e3:.3f} ms")
        if args.calls:
            small, large = calls_per_step(twin, data.BATCH), calls_per_step(twin, 10 * data.BATCH)
            print(
                f"\nPython calls per fit step: {small:.1f} at {data.BATCH} rows, "
                f"{large:.1f} at {10 * data.BATCH} rows; keras_floor "
                f"{calls_per_step(floor, data.BATCH):.1f} at {data.BATCH} rows"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.short:
        print("short mode: every case ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
