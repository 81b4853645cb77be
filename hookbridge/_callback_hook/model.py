"""The "model" Keras callbacks see under CallbackHook: a proxy over a TF1 graph and its session.

One :class:`~hookbridge._callback_hook.state.GraphState` per hook holds the session and the graph
ops; one :class:`ModelProxy` per hook is every callback's model, as Keras gives every callback the
same model (``History`` sets ``model.history`` for the others to read; an attribute one callback
sets, another sees). Everything a built-in callback reads is answered from the graph (the
optimizer in :mod:`optimizer`); anything else raises :class:`UnsupportedModelAttributeError`,
naming the callback found running on the stack.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._callback_hook import graph_summaries as _graph_summaries
from hookbridge._callback_hook import layers as _layers
from hookbridge._callback_hook import savedmodel as _savedmodel
from hookbridge._callback_hook import summary as _summary
from hookbridge._callback_hook.directions import (
    default_package,
    is_keras3,
    keras_package,
    warn_name_based_directions,
)
from hookbridge._callback_hook.errors import UnsupportedModelAttributeError, accessing_callback
from hookbridge._callback_hook.optimizer import optimizer_class
from hookbridge._callback_hook.state import GraphState

__all__ = ["GraphState", "ModelProxy"]


class ModelProxy:
    """The object a callback gets from ``set_model`` under CallbackHook (see CallbackHook docs)."""

    _FIXED: ClassVar[dict[str, Any]] = {
        "train_function": None,
        "train_tf_function": None,
        "make_train_function": None,
        "distribute_strategy": None,
        "_is_graph_network": False,
        "built": True,
        "name": "graph",
    }

    def __init__(self, state: GraphState, callbacks: Sequence[Any]) -> None:
        d = self.__dict__
        d["_hb_state"] = state
        d["_hb_callbacks"] = callbacks = list(callbacks)
        d["_hb_package"] = keras_package(callbacks[0]) if callbacks else default_package()
        d["_hb_counters"] = None
        d["optimizer"] = optimizer_class(d["_hb_package"])(state, callbacks)
        warn_name_based_directions(callbacks, state.metric_directions)

    @property
    def _hb_callback(self) -> str:
        return accessing_callback(self._hb_callbacks)

    def for_session(self) -> ModelProxy:
        """The model for a new session (a new ``fit``): the same object, batch counters reset.
        Warns if TensorBoard would record summaries the graph cannot give it (see
        graph_summaries)."""
        self.__dict__["_hb_counters"] = None
        _graph_summaries.warn_unrecorded(self._hb_state.graph, self._hb_callbacks)
        return self

    # stop_training is shared: any callback's stop is the hook's stop.
    @property
    def stop_training(self) -> bool:
        return self._hb_state.stop_training

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._hb_state.stop_training = bool(value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "stop_training":
            self._hb_state.stop_training = bool(value)
        else:  # e.g. History sets model.history
            self.__dict__[name] = value

    def get_weights(self) -> list[np.ndarray]:
        """The values of the hook's ``variables`` (default: the graph's model variables)."""
        return self._hb_state.get_weights()

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Assigns the hook's ``variables`` in the live session."""
        self._hb_state.set_weights(weights)

    @property
    def weights(self) -> list:
        """The hook's ``variables``: by default the graph's model variables, trainable and not
        (BatchNorm's moving statistics), never the optimizer's, as Keras's ``model.weights``."""
        return list(self._hb_state.variables)

    variables = weights

    @property
    def trainable_weights(self) -> list:
        ids = self._hb_state.trainable_ids
        return [v for v in self._hb_state.variables if id(v) in ids]

    trainable_variables = trainable_weights

    @property
    def non_trainable_weights(self) -> list:
        ids = self._hb_state.trainable_ids
        return [v for v in self._hb_state.variables if id(v) not in ids]

    non_trainable_variables = non_trainable_weights

    @property
    def layers(self) -> list:
        """The variables grouped by scope (``dense/kernel``, ``dense/bias``: layer ``dense``),
        each layer's ``weights`` the values now: TensorBoard's weight histograms and images."""
        return _layers.graph_layers(self._hb_state)

    def save_weights(self, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
        """Writes the variables: ``*.h5`` (HDF5) or a TF checkpoint prefix; see load_weights."""
        self._hb_state.save_weights(str(filepath))

    def load_weights(self, filepath: Any, skip_mismatch: bool = False, **kwargs: Any) -> None:
        """Loads what ``save_weights`` / ``save`` wrote (an ``.h5`` file, a TF checkpoint prefix
        or its directory), or a TF checkpoint / tf_keras ``.h5`` file of variables of the same
        names, into the hook's ``variables`` (``ModelCheckpoint(load_weights_on_restart=True)``).

        Raises:
            FileNotFoundError: nothing readable at ``filepath``.
            ValueError: one of ``variables`` is missing from the file or of another shape
                (``skip_mismatch=True``: load the others).
        """
        self._hb_state.load_weights(str(filepath), skip_mismatch=skip_mismatch)

    def save(self, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
        """Writes the model: an ``.h5`` path, the variables as ``save_weights``; another path,
        on tf_keras / Keras 2 a SavedModel of the graph (see savedmodel.py), on Keras 3 Keras's
        ``ValueError``; a ``.keras`` archive cannot be made."""
        path = str(filepath)
        if path.endswith(".keras"):
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model",
                "save",
                f"It was asked for a full-model .keras archive ({path!r}), which needs a Keras "
                "model. Use ModelCheckpoint(..., save_weights_only=True) with a path ending in "
                "'.weights.h5', and hookbridge.load_weights to load it back.",
            )
        if path.endswith((".h5", ".hdf5")):
            self._hb_state.save_weights(path)
            return
        if is_keras3(self._hb_package):  # Keras 3's own error (saving_api.save_model)
            raise ValueError(
                "Invalid filepath extension for saving. Please add either a `.keras` extension "
                "for the native Keras format (recommended) or a `.h5` extension. Use "
                "`model.export(filepath)` if you want to export a SavedModel for use with "
                f"TFLite/TFServing/etc. Received: filepath={path}. (CallbackHook: `.h5` writes "
                "the graph's variables, `.keras` cannot be made.)"
            )
        state = self._hb_state
        try:
            _savedmodel.write_saved_model(state.session, state.graph, path)
        except _savedmodel.SavedModelError as e:
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model",
                "save",
                f"It was asked for a SavedModel at {path!r} (tf_keras's format for a path "
                f"without extension), and the session's graph could not be copied into one: "
                f"{str(e).rstrip('.')}. Use ModelCheckpoint(..., save_weights_only=True) (a "
                "TF checkpoint of the variables).",
            ) from e

    def count_params(self) -> int:
        """Scalars in the hook's ``variables`` (Keras: in ``model.weights``)."""
        return _summary.count(self._hb_state.variables)

    def summary(
        self,
        line_length: int | None = None,
        positions: Any = None,
        print_fn: Any = None,
        expand_nested: bool = False,
        show_trainable: bool = False,
        layer_range: Any = None,
    ) -> None:
        """Keras's summary table with one row per variable of ``variables`` (no layers).

        ``positions`` and ``expand_nested`` change nothing (no nested layers); ``layer_range``
        names layers, which a graph lacks: an error.
        """
        if layer_range is not None:
            raise UnsupportedModelAttributeError(
                self._hb_callback, "model", "summary(layer_range=...)", "A graph has no layers."
            )
        state = self._hb_state
        _summary.render(
            keras3=is_keras3(self._hb_package),
            variables=state.variables,
            trainable=state.trainable_ids,
            optimizer_variables=state.optimizer_variables,
            line_length=line_length,
            show_trainable=show_trainable,
            print_fn=print_fn,
        )

    def get_config(self) -> dict:
        """What Keras's ``Model().get_config()`` gives a model without layers or arguments
        (``name``, ``trainable``, ``dtype``), named ``"graph"``: the graph is not serializable."""
        with _tfcompat.eager():
            config = dict(self._hb_package.Model().get_config())
        config["name"] = "graph"
        return config

    @property
    def metrics(self) -> list:
        """Keras 3 ``mode="auto"`` finds metric directions here: each log name's direction as
        ``compile(metrics=[name])`` would give it, or the one declared in ``metric_directions``;
        tf_keras's ProgbarLogger reads the names (the logs are running means already)."""
        if not is_keras3(self._hb_package):
            # tf_keras / Keras 2: ProgbarLogger treats these names as already-averaged values.
            return [types.SimpleNamespace(name=n) for n in self._hb_state.log_names]
        state = self._hb_state
        entries = []
        for name in dict.fromkeys([*state.log_names, *state.metric_directions]):
            direction = state.direction(self._hb_package, name)
            if direction is not None:
                entries.append(types.SimpleNamespace(name=name, _direction=direction))
        return [_tfcompat.keras3_metrics_list(entries)]

    def _hb_counter(self, index: int) -> Any:
        if self._hb_counters is None:
            with _tfcompat.eager():
                self.__dict__["_hb_counters"] = (
                    tf.Variable(0, dtype=tf.int64, trainable=False),
                    tf.Variable(0, dtype=tf.int64, trainable=False),
                )
        return self._hb_counters[index]

    def _hb_count_run(self, mode: str) -> None:
        """One training (``"train"``) or evaluation run made: tf_keras's train / test function
        adds 1 to ``_train_counter`` / ``_test_counter`` after each step, before the batch
        callbacks. Only once a callback took the counters (tf_keras's TensorBoard: the
        attributes are named in ``_tfcompat``, set on the class below)."""
        counters = self._hb_counters
        if counters is not None and mode != "predict":
            with _tfcompat.eager():
                counters[0 if mode == "train" else 1].assign_add(1)

    def __getattr__(self, attribute: str) -> Any:
        if attribute in ModelProxy._FIXED:
            return ModelProxy._FIXED[attribute]
        if attribute.startswith("_hb_"):
            raise AttributeError(attribute)
        raise UnsupportedModelAttributeError(self._hb_callback, "model", attribute)

    def __repr__(self) -> str:
        return "<hookbridge graph model proxy>"


# tf_keras TensorBoard's batch step: model._train_counter / model._test_counter (private names).
setattr(ModelProxy, _tfcompat.KERAS_TRAIN_COUNTER_ATTRIBUTE, property(lambda m: m._hb_counter(0)))
setattr(ModelProxy, _tfcompat.KERAS_TEST_COUNTER_ATTRIBUTE, property(lambda m: m._hb_counter(1)))
