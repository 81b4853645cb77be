"""The "model" Keras callbacks see under CallbackHook: a proxy over a TF1 graph and its session.

One :class:`GraphState` per hook holds the session and the graph ops; one :class:`ModelProxy`
per hook is every callback's model, as Keras gives every callback the same model (``History``
sets ``model.history`` for the others to read; an attribute one callback sets, another sees).
Everything a built-in callback reads is answered from the graph; anything else raises
:class:`UnsupportedModelAttributeError`, naming the callback found running on the stack.
"""

from __future__ import annotations

import importlib
import inspect
import types
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._callback_hook import graph_summaries as _graph_summaries
from hookbridge._callback_hook import summary as _summary
from hookbridge._callback_hook import weights as _weights
from hookbridge._callback_hook.errors import UnsupportedModelAttributeError
from hookbridge._callback_hook.rate import LearningRate

_SCOPE = "hookbridge_callback_hook"


class GraphState:
    """Graph ops and the live session shared by every callback's model proxy."""

    def __init__(
        self,
        variables: Sequence[Any] | None,
        learning_rate: Any,
        metric_directions: Mapping[str, str] | None = None,
        optimizer: Any = None,
    ) -> None:
        if optimizer is not None and not isinstance(optimizer, tf.compat.v1.train.Optimizer):
            raise TypeError(
                "CallbackHook: optimizer must be the tf.compat.v1.train.Optimizer the graph's "
                f"train op was built with, received {optimizer!r} of type "
                f"{type(optimizer).__name__}."
            )
        self.optimizer = optimizer
        self.optimizer_variables: list = []
        self._variables_arg = variables
        self._learning_rate_arg = learning_rate
        self.metric_directions = check_metric_directions(metric_directions)
        self._directions: dict[str, str | None] = {}
        self.session: Any = None
        self.stop_training = False
        self.variables: list = []
        self.learning_rate: Any = None
        self.lr: LearningRate | None = None
        self.warned_lr_ignored = False
        self.warned_lr_lag = False
        self.trainable_ids: set[int] = set()
        self.global_step: Any = None
        self.log_names: list[str] = []
        self.graph: tf.Graph | None = None

    def build(self, graph: tf.Graph, log_names: list[str]) -> None:
        """Called from ``begin()``: resolves variables, builds the assign ops (graph not final)."""
        self.log_names = log_names
        self.graph = graph
        self.stop_training = False
        if self._variables_arg is None:
            self.variables = list(graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES))
        else:
            self.variables = [_resolve_variable(graph, v, "variables") for v in self._variables_arg]
        self.global_step = tf.compat.v1.train.get_global_step(graph)
        lr_arg = self._learning_rate_arg
        if lr_arg is None and self.optimizer is not None:  # the optimizer's own rate, if a tensor
            lr_arg = _tfcompat.tf1_optimizer_settings(self.optimizer).get("learning_rate")
            if getattr(lr_arg, "graph", None) is not graph:
                lr_arg = None
        self.lr = None if lr_arg is None else LearningRate(graph, lr_arg)
        self.learning_rate = None if self.lr is None else self.lr.tensor
        self.optimizer_variables = [self.global_step] if self.global_step is not None else []
        if self.lr is not None and self.lr.settable:
            self.optimizer_variables.append(self.lr.tensor)
        if self.optimizer is not None:
            with graph.as_default():
                self.optimizer_variables += list(self.optimizer.variables())
        self.trainable_ids = {
            id(v) for v in graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        }
        with graph.as_default(), tf.name_scope(_SCOPE):
            self._feeds = [
                tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape) for v in self.variables
            ]
            self._assigns = [
                tf.compat.v1.assign(v, p).op for v, p in zip(self.variables, self._feeds)
            ]

    def direction(self, package: Any, name: str) -> str | None:
        """``"up"``/``"down"`` for log ``name``: declared, else as Keras 3 compiles it (cached)."""
        if name in self.metric_directions:
            return self.metric_directions[name]
        if name not in self._directions:
            self._directions[name] = compiled_metric_direction(package, name)
        return self._directions[name]

    # -- reads/writes through the hook's session (never through MonitoredSession.run) --------
    def get_weights(self) -> list[np.ndarray]:
        return list(self.session.run(self.variables)) if self.variables else []

    def set_weights(self, values: Sequence[Any]) -> None:
        if len(values) != len(self.variables):
            raise ValueError(
                f"set_weights received {len(values)} arrays, the graph has "
                f"{len(self.variables)} variables under CallbackHook "
                f"({[v.op.name for v in self.variables]})."
            )
        self.session.run(self._assigns, dict(zip(self._feeds, values)))

    def get_lr(self) -> float:
        return self.lr.read(self.session)

    def set_lr(self, value: Any) -> None:
        self.lr.write(self.session, value)

    def get_step(self) -> int:
        return int(self.session.run(self.global_step))

    def save_weights(self, filepath: str) -> None:
        values = dict(zip((v.op.name for v in self.variables), self.get_weights()))
        _weights.write_weights(str(filepath), values)


