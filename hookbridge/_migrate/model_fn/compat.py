"""What a ``model_fn`` names from ``tf.estimator`` where ``tf.estimator`` is gone (TF >= 2.16).

A ``model_fn`` compares its ``mode`` with ``tf.estimator.ModeKeys`` and returns a
``tf.estimator.EstimatorSpec`` (or, under ``TPUEstimator``, a ``TPUEstimatorSpec``). On TF 2.21
none of these exist. This module gives the same three names, reached as
``hookbridge.estimator_compat``:

* where tensorflow-estimator is installed (TF <= 2.15), they ARE TensorFlow's classes
  (``tf.estimator.ModeKeys``, ``tf.estimator.EstimatorSpec``,
  ``tf.compat.v1.estimator.tpu.TPUEstimatorSpec``): the same code runs under the Estimator and
  under :func:`hookbridge.model_fn_model`;
* elsewhere they are written here after tensorflow-estimator 2.15's ``model_fn.py`` and
  ``tpu_estimator.py``: the same fields, in the same order, the same mode strings
  (``"train"``, ``"eval"``, ``"infer"``) and the same validation (a TRAIN spec needs ``loss`` and
  ``train_op``, EVAL ``loss``, PREDICT ``predictions``; a loss is a scalar or ``[1]``, reshaped to
  a scalar; tensors come from the default graph; hooks are ``SessionRunHook``s; a PREDICT spec
  gets the default ``PredictOutput`` export output), with the same messages.

What is not reproduced (TPUs are not run here): ``TPUEstimatorSpec.host_call`` is kept as a
field but runs only through :meth:`TPUEstimatorSpec.as_estimator_spec` as ``TPUEstimator``'s
``use_tpu=False`` path runs it (``host_call`` there becomes a hook, which is refused here), and the
Tensor Tracer wrapping of the loss (off unless an environment flag turns it on) is not done.
"""

from __future__ import annotations

import collections
import importlib.util
from typing import Any

import tensorflow as tf

from hookbridge import _tfcompat

#: Whether TensorFlow's own classes are importable (tensorflow-estimator, TF <= 2.15).
NATIVE = importlib.util.find_spec("tensorflow_estimator") is not None and hasattr(tf, "estimator")

_GRAPH_MESSAGE = (
    '{0} with "{1}" must be from the default graph. '
    "Possible causes of this error include: \n\n"
    "1) {0} was created outside the context of the default graph."
    "\n\n"
    "2) The object passed through to EstimatorSpec was not created "
    'in the most recent call to "model_fn".'
)


class _ModeKeys:
    """Standard names for Estimator model modes (``tf.estimator.ModeKeys``).

    * ``TRAIN``: training/fitting mode.
    * ``EVAL``: testing/evaluation mode.
    * ``PREDICT``: prediction/inference mode.
    """

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


def _in_graph(value: Any) -> bool:
    return tf.executing_eagerly() or value.graph is tf.compat.v1.get_default_graph()


def _check_tensor(value: Any, name: str) -> Any:
    if not isinstance(value, tf.__internal__.types.Tensor):
        raise TypeError(f"{name} must be Tensor, given: {value}")
    return value


def _train_op(train_op: Any, mode: str) -> Any:
    if train_op is None:
        if mode == _ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    if not isinstance(train_op, (tf.Operation, tf.__internal__.types.Tensor)):
        raise TypeError(f"train_op must be Operation or Tensor, given: {train_op}")
    if isinstance(train_op, tf.Variable):
        train_op = train_op.op
    if not _in_graph(train_op):
        raise ValueError(_GRAPH_MESSAGE.format("train_op", train_op.name))
    return train_op


def _loss(loss: Any, mode: str) -> Any:
    if loss is None:
        if mode in (_ModeKeys.TRAIN, _ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    loss = _check_tensor(loss, "loss")
    shape = loss.get_shape()
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    if not shape.is_compatible_with(tf.TensorShape([])):
        loss = tf.reshape(loss, [])
    if not _in_graph(loss):
        raise ValueError(_GRAPH_MESSAGE.format("loss", loss.name))
    return loss


def _predictions(predictions: Any, mode: str) -> Any:
    if predictions is None:
        if mode == _ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, dict):
        predictions = {k: _check_tensor(v, f"predictions[{k}]") for k, v in predictions.items()}
        for key, value in predictions.items():
            if not _in_graph(value):
                raise ValueError(_GRAPH_MESSAGE.format("prediction values", f"{key}: {value.name}"))
        return predictions
    predictions = _check_tensor(predictions, "predictions")
    if not _in_graph(predictions):
        raise ValueError(_GRAPH_MESSAGE.format("prediction values", predictions.name))
    return predictions


