"""The migration toolkit: ``scan`` (inventory by syntax tree), ``check`` (a user's hook or callback
natively and bridged), assignment maps from TF1 / Estimator checkpoints into Keras, and the hooks
``Estimator.train`` added (``estimator_hooks``)."""
