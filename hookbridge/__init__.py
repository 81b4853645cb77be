"""hookbridge: move TF1 training code to Keras in stages, keeping its hooks and callbacks.

* :class:`HookCallback` runs TF1 ``SessionRunHook``s inside Keras ``fit``/``evaluate``/``predict``.
* :func:`restore_checkpoint` loads a checkpoint written under ``HookCallback`` into a Keras model.
"""

from __future__ import annotations

from hookbridge._hook_callback.callback import HookCallback
from hookbridge._hook_callback.checkpoint import restore_checkpoint
from hookbridge._callback_hook.errors import UnsupportedModelAttributeError
from hookbridge._callback_hook.hook import CallbackHook
from hookbridge._callback_hook.weights import load_weights, read_weights
from hookbridge import hooks

__all__ = [
    "HookCallback",
    "restore_checkpoint",
    "CallbackHook",
    "UnsupportedModelAttributeError",
    "load_weights",
    "read_weights",
    "hooks",
]
__version__ = "0.1.0"
