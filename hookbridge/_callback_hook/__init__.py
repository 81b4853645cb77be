"""Direction 2: Keras callbacks inside TF1 ``MonitoredSession`` (``CallbackHook``)."""
