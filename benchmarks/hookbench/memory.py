"""The memory soak: 50,000 steps with the standard hook set; RSS and open file descriptors."""

from __future__ import annotations

import gc
import os
import time

import keras
import numpy as np

import hookbridge

from .workloads import HIDDEN, dataset, keras_mlp, standard_hooks


def memory_soak(workdir: str, steps: int, epochs: int) -> bool:
    """Trains ``steps`` steps in ``epochs`` epochs after a 2,000-step warm-up fit; prints RSS and
    fds per epoch; target: RSS growth < 10 MB and no fd growth."""
    import psutil

    proc = psutil.Process()
    ds = dataset()
    model = keras_mlp(HIDDEN)
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
