"""What ``model_fn_model`` runs otherwise than the Estimator did, said once per model.

Each notice is a warning given the first time its case arises (docs/limits.md gives the
reasons): the TRAIN ``model_fn``'s LOCAL variables updating at every step, its own summaries
``fit`` does not write, and the spec's training hooks running in a session beside the caller's
``HookCallback``s when there are several.
"""

from __future__ import annotations

import warnings


class Notices:
    """The once-per-model warnings of one ``model_fn_model`` (named ``owner`` in each)."""

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._given: set[str] = set()

    def _once(self, key: str) -> bool:
        if key in self._given:
            return False
        self._given.add(key)
        return True

    def local_updates(self, names: list[str]) -> None:
        """TRAIN-mode LOCAL variables update at every step of fit."""
        if self._once("locals"):
            warnings.warn(
                f"{self._owner}: the TRAIN model_fn updates local variables {names} (streaming "
                "metrics) at every step of fit; the Estimator's session updated them only on the "
                "steps something fetched them. A hook reading them every step sees the "
                "Estimator's values; one reading them every N steps "
                "(LoggingTensorHook(every_n_iter=N), a summary every N steps) sees the metric "
                "over all batches (docs/limits.md).",
                stacklevel=5,
            )

    def summaries(self, summaries: list) -> None:
        """The model_fn's own TRAIN summaries, which this fit did not write."""
        if summaries and self._once("summaries"):
            names = sorted(t.op.name for t in summaries)
            warnings.warn(
                f"{self._owner}: the TRAIN model_fn's summaries {names} are not written by "
                "this fit: the Estimator's SummarySaverHook wrote its SUMMARIES collection into "
                "model_dir; fit writes them there when its callbacks hold ONE HookCallback whose "
                "hooks come from hookbridge.estimator_hooks(model_dir, ...) (docs/limits.md).",
                stacklevel=3,
            )

    def two_sessions(self, theirs: list) -> None:
        """Several ``HookCallback`` of the caller's beside the spec's training hooks (call it
        only when the TRAIN spec has hooks): which one ran them natively is not known."""
        if len(theirs) > 1 and self._once("two"):
            warnings.warn(
                f"{self._owner}: fit got {len(theirs)} HookCallbacks, so the spec's training "
                "hooks run in one of their own, after yours (Estimator.train ran its hooks and "
                "the spec's in one MonitoredSession; with ONE HookCallback they join it, placed "
                "as estimator_hooks places them). Give all your hooks to one HookCallback "
                "(docs/limits.md).",
                stacklevel=4,
            )
