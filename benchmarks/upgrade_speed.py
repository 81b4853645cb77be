"""How fast ``hookbridge upgrade`` reads and rewrites a codebase: files per second.

    python benchmarks/upgrade_speed.py                 # a generated TF1 corpus of 400 files
    python benchmarks/upgrade_speed.py --files 800 --tf1-share 0.25
    python benchmarks/upgrade_speed.py PATH            # any tree (shown, never written)

The generated corpus is written in our own words, shaped like a TF1 model garden of the r1 era:
every file has numeric helpers (about 200 lines); a share of them (``--tf1-share``, default 0.3)
also builds a layer with TF1 names (``tf.layers``, ``tf.get_variable``, ``tf.logging``,
``tf.train.*Hook``) that the upgrade rewrites, the others already use TF 2 names. Reports the
best of ``--repeats`` runs of ``plan`` (what both ``upgrade`` and ``upgrade --write`` compute;
writing adds one file copy and rename per changed file), with TensorFlow already imported, and
how many files went through TensorFlow's engine (``pasta``). Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_HEAD = '''"""Module {i} of a generated project."""

import numpy as np
import tensorflow as tf

SCALE_{i} = {i} * 0.5
'''
_NUMERIC = '''

def helper_{i}_{j}(values, scale=SCALE_{i}):
    """Rescales and clips a batch of values ({j})."""
    out = []
    for v in values:
        if v > scale:
            out.append(scale)
        elif v < -scale:
            out.append(-scale)
        else:
            out.append(v * 0.5 + {j})
    total = sum(out)
    mean = total / max(len(out), 1)
    return np.asarray(out) - mean
'''
_TF1 = '''

def block_{i}(inputs, training, hidden={i}):
    tf.logging.info("block {i}: %s", inputs.shape)
    with tf.variable_scope("block_{i}"):
        w = tf.get_variable("w", [inputs.shape[-1].value, hidden])
        x = tf.layers.dense(tf.matmul(inputs, w), hidden, activation=tf.nn.relu)
        x = tf.layers.dropout(x, rate=0.1, training=training)
    tf.summary.scalar("block_{i}", tf.reduce_mean(x))
    return x


def hooks_{i}(loss):
    return [tf.train.LoggingTensorHook({{"loss": loss}}, every_n_iter=100),
            tf.train.StopAtStepHook(last_step=1000)]
'''
_TF2 = '''

def block_{i}(inputs):
    return tf.math.reduce_mean(tf.nn.relu(inputs), axis=-1)
'''


def generate(root: Path, files: int, tf1_share: float) -> None:
    every = max(1, round(1 / tf1_share)) if tf1_share > 0 else files + 1
    for i in range(files):
        parts = [_HEAD.format(i=i)]
        parts += [_NUMERIC.format(i=i, j=j) for j in range(12)]
        parts.append((_TF1 if i % every == 0 else _TF2).format(i=i))
        (root / f"module_{i:04d}.py").write_text("".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?")
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--tf1-share", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import tensorflow  # noqa: F401  (imported once, as the command does before it reads)

    from hookbridge._migrate.upgrade import engine, tree

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.path) if args.path else Path(tmp)
        if not args.path:
            generate(root, args.files, args.tf1_share)
        engine.upgrade_source("import tensorflow as tf\ntf.logging.info('warm')\n")  # tables
        best = None
        for _ in range(args.repeats):
            start = time.perf_counter()
            planned = tree.plan(root)
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        count = len(planned.files)
        print(
            f"{count} files, {len(planned.changed)} rewritten: {best:.2f} s, "
            f"{count / best:.0f} files/s (best of {args.repeats})"
        )


if __name__ == "__main__":
    main()
