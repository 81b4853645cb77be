"""hookbridge: move TF1 training code to Keras in stages, keeping its hooks and callbacks.

* :class:`HookCallback` runs TF1 ``SessionRunHook``s inside Keras ``fit``/``evaluate``/``predict``.
* :func:`restore_checkpoint` loads a checkpoint written under ``HookCallback`` into a Keras model.
"""

from __future__ import annotations

from hookbridge._hook_callback.callback import HookCallback
from hookbridge._hook_callback.checkpoint import restore_checkpoint

__all__ = ["HookCallback", "restore_checkpoint"]
__version__ = "0.1.0"
