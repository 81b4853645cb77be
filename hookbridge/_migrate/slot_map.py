"""``slot_map``: optimizer state hookbridge does not know, named by the user.

A TF1 optimizer of a project's own (BERT's ``AdamWeightDecayOptimizer`` keeps ``<var>/adam_m``
and ``<var>/adam_v``, no beta powers) saves slots under names no table can know. A slot map says
which Keras slot continues each: ``{"adam_m": "m", "adam_v": "v"}``. A key is the checkpoint
name of a slot with ``{var}`` standing for its model variable (``"{var}/adam_m"``,
``"opt/{var}/acc"``); a key without ``{var}`` is a suffix (``"adam_m"`` means
``"{var}/adam_m"``). A value is a Keras slot name as ``tf.keras.optimizers.legacy``'s
``get_slot`` names them (``m``, ``v``, ``vhat``, ``momentum``, ``accumulator``, ``linear``,
``rms``, ``mg``; Keras 3 keeps ``m``/``v`` in ``_momentums``/``_velocities``). The values are
copied as they are, both ways: the map asserts that the two optimizers keep the same quantity.

``restore_checkpoint(..., slot_map=)`` remembers the map per model: ``estimator_hooks(model=...)``
writes the slots back under the same names unless given another.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from typing import Any

#: The Keras slot names a map may target (``hookbridge._tfcompat.keras_optimizer_slot``).
KERAS_SLOTS = ("m", "v", "vhat", "momentum", "accumulator", "linear", "rms", "mg")
_REMEMBERED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BY_ID: dict[int, dict[str, str]] = {}  # models that cannot be weakly referenced


class SlotMap:
    """A validated ``slot_map``: ``match(name)`` gives ``(variable, Keras slot)`` or ``None``."""

    def __init__(self, slot_map: Mapping[str, str], where: str) -> None:
        self.entries = dict(slot_map)
        self._patterns: list[tuple[str, re.Pattern[str], str]] = []
        for key, slot in self.entries.items():
            if not isinstance(key, str) or not key or key.count("{var}") > 1:
                raise ValueError(
                    f"{where}: slot_map key {key!r} is not a checkpoint slot name: give its "
                    "suffix ('adam_m') or its name with {var} for the model variable "
                    "('{var}/adam_m')."
                )
            if slot not in KERAS_SLOTS:
                raise ValueError(
                    f"{where}: slot_map[{key!r}] = {slot!r} is not a Keras slot name; one of "
                    f"{', '.join(KERAS_SLOTS)} (Adam: m, v; SGD: momentum; Adagrad: "
                    "accumulator; Ftrl: accumulator, linear; RMSprop: rms, momentum, mg)."
                )
            template = key if "{var}" in key else "{var}/" + key
            before, _, after = template.partition("{var}")
            pattern = re.compile(f"^{re.escape(before)}(?P<var>.+){re.escape(after)}$")
            self._patterns.append((key, pattern, slot))

    def match(self, name: str, variables: set[str]) -> tuple[str, str, str] | None:
        """``(key, variable, Keras slot)`` of the entry matching checkpoint ``name`` whose
        variable is one of ``variables``, or ``None``."""
        for key, pattern, slot in self._patterns:
            m = pattern.match(name)
            if m and m["var"] in variables:
                return key, m["var"], slot
        return None

    def unused(self, names: list[str], variables: set[str]) -> list[str]:
        """The keys matching none of ``names``."""
        used = {hit[0] for n in names if (hit := self.match(n, variables))}
        return [k for k in self.entries if k not in used]


def parse(slot_map: Mapping[str, str] | None, where: str) -> SlotMap | None:
    if slot_map is None:
        return None
    if not isinstance(slot_map, Mapping):
        raise TypeError(f"{where}: slot_map must be a dict {{checkpoint slot: Keras slot}}.")
    return SlotMap(slot_map, where)


def remember(model: Any, slot_map: Mapping[str, str] | None) -> None:
    """Records the map ``model`` was restored with (``None``: forgets it)."""
    entries = dict(slot_map) if slot_map is not None else None
    try:
        if entries is None:
            _REMEMBERED.pop(model, None)
        else:
            _REMEMBERED[model] = entries
    except TypeError:
        if entries is None:
            _BY_ID.pop(id(model), None)
        else:
            _BY_ID[id(model)] = entries


def remembered(model: Any) -> dict[str, str] | None:
    """The map of ``model``'s last ``restore_checkpoint`` (``None``: none)."""
    try:
        return _REMEMBERED.get(model)
    except TypeError:
        return _BY_ID.get(id(model))
