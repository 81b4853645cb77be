"""An Estimator's own ``model_fn`` as a Keras model (issue 32).

Its variables are the ``model_fn``'s own, under their TF1 names, tracked as the model's weights;
``fit`` runs the ``model_fn``'s own training step (its optimizer and ``train_op``).
"""
