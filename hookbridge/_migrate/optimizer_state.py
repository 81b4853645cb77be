"""An Estimator's optimizer state, read into a Keras optimizer and written back under its names.

TF1 optimizers keep one slot per variable and state next to it:

* ``tf.compat.v1.train`` optimizers (custom ``model_fn``, V1 canned Estimators): ``<var>/Adam``
  (m), ``<var>/Adam_1`` (v) with ``beta1_power``/``beta2_power``; ``<var>/Momentum``;
  ``<var>/Adagrad``; ``<var>/RMSProp`` (rms), ``<var>/RMSProp_1`` (momentum, or mg when
  centered, then ``RMSProp_2`` is the momentum); ``<var>/Ftrl`` (accumulator), ``<var>/Ftrl_1``
  (linear). V1 canned Estimators put a partition between (``<var>/part_0/Ftrl``,
  ``<var>/t_0/Adagrad``).
* ``tf.keras.optimizers.legacy`` optimizers of the V2 canned Estimators:
  ``training/<Optimizer>/<var>/<slot>`` (``m``, ``v``, ``momentum``, ``accumulator``,
  ``linear``, ``rms``, ``mg``) and their settings ``training/<Optimizer>/<setting>``
  (``learning_rate``, ``decay``, ``beta``, ``iter``, ...).

The Keras optimizers compute the same updates from the same state, with two conversions:
TF1's ``MomentumOptimizer`` accumulates gradients (``a = mu*a + g``, ``w -= lr*a``) where Keras's
``SGD`` accumulates steps (``m = mu*m - lr*g``, ``w += m``): ``m = -lr*a``; and TF1's Adam keeps
its bias correction in ``beta1_power``/``beta2_power`` where Keras derives it from
``iterations`` (the global step): equal while the optimizer ran from step 0.

Reading (``restore``) is here; writing back (the ``Writer`` a ``Saver`` fills before each save)
is in ``hookbridge/_migrate/state_writer.py``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: TF1 slot leaf -> (family, Keras slot).
_V1_LEAVES = {
    "Adam": ("adam", "m"),
    "Adam_1": ("adam", "v"),
    "Momentum": ("momentum", "momentum"),
    "Adagrad": ("adagrad", "accumulator"),
    "RMSProp": ("rmsprop", "rms"),
    "RMSProp_1": ("rmsprop", "momentum"),  # mg when the optimizer is centered (RMSProp_2 exists)
    "RMSProp_2": ("rmsprop", "momentum"),
    "Ftrl": ("ftrl", "accumulator"),
    "Ftrl_1": ("ftrl", "linear"),
}
_V1_SLOT = re.compile(
    r"^(?P<var>.+?)(?P<part>/(?:part|t)_\d+)?/(?P<leaf>" + "|".join(_V1_LEAVES) + ")$"
)
_V1_POWER = re.compile(r"^(?:.*/)?beta(?P<n>[12])_power(?:_\d+)?$")  # _1: a second Adam
_V2_SLOT = re.compile(
    r"^training/(?P<opt>[^/]+)/(?P<var>.+)/(?P<slot>m|v|vhat|momentum|accumulator|linear|rms|mg)$"
)
_V2_SETTING = re.compile(r"^training/(?P<opt>[^/]+)/(?P<setting>[^/]+)$")
#: Keras optimizer class -> the family of TF1 state it continues.
_KERAS_FAMILY = {
    "Adam": "adam",
    "SGD": "momentum",
    "Adagrad": "adagrad",
    "RMSprop": "rmsprop",
    "Ftrl": "ftrl",
}
#: V2 canned ``training/<Optimizer>`` scope -> family (their SGD keeps Keras's momentum).
_V2_FAMILY = _KERAS_FAMILY
#: V2 canned settings -> the Keras optimizer attribute holding them.
_SETTINGS = {
    "learning_rate": "learning_rate",
    "beta_1": "beta_1",
    "beta_2": "beta_2",
    "epsilon": "epsilon",
    "momentum": "momentum",
    "rho": "rho",
    "beta": "beta",
    "learning_rate_power": "learning_rate_power",
    "initial_accumulator_value": "initial_accumulator_value",
    "l1_regularization_strength": "l1_regularization_strength",
    "l2_regularization_strength": "l2_regularization_strength",
    "l2_shrinkage_regularization_strength": "l2_shrinkage_regularization_strength",
    "decay": "decay",
}


@dataclasses.dataclass
class Slot:
    """One slot variable of the checkpoint: ``name`` holds ``slot`` of model variable ``var``."""

    name: str
    var: str
    family: str
    slot: str
    tf1_momentum: bool = False  # TF1 MomentumOptimizer's accumulator (m = -lr * a)
    scope: str | None = None  # V2 canned: training/<Optimizer>, its settings' scope
    mapped: bool = False  # named by the user's slot_map: copied as it is, any kind


@dataclasses.dataclass
class State:
    """The optimizer state a checkpoint holds, classified."""

    slots: list[Slot]
    powers: dict[str, int]  # beta1_power -> 1
    settings: dict[str, str]  # training/Ftrl/learning_rate -> learning_rate
    unknown: list[str]
    setting_families: dict[str, str] = dataclasses.field(default_factory=dict)
    setting_scopes: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def families(self) -> set[str]:
        return {s.family for s in self.slots} | ({"adam"} if self.powers else set())


def classify(names: Sequence[str], variables: set[str], slot_map: Any = None) -> State:
    """Sorts a checkpoint's optimizer-state ``names`` given its model ``variables`` (and a
    parsed ``slot_map``, whose entries come first)."""
    as_set = set(names)
    state = State([], {}, {}, [])
    for name in names:
        hit = slot_map.match(name, variables) if slot_map is not None else None
        if hit:
            state.slots.append(Slot(name, hit[1], None, hit[2], mapped=True))
            continue
        m = _V2_SLOT.match(name)
        if m and m["var"] in variables:
            family = v2_family(m["opt"])
            state.slots.append(Slot(name, m["var"], family, m["slot"], scope=f"training/{m['opt']}"))
            continue
        m = _V1_SLOT.match(name)
        if m and m["var"] in variables:
            family, slot = _V1_LEAVES[m["leaf"]]
            base = name[: -len(m["leaf"])]
            if m["leaf"] == "RMSProp_1" and base + "RMSProp_2" in as_set:
                slot = "mg"
            state.slots.append(Slot(name, m["var"], family, slot, family == "momentum"))
            continue
        m = _V1_POWER.match(name)
        if m:
            state.powers[name] = int(m["n"])
            continue
        m = _V2_SETTING.match(name)
        if m:
            state.settings[name] = m["setting"]
            state.setting_families[name] = v2_family(m["opt"])
            state.setting_scopes[name] = f"training/{m['opt']}"
            continue
        state.unknown.append(name)
    return state


def v2_family(scope: str) -> str:
    """The family of a V2 canned optimizer scope: ``Adagrad``, and ``Adagrad_1`` (the graph's
    second optimizer of that class, as Keras uniquifies its name)."""
    base = re.sub(r"_\d+$", "", scope)
    return _V2_FAMILY.get(scope) or _V2_FAMILY.get(base, scope)


def inner(optimizer: Any) -> Any:
    """The optimizer doing the updates: a ``LossScaleOptimizer``'s ``inner_optimizer`` (Keras 3,
    tf_keras), else ``optimizer`` itself. Its slots, settings and step are the state to load."""
    while getattr(optimizer, "inner_optimizer", None) is not None:
        optimizer = optimizer.inner_optimizer
    return optimizer


def set_step(optimizer: Any, step: int) -> None:
    """Sets the optimizer's ``iterations`` (its count of updates, the global step) to ``step``.

    Under Keras 3 ``gradient_accumulation_steps=k`` Keras computes ``iterations`` from a counter
    of batches: it is set to ``step * k``, the first batch of an accumulation, and the
    accumulated gradients to zero (a TF1 checkpoint holds none: TF1 applies every step).
    Call it in eager mode.
    """
    from hookbridge import _tfcompat

    optimizer = inner(optimizer)
    counter, per_update = _tfcompat.keras_optimizer_counter(optimizer)
    counter.assign(np.asarray(step * per_update, dtype=np.asarray(counter).dtype))
    for accumulator in _tfcompat.keras_gradient_accumulators(optimizer):
        accumulator.assign(np.zeros(accumulator.shape, np.asarray(accumulator).dtype))


def keras_family(optimizer: Any) -> str | None:
    """The family of TF1 state a Keras optimizer continues: its class's ``estimator_family``
    (the twins' optimizers, ``twins/optimizer_kernels.py``), else by its class name."""
    optimizer = inner(optimizer)
    family = getattr(type(optimizer), "estimator_family", None)
    return family or _KERAS_FAMILY.get(type(optimizer).__name__)


def optimizers(model: Any) -> list[Any]:
    """``model.optimizer`` and the model's ``extra_optimizers`` (a ``keras_twin`` of a
    ``DNNLinearCombined*`` trains its linear part with a second one)."""
    found = [getattr(model, "optimizer", None), *getattr(model, "extra_optimizers", ())]
    return [o for o in found if o is not None]


def current_lr(optimizer: Any) -> float:
    """The Keras optimizer's learning rate at its current iteration (a schedule evaluated)."""
    lr = optimizer.learning_rate
    if callable(lr) and not hasattr(lr, "numpy"):
        lr = lr(optimizer.iterations)
    return float(np.asarray(lr))


def setting_value(optimizer: Any, setting: str, iterations: int) -> Any:
    """The Keras optimizer's value of a V2 canned setting, or ``None`` when it has none."""
    if setting == "iter":
        return iterations
    if setting == "learning_rate":
        return current_lr(optimizer)
    attribute = _SETTINGS.get(setting)
    value = getattr(optimizer, attribute, None) if attribute else None
    if value is None and setting == "decay":
        return 0.0  # Keras 2.11+ / Keras 3 optimizers have no legacy decay: none applied
    if value is None or (callable(value) and not hasattr(value, "numpy")):
        return None
    return float(np.asarray(value))


def weight_at(model: Any, index: int) -> Any:
    return list(model.weights)[index]


def restore(
    model: Any,
    reader: Any,
    names: Sequence[str],
    pairs: Sequence[tuple[str, int]],
    step: int,
    rows: Mapping[str, tuple[int, int, int]] | None = None,
    slot_map: Mapping[str, str] | None = None,
) -> list[str]:
    """Loads the optimizer state ``names`` into ``model.optimizer``; returns what it did not
    load, each as ``name (why)``. The optimizer is built first (its slots created). ``rows``:
    ``{variable: (weight index, first row, end row)}`` for variables stacked into one weight;
    ``slot_map``: ``{checkpoint slot: Keras slot}`` (``hookbridge/_migrate/slot_map.py``).

    Raises:
        ValueError: a ``slot_map`` entry matches no slot, or names one the optimizer lacks.
    """
    from hookbridge._migrate import slot_map as _slot_map

    parsed = _slot_map.parse(slot_map, "restore_checkpoint")
    from hookbridge import _tfcompat
    from hookbridge._migrate.optimizer_owner import Owners

    variables = {name: i for name, i in pairs}
    state = classify(names, set(variables), parsed)
    if parsed is not None and parsed.unused(list(names), set(variables)):
        raise ValueError(
            f"restore_checkpoint: slot_map entries {parsed.unused(list(names), set(variables))} "
            "match no optimizer state of the checkpoint (a key is a slot's suffix, 'adam_m', "
            f"or its name with {{var}}); its optimizer state: {describe(list(names), 6)}."
        )
    if not optimizers(model):
        return [f"{n} (the model has no optimizer: compile it first)" for n in names]
    missed: list[str] = []
    pending: dict[int, tuple[Any, Any]] = {}
    with _tfcompat.eager():
        owners = Owners(model, state, variables)
        for optimizer in owners.extras:  # each counts the global step, as the Estimator's did
            set_step(optimizer, step)
        for s in state.slots:
            optimizer = owners.of(s.var, s.family)
            why = None if s.mapped else mismatch(optimizer, keras_family(optimizer), s.family)
            variable = weight_at(model, variables[s.var])
            target = None if why else _tfcompat.keras_optimizer_slot(optimizer, variable, s.slot)
            if target is None and s.mapped:
                raise ValueError(
                    f"restore_checkpoint: slot_map maps {s.name} to the slot {s.slot!r}, which "
                    f"the Keras {type(optimizer).__name__} does not keep: "
                    f"{_no_slot(optimizer, s.slot)}."
                )
            if target is None:
                missed.append(f"{s.name} ({why or _no_slot(optimizer, s.slot)})")
                continue
            value = np.asarray(reader.get_tensor(s.name))
            if s.tf1_momentum:
                value = -current_lr(optimizer) * value
            if id(target) not in pending:
                pending[id(target)] = (target, np.array(target.numpy()))
            buffer = pending[id(target)][1]
            if rows and s.var in rows:
                _, start, end = rows[s.var]
                buffer[start:end] = value.reshape(buffer[start:end].shape)
            else:
                buffer[...] = value.reshape(buffer.shape)
        for target, buffer in pending.values():
            target.assign(buffer)
        adams = owners.of_family("adam")
        for name, n in state.powers.items():
            found = float(reader.get_tensor(name))
            missed += _check_power(name, n, found, adams, owners.main, step)
        for name, setting in state.settings.items():
            optimizer, why = owners.of_scope(
                state.setting_scopes.get(name), state.setting_families.get(name)
            )
            found = np.asarray(reader.get_tensor(name)).item()
            if optimizer is None:
                missed.append(f"{name} (= {found}; {why})")
                continue
            if setting == "iter":
                if int(found) != step:
                    missed.append(f"{name} (= {found}; optimizer.iterations follows global_step)")
                continue
            if setting == "learning_rate":
                try:
                    if callable(optimizer.learning_rate) and not hasattr(
                        optimizer.learning_rate, "numpy"
                    ):
                        raise TypeError("a schedule")
                    optimizer.learning_rate = float(found)
                except (TypeError, ValueError):
                    missed.append(f"{name} (= {found:g}; the Keras learning rate is a schedule)")
                continue
            have = setting_value(optimizer, setting, step)
            if have is None or not np.isclose(have, found, rtol=1e-6, atol=1e-12):
                missed.append(
                    f"{name} (= {found:g}; the Keras {type(optimizer).__name__} has "
                    f"{setting}={have}: construct it with {setting}={found:g})"
                )
    missed += [
        f"{n} (not an optimizer state hookbridge knows: name its Keras slot with "
        "slot_map={'<suffix>': 'm', ...}, docs/migration.md)"
        for n in state.unknown
    ]
    return missed


def power_matches(found: float, expected: float, step: int) -> bool:
    """Whether TF1's float32 ``beta_power`` (``beta``, then times ``beta`` at each of ``step``
    steps) is ``beta ** (step + 1)`` up to float32 rounding.

    Each of the ``step + 1`` roundings (``beta`` itself, then every product) is off by at most
    half an ulp, ``2**-24`` relative, so the running power drifts from the exact one by at most
    ``(2 * step + 2) * 2**-24`` (measured: under half that, 10 to 20000 steps, betas 0.9 to
    0.9999); below float32's smallest normal number (``0.9**834``) it is ``0`` or a subnormal.
    A run that started ``k`` steps away is ``1 - beta**k`` off: ``0.1`` for ``beta_1 = 0.9``.
    """
    bound = expected * (2 * step + 2) * 2.0**-24 + float(np.finfo(np.float32).tiny)
    return abs(found - expected) <= bound


def _check_power(
    name: str, n: int, found: float, adams: Sequence[Any], main: Any, step: int
) -> list[str]:
    """TF1 Adam's ``beta<n>_power`` against the Keras Adams' bias correction at ``step``: empty
    when one of them agrees, else why not."""
    if not adams:
        return [f"{name} ({mismatch(main, keras_family(main), 'adam')})"]
    expected = [float(getattr(a, f"beta_{n}")) ** (step + 1) for a in adams]
    if any(power_matches(found, e, step) for e in expected):
        return []
    return [
        f"{name} (= {found:.6g}; Keras's Adam corrects its bias by iterations = "
        f"{step}, i.e. beta_{n}**{step + 1} = {expected[0]:.6g}: the TF1 optimizer did "
        "not run from step 0)"
    ]


def mismatch(optimizer: Any, family: str | None, wanted: str) -> str | None:
    if family == wanted == "momentum" and not float(getattr(optimizer, "momentum", 0.0) or 0.0):
        return (
            "state of a momentum optimizer; the model's SGD has momentum=0: construct it "
            "with the TF1 optimizer's momentum"
        )
    if family == wanted:
        return None
    keras = {
        "adam": "Adam",
        "momentum": "SGD(momentum=...)",
        "adagrad": "Adagrad",
        "rmsprop": "RMSprop",
        "ftrl": "Ftrl",
    }.get(wanted, wanted)
    return (
        f"state of a {wanted} optimizer; the model's optimizer is {type(optimizer).__name__}: "
        f"compile it with keras.optimizers.{keras}"
    )


def _no_slot(optimizer: Any, slot: str) -> str:
    hint = {
        "momentum": "construct it with the TF1 optimizer's momentum (none needed if 0)",
        "mg": "construct it with centered=True",
    }.get(slot, "a Keras optimizer of the same kind keeps it")
    return f"the Keras {type(optimizer).__name__} keeps no {slot!r} slot: {hint}"


def describe(missed: Sequence[str], limit: int = 8) -> str:
    shown = list(missed[:limit])
    more = f", ... ({len(missed) - limit} more)" if len(missed) > limit else ""
    return "; ".join(shown) + more