def _export_outputs(export_outputs: Any, predictions: Any, mode: str) -> Any:
    if mode == _ModeKeys.PREDICT:
        return _tfcompat.default_export_outputs(export_outputs, predictions)
    return export_outputs


def _hooks(hooks: Any) -> tuple:
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, tf.compat.v1.train.SessionRunHook):
            raise TypeError(f"All hooks must be SessionRunHook instances, given: {hook}")
    return hooks


def _eval_metric_ops(eval_metric_ops: Any) -> dict:
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                "Values of eval_metric_ops must be (metric_value, update_op) "
                f"tuples, given: {value} for key: {key}"
            )
        for part in tf.nest.flatten(value):
            if not _in_graph(part):
                raise ValueError(_GRAPH_MESSAGE.format("eval_metric_ops", f"{key}: {part.name}"))
    return eval_metric_ops


def _scaffold(scaffold: Any) -> Any:
    scaffold = scaffold or tf.compat.v1.train.Scaffold()
    if not isinstance(scaffold, tf.compat.v1.train.Scaffold):
        raise TypeError(f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
    return scaffold


_SPEC_FIELDS = (
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metric_ops",
    "export_outputs",
    "training_chief_hooks",
    "training_hooks",
    "scaffold",
    "evaluation_hooks",
    "prediction_hooks",
)


class _EstimatorSpec(collections.namedtuple("EstimatorSpec", _SPEC_FIELDS)):
    """Ops and objects returned from a ``model_fn`` (``tf.estimator.EstimatorSpec``).

    TRAIN needs ``loss`` and ``train_op``, EVAL ``loss``, PREDICT ``predictions``.
    ``eval_metric_ops`` values are ``(metric_tensor, update_op)`` tuples (TF1 ``tf.compat.v1.
    metrics``): a Keras ``Metric`` object, which the 2.15 class also takes, is refused here
    (its graph-mode ``updates`` do not exist on Keras 3).

    Raises:
        ValueError: if a field the mode needs is missing, the loss is not a scalar, or a tensor
            is not from the default graph.
        TypeError: if a field has the wrong type.
    """

    __slots__ = ()

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metric_ops=None,
        export_outputs=None,
        training_chief_hooks=None,
        training_hooks=None,
        scaffold=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        train_op = _train_op(train_op, mode)
        loss = _loss(loss, mode)
        predictions = _predictions(predictions, mode)
        return super().__new__(
            cls,
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metric_ops=_eval_metric_ops(eval_metric_ops),
            export_outputs=_export_outputs(export_outputs, predictions, mode),
            training_chief_hooks=_hooks(training_chief_hooks),
            training_hooks=_hooks(training_hooks),
            scaffold=_scaffold(scaffold),
            evaluation_hooks=_hooks(evaluation_hooks),
            prediction_hooks=_hooks(prediction_hooks),
        )

    def _replace(self, **kwds):
        """A new spec with the given fields replaced (the mode cannot change)."""
        if "mode" in kwds and self.mode != kwds["mode"]:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        return _EstimatorSpec(*map(kwds.pop, self._fields, list(self)))


_TPU_FIELDS = (
    "mode",
    "predictions",
    "loss",
    "train_op",
    "eval_metrics",
    "export_outputs",
    "scaffold_fn",
    "host_call",
    "training_hooks",
    "evaluation_hooks",
    "prediction_hooks",
)


#: Why a ``host_call`` is refused (here and by ``model_fn_model`` for TF's own class).
HOST_CALL_REFUSED = (
    "TPUEstimatorSpec.host_call is run by TPUEstimator's private outfeed hook, which "
    "hookbridge does not reproduce: call the host_call function on its tensors inside "
    "the model_fn (use_tpu=False computes the same thing), or run the Estimator on "
    "TF 2.15"
)


def _check_host_call(name: str, value: Any) -> None:
    """``(fn, tensors)``, tensors a list or dict, as ``_OutfeedHostCall.validate`` asks."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise ValueError(f"{name} should be tuple of length 2. Got {value}")
    if not callable(value[0]):
        raise TypeError(f"{name}[0] should be a function.")
    if not isinstance(value[1], (tuple, list, dict)):
        raise ValueError(f"{name}[1] should be tuple or list, or dict.")


class _TPUEstimatorSpec(collections.namedtuple("TPUEstimatorSpec", _TPU_FIELDS)):
    """What a ``TPUEstimator`` ``model_fn`` returns (``tf.compat.v1.estimator.tpu.
    TPUEstimatorSpec``), run as ``use_tpu=False`` runs it: :meth:`as_estimator_spec`.

    Raises:
        ValueError: if ``eval_metrics``/``host_call`` is not a ``(fn, tensors)`` pair.
        TypeError: if a hook is not a ``SessionRunHook``.
    """

    __slots__ = ()

    def __new__(
        cls,
        mode,
        predictions=None,
        loss=None,
        train_op=None,
        eval_metrics=None,
        export_outputs=None,
        scaffold_fn=None,
        host_call=None,
        training_hooks=None,
        evaluation_hooks=None,
        prediction_hooks=None,
    ):
        for name, value in (("eval_metrics", eval_metrics), ("host_call", host_call)):
            if value is not None:
                _check_host_call(name, value)
        return super().__new__(
            cls,
            mode=mode,
            predictions=predictions,
            loss=loss,
            train_op=train_op,
            eval_metrics=eval_metrics,
            export_outputs=export_outputs,
            scaffold_fn=scaffold_fn,
            host_call=host_call,
            training_hooks=_hooks(training_hooks),
            evaluation_hooks=_hooks(evaluation_hooks),
            prediction_hooks=_hooks(prediction_hooks),
        )

    def as_estimator_spec(self) -> _EstimatorSpec:
        """The ``EstimatorSpec`` ``TPUEstimator`` runs on CPU: ``eval_metrics``'s function called
        on its tensors, ``scaffold_fn`` called.

        Raises:
            NotImplementedError: for a ``host_call`` (``TPUEstimator`` runs it through a private
                outfeed hook; write its summaries in the ``model_fn`` or a hook instead).
        """
        if self.host_call is not None:
            raise NotImplementedError(HOST_CALL_REFUSED)
        eval_metric_ops = None
        if self.eval_metrics:
            metric_fn, tensors = self.eval_metrics
            eval_metric_ops = (
                metric_fn(**tensors) if isinstance(tensors, dict) else metric_fn(*tensors)
            )
        return _EstimatorSpec(
            mode=self.mode,
            predictions=self.predictions,
            loss=self.loss,
            train_op=self.train_op,
            eval_metric_ops=eval_metric_ops,
            export_outputs=self.export_outputs,
            scaffold=self.scaffold_fn() if self.scaffold_fn else None,
            training_hooks=self.training_hooks,
            evaluation_hooks=self.evaluation_hooks,
            prediction_hooks=self.prediction_hooks,
        )


if NATIVE:
    ModeKeys = tf.estimator.ModeKeys
    EstimatorSpec = tf.estimator.EstimatorSpec
    TPUEstimatorSpec = tf.compat.v1.estimator.tpu.TPUEstimatorSpec
else:
    ModeKeys = _ModeKeys
    EstimatorSpec = _EstimatorSpec
    TPUEstimatorSpec = _TPUEstimatorSpec


def as_estimator_spec(spec: Any) -> Any:
    """The ``EstimatorSpec`` of what a ``model_fn`` returned (a ``TPUEstimatorSpec`` converted as
    ``use_tpu=False`` converts it), for the code that runs the ``model_fn``.

    Raises:
        TypeError: if ``spec`` is neither.
    """
    if isinstance(spec, (_TPUEstimatorSpec, TPUEstimatorSpec)):
        return spec.as_estimator_spec()
    if isinstance(spec, (_EstimatorSpec, EstimatorSpec)):
        return spec
    raise TypeError(
        f"a model_fn must return an EstimatorSpec or a TPUEstimatorSpec "
        f"(hookbridge.estimator_compat), got {type(spec).__name__}: {spec!r}"
    )


__all__ = ["NATIVE", "EstimatorSpec", "ModeKeys", "TPUEstimatorSpec", "as_estimator_spec"]
