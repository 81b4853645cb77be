"""How fast ``hookbridge scan`` reads a codebase: files per second, beside parsing alone.

    python benchmarks/scan_speed.py                    # a generated TF1-style corpus of 500 files
    python benchmarks/scan_speed.py --files 2000       # a bigger one
    python benchmarks/scan_speed.py --stage0           # also `scan --stage0` (imports TF)
    python benchmarks/scan_speed.py PATH               # any tree (e.g. an installed
                                                       # tensorflow_estimator, a checkout)

The generated corpus is written in our own words, shaped like a large TF1 project (most files are
layers, data and numeric code; some hold the Estimator parts): every file has numeric helpers
(about 300 lines a file), every 4th a model_fn returning EstimatorSpecs with hooks, every 10th a
hook class and an Estimator driver. Reports the best of ``--repeats`` runs in wall time and in process
CPU time, for the scan and for ``ast.parse`` of every file alone (the floor of a scan that parses
every file; the scan parses only the files whose text may hold a finding and syntax-checks the
others, hookbridge/_migrate/scan/prefilter.py). On a virtual machine under load the process CPU
clock can run ahead of wall time: compare figures measured in one run. Not a test: it prints
figures, it asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
import time
from pathlib import Path

_HEAD = '''"""Module {i} of a generated TF1 project."""

import numpy as np
import tensorflow.compat.v1 as tf

from project import common

LOG_NAMES = dict((n, n) for n in ["loss", "accuracy_{i}", "learning_rate"])
'''

_HOOK = '''

class Watch{i}Hook(tf.train.SessionRunHook):
    """Watches the loss of part {i}."""

    def __init__(self, limit, every={i}):
        self._limit = limit
        self._every = every

    def begin(self):
        self._loss = tf.get_default_graph().get_tensor_by_name("loss:0")
        self._extra = tf.get_collection(tf.GraphKeys.UPDATE_OPS)

    def before_run(self, run_context):
        return tf.train.SessionRunArgs({{"loss": self._loss, "norm": "grad_norm_{i}:0"}})

    def after_run(self, run_context, run_values):
        if run_values.results["loss"] < self._limit:
            run_context.request_stop()


def make_watch_hook():
    return Watch{i}Hook(0.1)
'''

_MODEL = '''

def model_fn_{j}(features, labels, mode, params):
    hidden = tf.layers.dense(features["x"], params["units"], activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, params["classes"])
    total_loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.train.get_or_create_global_step()
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={{"logits": logits}})
    train_op = tf.train.AdamOptimizer(params["lr"]).minimize(total_loss, step)
    hooks = [
        tf.train.LoggingTensorHook(LOG_NAMES, every_n_iter=100),
        tf.train.LoggingTensorHook({{"total_loss": total_loss}}, every_n_iter=10),
        tf.train.NanTensorHook(total_loss),
        make_watch_hook(),
    ]
    return tf.estimator.EstimatorSpec(
        mode, loss=total_loss, train_op=train_op, training_hooks=hooks,
        evaluation_hooks=[tf.train.SummarySaverHook(save_steps=10, output_dir="eval",
                                                     summary_op=tf.summary.merge_all())],
    )
'''

_HELPER = '''

def helper_{j}(values, scale={j}, offset=0.5):
    """A numeric helper, as most of a real project is."""
    out = []
    for index, value in enumerate(values):
        if index % 3 == 0:
            out.append(value * scale + offset)
        elif index % 3 == 1:
            out.append(np.sqrt(abs(value)) - offset)
        else:
            out.append(max(value, common.floor(index)))
    table = {{key: [v for v in out if v > key] for key in range(4)}}
    return sum(len(v) for v in table.values()) / (len(out) or 1), table
'''

_DRIVER = '''

def main(model_dir="/tmp/model_{i}"):
    estimator = tf.estimator.Estimator(model_fn_0, model_dir=model_dir, params=common.PARAMS)
    estimator.train(common.input_fn, hooks=[tf.train.StopAtStepHook(last_step=1000)])
    estimator.evaluate(common.input_fn, steps=10)
'''


def generate(folder: Path, files: int) -> Path:
    """Writes ``files`` modules of about 300 lines each under ``folder/project``."""
    project = folder / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "__init__.py").write_text("")
    for i in range(files):
        parts = [_HEAD.format(i=i)]
        if i % 10 == 0:
            parts += [_HOOK.format(i=i), _DRIVER.format(i=i)]
        if i % 4 == 0:
            parts.append(_MODEL.format(j=0))
        parts += [_HELPER.format(j=j) for j in range(19 - (i % 4 == 0) * 2 - (i % 10 == 0) * 2)]
        (project / f"part_{i:05d}.py").write_text("".join(parts))
    return folder


def _best(function, repeats: int) -> tuple[float, float, object]:
    wall = cpu = float("inf")
    result = None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = function()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def _parse_each(sources: list[bytes]) -> None:
    for source in sources:
        ast.parse(source)  # each tree dropped at once: no garbage-collector cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", help="a tree to scan (default: a generated corpus)")
    parser.add_argument("--files", type=int, default=500, help="generated files (default 500)")
    parser.add_argument("--repeats", type=int, default=5, help="runs; the best counts")
    parser.add_argument(
        "--stage0",
        action="store_true",
        help="also time `scan --stage0` (TensorFlow's import, a one-time cost, timed apart)",
    )
    args = parser.parse_args(argv)
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH wins
    from hookbridge._migrate.scan import scan
    from hookbridge._migrate.scan.project import discover

    with tempfile.TemporaryDirectory(prefix="hookbridge-scan-speed-") as tmp:
        root = Path(args.path) if args.path else generate(Path(tmp), args.files)
        sources = [p.read_bytes() for p in discover(root)]
        lines = sum(s.count(b"\n") for s in sources)
        scan(root)  # warm: the shipped conformance results are read once per process
        wall, cpu, result = _best(lambda: scan(root), args.repeats)
        parse_wall, parse_cpu, _ = _best(lambda: _parse_each(sources), args.repeats)
        if args.stage0:
            start = time.perf_counter()
            from hookbridge._migrate.upgrade.engine import _fast_spec

            _fast_spec()  # imports TensorFlow for its upgrader's tables: once per process
            tf_import = time.perf_counter() - start
            scan(root, stage0=True)  # warm: TF's engine on each distinct transformed call
            s0_wall, s0_cpu, s0 = _best(lambda: scan(root, stage0=True), args.repeats)
    n = result.files
    print(f"corpus: {root if args.path else f'generated, {args.files} files'}")
    found = len(result.findings)
    print(f"  {n} files, {lines} lines ({lines // max(n, 1)} per file), {found} findings")
    print(
        f"  scan:        wall {wall:.3f} s = {n / wall:7.0f} files/s; "
        f"CPU {cpu:.3f} s = {n / cpu:7.0f} files/s"
    )
    print(
        f"  parse alone: wall {parse_wall:.3f} s = {n / parse_wall:7.0f} files/s; "
        f"CPU {parse_cpu:.3f} s = {n / parse_cpu:7.0f} files/s (every file parsed)"
    )
    if args.stage0:
        print(
            f"  --stage0:    wall {s0_wall:.3f} s = {n / s0_wall:7.0f} files/s; "
            f"CPU {s0_cpu:.3f} s = {n / s0_cpu:7.0f} files/s ({len(s0.findings)} rows; "
            f"TensorFlow's import once before: {tf_import:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
