"""Which Keras optimizer continues each piece of a checkpoint's optimizer state.

A model trains with ``model.optimizer`` and, when it has several optimizers (a
``DNNLinearCombined*`` twin, a GAN written with its own ``train_step``), with those it lists in
``model.extra_optimizers``. A variable's slots go to **the optimizer that trains it**, never to
an optimizer chosen by kind (two Adagrads are two states): an extra optimizer built on that
variable (``optimizer.build(variables)``; ``keras_twin`` builds its own), else
``model.optimizer``. An extra optimizer of the slot's kind that is not built yet could be the
owner: that is refused, naming it. The V2 canned settings (``training/Adagrad_1/learning_rate``)
go to the optimizer that received the slots of their scope (``training/Adagrad_1``); TF1 Adam's
beta powers are checked against every Adam.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class Owners:
    """The model's optimizers (their updating ones: a ``LossScaleOptimizer``'s inner) and the
    owner of each variable's and each V2 scope's state.

    Building it builds ``model.optimizer`` on the model's trainable variables when it is not
    built (its slots are created, as its first step would); call it in eager mode.
    """

    def __init__(self, model: Any, state: Any, variables: Mapping[str, int]) -> None:
        from hookbridge import _tfcompat
        from hookbridge._migrate.optimizer_state import inner, optimizers, weight_at

        wrappers = optimizers(model)
        self.main = inner(wrappers[0]) if wrappers else None
        self.extras = [inner(o) for o in wrappers[1:]]
        if wrappers:  # on the variables no extra optimizer was built on
            trained = [
                v
                for v in model.trainable_variables
                if not any(_tfcompat.keras_optimizer_owns(o, v) for o in self.extras)
            ]
            _tfcompat.build_keras_optimizer(wrappers[0], trained)
        self.all = ([self.main] if wrappers else []) + self.extras
        self._model = model
        self._variables = variables
        self._weight_at = weight_at
        self._by_scope: dict[str, list[Any]] = {}
        for s in state.slots:
            if s.scope is not None and s.var in variables:
                owner = self.of(s.var, s.family)
                if not any(owner is o for o in self._by_scope.setdefault(s.scope, [])):
                    self._by_scope[s.scope].append(owner)

    def of(self, var: str, family: str | None) -> Any:
        """The optimizer training checkpoint variable ``var`` (its Keras weight).

        Raises:
            ValueError: several extra optimizers were built on it, or an extra optimizer of
                ``family`` is not built (it could be the one training it).
        """
        from hookbridge import _tfcompat
        from hookbridge._migrate.optimizer_state import keras_family

        weight = self._weight_at(self._model, self._variables[var])
        owns = [(o, _tfcompat.keras_optimizer_owns(o, weight)) for o in self.extras]
        claimed = [o for o, yes in owns if yes]
        if len(claimed) > 1:
            raise ValueError(
                f"restore_checkpoint: model.extra_optimizers {_names(claimed)} were all built on "
                f"the weight {weight.name} ({var}): its optimizer state can go to one only. "
                "Build each optimizer on the variables it trains (optimizer.build(variables))."
            )
        if claimed:
            return claimed[0]
        unknown = [o for o, yes in owns if yes is None and family in (None, keras_family(o))]
        if unknown:
            raise ValueError(
                f"restore_checkpoint: model.extra_optimizers {_names(unknown)} not built: "
                f"hookbridge cannot tell which optimizer trains {weight.name} ({var}) and "
                "takes its state. Build each extra optimizer on the variables it trains "
                "(optimizer.build(variables), as keras_twin does) before restore_checkpoint."
            )
        return self.main

    def of_scope(self, scope: str | None, family: str | None) -> tuple[Any, str | None]:
        """The optimizer continuing V2 scope ``scope`` (``training/Adagrad_1``), or ``None`` with
        why: the one that received its slots, else the only one of ``family``."""
        from hookbridge._migrate.optimizer_state import keras_family

        owners = self._by_scope.get(scope or "", [])
        if len(owners) == 1:
            return owners[0], None
        if len(owners) > 1:
            return None, f"the slots of {scope} went to several optimizers ({_names(owners)})"
        kind = [o for o in self.all if keras_family(o) == family]
        if len(kind) == 1 or (kind and len(self.all) == 1):
            return kind[0], None
        if not kind:
            return (self.main, None) if self.main is not None else (None, "no optimizer")
        return None, (
            f"several optimizers of that kind ({_names(kind)}) and none received a slot of "
            f"{scope}: which one it belongs to is not known"
        )

    def of_family(self, family: str) -> list[Any]:
        from hookbridge._migrate.optimizer_state import keras_family

        return [o for o in self.all if keras_family(o) == family]


def _names(optimizers: list[Any]) -> str:
    return ", ".join(f"{type(o).__name__}({getattr(o, 'name', '?')!s})" for o in optimizers)
