"""What agreeing on stops costs per step under MultiWorkerMirroredStrategy (run by hand).

Starts 2 MultiWorkerMirroredStrategy workers on loopback (this script, ports picked free) and,
in each, fits the same small model in interleaved rounds with four callback sets:

* ``noop``: a Keras callback whose batch methods do nothing (the reference);
* ``bridge_unagreed``: ``HookCallback`` with the hooks of docs/distributed.md's setup
  (``StopAtStepHook`` and ``NanTensorHook`` on ``loss:0`` on every worker, ``StepCounterHook``
  and ``LoggingTensorHook`` as chief-only hooks), ``agree_stops=False`` (no agreement at all);
* ``bridge``: the same ``HookCallback`` with its stop agreement (the default);
* ``bridge_user_hook``: ``HookCallback`` with one user hook whose ``after_run`` could stop its
  worker alone, so every step needs the agreement's collective round.

Per-step time is the slope inside each fit: from the end of a warm-up step to the end of the
last, by a timing callback placed after the others (so their work is inside). Prints, from the
chief, the median ms/step of each case over the rounds and the differences.

    TF_CPP_MIN_LOG_LEVEL=3 TF_USE_LEGACY_KERAS=1 python benchmarks/multiworker_stop.py \\
        [--steps 200] [--rounds 5]

Needs a Keras that fits under MultiWorkerMirroredStrategy (tf_keras or Keras 2; Keras 3 fails
upstream, keras-team/keras#20585).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from distributed.procs import free_ports


def launch(args: argparse.Namespace) -> None:
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            ),
        }
        argv = [
            sys.executable,
            __file__,
            "--worker",
            f"--steps={args.steps}",
            f"--rounds={args.rounds}",
        ]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=args.timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = [ln for ln in outs[0].splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"the chief printed no result:\n{outs[0][-2000:]}")
    result = json.loads(lines[-1])
    print(json.dumps(result, indent=1))
    med = result["median_ms_per_step"]
    print(
        f"\nms/step (median of {args.rounds} rounds, {args.steps} steps each): "
        + ", ".join(f"{k} {v:.3f}" for k, v in med.items())
    )
    print(f"agreement rounds per fit of {args.steps} steps: {result['agreement_rounds_per_fit']}")
    times = result["ms_per_step"]

    def paired(case: str) -> float:
        """Median over the rounds of ``case`` minus ``bridge_unagreed`` in the same round (the
        cases of a round run back to back, so a load change on the machine hits both)."""
        return statistics.median(a - b for a, b in zip(times[case], times["bridge_unagreed"]))

    print(
        f"paired per round (median): agreement {paired('bridge'):+.3f} ms/step "
        f"({100 * paired('bridge') / med['bridge_unagreed']:+.1f} %), a hook that can stop one "
        f"worker alone {paired('bridge_user_hook'):+.3f} ms/step"
    )
    extra = med["bridge"] - med["bridge_unagreed"]
    print(
        f"agreement: {extra:+.3f} ms/step over the bridge without it "
        f"({100 * extra / med['bridge_unagreed']:+.1f} % of its step); a hook that can stop one "
        f"worker alone: {med['bridge_user_hook'] - med['bridge_unagreed']:+.3f} ms/step"
    )
    print(
        f"bridge with agreement: {med['bridge'] - med['noop']:+.3f} ms/step over a no-op callback"
    )


def worker(args: argparse.Namespace) -> None:
    import numpy as np
    import tensorflow as tf

    import hookbridge
    keras = tf.keras

    class Noop(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            pass

        def on_train_batch_end(self, batch, logs=None):
            pass

    class Idle(tf.compat.v1.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            pass

    v1 = tf.compat.v1

    def hooks():
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        return [v1.train.StopAtStepHook(last_step=10**9), v1.train.NanTensorHook(loss)]

    def chief_hooks():
        loss = v1.get_default_graph().get_tensor_by_name("loss:0")
        return [
            v1.train.StepCounterHook(every_n_steps=100),
            v1.train.LoggingTensorHook({"loss": loss}, every_n_iter=100),
        ]

    class Timer(keras.callbacks.Callback):
        def __init__(self, warmup: int) -> None:
            super().__init__()
            self.warmup, self.start, self.end, self.count = warmup, 0.0, 0.0, 0

        def on_train_batch_end(self, batch, logs=None):
            self.count += 1
            if self.count == self.warmup:
                self.start = time.perf_counter()
            self.end = time.perf_counter()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((32,)), keras.layers.Dense(64, "relu"), keras.layers.Dense(1)]
        )
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 32)).astype("float32")
    y = rng.normal(size=(1024, 1)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)

    from hookbridge._hook_callback.agreement import StopAgreement

    # The agreement's collective rounds (the start round included), counted per fit (before
    # the rounds were skipped, StopAgreement had only ``agree``).
    rounds = [0]
    counted_name = "_exchange" if hasattr(StopAgreement, "_exchange") else "agree"
    original = getattr(StopAgreement, counted_name)

    def counted(self, *args):
        rounds[0] += 1
        return original(self, *args)

    setattr(StopAgreement, counted_name, counted)
    warnings.filterwarnings("ignore", message="HookCallback runs its hooks")

    def fit(case: str) -> float:
        rounds[0] = 0
        if case == "noop":
            first = Noop()
        elif case == "bridge_user_hook":
            first = hookbridge.HookCallback([Idle()])
        else:
            agreed = case == "bridge"
            first = hookbridge.HookCallback(hooks, chief_only_hooks=chief_hooks, agree_stops=agreed)
        timer = Timer(warmup=5)
        model.fit(ds, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=[first, timer])
        per_fit[case] = rounds[0]
        return (timer.end - timer.start) / (timer.count - timer.warmup) * 1e3

    per_fit: dict[str, int] = {}

    cases = ["noop", "bridge_unagreed", "bridge", "bridge_user_hook"]
    for case in cases:  # warm up: traces every function once
        fit(case)
    times: dict[str, list[float]] = {c: [] for c in cases}
    n = len(cases)
    for r in range(args.rounds):
        for case in cases[r % n :] + cases[: r % n]:  # rotated, the same order on both workers
            times[case].append(fit(case))
    print(
        json.dumps(
            {
                "ms_per_step": times,
                "median_ms_per_step": {c: statistics.median(v) for c, v in times.items()},
                "agreement_rounds_per_fit": per_fit,
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    (worker if args.worker else launch)(args)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    main()