_DIRECTIONS = {"max": "up", "min": "down"}


def check_metric_directions(value: Mapping[str, str] | None) -> dict[str, str]:
    """``metric_directions`` (log name -> ``"max"``/``"min"``) as Keras 3 directions."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(
            "CallbackHook: metric_directions must be a mapping of log name -> 'max' or 'min' "
            f"(e.g. {{'my_score': 'max'}}), received {value!r} of type {type(value).__name__}."
        )
    out = {}
    for name, mode in value.items():
        if not isinstance(name, str) or mode not in _DIRECTIONS:
            raise ValueError(
                f"CallbackHook: metric_directions[{name!r}] = {mode!r}: expected a log name "
                "(str) mapped to 'max' (greater is better) or 'min' (lower is better)."
            )
        out[name.removeprefix("val_")] = _DIRECTIONS[mode]
    return out


def compiled_metric_direction(package: Any, name: str) -> str | None:
    """The direction Keras 3 gives metric ``name`` in a model compiled with ``metrics=[name]``.

    As Keras 3's ``compile`` builds it (``compile_utils.get_metric``): ``"acc"``/``"accuracy"``
    become one of the accuracy metrics (all ``"up"``); any other name is looked up with
    ``keras.metrics.get`` and a plain function is wrapped in ``MeanMetricWrapper`` (which gives
    Keras's loss functions ``"down"``). ``None`` when Keras would not know the name either.
    """
    if name.lower() in ("acc", "accuracy"):
        metric: Any = package.metrics.BinaryAccuracy(name=name)
    else:
        try:
            metric = package.metrics.get(name)
        except (ValueError, TypeError):
            return None
        if not isinstance(metric, package.metrics.Metric):
            metric = package.metrics.MeanMetricWrapper(metric, name=name)
    return _tfcompat.metric_direction(metric)


def warn_name_based_directions(callbacks: Sequence[Any], directions: Mapping[str, str]) -> None:
    """Warns when a tf_keras / Keras 2 monitor callback ignores a declared direction.

    Those callbacks decide ``mode="auto"`` from the monitor's name alone (``"acc"`` in it:
    maximize), never asking the model, natively as here; a declared ``metric_directions``
    entry they contradict would be silently unused.
    """
    for cb in callbacks:
        name = str(getattr(cb, "monitor", "")).removeprefix("val_")
        op = getattr(cb, "monitor_op", None)
        # (tf_keras keeps ``mode`` only on ReduceLROnPlateau: the others are checked whatever it was)
        if name not in directions or getattr(cb, "mode", "auto") != "auto" or op is None:
            continue
        if is_keras3(_keras_package(cb)):
            continue  # Keras 3 decides from model.metrics, which holds the declaration
        decided = "up" if bool(op(1.0, 0.0)) else "down"
        if decided != directions[name]:
            mode = "max" if directions[name] == "up" else "min"
            warnings.warn(
                f"CallbackHook: {type(cb).__name__}(monitor={cb.monitor!r}) will "
                f"{'maximize' if decided == 'up' else 'minimize'} it: tf_keras / Keras 2 "
                "callbacks choose the direction from the name alone (or their mode) and ignore "
                f"metric_directions[{name!r}]. Pass mode={mode!r} to the callback.",
                UserWarning,
                stacklevel=3,
            )


def _resolve_variable(graph: tf.Graph, value: Any, arg: str) -> Any:
    if isinstance(value, str):
        name = value if ":" in value else value + ":0"
        matches = [
            v
            for v in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
            if v.name == name
        ]
        if not matches:
            raise ValueError(
                f"CallbackHook: {arg} names {value!r}, which is not a global variable of the "
                "session's graph. Pass the tf.Variable itself or one of: "
                f"{[v.op.name for v in graph.get_collection('variables')][:30]}."
            )
        return matches[0]
    if getattr(value, "graph", None) is not graph:
        raise ValueError(
            f"CallbackHook: {arg} received {value!r}, which is not a variable of the session's "
            "graph. Create it in the graph the MonitoredSession runs (or pass its name)."
        )
    return value


#: Keras 3's own message (``BaseOptimizer.learning_rate``'s setter) for a schedule's rate.
KERAS3_SCHEDULE_NOT_SETTABLE = (
    "This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
    "constructor argument, hence its learning rate is not settable. If you need the learning "
    "rate to be settable, you should instantiate the optimizer with a float `learning_rate` "
    "argument."
)


class _ValueMixin:
    """A learning-rate value as Keras callbacks read it (``float()``, ``.numpy()``, ``.dtype``,
    ``.shape == ()``) and write it (``.assign``, which ``backend.set_value`` calls).

    A NumPy scalar of the variable's dtype (its ``dtype`` and ``shape`` NumPy's: NumPy's C code
    reads them), as tf_keras's ``backend.get_value`` gives natively:
    ``ReduceLROnPlateau``'s ``old_lr * factor`` then rounds as natively (float32 arithmetic
    under NumPy 2)."""

    _state: GraphState

    def assign(self, value: Any) -> None:
        _write_lr(self._state, value, keras3=False)

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


_VALUE_CLASSES: dict = {}


def _lr_value(state: GraphState) -> Any:
    """The learning rate's value now, as a :class:`_ValueMixin` NumPy scalar of its dtype."""
    scalar = state.lr.dtype.as_numpy_dtype
    klass = _VALUE_CLASSES.get(scalar)
    if klass is None:
        # NumPy's scalar first in the bases: with a Python class before it, NumPy 2.4's
        # ``.item()`` crashes the interpreter (tf_keras's ModelCheckpoint calls it on logs).
        klass = _VALUE_CLASSES[scalar] = type("LearningRateValue", (scalar, _ValueMixin), {})
    value = klass(state.get_lr())
    value._state = state
    return value


