"""What the two halves of the BERT walk share: the output folder, the rows, the step counts.

Seeds and counts are those of ``tests/fixtures/model_fns`` (its ``bert`` subject), so the walk's
Estimator run reproduces that fixture: the pre-trained checkpoint is 5 steps on rows of seed 9,
the Estimator trains 30 steps on rows of seed 1, predicts 16 rows of seed 3 at the switch, and
both sides continue 20 steps on rows of seed 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import classifier
import numpy as np
import tensorflow as tf

PRETRAIN_STEPS, PRETRAIN_SEED = 5, 9
TRAIN_STEPS, TRAIN_SEED = 30, 1
CONTINUE_STEPS, CONTINUE_SEED = 20, 2
PREDICT_ROWS, PREDICT_SEED = 16, 3


def out_dir(argv: list[str] | None = None) -> Path:
    """The output folder: the first command-line argument, default ``./bert_walk``."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "bert_walk").resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"writing to {out}")
    return out


def continue_rows(start: int = 0, stop: int = CONTINUE_STEPS):
    """The rows both sides continue on, batches ``start`` to ``stop`` (numpy)."""
    features, labels = classifier.rows(CONTINUE_SEED, CONTINUE_STEPS * classifier.BATCH)
    rows = slice(start * classifier.BATCH, stop * classifier.BATCH)
    return {k: v[rows] for k, v in features.items()}, labels[rows]


def predict_features():
    return classifier.rows(PREDICT_SEED, PREDICT_ROWS)[0]


def relative(losses, reference) -> np.ndarray:
    losses, reference = np.asarray(losses, np.float64), np.asarray(reference, np.float64)
    return np.abs(losses - reference) / np.abs(reference)


def write_json(path: Path, values: dict) -> None:
    """``values`` into ``path``, complete or absent (written beside it, then renamed)."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(values, indent=1) + "\n")
    partial.replace(path)


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def as_lists(predictions: dict) -> dict:
    return {k: np.asarray(v, np.float64).tolist() for k, v in predictions.items()}


def one_thread() -> tf.compat.v1.ConfigProto:
    """Every op in the caller's thread: the Estimator's run is deterministic (BERT's learning rate
    reads the global step its own train op assigns; ``inter_op_parallelism_threads=1`` still hands
    ops to a pool thread beside the caller, and the read races the assign)."""
    return tf.compat.v1.ConfigProto(inter_op_parallelism_threads=-1, intra_op_parallelism_threads=1)
