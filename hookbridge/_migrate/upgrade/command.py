"""The ``hookbridge upgrade`` command: its arguments, its report and its exit status.

Exit status: 0 nothing left to do (the tree needs no change, or ``--write`` changed it, and no
finding needs a person); 1 changes to apply (without ``--write``) or findings a person must
handle; 2 bad input or a write that failed (the tree is as it was).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

EXIT_CLEAN, EXIT_PENDING, EXIT_ERROR = 0, 1, 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    upgrade = sub.add_parser(
        "upgrade",
        help="rewrite a TF1 tree so it runs on TF 2.15 and its hooks import on TF 2.21 (stage 0)",
        description="Shows (by default) or applies (--write) the stage-0 rewrite of every .py "
        "file under PATH: TensorFlow's own tf_upgrade_v2 with hookbridge's rules on top (hooks "
        "to tf.compat.v1.train, canned Estimators kept V1, tf.contrib.tpu's Estimator to "
        "tf.compat.v1.estimator.tpu, tf.flags/tf.app to absl, tf.contrib.layers to tf-slim, "
        "shape[i].value to dimension_value). Never imports the code. --write changes every "
        "file or none and keeps the originals and the patch in PATH/.hookbridge-upgrade/. Exit "
        "status: 0 nothing left to do; 1 changes to apply or findings for a person; 2 error.",
    )
    upgrade.add_argument("path", metavar="PATH", help="a .py file or a folder")
    upgrade.add_argument("--write", action="store_true", help="apply the rewrite")
    upgrade.add_argument(
        "--backup",
        metavar="DIR",
        default=None,
        help="where --write keeps the originals and the patch (default: PATH/.hookbridge-upgrade)",
    )
    upgrade.add_argument(
        "--model-fn",
        action="store_true",
        help="also point what a model_fn names from tf.estimator (ModeKeys, EstimatorSpec, "
        "TPUEstimatorSpec) and tf.layers (dense, conv2d, max_pooling2d, dropout, "
        "batch_normalization, flatten) at hookbridge.estimator_compat, for hookbridge."
        "model_fn_model on TF 2.21 (the code still runs under the Estimator on TF 2.15)",
    )
    upgrade.add_argument(
        "--no-diff", action="store_true", help="print the report only, not the diff"
    )
    upgrade.set_defaults(handler=run)


def render(planned, *, written: bool) -> str:
    """The report: per file what changed and why, then what is left for a person."""
    lines = []
    changed = planned.changed
    ours = sum(len(f.changes) for f in changed)
    theirs = sum(f.renamed_by_tensorflow for f in changed)
    verb = "changed" if written else "would change"
    lines.append(
        f"hookbridge upgrade: {len(changed)} of {len(planned.files)} files {verb} "
        f"({ours} rewrites by hookbridge's rules, {theirs} renames by TensorFlow's tf_upgrade_v2)"
    )
    reasons: dict[str, int] = {}
    for result in changed:
        lines.append(f"\n{planned.relative(result)}")
        grouped: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for change in result.changes:
            grouped[change.old, change.new, change.why].append(change.line)
        for (old, new, why), at in grouped.items():
            mark = reasons.setdefault(why, len(reasons) + 1)
            where = "line " + ", ".join(map(str, at)) if len(at) < 6 else f"{len(at)} lines"
            lines.append(f"  {old} -> {new}  [{mark}] ({where})")
        if result.renamed_by_tensorflow:
            lines.append(f"  + {result.renamed_by_tensorflow} renames by tf_upgrade_v2 (in the diff)")
    if reasons:
        lines.append("\nWhy:")
        lines.extend(f"  [{mark}] {why}" for why, mark in reasons.items())
    notes: dict[str, list[str]] = defaultdict(list)
    for result in planned.files:
        for finding in result.findings:
            if finding.severity == "WARNING":
                notes[finding.message].append(f"{planned.relative(result)}:{finding.line}")
    if notes:
        lines.append("\nTensorFlow's notes on the rewritten code (check them; nothing is wrong yet):")
        for message, places in notes.items():
            shown = ", ".join(places[:4]) + (f" (+{len(places) - 4})" if len(places) > 4 else "")
            lines.append(f"  {shown}: {message}")
    left = planned.left
    if left:
        lines.append("\nLeft for a person (no rule rewrites these):")
        for result, finding in left:
            lines.append(f"  {planned.relative(result)}:{finding.line}: {finding.message}")
    needs = sorted({i for f in changed for i in _installs(f.text)})
    if needs:
        lines.append("\nThe rewritten code needs: " + ", ".join(needs))
    if not changed and not left:
        lines.append("Stage 0 is clean: nothing to rewrite.")
    elif changed and not written:
        lines.append(f"\nApply with: hookbridge upgrade {planned.root} --write")
    return "\n".join(lines) + "\n"


def _installs(text: str) -> list[str]:
    found = []
    if "import tf_slim" in text:
        found.append("tf-slim (pip install tf-slim)")
    if "import absl." in text:
        found.append("absl-py (installed with TensorFlow)")
    return found


def run(args: argparse.Namespace) -> int:
    from hookbridge.cli import quiet_tensorflow

    quiet_tensorflow("upgrade")
    from hookbridge._migrate.upgrade import tree

    try:
        planned = tree.plan(args.path, model_fn=args.model_fn)
    except FileNotFoundError as error:
        print(f"hookbridge upgrade: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    if not args.write:
        sys.stdout.write(render(planned, written=False))
        if planned.changed and not args.no_diff:
            sys.stdout.write("\n" + planned.diff())
        return EXIT_PENDING if planned.changed or planned.left else EXIT_CLEAN
    try:
        backup = tree.write(planned, args.backup)
    except (OSError, RuntimeError) as error:
        print(f"hookbridge upgrade: error: {error} (the tree is as it was)", file=sys.stderr)
        return EXIT_ERROR
    sys.stdout.write(render(planned, written=True))
    if backup is not None:
        sys.stdout.write(f"Originals and the patch: {backup}\n")
    return EXIT_PENDING if planned.left else EXIT_CLEAN
