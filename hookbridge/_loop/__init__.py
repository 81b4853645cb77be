"""Keras callbacks and, through ``HookCallback``, TF1 hooks in custom training loops, with the
events and logs ``fit`` gives them (``CallbackLoop``)."""
