"""TensorFlow spellings that no longer import, and what to write instead.

``tf.estimator`` was removed in TF 2.16 (``tensorflow-estimator`` stops at 2.15) and
``tf.contrib`` in TF 2.0: code that spells a hook ``tf.estimator.LoggingTensorHook`` stops
importing there. :func:`removed` tells it for one qualified name (a hook's constructor, an import,
a dotted name); :func:`rows` gives one module's rows, one per removed spelling with every line
it is written on.
"""

from __future__ import annotations

from typing import Final

from hookbridge._migrate.scan import findings as f
from hookbridge._migrate.scan.catalog import Bridged
from hookbridge._migrate.scan.classes import display
from hookbridge._migrate.scan.modules import ModuleInfo

#: TensorFlow spellings that no longer import, by qualified prefix: (since, what removed them).
REMOVED_PREFIXES: Final = {
    "tensorflow.estimator.": ("TF 2.16", "tf.estimator was removed in TF 2.16"),
    "tensorflow.compat.v1.estimator.": ("TF 2.16", "tf.estimator was removed in TF 2.16"),
    "tensorflow.compat.v2.estimator.": ("TF 2.16", "tf.estimator was removed in TF 2.16"),
    "tensorflow_estimator.": ("TF 2.16", "tensorflow-estimator stops at 2.15"),
    "tensorflow.contrib.": ("TF 2.0", "tf.contrib was removed in TF 2.0"),
}
#: Names tf.compat.v1.train has under the same name (tests/test_scan.py checks each exists).
V1_TRAIN_NAMES: Final = frozenset(
    {
        "SessionRunHook",
        "SessionRunArgs",
        "SessionRunContext",
        "SessionRunValues",
        "CheckpointSaverHook",
        "CheckpointSaverListener",
        "FeedFnHook",
        "FinalOpsHook",
        "GlobalStepWaiterHook",
        "LoggingTensorHook",
        "NanLossDuringTrainingError",
        "NanTensorHook",
        "ProfilerHook",
        "SecondOrStepTimer",
        "StepCounterHook",
        "StopAtStepHook",
        "SummarySaverHook",
        "Scaffold",
    }
)


def removed(qualified: str | None) -> tuple[str, str] | None:
    """``(spelling, replacement)`` when ``qualified`` no longer imports on current TensorFlow.

    The spelling is the qualified name cut after the removed module's public name
    (``tensorflow.estimator.ModeKeys``; ``tensorflow.estimator.experimental.stop_if_...``).
    """
    if not qualified:
        return None
    for prefix, (since, why) in REMOVED_PREFIXES.items():
        if not qualified.startswith(prefix):
            continue
        rest = qualified[len(prefix) :].split(".")
        keep = 2 if rest[0] in ("experimental", "tpu", "export", "inputs", "training") else 1
        spelling = prefix + ".".join(rest[:keep])
        name = rest[keep - 1] if len(rest) >= keep else rest[-1]
        if name in V1_TRAIN_NAMES:
            return spelling, f"{why}: spell it tf.compat.v1.train.{name}"
        if prefix == "tensorflow.contrib." and rest[0] == "tpu" and len(rest) > 1:
            return spelling, (
                f"{why}: tf.compat.v1.estimator.tpu.{rest[1]} on TF <= 2.15 (with "
                "tensorflow-estimator); on TF >= 2.16 migrate it to Keras fit"
            )
        if since == "TF 2.0":
            return spelling, f"{why}: it does not import on any TF 2; replace it first"
        return spelling, (
            f"{why}: it imports only on TF <= 2.15 with tensorflow-estimator; on TF >= 2.16 "
            "migrate it to Keras (see the entry points)"
        )
    return None


def rows(module: ModuleInfo, carried: set[tuple[int, str]]) -> list[tuple[int, str, Bridged]]:
    """``(first line, spelling as written, status)``: one row per removed spelling in
    ``module`` (its imports and dotted names; every line in the detail), except on
    the ``(line, spelling)`` pairs in ``carried`` (a hook's or entry point's own row on that line
    already names the spelling)."""
    aliases = module.aliases
    lines: dict[str, list[int]] = {}
    replacements: dict[str, str] = {}
    shown: dict[str, str] = {}
    found = [(line, name, None) for line, name in module.imports]
    for line, raw in module.dotted:
        root, _, rest = raw.partition(".")
        found.append((line, f"{aliases.get(root, root)}.{rest}", raw))
    for line, qualified, raw in found:
        gone = removed(qualified)
        if gone is None or (line, gone[0]) in carried:
            continue
        spelling, replacement = gone
        at = lines.setdefault(spelling, [])
        if line not in at:
            at.append(line)
        replacements[spelling] = replacement
        if raw is not None and spelling not in shown:  # as written: tf.estimator.ModeKeys
            cut = qualified.count(".") - spelling.count(".")
            shown[spelling] = ".".join(raw.split(".")[: raw.count(".") + 1 - cut])
    out = []
    for spelling, at in lines.items():
        at.sort()
        uses = f" ({len(at)} uses: lines {', '.join(map(str, at))})" if len(at) > 1 else ""
        why, _, what = replacements[spelling].partition(": ")
        name = shown.get(spelling) or display(spelling)
        out.append((at[0], name, Bridged(f.REMOVED_API, f"{why}{uses}", what)))
    return out