def _write_lr(state: GraphState, value: Any, *, keras3: bool) -> None:
    """Assigns the learning rate; a tensor's (a schedule's) cannot be, as in Keras.

    Keras 3 raises its TypeError. tf_keras / Keras 2 accept the assignment to the variable their
    optimizer copies the schedule's value into, and overwrite it before the next step: natively
    it has no effect, here neither, and a warning says so.
    """
    if state.lr.settable:
        state.set_lr(value)
    elif keras3:
        raise TypeError(
            KERAS3_SCHEDULE_NOT_SETTABLE + " (CallbackHook: learning_rate= is a tensor, not a "
            "tf.Variable; pass a variable to make it settable.)"
        )
    elif not state.warned_lr_ignored:
        state.warned_lr_ignored = True
        warnings.warn(
            f"CallbackHook: a callback assigned the learning rate {float(value)!r}, but "
            f"learning_rate= is the tensor {state.lr.tensor.name!r} (a schedule), which cannot "
            "be assigned: the assignment is ignored, as tf_keras / Keras 2 overwrite it with the "
            "schedule's value before the next step. Pass a tf.Variable to make it settable.",
            UserWarning,
            stacklevel=3,
        )


class _Step(int):
    """The global step as Keras reads ``optimizer.iterations`` (``.numpy()``, ``.read_value()``)."""

    def numpy(self) -> np.ndarray:
        return np.int64(self)

    def read_value(self) -> np.ndarray:
        return np.int64(self)


def is_keras3(package: Any) -> bool:
    """Whether ``package`` (a callback's Keras package) is Keras 3."""
    return package.__name__ == "keras" and hasattr(package, "ops")


