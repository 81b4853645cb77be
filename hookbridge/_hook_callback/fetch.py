"""Fetch structures as the bridge plans them: which elements Python holds, which need a run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.graph import SideGraph


class FetchPlan:
    """One fetch structure, mapped once: which elements come from Python, which need a run."""

    __slots__ = ("elements", "known", "mapper", "single", "source", "unknown")

    def __init__(self, fetches: Any, known: Mapping[Any, tuple], side: SideGraph) -> None:
        self.source = fetches  # keeps the leaves alive, so the ids in the cache key stay valid
        try:
            self.mapper = _tfcompat.fetch_mapper(fetches)
        except (TypeError, ValueError, KeyError) as e:
            raise type(e)(
                f"{e}\nhookbridge: tensors available in the bridge's graph: "
                f"{side.available_names()} (plus any op a hook added in begin())."
            ) from None
        self.elements = list(self.mapper.unique_fetches())
        self.known = [(i, known[e]) for i, e in enumerate(self.elements) if e in known]
        self.unknown = [(i, e) for i, e in enumerate(self.elements) if e not in known]
        # A lone tensor the bridge holds (NanTensorHook's loss, StepCounterHook's global step):
        # its result is the held value itself, no mapping needed.
        self.single = (
            self.known[0][1]
            if len(self.elements) == 1 and self.known and _is_leaf(fetches, self.elements[0])
            else None
        )


def describes_a_run(options: Any) -> bool:
    """Whether ``RunOptions`` ask for a description of the run in its ``RunMetadata``."""
    return options is not None and bool(options.trace_level or options.output_partition_graphs)


def _is_leaf(fetches: Any, element: Any) -> bool:
    """Whether ``fetches`` is the element itself (not a structure holding it)."""
    return fetches is element or (isinstance(fetches, str) and fetches == element.name)


#: Concrete tensor / op classes seen as fetches (graph tensors are a subclass of tf.Tensor).
_LEAF_TYPES: set[type] = set()


def structure_key(fetches: Any) -> Any:
    """A cache key for a fetch structure: its shape and the identity of its leaves.

    Hooks often return a new dict of the same tensors every step (SummarySaverHook does), so the
    key follows the structure, not the container's identity; strings key by value.
    """
    kind = type(fetches)
    if kind in _LEAF_TYPES:  # the common case, without the Mapping ABC check
        return id(fetches)
    if isinstance(fetches, str):
        return fetches
    if isinstance(fetches, Mapping):
        return (type(fetches), tuple((k, structure_key(v)) for k, v in fetches.items()))
    if isinstance(fetches, (list, tuple)):
        return (type(fetches), tuple(structure_key(v) for v in fetches))
    if isinstance(fetches, (tf.Tensor, tf.Operation)):
        _LEAF_TYPES.add(kind)
    return id(fetches)


def is_leaf_fetch(fetches: Any) -> bool:
    """Whether ``fetches`` is one tensor, op or name: immutable, so the same object always
    means the same fetch (a dict or list may have changed since it was last seen)."""
    return type(fetches) in _LEAF_TYPES or type(fetches) is str
