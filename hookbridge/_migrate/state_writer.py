"""The way back: the Keras optimizer's state written under an Estimator checkpoint's names.

``estimator_hooks(model_dir, model=...)`` gives its ``Saver`` one side-graph variable per name of
the Estimator's checkpoint that no weight mirror carries (optimizer slots, Adam's beta powers,
the V2 canned settings, the rows of a stacked weight, variables no Keras weight holds); before
each save, :class:`Writer` copies the Keras side's current values into them, converted as the
TF1 optimizer keeps them (``hookbridge/_migrate/optimizer_state.py`` says how).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hookbridge._migrate.optimizer_owner import Owners
from hookbridge._migrate.optimizer_state import (
    classify,
    current_lr,
    keras_family,
    mismatch,
    optimizers,
    setting_value,
    weight_at,
)


class Writer:
    """Side-graph variables carrying the Keras optimizer's state under the Estimator's names.

    Built (in the bridge's graph, before it is finalized) from the names and shapes of the
    Estimator's checkpoint (``unchanged``: names written as that checkpoint holds them, the
    variables no Keras weight holds); :meth:`fill` copies the Keras optimizer's current state
    into them (converted as the TF1 optimizer keeps it) right before a Saver writes them.
    """

    def __init__(
        self,
        tf: Any,
        model: Any,
        reader: Any,
        names: Sequence[str],
        pairs: Sequence[tuple[str, int]],
        unchanged: Sequence[str] = (),
        rows: Mapping[str, tuple[int, int, int]] | None = None,
        slot_map: Mapping[str, str] | None = None,
    ) -> None:
        from hookbridge._migrate import slot_map as _slot_map

        self.model = model
        self.rows = dict(rows or {})
        variables = {name: i for name, i in pairs}
        parsed = _slot_map.parse(slot_map, "estimator_hooks")
        self.state = classify(names, set(variables), parsed)
        self.variables = variables
        dtypes = reader.get_variable_to_dtype_map()
        self.var_list: dict[str, Any] = {}
        self._feeds: list[tuple[str, Any]] = []
        self.carried: list[str] = []
        self._initial: dict[str, Any] = {}
        v1 = tf.compat.v1
        assigns = []
        with tf.name_scope("hookbridge/"):
            for index, name in enumerate(sorted([*names, *unchanged, *self.rows])):
                value = np.asarray(reader.get_tensor(name))
                self._initial[name] = value
                var = v1.get_variable(
                    f"hookbridge_optimizer/{index:03d}",
                    initializer=tf.constant(value, dtype=dtypes[name]),
                    trainable=False,
                    use_resource=True,
                )
                placeholder = v1.placeholder(dtypes[name], shape=value.shape)
                assigns.append(var.assign(placeholder, read_value=False))
                self.var_list[name] = var
                self._feeds.append((name, placeholder))
            self._assign = tf.group(*assigns)
        self.values()  # which optimizer keeps which state: refused now, not at the first save

    def values(self) -> tuple[dict[str, Any], list[str]]:
        """The Keras optimizer's state under the Estimator's names, and what it could not give
        (written as the Estimator's checkpoint held it)."""
        from hookbridge import _tfcompat

        model, state = self.model, self.state
        out = dict(self._initial)
        if self.rows:
            weights = list(model.weights)
            with _tfcompat.eager():
                for name, (i, start, end) in self.rows.items():
                    out[name] = np.asarray(weights[i].numpy())[start:end].reshape(out[name].shape)
        if not optimizers(model):
            return out, sorted(self._initial)
        carried = []
        with _tfcompat.eager():
            owners = Owners(model, state, self.variables)
            iterations = int(owners.main.iterations.numpy())
            for s in state.slots:
                optimizer = owners.of(s.var, s.family)
                variable = weight_at(model, self.variables[s.var])
                slot = None
                if s.mapped or mismatch(optimizer, keras_family(optimizer), s.family) is None:
                    slot = _tfcompat.keras_optimizer_slot(optimizer, variable, s.slot)
                if slot is None and s.mapped:
                    raise ValueError(
                        f"estimator_hooks: slot_map maps {s.name} to the slot {s.slot!r}, which "
                        f"the Keras {type(optimizer).__name__} does not keep."
                    )
                if slot is None:
                    carried.append(s.name)
                    continue
                value = np.asarray(slot.numpy())
                if s.tf1_momentum:
                    value = value / -current_lr(optimizer)
                if s.var in self.rows:
                    value = value[self.rows[s.var][1] : self.rows[s.var][2]]
                out[s.name] = value.reshape(out[s.name].shape)
            adams = owners.of_family("adam")
            for name, n in state.powers.items():
                if not adams:
                    carried.append(name)
                    continue
                out[name] = np.asarray(float(getattr(adams[0], f"beta_{n}")) ** (iterations + 1))
            for name, setting in state.settings.items():
                optimizer, _ = owners.of_scope(
                    state.setting_scopes.get(name), state.setting_families.get(name)
                )
                have = None if optimizer is None else setting_value(optimizer, setting, iterations)
                if have is None:
                    carried.append(name)
                    continue
                out[name] = np.asarray(have)
        carried += state.unknown
        return out, carried

    def fill(self, session: Any) -> None:
        values, carried = self.values()
        if carried and carried != self.carried:
            import warnings

            optimizer = type(getattr(self.model, "optimizer", None)).__name__
            warnings.warn(
                f"estimator_hooks: the Keras {optimizer} keeps no counterpart of the Estimator's "
                f"{', '.join(carried[:8])}{', ...' if len(carried) > 8 else ''}: the checkpoints "
                "carry them as the Estimator's checkpoint held them, so the Estimator restores, "
                "but continues from that older state. Compile the Keras model with the "
                "Estimator's kind of optimizer (restore_checkpoint's warning names it).",
                stacklevel=2,
            )
        self.carried = carried
        feeds = {
            p: np.asarray(values[name]).astype(p.dtype.as_numpy_dtype).reshape(p.shape)
            for name, p in self._feeds
        }
        session.run(self._assign, feed_dict=feeds)


def saver_class(tf: Any) -> Any:
    """A ``Saver`` that fills its optimizer-state variables from Keras before each save."""

    class StateSaver(tf.compat.v1.train.Saver):
        """``tf.compat.v1.train.Saver`` whose ``save`` first copies the Keras optimizer's state
        into the variables carrying it (hookbridge's ``estimator_hooks(model=...)``)."""

        writer: Writer | None = None

        def save(self, sess: Any, *args: Any, **kwargs: Any) -> Any:
            if self.writer is not None:
                self.writer.fill(sess)
            return super().save(sess, *args, **kwargs)

    return StateSaver