def _keras_package(callback: Any) -> Any:
    """The Keras package ``callback`` belongs to: that of its first Keras base class (a user's
    subclass of ``tf.keras.callbacks.Callback`` on tf_keras is a tf_keras callback)."""
    for klass in type(callback).__mro__:
        root = klass.__module__.split(".")[0]
        if root in ("keras", "tf_keras"):
            return importlib.import_module(root)
    return _default_package()


def _default_package() -> Any:
    """The package ``tf.keras`` is (tf_keras under ``TF_USE_LEGACY_KERAS=1``)."""
    return importlib.import_module(tf.keras.__name__.split(".")[0])


_OPTIMIZER_CLASSES: dict = {}


def _optimizer_class(package: Any) -> type:
    """A subclass of the stack's Keras ``Optimizer`` (TensorBoard logs the learning rate of those
    only), whose every attribute is answered by :class:`_OptimizerMixin`."""
    key = package.__name__
    if key not in _OPTIMIZER_CLASSES:
        base = package.optimizers.Optimizer
        schedule_base = package.optimizers.schedules.LearningRateSchedule
        schedule = type("GraphLearningRate", (_ScheduleMixin, schedule_base), {})
        _OPTIMIZER_CLASSES[key] = type(
            "GraphOptimizer",
            (_OptimizerMixin, base),
            {"_schedule_class": schedule, "_hb_keras3": is_keras3(package)},
        )
    return _OPTIMIZER_CLASSES[key]


class _ScheduleMixin:
    """``optimizer._learning_rate`` as a schedule: tf_keras's TensorBoard logs schedules only."""

    def __init__(self, state: GraphState) -> None:
        self._state = state

    def __call__(self, step: Any) -> float:
        return self._state.get_lr()

    def get_config(self) -> dict:
        return {}


def _accessing_callback(callbacks: Sequence[Any]) -> str:
    """The name of the callback whose code is running (for error messages): the model and its
    optimizer are shared by every callback, as in Keras, so the caller is found on the stack."""
    frame = inspect.currentframe()
    ids = {id(cb) for cb in callbacks}
    while frame is not None:
        owner = frame.f_locals.get("self")
        if owner is not None and id(owner) in ids:
            return type(owner).__name__
        frame = frame.f_back
    return " / ".join(dict.fromkeys(type(cb).__name__ for cb in callbacks)) or "(none)"


class _OptimizerMixin:
    __setattr__ = object.__setattr__

    def __init__(self, state: GraphState, callbacks: list) -> None:  # no Keras __init__: no vars
        object.__setattr__(self, "_hb_state", state)
        object.__setattr__(self, "_hb_callbacks", callbacks)

    @property
    def _hb_callback(self) -> str:
        return _accessing_callback(self._hb_callbacks)

    def _hb_lr_state(self, attribute: str) -> GraphState:
        state = self._hb_state
        if state.learning_rate is None:
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model.optimizer",
                attribute,
                "Pass CallbackHook(..., learning_rate=<the graph's learning-rate tf.Variable, "
                "or a tensor such as tf.compat.v1.train.exponential_decay(...)>), the rate the "
                "TF1 optimizer was built with.",
            )
        return state

    @property
    def learning_rate(self) -> Any:
        """As Keras's: a variable's value (readable and assignable); a tensor's (a schedule's)
        value is Keras 3's scalar tensor, or tf_keras's assignable value."""
        state = self._hb_lr_state("learning_rate")
        if self._hb_keras3 and not state.lr.settable:
            with _tfcompat.eager():
                return tf.constant(state.get_lr(), state.lr.dtype)
        if not state.lr.settable and not state.lr.fed and not state.warned_lr_lag:
            state.warned_lr_lag = True
            warnings.warn(
                "CallbackHook: model.optimizer.learning_rate of a schedule tensor is its value "
                "at the current global step (Keras 3's value, and what tf_keras's TensorBoard "
                "logs); a native tf_keras / Keras 2 optimizer returns the rate its last step "
                "used, one step behind. See docs/limits.md.",
                UserWarning,
                stacklevel=2,
            )
        return _lr_value(state)

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        _write_lr(self._hb_lr_state("learning_rate"), value, keras3=self._hb_keras3)

    lr = learning_rate

    @property
    def _learning_rate(self) -> Any:
        return self._schedule_class(self._hb_lr_state("_learning_rate"))

    @property
    def iterations(self) -> _Step:
        state = self._hb_state
        if state.global_step is None:
            raise UnsupportedModelAttributeError(
                self._hb_callback,
                "model.optimizer",
                "iterations",
                "The graph has no global step: create it with "
                "tf.compat.v1.train.get_or_create_global_step() before the session.",
            )
        return _Step(state.get_step())

    @property
    def name(self) -> str:
        optimizer = self._hb_state.optimizer
        return "graph_optimizer" if optimizer is None else optimizer.get_name()

    def get_config(self) -> dict:
        """``name``, the current ``learning_rate`` (when known) and, with
        ``CallbackHook(optimizer=...)``, the TF1 optimizer's other constructor arguments."""
        state = self._hb_state
        config: dict[str, Any] = {"name": self.name}
        if state.lr is not None and state.session is not None:
            config["learning_rate"] = state.get_lr()
        if state.optimizer is not None:
            for key, value in _tfcompat.tf1_optimizer_settings(state.optimizer).items():
                if isinstance(value, (bool, int, float, str)) and key not in config:
                    config[key] = value
        return config

    def __getattr__(self, attribute: str) -> Any:
        # Also reached when a property above raised (Python retries here): re-raise its error.
        if attribute.startswith("_hb_"):
            raise AttributeError(attribute)
        if attribute in ("learning_rate", "lr", "_learning_rate"):
            self._hb_lr_state(attribute)
        if attribute == "iterations":
            return type(self).iterations.fget(self)
        raise UnsupportedModelAttributeError(self._hb_callback, "model.optimizer", attribute)

    def __repr__(self) -> str:
        return f"<hookbridge GraphOptimizer {self.name!r}>"


