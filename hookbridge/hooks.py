"""Hooks hookbridge ships: the R tfestimators package's ``hook_progress_bar()`` and
``hook_history_saver()``, built on Keras's own ``Progbar``."""

from __future__ import annotations
