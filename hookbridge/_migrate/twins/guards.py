"""What a twin refuses to restore: a checkpoint of the other canned generation.

A V1 canned Estimator (``tf.compat.v1.estimator``) sums its loss over the batch
(``Reduction.SUM``) and keeps TF1 optimizer slots (``<var>/Adagrad``, ``<var>/part_0/Ftrl``,
``beta1_power``); a V2 one (``tf.estimator``) averages it (``SUM_OVER_BATCH_SIZE``) and keeps
Keras legacy optimizer state under ``training/<Optimizer>/...``. The twin of one generation
restoring the other's model_dir would load and train with the other reduction (losses 1/batch
or batch times the native ones): the optimizer-state names tell which generation wrote a
checkpoint, and :func:`check_generation` refuses a mismatch.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Sequence
from typing import Any

#: twin -> the canned class name it was built as (``"DNNClassifierV2"``).
_KINDS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def remember(twin: Any, kind: str) -> None:
    """Records that ``twin`` is the twin of the canned class ``kind``."""
    try:
        _KINDS[twin] = kind
    except TypeError:  # a model that cannot be weakly referenced is not checked
        pass


def kind_of(model: Any) -> str | None:
    """The canned class name ``model`` is the twin of, or ``None`` (not a twin)."""
    try:
        return _KINDS.get(model)
    except TypeError:
        return None


def generation(state_names: Sequence[str]) -> bool | None:
    """``True`` when a V2 canned Estimator wrote this optimizer state, ``False`` for V1,
    ``None`` when the names do not tell (no optimizer state)."""
    from hookbridge._migrate import optimizer_state

    if any(n.startswith("training/") for n in state_names):
        return True
    if any(
        optimizer_state._V1_SLOT.match(n) or optimizer_state._V1_POWER.match(n) for n in state_names
    ):
        return False
    return None


def check_generation(model: Any, prefix: str, state_names: Sequence[str]) -> None:
    """Refuses restoring into a twin a checkpoint the other canned generation wrote.

    Raises:
        ValueError: ``model`` is the twin of a V1 class and ``prefix`` was written by a V2
            Estimator, or the reverse (names both classes, the reduction and the fix).
    """
    kind = kind_of(model)
    if kind is None:
        return
    twin_v2 = kind.endswith("V2")
    base = kind[:-2] if twin_v2 else kind
    v1_name, v2_name = base, base + "V2"
    written = generation(state_names)
    if written is None:
        if twin_v2:  # a V2 Estimator always writes training/<Optimizer>/iter
            warnings.warn(
                f"restore_checkpoint: {prefix!r} holds no optimizer state, so which canned "
                f"generation wrote it cannot be told; the twin assumes {kind} "
                "(tf.estimator, loss averaged over the batch). If tf.compat.v1.estimator."
                f"{v1_name} wrote it (loss summed), build keras_twin({v1_name!r}, ...).",
                stacklevel=4,
            )
        return
    if written == twin_v2:
        return
    writer, writer_mod, writer_red = (
        (v2_name, "tf.estimator", "SUM_OVER_BATCH_SIZE (mean over the batch)")
        if written
        else (v1_name, "tf.compat.v1.estimator", "SUM (summed over the batch)")
    )
    twin_red = "SUM_OVER_BATCH_SIZE (mean)" if twin_v2 else "SUM (sum)"
    seen = next(
        (n for n in state_names if n.startswith("training/") == bool(written)), state_names[0]
    )
    raise ValueError(
        f"restore_checkpoint: {prefix!r} was written by a {writer_mod} canned Estimator "
        f"(optimizer state such as {seen!r}), i.e. {writer}, but the model is "
        f"keras_twin({kind!r}). The two generations reduce the loss differently ({writer} "
        f"{writer_red}, {kind} {twin_red}) and keep other optimizer state: training on would "
        f"not continue the Estimator. Build the twin with the class that wrote it: "
        f"keras_twin({writer!r}, ...)."
    )


#: TF1 state family -> the name ``keras_twin``'s optimizer arguments take.
_ARGUMENT_NAMES = {
    "adam": "Adam",
    "adagrad": "Adagrad",
    "ftrl": "Ftrl",
    "rmsprop": "RMSProp",
    "momentum": "SGD",
}


def check_optimizers(
    model: Any, prefix: str, state_names: Sequence[str], variables: set[str]
) -> None:
    """Refuses restoring into a twin a checkpoint whose optimizer state is of another optimizer
    than the twin's part it trains (a twin built without ``optimizer=`` trains with Adagrad /
    Ftrl: it would drop an Adam state and train on with Adagrad).

    Raises:
        ValueError: naming the part, both optimizers and the ``keras_twin`` argument to give.
    """
    from hookbridge._migrate import optimizer_state

    kind = kind_of(model)
    if kind is None:
        return
    combined = kind.startswith("DNNLinearCombined")
    extra = list(getattr(model, "extra_optimizers", ()))
    parts = {"dnn": ("dnn_optimizer", model.optimizer)} if combined else {}
    if combined and extra:
        parts["linear"] = ("linear_optimizer", extra[0])
    state = optimizer_state.classify(list(state_names), variables)
    wrong: dict[str, tuple[str, str, str, str]] = {}
    for slot in state.slots:
        if slot.family is None:
            continue
        part = slot.var.split("/", 1)[0]
        argument, optimizer = parts.get(part, ("optimizer", model.optimizer))
        if not combined:
            argument, optimizer = "optimizer", model.optimizer
        has = optimizer_state.keras_family(optimizer)
        if has is None or has == slot.family:
            continue
        wrong.setdefault(
            argument, (slot.family, has, slot.name, type(optimizer_state.inner(optimizer)).__name__)
        )
    if not wrong:
        return
    lines = [
        f"{argument}: the checkpoint holds {_ARGUMENT_NAMES.get(found, found)} state "
        f"({name!r}), the twin trains with {cls} ({_ARGUMENT_NAMES.get(has, has)})"
        for argument, (found, has, name, cls) in wrong.items()
    ]
    fix = ", ".join(
        f"{argument}={_ARGUMENT_NAMES.get(found, found)!r}"
        for argument, (found, _, _, _) in wrong.items()
    )
    raise ValueError(
        f"restore_checkpoint: {prefix!r} was trained with another optimizer than "
        f"keras_twin({kind!r}) has: " + "; ".join(lines) + ". Its state would be dropped and "
        "training would go on with the other optimizer, not as the Estimator. Build the twin "
        f"with the Estimator's optimizer: keras_twin({kind!r}, ..., {fix}) (with its learning "
        "rate and settings, as the Estimator was given them)."
    )
