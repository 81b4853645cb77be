"""``model_fn_model``: an Estimator's ``model_fn`` as a Keras model that trains with its own step.

``model(features)`` runs the ``model_fn`` in PREDICT mode (its ``predictions``); ``fit`` runs it in
TRAIN mode and runs its ``train_op`` (its TF1 optimizer, clipping, ``UPDATE_OPS``), with its loss
as ``fit``'s loss and its global step as the model's ``optimizer.iterations``. Its variables are
Keras weights under their TF1 names (``VariableStore``), slots and ``beta1_power`` included, so
``restore_checkpoint(model, model_dir)`` loads an Estimator's checkpoint by name with no map.
``fit`` runs the spec's ``training_hooks`` through a ``HookCallback`` (``model_fn/spec.py``); the
``model_fn``'s LOCAL variables (streaming metrics) are state outside the checkpoint, reset at
each ``fit`` as the Estimator's ``local_init_op`` at each ``train``; ``evaluate`` runs the EVAL
mode's ``eval_metric_ops`` and ``evaluation_hooks`` as ``Estimator.evaluate`` did
(``model_fn/evaluation.py``); ``predict`` runs the PREDICT spec's ``prediction_hooks`` as
``Estimator.predict`` did (``model_fn/prediction.py``); ``export_saved_model`` writes the spec's ``export_outputs`` as
``Estimator.export_saved_model`` did (``model_fn/export.py``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat
from hookbridge._hook_callback.graph import set_tf1_names
from hookbridge._migrate.model_fn import evaluation, export, training_hooks
from hookbridge._migrate.model_fn.host_call import HostCall
from hookbridge._migrate.model_fn.notices import Notices
from hookbridge._migrate.model_fn.prediction import hook_arrays, hooked_predict, with_hook_values
from hookbridge._migrate.model_fn.spec import (
    call_model_fn,
    hook_callback,
    hook_fetches,
    op_names,
    quiet_batch_logs,
    refuse_host_call,
    refuse_scaffold,
    spec_hooks,
)
from hookbridge._migrate.model_fn.summaries import SummaryWrites
from hookbridge._migrate.model_fn.unrun import refuse_unrun_writes, writes_only
from hookbridge._migrate.model_fn.variables import VariableStore, keras_weight

keras = tf.keras
KERAS3 = str(getattr(keras, "__version__", "2")).startswith("3")

#: ``tf.estimator.ModeKeys`` values (strings on every TF version).
TRAIN, EVAL, PREDICT = "train", "eval", "infer"


def model_fn_model(
    model_fn: Callable[..., Any],
    *,
    params: dict | None = None,
    config: Any = None,
    features: Any,
    labels: Any = None,
) -> Any:
    """An Estimator's ``model_fn`` as a Keras model whose variables are the ``model_fn``'s own.

    The model is built and compiled: ``model(features)`` returns the PREDICT-mode
    ``predictions``; ``model.fit(dataset of (features, labels))`` runs the ``model_fn`` in TRAIN
    mode and its own ``train_op`` each step (no loss or optimizer to ``compile``; ``compile()``
    with other arguments is allowed), ``fit``'s ``loss`` being the ``EstimatorSpec.loss`` and the
    step the ``model_fn``'s global step (``model.optimizer.iterations``, what ``HookCallback``'s
    hooks see). Every variable the ``model_fn`` makes, in PREDICT and TRAIN mode (the optimizer's
    slots ``dense/kernel/Adam`` and ``beta1_power`` too), is a weight of the model that answers
    to its TF1 name: ``restore_checkpoint(model, model_dir)`` loads an Estimator's checkpoint
    with no map, and ``CheckpointSaverHook`` under ``HookCallback`` writes the Estimator's names.

    Args:
        model_fn: ``model_fn(features, labels, mode, params, config)`` (the arguments it names)
            returning an ``EstimatorSpec`` (or ``TPUEstimatorSpec``, run as ``use_tpu=False``).
        params: the Estimator's ``params``.
        config: the Estimator's ``config`` (a ``RunConfig``), passed as it is.
        features: what the Estimator's ``input_fn`` yields as features: an example batch
            (``tf.SparseTensor`` / ``tf.RaggedTensor`` values too) or a structure of type specs
            (``tf.TensorSpec``, ``tf.SparseTensorSpec``; an example's batch dimension is taken
            as unknown).
        labels: the same for labels; without them the model can predict but not ``fit``.

    Returns:
        A compiled Keras model.

    Raises:
        ValueError: the ``model_fn`` returns no ``train_op`` / ``loss`` in TRAIN mode, or makes
            a variable after the model was built.
    """
    model = ModelFnModel(model_fn, params=params, config=config)
    model._mfn_build(_spec_of(features), None if labels is None else _spec_of(labels))
    return model


def _spec_of(structure: Any) -> Any:
    def batchless(shape: tf.TensorShape) -> list:
        return [None, *shape[1:]] if shape.rank else shape

    def spec(x: Any) -> tf.TypeSpec:
        # An input_fn's parse_example yields SparseTensors (and RaggedTensors): their own specs.
        if isinstance(x, tf.TypeSpec):
            return x
        if isinstance(x, tf.SparseTensor):
            return tf.SparseTensorSpec(batchless(x.shape), x.dtype)
        if isinstance(x, tf.RaggedTensor):
            return tf.RaggedTensorSpec(
                batchless(x.shape), x.dtype, x.ragged_rank, x.row_splits.dtype
            )
        t = tf.convert_to_tensor(x)
        return tf.TensorSpec(batchless(t.shape), t.dtype)

    return tf.nest.map_structure(spec, structure)


class ModelFnModel(keras.Model):
    """The Keras model ``model_fn_model`` returns (see there)."""

    def __init__(self, model_fn: Callable[..., Any], *, params: Any, config: Any) -> None:
        # dtype float32: under a mixed policy Keras would cast the features to float16 before
        # the model_fn; the Estimator fed the model_fn what the input_fn gave (docs/limits.md).
        super().__init__(name="model_fn_model", dtype="float32")
        self._mfn = (model_fn, params, config)
        owner = f"model_fn_model({getattr(model_fn, '__name__', model_fn)!r})"
        self._mfn_owner = owner
        self._mfn_store = VariableStore(functools.partial(keras_weight, self), owner)
        self._mfn_labels = False
        object.__setattr__(self, "_mfn_notices", Notices(owner))  # not tracked by Keras
        object.__setattr__(self, "_mfn_summaries", SummaryWrites())
        object.__setattr__(self, "_mfn_train_summaries", [])  # of the last TRAIN trace
        self._mfn_predict: Any = None
        object.__setattr__(self, "_mfn_eval", None)  # EvalStep, made at the first evaluate
        object.__setattr__(self, "_mfn_host", HostCall(owner))  # TRAIN host_call (host_call.py)
        # predict runs prediction_hooks; why they cannot run; the hooked tensors of call()
        object.__setattr__(self, "_mfn_hooking", False)
        object.__setattr__(self, "_mfn_predict_refused", None)
        object.__setattr__(self, "_mfn_hook_values", {})
        object.__setattr__(self, "_mfn_hook_arrays", {})  # non-scalar hooked: (dtype, shape)
        object.__setattr__(self, "_mfn_caller_hooks", [])  # a caller's HookCallback's, predict
        object.__setattr__(self, "_mfn_hooked_predicts", {})  # by log keys (prediction.py)
        #: Per mode, the log keys of the tensors its spec's hooks name (model_fn/spec.py).
        self._mfn_hook_keys: dict[str, list[str]] = {}
        object.__setattr__(self, "_mfn_op_names", {})  # per mode: the model_fn's (name, type)s
        # Not an attribute Keras tracks: tf_keras would count its total/count among the weights.
        object.__setattr__(self, "_mfn_loss", keras.metrics.Mean(name="loss"))

    # ---- building ----
    def _mfn_build(self, features: Any, labels: Any) -> None:
        self.compile()
        self._mfn_features = features
        #: Per mode, whether its spec has hooks (EVAL: known at the first evaluate).
        self._mfn_has_hooks: dict[str, bool] = {}
        tf.function(lambda f: self._mfn_run(f, None, PREDICT)[0].predictions).get_concrete_function(
            features
        )
        self._mfn_labels_spec = labels
        if labels is not None:
            self._mfn_labels = True

            def train(f: Any, y: Any) -> Any:
                return self._mfn_train_graph(f, y)

            tf.function(train).get_concrete_function(features, labels)
        self._mfn_store.frozen = "the variables of its predict and train modes were made"
        names = self._mfn_store.names()
        set_tf1_names(self, {i: names[id(w)] for i, w in enumerate(self.weights) if id(w) in names})
        self.built = True

    def _mfn_step(self) -> tf.Variable:
        optimizer = getattr(self, "optimizer", None)
        if optimizer is None:
            raise ValueError(f"{self._mfn_owner}: compile() the model before running it.")
        step = optimizer.iterations
        return _tfcompat.keras3_tf_variable(step) if KERAS3 else step

    @tf.autograph.experimental.do_not_convert
    def _mfn_run(self, features: Any, labels: Any, mode: str) -> tuple[Any, dict[str, Any]]:
        """The spec of one ``model_fn`` call and the tensors its hooks name, by log key."""
        model_fn, params, config = self._mfn
        with self._mfn_store.scope(self._mfn_step, mode) as graph:
            first = len(graph.get_operations())
            if mode == TRAIN:  # the hooks' reads after the train_op (host_call.py)
                self._mfn_host.traced = (graph, first)
            host: list = []
            spec = call_model_fn(model_fn, features, labels, mode, params, config, host)
            if host:  # TPUEstimatorSpec.host_call: the TRAIN step returns its tensors
                refuse_host_call(self._mfn_owner, mode)
                self._mfn_host.found = (host[0], graph, first)
            refuse_scaffold(self._mfn_owner, mode, getattr(spec, "scaffold", None))
            hooks = spec_hooks(spec, mode)
            # the first trace of a mode names the log keys (hook_fetches: by op position)
            made = (first, self._mfn_op_names.setdefault(mode, op_names(graph, first)))
            try:
                extras = hook_fetches(self._mfn_owner, mode, hooks, graph, made)
            except ValueError as error:
                if mode != PREDICT:
                    raise
                # said when predict would run them (model(x) and fit need no prediction hook)
                object.__setattr__(self, "_mfn_predict_refused", error)
                extras = {}
            if mode == PREDICT:
                self._mfn_has_hooks[PREDICT] = bool(hooks)
                extras.update(
                    hook_fetches(self._mfn_owner, mode, self._mfn_caller_hooks, graph, made)
                )
                self._mfn_hook_arrays.update(hook_arrays(extras))
            fetches = [spec.predictions] if mode == PREDICT else [spec.loss, spec.train_op]
            # LOCAL variables (streaming metrics) no checkpoint holds and no loss reads: their
            # updates run every step here, where the Estimator ran them when fetched (limits.md).
            local = _tfcompat.captured_handles(graph, self._mfn_store.locals(mode))
            ops = graph.get_operations()[first:]
            new_ops = [op for op in ops if not writes_only(op, local)]
            if mode == TRAIN and len(new_ops) < len(ops):
                locals_ = self._mfn_store.locals(TRAIN)
                self._mfn_notices.local_updates(sorted(v.name.split(":")[0] for v in locals_))
            if mode == TRAIN:
                summaries = graph.get_collection(tf.compat.v1.GraphKeys.SUMMARIES)
                object.__setattr__(self, "_mfn_train_summaries", list(summaries))
            if mode != EVAL:  # evaluate runs only what its fetches need (evaluation.py)
                refuse_unrun_writes(self._mfn_owner, mode, new_ops, [*fetches, *extras.values()])
        self._mfn_hook_keys.setdefault(mode, sorted(extras))
        return spec, extras

    def _mfn_spec_hooks(self, mode: str) -> tuple[list, list]:
        """Fresh hooks of the spec in ``mode`` (a new ``model_fn`` call, as each
        ``Estimator.train`` call made): (chief-only hooks, hooks)."""
        found: dict[str, Any] = {}

        def trace(f: Any, y: Any) -> Any:
            spec, _ = self._mfn_run(f, y, mode)
            found["spec"] = spec
            return tf.constant(0.0)

        labels = self._mfn_labels_spec if mode != PREDICT else None
        tf.function(trace).get_concrete_function(self._mfn_features, labels)
        spec = found["spec"]
        chief = list(getattr(spec, "training_chief_hooks", None) or ()) if mode == TRAIN else []
        return chief, [hook for hook in spec_hooks(spec, mode) if hook not in chief]

    def _mfn_hook_callback(self, mode: str, callbacks: Any) -> list:
        """``callbacks`` and, after them, a ``HookCallback`` running the spec's hooks of
        ``mode`` (as the Estimator ran them after the caller's hooks), if it has any; the
        LOCAL variables of ``mode`` start from their initial values (``local_init_op``)."""
        self._mfn_store.reset_locals(mode)
        if not self._mfn_has_hooks.get(mode):
            return callbacks
        keys = self._mfn_hook_keys.get(mode, [])
        if mode == EVAL:  # evaluate's logs also hold the eval_metric_ops values
            keys = [*keys, *self._mfn_eval.keys]
        return hook_callback(lambda: self._mfn_spec_hooks(mode), keys, callbacks)

    def fit(self, *args: Any, callbacks: Any = None, **kwargs: Any) -> Any:
        """Keras ``fit``, running the spec's ``training_hooks`` / ``training_chief_hooks`` in the
        caller's ``HookCallback`` where ``Estimator.train`` ran them (``model_fn/
        training_hooks.py``; in one of their own after ``callbacks`` when there is none), and
        the ``model_fn``'s LOCAL variables (streaming metrics) from their initial values, as
        ``Estimator.train`` did."""
        keys = self._mfn_hook_keys.get(TRAIN, [])
        theirs = training_hooks.user_hook_callbacks(callbacks)
        join: Any = contextlib.nullcontext()
        if len(theirs) == 1:  # one session, as train(); summaries if it has estimator_hooks
            self._mfn_store.reset_locals(TRAIN)
            hooks = self._mfn_spec_hooks(TRAIN) if self._mfn_has_hooks.get(TRAIN) else ([], [])
            join = training_hooks.joined(theirs[0], lambda: hooks, keys, self._mfn_summaries)
        else:
            if self._mfn_has_hooks.get(TRAIN):
                self._mfn_notices.two_sessions(theirs)
            callbacks = self._mfn_hook_callback(TRAIN, callbacks)
        # The step returns the hooks' tensors as batch values: exact, not a running value.
        try:
            with join, quiet_batch_logs(keys), self._mfn_host.running(self):
                return super().fit(*args, callbacks=callbacks, **kwargs)
        finally:
            if not self._mfn_summaries.stop():
                self._mfn_notices.summaries(self._mfn_train_summaries)

    def export_saved_model(
        self, export_dir_base: str, serving_input_receiver_fn: Callable[[], Any]
    ) -> str:
        """Writes the SavedModel ``Estimator.export_saved_model`` wrote: the ``model_fn`` in
        PREDICT mode on ``serving_input_receiver_fn()``'s features, one signature per entry of
        the spec's ``export_outputs`` (``predictions`` as the default ``PredictOutput`` when
        there are none) with TensorFlow's signature keys and input/output names, the model's
        current weights; in ``export_dir_base/<timestamp>``, written beside and renamed (complete
        or absent).

        Returns:
            The export directory (a ``str``; the Estimator returned ``bytes``).
        """
        return export.export_saved_model(
            lambda features: self._mfn_run(features, None, PREDICT)[0],
            [*self._mfn_store.tf_variables(), self._mfn_step()],
            export_dir_base,
            serving_input_receiver_fn,
            self._mfn_owner,
        )

    # ---- Keras ----
    def compile(self, optimizer: Any = None, loss: Any = None, **kwargs: Any) -> None:
        """Compiles with no loss and no optimizer of Keras's: the ``model_fn``'s own train.

        Raises:
            ValueError: ``optimizer`` or ``loss`` is given (the ``model_fn``'s ``train_op``
                and loss are what ``fit`` runs; another would train something else).
        """
        if optimizer is not None or loss is not None:
            raise ValueError(
                f"{self._mfn_owner}.compile: fit runs the model_fn's own train_op and loss; "
                "give compile() no optimizer and no loss (change them in the model_fn)."
            )
        # The optimizer only counts steps: its `iterations` is the model_fn's global step.
        super().compile(optimizer=keras.optimizers.SGD(0.0), **kwargs)

    @property
    def metrics(self) -> list:
        return [self._mfn_loss]

    def call(self, inputs: Any, training: Any = None) -> Any:
        if tf.executing_eagerly():
            if self._mfn_predict is None:
                self._mfn_predict = tf.function(
                    lambda f: self._mfn_run(f, None, PREDICT)[0].predictions,
                    reduce_retracing=True,
                )
            return self._mfn_predict(inputs)
        spec, extras = self._mfn_run(inputs, None, PREDICT)
        object.__setattr__(self, "_mfn_hook_values", extras)
        return spec.predictions

    def predict_step(self, data: Any) -> Any:
        return with_hook_values(self, super().predict_step(data))  # call() set the hook values

    def _mfn_train_graph(self, features: Any, labels: Any) -> tuple[tf.Tensor, dict[str, Any]]:
        before = self._mfn_step().read_value()  # the step the Estimator's hooks read in the run
        pre = self._mfn_host.pre_reads()  # what host_call reads as the Estimator's run read it
        spec, extras = self._mfn_run(features, labels, TRAIN)
        variables = {**self._mfn_store.by_name(), "global_step": self._mfn_step()}
        extras = self._mfn_host.hook_tensors(extras, pre, variables)
        extras = {**extras, **self._mfn_host.outputs(pre, variables)}
        self._mfn_has_hooks[TRAIN] = bool(spec_hooks(spec, TRAIN))
        if getattr(spec, "loss", None) is None or getattr(spec, "train_op", None) is None:
            raise ValueError(
                f"{self._mfn_owner}: the model_fn returned no "
                f"{'loss' if getattr(spec, 'loss', None) is None else 'train_op'} in TRAIN mode; "
                "fit runs the model_fn's own train_op on its loss."
            )
        runs = [spec.train_op]
        if self._mfn_train_summaries:  # written on the SummarySaverHook's steps only
            runs.append(self._mfn_summaries.op(self._mfn_train_summaries, before))
        with tf.control_dependencies(runs):
            return tf.identity(spec.loss), extras

    def train_step(self, data: Any) -> dict:
        features, labels, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        if sample_weight is not None:
            raise ValueError(
                f"{self._mfn_owner}: fit got sample weights; the model_fn weighs its own loss "
                "(give the weights as a feature, as the Estimator's input_fn did)."
            )
        if not self._mfn_labels:
            raise ValueError(
                f"{self._mfn_owner}: built without labels, so it cannot fit; pass labels= "
                "(an example batch or TensorSpecs) to model_fn_model."
            )
        loss, extras = self._mfn_train_graph(features, labels)
        self._mfn_loss.update_state(loss)
        return {"loss": self._mfn_loss.result(), **extras}

    def make_train_function(self, force: bool = False) -> Any:
        super().make_train_function(force)
        self.train_function = self._mfn_host.wrap(self.train_function)  # host_call.py
        return self.train_function

    def predict(self, *args: Any, callbacks: Any = None, **kwargs: Any) -> Any:
        """Keras ``predict``: the PREDICT spec's ``predictions``, its ``prediction_hooks`` run
        through a ``HookCallback`` after ``callbacks`` on each batch's own tensors, as
        ``Estimator.predict`` ran them (``model_fn/prediction.py``, which says what it raises)."""
        return hooked_predict(
            self,
            lambda given: super(ModelFnModel, self).predict(*args, callbacks=given, **kwargs),
            callbacks,
        )

    def evaluate(self, *args: Any, callbacks: Any = None, **kwargs: Any) -> Any:
        """Keras ``evaluate`` as ``Estimator.evaluate`` (``model_fn/evaluation.py``)."""
        return evaluation.evaluate(
            self,
            lambda given: super(ModelFnModel, self).evaluate(*args, callbacks=given, **kwargs),
            callbacks,
        )

    def test_step(self, data: Any) -> dict:
        return evaluation.test_step(self, data)
