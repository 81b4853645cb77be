"""Keras optimizers running the training kernels a canned Estimator's optimizer runs.

A V1 canned Estimator trains with ``tf.compat.v1.train`` optimizers, a V2 one with
``tf.keras.optimizers.legacy`` optimizers (Keras 2). Both update through TensorFlow's fused
training ops (``ResourceApplyAdagrad``, ``ResourceSparseApplyFtrl``, ...) after summing the rows
of a sparse gradient that share an index (``unique`` + ``unsorted_segment_sum``: TF1's
``Optimizer._resource_apply_sparse_duplicate_indices``, legacy Keras's the same). Keras 3's own
optimizers compute the update with other ops, which differ in float and, for ``Adagrad`` on an
``IndexedSlices`` with duplicate ids, in value (it accumulates the sum of the squared rows, not
the square of their sum). The classes here are Keras optimizers (Keras 3, and the Keras 2.11+
``tf.keras.optimizers.Optimizer`` of TF 2.15 / tf_keras) whose ``update_step`` runs those very
ops, so a twin trained in ``fit`` takes the Estimator's steps bit for bit.

``flavor`` picks the optimizer continued: ``"tf1"`` (``tf.compat.v1.train``: Adagrad without
epsilon, ``ResourceApplyAdagrad``; Ftrl's ``beta`` folded into l2 in float64 as TF1's
``_prepare`` does) or ``"keras"`` (``optimizers.legacy``: ``ResourceApplyAdagradV2`` with
``epsilon``; ``beta`` folded in float32). Slots are kept in ``_accumulators`` / ``_linears`` (the
lists Keras's own Adagrad/Ftrl keep), so ``restore_checkpoint`` and ``estimator_hooks`` map them
to ``<var>/Adagrad``, ``<var>/part_0/Ftrl``, ``training/Adagrad/<var>/accumulator``, ...
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

#: The defaults of each class, per flavor (TF1 ``tf.compat.v1.train`` / legacy Keras).
DEFAULTS = {
    ("Adagrad", "tf1"): {"initial_accumulator_value": 0.1},
    ("Adagrad", "keras"): {
        "learning_rate": 0.001,
        "initial_accumulator_value": 0.1,
        "epsilon": 1e-7,
    },
    ("Ftrl", "tf1"): {
        "learning_rate_power": -0.5,
        "initial_accumulator_value": 0.1,
        "l1_regularization_strength": 0.0,
        "l2_regularization_strength": 0.0,
        "l2_shrinkage_regularization_strength": 0.0,
        "beta": 0.0,
    },
    ("Ftrl", "keras"): {
        "learning_rate": 0.001,
        "learning_rate_power": -0.5,
        "initial_accumulator_value": 0.1,
        "l1_regularization_strength": 0.0,
        "l2_regularization_strength": 0.0,
        "l2_shrinkage_regularization_strength": 0.0,
        "beta": 0.0,
    },
    ("SGD", "tf1"): {},
    ("SGD", "keras"): {"learning_rate": 0.01},
}


def deduplicate(values: Any, indices: Any) -> tuple[Any, Any]:
    """Sums the rows of a sparse gradient sharing an index, as TF1's and legacy Keras's
    ``_deduplicate_indexed_slices`` do (same ops, same order: the same float sums)."""
    import tensorflow as tf

    unique, positions = tf.unique(indices)
    return tf.math.unsorted_segment_sum(values, positions, tf.shape(unique)[0]), unique


def _handle(variable: Any) -> Any:
    """The resource handle of a ``tf.Variable`` or of a Keras 3 variable (its ``.value``)."""
    import tensorflow as tf

    return (variable if isinstance(variable, tf.Variable) else variable.value).handle


def _adagrad(opt: Any, var: Any, lr: Any, grad: Any, indices: Any) -> Any:
    import tensorflow as tf

    raw = tf.raw_ops
    acc = _handle(opt.slot(var, "accumulator"))
    if opt.flavor == "tf1":  # var -= lr * g * rsqrt(acc)
        if indices is None:
            return raw.ResourceApplyAdagrad(var=_handle(var), accum=acc, lr=lr, grad=grad)
        return raw.ResourceSparseApplyAdagrad(
            var=_handle(var), accum=acc, lr=lr, grad=grad, indices=indices
        )
    eps = tf.cast(opt.epsilon, grad.dtype)  # legacy Keras: var -= lr * g / (sqrt(acc) + eps)
    if indices is None:
        return raw.ResourceApplyAdagradV2(
            var=_handle(var), accum=acc, lr=lr, epsilon=eps, grad=grad
        )
    return raw.ResourceSparseApplyAdagradV2(
        var=_handle(var), accum=acc, lr=lr, epsilon=eps, grad=grad, indices=indices
    )


def _ftrl(opt: Any, var: Any, lr: Any, grad: Any, indices: Any) -> Any:
    import tensorflow as tf

    dtype = grad.dtype
    if opt.flavor == "tf1" and isinstance(opt.lr_value, float):
        # TF1's _prepare folds beta into l2 in Python (float64), then casts.
        l2 = tf.constant(
            opt.l2_regularization_strength + opt.beta / (2.0 * max(opt.lr_value, 1e-36)), dtype
        )
    else:  # legacy Keras: in float32, from the learning rate tensor
        l2 = tf.cast(opt.l2_regularization_strength, dtype) + tf.cast(opt.beta, dtype) / (2.0 * lr)
    args = {
        "var": _handle(var),
        "accum": _handle(opt.slot(var, "accumulator")),
        "linear": _handle(opt.slot(var, "linear")),
        "grad": grad,
        "lr": lr,
        "l1": tf.cast(opt.l1_regularization_strength, dtype),
        "l2": l2,
        "lr_power": tf.cast(opt.learning_rate_power, dtype),
    }
    shrinkage = opt.l2_shrinkage_regularization_strength > 0.0
    if shrinkage:
        args["l2_shrinkage"] = tf.cast(opt.l2_shrinkage_regularization_strength, dtype)
    if indices is not None:
        args["indices"] = indices
    name = ("ResourceSparseApplyFtrl" if indices is not None else "ResourceApplyFtrl") + (
        "V2" if shrinkage else ""
    )
    return getattr(tf.raw_ops, name)(**args)


def _sgd(opt: Any, var: Any, lr: Any, grad: Any, indices: Any) -> Any:
    import tensorflow as tf

    if indices is None:
        return tf.raw_ops.ResourceApplyGradientDescent(var=_handle(var), alpha=lr, delta=grad)
    # TF1 and legacy Keras scatter-add -lr * g without summing duplicates first.
    return tf.raw_ops.ResourceScatterAdd(resource=_handle(var), indices=indices, updates=-grad * lr)


_KERNELS = {
    "Adagrad": (_adagrad, ("accumulator",)),
    "Ftrl": (_ftrl, ("accumulator", "linear")),
    "SGD": (_sgd, ()),
}
#: The family of checkpoint state each class continues (``optimizer_state``'s names).
FAMILY = {"Adagrad": "adagrad", "Ftrl": "ftrl", "SGD": "momentum"}
_SLOT_LISTS = {"accumulator": "_accumulators", "linear": "_linears"}


@functools.cache
def classes(keras: Any) -> dict[str, type]:
    """``{"Adagrad": class, "Ftrl": class, "SGD": class}`` for this ``keras`` module (Keras 3,
    or the Keras 2.11+ ``tf.keras`` of TF 2.15 / tf_keras)."""
    import tensorflow as tf

    from hookbridge import _tfcompat

    keras3 = str(getattr(keras, "__version__", "2")).startswith("3")

    class EstimatorOptimizer(keras.optimizers.Optimizer):
        """A Keras optimizer running the Estimator's training kernel (see the module)."""

        kind = ""

        def __init__(
            self,
            learning_rate: Any = None,
            flavor: str = "tf1",
            name: str | None = None,
            **settings: Any,
        ) -> None:
            defaults = DEFAULTS[(self.kind, flavor)]
            unknown = sorted(set(settings) - set(defaults))
            if unknown or flavor not in ("tf1", "keras"):
                raise ValueError(
                    f"{type(self).__name__}: unknown settings {unknown} (flavor {flavor!r}); it "
                    f"takes learning_rate, flavor ('tf1' or 'keras') and {sorted(defaults)}."
                )
            if learning_rate is None:
                learning_rate = defaults.get("learning_rate")
            if learning_rate is None:
                raise ValueError(f"{type(self).__name__}: the TF1 optimizer needs learning_rate.")
            name = name or self.kind
            if keras3:
                super().__init__(learning_rate=learning_rate, name=name)
            else:  # Keras 2.11+: XLA off (the sparse ops and tf.unique have no fixed shapes);
                # no weight decay: the distributed base's default 0 would add `var -= var * 0 *
                # lr` per variable a step (Grappler drops the update, not its two variable reads)
                super().__init__(name=name, jit_compile=False, weight_decay=None)
                _tfcompat.keras2_optimizer_set_learning_rate(self, learning_rate)
            self.flavor = flavor
            self.lr_value = (
                float(learning_rate) if isinstance(learning_rate, (int, float)) else None
            )
            for key, value in defaults.items():
                if key != "learning_rate":
                    setattr(self, key, float(settings.get(key, value)))

        def build(self, var_list: list) -> None:
            if getattr(self, "_hb_built", False):
                return
            super().build(var_list)
            for slot in _KERNELS[self.kind][1]:
                init = self.initial_accumulator_value if slot == "accumulator" else 0.0
                setattr(
                    self,
                    _SLOT_LISTS[slot],
                    [
                        _tfcompat.keras_optimizer_slot_variable(self, v, slot, init)
                        for v in var_list
                    ],
                )
            self._hb_built = True
            _tfcompat.mark_keras_optimizer_built(self)

        def slot(self, variable: Any, slot: str) -> Any:
            return getattr(self, _SLOT_LISTS[slot])[
                _tfcompat.keras_optimizer_variable_index(self, variable)
            ]

        def apply_gradients(self, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            grads_and_vars = list(grads_and_vars)
            grads = [grad for grad, _ in grads_and_vars]
            return self._outermost(super().apply_gradients, grads, grads_and_vars, *args, **kwargs)

        if keras3:  # Keras 3's own train_step calls apply (apply_gradients calls it too)

            def apply(self, grads: Any, *args: Any, **kwargs: Any) -> Any:
                return self._outermost(super().apply, grads, grads, *args, **kwargs)

        def _outermost(self, method: Any, grads: Any, *args: Any, **kwargs: Any) -> Any:
            """``method(*args, **kwargs)``, the optimizer's step, as TF1's optimizer takes it:

            * the learning rate read once for all its variables, as TF1's ``_prepare``
              converts it once (Keras reads it per variable: one ``ReadVariableOp`` each a
              step); the same value, nothing assigns it between;
            * in a traced step, the step counted only when it is taken: every op of the step
              (the updates, and Keras's ``iterations.assign_add(1)``) waits for the
              gradients. Keras's increment depends on nothing, so where the step's batch never
              comes (an input of unknown length ends: Keras's last call of an epoch raises
              ``OutOfRangeError``) Keras's executor may already have run it, and
              ``iterations`` would count a step that was not taken (Keras 2.11+ and Keras 3 do
              so natively); TF1's ``apply_gradients(global_step=)`` increments after the
              updates, and the Estimator's global step counts taken steps only.
            """
            outermost = self._hb_rates is None
            if not outermost:
                return method(*args, **kwargs)
            object.__setattr__(self, "_hb_rates", {})  # a plain attribute, not tracked
            try:
                taken = [
                    t
                    for t in tf.nest.flatten(list(grads), expand_composites=True)
                    if isinstance(t, tf.Tensor)
                ]
                if tf.executing_eagerly() or not taken:
                    return method(*args, **kwargs)
                with tf.control_dependencies([tf.group(*taken)]):
                    return method(*args, **kwargs)
            finally:
                object.__setattr__(self, "_hb_rates", None)

        _hb_rates: dict | None = None  # {dtype: the rate read}, while a call above runs

        def update_step(self, gradient: Any, variable: Any, learning_rate: Any = None) -> Any:
            rates = self._hb_rates if not tf.distribute.has_strategy() else None
            lr = None if rates is None else rates.get(variable.dtype)
            if lr is None:
                lr = self.learning_rate if learning_rate is None else learning_rate
                lr = tf.convert_to_tensor(tf.cast(lr, variable.dtype))
                if rates is not None:
                    rates[variable.dtype] = lr
            kernel = _KERNELS[self.kind][0]
            if isinstance(gradient, tf.IndexedSlices):
                values, indices = gradient.values, gradient.indices
                # TF1 and legacy Keras sum duplicates first (not SGD); Keras 2.11+'s
                # apply_gradients already did, with these same ops: not twice.
                if self.kind != "SGD" and keras3:
                    values, indices = deduplicate(values, indices)
                return kernel(self, variable, lr, values, indices)
            return kernel(self, variable, lr, gradient, None)

        def get_config(self) -> dict[str, Any]:
            config = super().get_config()
            config.update(
                {
                    k: getattr(self, k)
                    for k in DEFAULTS[(self.kind, self.flavor)]
                    if k != "learning_rate"
                }
            )
            config["flavor"] = self.flavor
            rate = config.get("learning_rate")  # Keras 2.11+'s base config has none
            if rate is None or isinstance(rate, (float, np.floating)):
                rate = float(np.asarray(self.learning_rate))
                # the number given, while it is the rate (Keras keeps it in float32)
                same = self.lr_value is not None and np.float32(rate) == np.float32(self.lr_value)
                config["learning_rate"] = self.lr_value if same else rate
            for key in (
                "weight_decay",
                "clipnorm",
                "global_clipnorm",
                "clipvalue",
                "use_ema",
                "ema_momentum",
                "ema_overwrite_frequency",
                "jit_compile",
                "loss_scale_factor",
                "gradient_accumulation_steps",
                "is_legacy_optimizer",
            ):
                config.pop(key, None)
            return config

    out = {}
    for kind in _KERNELS:
        out[kind] = type(
            f"Estimator{kind}",
            (EstimatorOptimizer,),
            {
                "kind": kind,
                "estimator_family": FAMILY[kind],
                "__doc__": f"{kind} computing the Estimator's update with TensorFlow's kernels.",
            },
        )
    return out