class ModelProxy:
    """The object a callback gets from ``set_model`` under CallbackHook (see CallbackHook docs)."""

    _FIXED: ClassVar[dict[str, Any]] = {
        "layers": [],
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
        d["_hb_package"] = _keras_package(callbacks[0]) if callbacks else _default_package()
        d["_hb_counters"] = None
        d["optimizer"] = _optimizer_class(d["_hb_package"])(state, callbacks)
        warn_name_based_directions(callbacks, state.metric_directions)

    @property
    def _hb_callback(self) -> str:
        return _accessing_callback(self._hb_callbacks)

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
        """The values of the hook's ``variables`` (default: the graph's trainable variables)."""
        return self._hb_state.get_weights()

    def set_weights(self, weights: Sequence[Any]) -> None:
        """Assigns the hook's ``variables`` in the live session."""
        self._hb_state.set_weights(weights)

    @property
    def weights(self) -> list:
        return list(self._hb_state.variables)

    trainable_variables = trainable_weights = weights

    def save_weights(self, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
        """Writes the variables: ``*.h5`` (HDF5) or a TF checkpoint prefix; see load_weights."""
        self._hb_state.save_weights(str(filepath))

    def save(self, filepath: Any, overwrite: bool = True, **kwargs: Any) -> None:
        """Writes the variables like save_weights; a ``.keras`` archive cannot be made."""
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
        self._hb_state.save_weights(path)

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

    @property
    def _train_counter(self) -> Any:  # tf_keras TensorBoard's batch step
        return self._hb_counter(0)

    def _hb_count_run(self, mode: str) -> None:
        """One training (``"train"``) or evaluation run made: tf_keras's train / test function
        adds 1 to ``_train_counter`` / ``_test_counter`` after each step, before the batch
        callbacks. Only once a callback took the counters (tf_keras's TensorBoard)."""
        counters = self._hb_counters
        if counters is not None and mode != "predict":
            with _tfcompat.eager():
                counters[0 if mode == "train" else 1].assign_add(1)

    @property
    def _test_counter(self) -> Any:
        return self._hb_counter(1)

    def __getattr__(self, attribute: str) -> Any:
        if attribute in ModelProxy._FIXED:
            return ModelProxy._FIXED[attribute]
        if attribute.startswith("_hb_"):
            raise AttributeError(attribute)
        raise UnsupportedModelAttributeError(self._hb_callback, "model", attribute)

    def __repr__(self) -> str:
        return "<hookbridge graph model proxy>"
