"""Stage-0 rows: every TF1-only name ``hookbridge upgrade`` would rewrite, with its replacement.

``hookbridge scan --stage0 PATH`` reports them (and only them, with the files that do not parse):
``tf.logging.info -> tf.compat.v1.logging.info``, ``tf.flags -> absl.flags``,
``x.shape[-1].value -> tf.compat.v1.dimension_value(x.shape[-1])``,
``tf.nn.dropout(...) : arguments rewritten by the upgrade``. The rules are the upgrade's own
(:func:`hookbridge._migrate.upgrade.engine.stage0_names`: TensorFlow's ``tf_upgrade_v2`` tables
with hookbridge's rules first), so a tree after ``hookbridge upgrade --write`` gives none.

TensorFlow's tables need ``import tensorflow``: it is imported only when a scanned file mentions
``tensorflow`` (a one-time cost of a few seconds); without TensorFlow installed, stage 0 is
reported ``unverified`` (exit 1), never clean.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.util import decode_source
from pathlib import Path
from typing import Final

from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.project import _parse_error, discover

#: What to do about a stage-0 row.
ACTION: Final = "run `hookbridge upgrade PATH --write` (docs/upgrade.md), then scan again"


def rows(root: Path, exclude: Iterable[str] = ()) -> tuple[int, list[f.Finding]]:
    """The number of files under ``root`` and their stage-0 findings (see the module docstring)."""
    base = root.parent if root.is_file() else root
    files = discover(root, exclude)
    out: list[f.Finding] = []
    names = None
    for file in files:
        source = file.read_bytes()
        if b"tensorflow" not in source:
            continue
        rel = file.relative_to(base).as_posix()
        if names is None:
            try:
                from hookbridge._migrate.upgrade.engine import _fast_spec, stage0_names

                _fast_spec()  # imports TensorFlow (its rename tables)
                names = stage0_names
            except ImportError as error:
                out.append(_unknown(rel, error))
                return len(files), out
        try:
            found = names(decode_source(source), str(file))
        except (SyntaxError, ValueError, UnicodeDecodeError) as error:
            out.append(_parse_error(rel, error))
            continue
        for line, old, new in found:
            if new.startswith("arguments "):
                detail = f"TF1-only call: its {new} (TensorFlow's tf_upgrade_v2 rule)"
            else:
                detail = f"TF1-only name: the upgrade spells it {new}"
            out.append(f.Finding(rel, line, f.TF1_NAME, old, f.REMOVED_API, detail, ACTION))
    return len(files), out


def _unknown(rel: str, error: ImportError) -> f.Finding:
    return f.Finding(
        rel,
        1,
        f.TF1_NAME,
        "stage 0",
        f.UNVERIFIED,
        f"unknown: TensorFlow is not installed ({error}), and the TF1-only names come from its "
        "upgrader's tables",
        "install tensorflow (2.15 to 2.21) in this environment and scan again",
    )
