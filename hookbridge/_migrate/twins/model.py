"""The twin as a Keras model: a dict of named features in, the logits out.

``call(features)`` reads each feature column's input by its key (extra keys are ignored, never
mapped by position: Keras 3's functional models feed a dict's values by position when its keys
are not the inputs'), runs the DNN part (``input_layer``, hidden layers, logits) and the linear
part (``linear_model``), and adds their logits as ``DNNLinearCombined*`` does
(``dnn_logits + linear_logits``).

A twin with both parts trains as ``DNNLinearCombined*`` does: the linear part's variables with
``model.extra_optimizers[0]`` (the linear optimizer), the rest with ``model.optimizer``, one
gradient computation for both (:meth:`train_step`).
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def twin_class(keras: Any) -> Any:
    """The ``CannedTwin`` model class for the Keras module ``keras``."""
    import tensorflow as tf

    from hookbridge import _keras_call, _tfcompat

    class CannedTwin(keras.Model):
        """A canned Estimator's model: ``dnn_features -> hidden -> logits`` and/or
        ``linear``, summed."""

        def __init__(
            self, dnn_features=None, hidden=(), dropout=None, logits=None, linear=None, **kwargs
        ):
            super().__init__(**kwargs)
            self.dnn_features, self.hidden_layers = dnn_features, list(hidden)
            self.dropout_layers = (
                [
                    keras.layers.Dropout(float(dropout), name=f"dropout_{k}")
                    for k in range(len(self.hidden_layers))
                ]
                if dropout
                else []
            )
            self.logits_layer, self.linear = logits, linear
            self.extra_optimizers = []

        def call(self, features, training=None):
            parts = []
            if self.logits_layer is not None:
                x = self.dnn_features(features)
                for k, layer in enumerate(self.hidden_layers):
                    x = layer(x)
                    if self.dropout_layers:
                        x = self.dropout_layers[k](x, training=training)
                parts.append(self.logits_layer(x))
            if self.linear is not None:
                parts.append(self.linear(features))
            return parts[0] if len(parts) == 1 else parts[0] + parts[1]

        def parts(self):
            """(DNN part's trainable variables, linear part's)."""
            linear = list(self.linear.trainable_variables) if self.linear is not None else []
            if self.dnn_features is not None:  # a shared embedding lives in the DNN's scope:
                dnn_own = {id(v) for v in self.dnn_features.trainable_variables}
                linear = [v for v in linear if id(v) not in dnn_own]  # the DNN optimizer's
            mine = {id(v) for v in linear}
            return [v for v in self.trainable_variables if id(v) not in mine], linear

        def train_step(self, data):
            if not self.extra_optimizers:
                return super().train_step(data)
            x, y, weights = keras.utils.unpack_x_y_sample_weight(data)
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=weights)
                _tfcompat.keras3_track_loss(self, loss, x)
            dnn, linear = self.parts()
            grads = tape.gradient(loss, dnn + linear)
            self.optimizer.apply_gradients(zip(grads[: len(dnn)], dnn))
            self.extra_optimizers[0].apply_gradients(zip(grads[len(dnn) :], linear))
            return self.compute_metrics(x, y, y_pred, weights)

        #: Keras's ``train_function`` runs its traced graph flat (``hookbridge._keras_call``:
        #: the same graph without the per-call ``tf.function`` dispatch); False (read at each
        #: new iterator): Keras's own call.
        flat_train_function = True

        def make_train_function(self, force=False):
            made = super().make_train_function(force)  # Keras 3 returns None
            _keras_call.install(self)
            return None if made is None else self.train_function

        def checkpoint_names(self):
            """``(weight, the Estimator's checkpoint name)`` of every weight."""
            layers = [self.dnn_features, *self.hidden_layers, self.logits_layer, self.linear]
            return [
                pair for layer in layers if layer is not None for pair in layer.checkpoint_names()
            ]

    return CannedTwin
