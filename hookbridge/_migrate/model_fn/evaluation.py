"""``evaluate`` of ``model_fn_model``: the ``model_fn``'s EVAL mode as ``Estimator.evaluate`` ran it.

``Estimator.evaluate`` ran, per batch, the ``update_op`` of every ``eval_metric_ops`` entry and
the loss (its ``loss`` metric: ``tf.compat.v1.metrics.mean(loss)``, the mean over batches), then
read each ``metric_value`` once after the last batch, with the metric's LOCAL variables set to
their initial values at the start. A ``tf.function`` would run every op of the ``model_fn``'s
graph each step and read a ``metric_value`` before its ``update_op`` (both read the same
variables, in creation order). So the EVAL graph is made with ``tf.compat.v1.wrap_function`` and
two parts of it are run, as a session ran fetches: the loss and the ``update_op``s from the
batch, then the ``metric_value``s alone (they depend on no input), after the updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from hookbridge._migrate.model_fn.spec import quiet_batch_logs, spec_hooks

#: ``tf.estimator.ModeKeys.EVAL``.
EVAL = "eval"


class EvalStep:
    """The EVAL graph of a ``model_fn`` and its two pruned parts.

    Args:
        run: ``run(features, labels) -> (spec, extras)``: the ``model_fn`` called in EVAL mode
            (with the model's variables) and the tensors its ``evaluation_hooks`` name, by log
            key (``spec.hook_fetches``), fetched with each batch's updates as the hooks' fetches
            ran in the Estimator's ``session.run(eval_ops)``.
        features: the features' ``TensorSpec`` structure.
        labels: the labels' ``TensorSpec`` structure.
        owner: how errors name the model.
    """

    def __init__(self, run: Callable[[Any, Any], Any], features: Any, labels: Any, owner: str):
        made: dict[str, Any] = {}

        def body(*flat: Any) -> None:
            n = len(tf.nest.flatten(features))
            f = tf.nest.pack_sequence_as(features, list(flat[:n]))
            y = tf.nest.pack_sequence_as(labels, list(flat[n:]))
            spec, made["extras"] = run(f, y)
            made["spec"] = spec
            metrics = dict(getattr(spec, "eval_metric_ops", None) or {})
            made["update"] = tf.group([update for _, update in metrics.values()])

        signature = [*tf.nest.flatten(features), *tf.nest.flatten(labels)]
        wrapped = tf.compat.v1.wrap_function(body, signature)
        spec = self.spec = made["spec"]
        metrics = dict(getattr(spec, "eval_metric_ops", None) or {})
        if "loss" in metrics:
            raise ValueError(
                f"{owner}: eval_metric_ops has a 'loss' entry; the Estimator's evaluate reports "
                "the mean of the EstimatorSpec's loss under that key. Rename the metric."
            )
        self.keys = sorted(metrics)
        self._extra_keys = sorted(made["extras"])
        extras = [made["extras"][key] for key in self._extra_keys]
        self._update = wrapped.prune(
            feeds=list(wrapped.inputs), fetches=[spec.loss, made["update"], *extras]
        )
        values = [metrics[key][0] for key in self.keys]
        for key, value in zip(self.keys, values):
            if not value.shape.is_compatible_with([]):
                raise ValueError(
                    f"{owner}: eval_metric_ops[{key!r}] has a value of shape {value.shape}; "
                    "Keras metrics of evaluate are scalars."
                )
        try:
            self._values = wrapped.prune(feeds=[], fetches=values) if values else None
        except (ValueError, tf.errors.InvalidArgumentError) as error:
            raise ValueError(
                f"{owner}: a metric_value of eval_metric_ops ({', '.join(self.keys)}) depends on "
                "the batch; the Estimator read it once after the last batch, which under "
                f"evaluate needs it to depend on the metric's variables only ({error})."
            ) from error

    def update(self, features: Any, labels: Any) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """Runs the batch's ``update_op``s; returns its loss and the hooks' tensors by key."""
        loss, _, *extras = self._update(*tf.nest.flatten(features), *tf.nest.flatten(labels))
        return loss, dict(zip(self._extra_keys, extras))

    def values(self) -> dict[str, tf.Tensor]:
        """Every ``metric_value`` as the variables hold it now, by key."""
        if self._values is None:
            return {}
        return {key: tf.cast(v, tf.float32) for key, v in zip(self.keys, self._values())}


def evaluate(model: Any, run: Callable[[Any], Any], callbacks: Any) -> Any:
    """``model.evaluate`` as ``Estimator.evaluate``: per batch the ``model_fn``'s EVAL-mode
    ``eval_metric_ops`` updates and loss; the logs are each ``metric_value`` after the batch (the
    last batch's: the Estimator's result) and ``loss``, the mean of the batches' losses; the
    LOCAL variables of EVAL mode start from their initial values; the spec's
    ``evaluation_hooks`` run through a ``HookCallback`` after ``callbacks``.

    Args:
        model: the ``ModelFnModel``.
        run: Keras ``evaluate`` with the given callbacks.
        callbacks: the caller's callbacks (or None).
    """
    if model._mfn_eval is None:
        if not model._mfn_labels:
            raise ValueError(
                f"{model._mfn_owner}: built without labels, so it cannot evaluate; pass "
                "labels= to model_fn_model."
            )
        step = EvalStep(
            lambda f, y: model._mfn_run(f, y, EVAL),
            model._mfn_features,
            model._mfn_labels_spec,
            model._mfn_owner,
        )
        object.__setattr__(model, "_mfn_eval", step)
        model._mfn_has_hooks[EVAL] = bool(spec_hooks(step.spec, EVAL))
    callbacks = model._mfn_hook_callback(EVAL, callbacks)
    with quiet_batch_logs(model._mfn_hook_keys.get(EVAL, [])):
        return run(callbacks)


def test_step(model: Any, data: Any) -> dict:
    """``model.test_step``: the batch's EVAL updates and loss, the metric values after them."""
    features, labels, sample_weight = tf.keras.utils.unpack_x_y_sample_weight(data)
    if sample_weight is not None:
        raise ValueError(
            f"{model._mfn_owner}: evaluate got sample weights; the model_fn weighs its own "
            "loss and metrics (give the weights as a feature)."
        )
    loss, extras = model._mfn_eval.update(features, labels)
    model._mfn_loss.update_state(loss)
    return {"loss": model._mfn_loss.result(), **model._mfn_eval.values(), **extras}
