"""hookbridge: move TF1 training code to Keras in stages, keeping its hooks and callbacks.

* :class:`HookCallback` runs TF1 ``SessionRunHook``s inside Keras ``fit``/``evaluate``/``predict``;
  :func:`restore_checkpoint` loads a checkpoint written under it (or, with an assignment map, by a
  TF1 graph or an Estimator: :func:`propose_assignment`) back into a Keras model, and
  :func:`estimator_hooks` gives ``fit`` the hooks ``Estimator.train`` added unasked;
  :func:`keras_twin` builds the Keras model of a canned Estimator, :func:`model_fn_model` the
  Keras model of a custom ``model_fn`` (its own variables, names and training step).
* :class:`CallbackLoop` gives a custom training loop (``tf.GradientTape``) ``fit``'s callback
  events and logs, for Keras callbacks and, through ``HookCallback``, TF1 hooks.
* :class:`CallbackHook` runs Keras callbacks inside ``MonitoredSession`` / ``Estimator``;
  :func:`load_weights` / :func:`read_weights` read what its ``ModelCheckpoint`` saved.
* :mod:`hookbridge.hooks`: the R tfestimators ``hook_history_saver`` / ``hook_progress_bar``.
* :mod:`hookbridge.testing`: the conformance kit (imported on demand: it needs hypothesis).

The names are imported on first use (``hookbridge._lazy``): ``import hookbridge``, the
``hookbridge`` command's ``--help`` and ``scan``, and the pytest plugin load no TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookbridge._lazy import lazy_exports

if TYPE_CHECKING:  # what the lazy table resolves to, for type checkers and IDEs
    from hookbridge import hooks
    from hookbridge._callback_hook.errors import UnsupportedModelAttributeError
    from hookbridge._callback_hook.hook import CallbackHook
    from hookbridge._callback_hook.weights import load_weights, read_weights
    from hookbridge._hook_callback.callback import HookCallback
    from hookbridge._hook_callback.checkpoint import restore_checkpoint
    from hookbridge._loop.driver import CallbackLoop
    from hookbridge._migrate.assignment import propose_assignment
    from hookbridge._migrate.estimator import estimator_hooks
    from hookbridge._migrate.model_fn.model import model_fn_model
    from hookbridge._migrate.twins.build import keras_twin

_EXPORTS = {
    "CallbackHook": "hookbridge._callback_hook.hook",
    "CallbackLoop": "hookbridge._loop.driver",
    "HookCallback": "hookbridge._hook_callback.callback",
    "UnsupportedModelAttributeError": "hookbridge._callback_hook.errors",
    "estimator_hooks": "hookbridge._migrate.estimator",
    "hooks": "hookbridge.hooks",
    "keras_twin": "hookbridge._migrate.twins.build",
    "model_fn_model": "hookbridge._migrate.model_fn.model",
    "load_weights": "hookbridge._callback_hook.weights",
    "propose_assignment": "hookbridge._migrate.assignment",
    "read_weights": "hookbridge._callback_hook.weights",
    "restore_checkpoint": "hookbridge._hook_callback.checkpoint",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CallbackHook",
    "CallbackLoop",
    "HookCallback",
    "UnsupportedModelAttributeError",
    "estimator_hooks",
    "hooks",
    "keras_twin",
    "load_weights",
    "model_fn_model",
    "propose_assignment",
    "read_weights",
    "restore_checkpoint",
]
__version__ = "0.1.0"
