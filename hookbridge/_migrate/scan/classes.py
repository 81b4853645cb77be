"""Pass 1 of the scan: which scanned classes are hooks and Keras callbacks, and who builds them.

A class is a hook when a base is ``SessionRunHook`` (or a built-in hook, or one of hookbridge's),
directly or through scanned classes, across modules; a Keras callback when a base comes from a
``callbacks`` module of TF/Keras. A top-level function without required arguments that returns
one is its *factory*: ``hookbridge check`` takes it where the constructor needs arguments.
"""

from __future__ import annotations

from collections.abc import Iterable

from hookbridge._migrate.scan import catalog
from hookbridge._migrate.scan.modules import ClassInfo, ModuleInfo, needs_arguments

HOOK_BASE = "SessionRunHook"
CALLBACK_BASE = "Callback"


def root_name(qualified: str | None) -> str:
    return qualified.split(".")[0] if qualified else ""


def last_name(qualified: str | None) -> str:
    return qualified.rsplit(".", 1)[-1] if qualified else ""


def is_tf(qualified: str | None) -> bool:
    return root_name(qualified) in catalog.TF_ROOTS


def is_tpu(qualified: str | None) -> bool:
    """A TPU entry point: by name under a ``tpu`` module (``tf.contrib.tpu``, ``contrib.tpu()``)."""
    if not qualified or last_name(qualified) not in catalog.TPU_ENTRIES:
        return False
    parts = qualified.split(".")[:-1]
    return any(p in ("tpu", "tpu()") for p in parts) or (
        last_name(qualified) != "RunConfig" and is_tf(qualified)
    )


def is_keras_callback_path(qualified: str | None) -> bool:
    return is_tf(qualified) and "callbacks" in qualified.split(".")[:-1]


def display(qualified: str) -> str:
    """``tensorflow.estimator.X`` -> ``tf.estimator.X``."""
    if qualified.startswith("tensorflow."):
        return "tf." + qualified[len("tensorflow.") :]
    return qualified


class Classes:
    """Which scanned classes are hooks and which are Keras callbacks (pass 1)."""

    def __init__(self, modules: Iterable[ModuleInfo]) -> None:
        modules = list(modules)
        self.by_qualname: dict[str, ClassInfo] = {}
        self.by_name: dict[str, list[ClassInfo]] = {}
        for module in modules:
            for cls in module.classes.values():
                self.by_qualname[cls.qualname] = cls
                self.by_name.setdefault(cls.name, []).append(cls)
        self.hooks = self._closure(self._is_hook_base)
        self.callbacks = self._closure(self._is_callback_base)
        #: class qualname -> "module:function", a zero-argument function returning one.
        self.factories: dict[str, str] = {}
        #: "module.function" of such a function -> the class it returns.
        self.built_by: dict[str, ClassInfo] = {}
        for module in modules:
            for call, function in module.returns:
                if needs_arguments(function.args):
                    continue
                cls = self.resolve(module.qualify(call.func))
                if cls is not None:
                    self.factories.setdefault(cls.qualname, f"{module.module}:{function.name}")
                    self.built_by[f"{module.module}.{function.name}"] = cls
        #: The last names a call must have to be looked at (besides hook positions).
        self.relevant_names = (
            catalog.relevant_names()
            | frozenset(self.by_name)
            | frozenset(k.rsplit(".", 1)[-1] for k in self.built_by)
        )

    def resolve(self, qualified: str | None) -> ClassInfo | None:
        """The scanned class a qualified name denotes (by import path, else by unique name)."""
        if not qualified:
            return None
        if qualified in self.by_qualname:
            return self.by_qualname[qualified]
        if is_tf(qualified):
            return None
        same_name = self.by_name.get(last_name(qualified), [])
        return same_name[0] if len(same_name) == 1 else None

    @staticmethod
    def _is_hook_base(base: str) -> bool:
        last = last_name(base)
        if is_tf(base) and (last == HOOK_BASE or last in catalog.known_names("hook")):
            return True
        return root_name(base) == "hookbridge" and last in catalog.HOOKBRIDGE_HOOKS

    @staticmethod
    def _is_callback_base(base: str) -> bool:
        return is_keras_callback_path(base)

    def _closure(self, is_base) -> dict[str, ClassInfo]:
        found: dict[str, ClassInfo] = {}
        changed = True
        while changed:
            changed = False
            for cls in self.by_qualname.values():
                if cls.qualname in found:
                    continue
                for base in cls.bases:
                    parent = self.resolve(base)
                    if is_base(base) or (parent is not None and parent.qualname in found):
                        found[cls.qualname] = cls
                        changed = True
                        break
        return found

    def base_description(self, cls: ClassInfo) -> str:
        for base in cls.bases:
            parent = self.resolve(base)
            if parent is not None:
                return f"subclass of {parent.name} ({parent.module.path}:{parent.node.lineno})"
            if base:
                return f"subclass of {last_name(base)}"
        return "subclass"

    def needs_arguments(self, cls: ClassInfo) -> bool:
        """Whether constructing ``cls`` needs arguments (its own or a scanned parent's __init__)."""
        seen: set[str] = set()
        current: ClassInfo | None = cls
        while current is not None and current.qualname not in seen:
            seen.add(current.qualname)
            needs = current.init_needs_arguments()
            if needs is not None:
                return needs
            parents = [self.resolve(b) for b in current.bases]
            scanned = [p for p in parents if p is not None]
            if not scanned:  # inherits a built-in __init__: SessionRunHook/Callback take none
                return any(last_name(b) not in (HOOK_BASE, CALLBACK_BASE) for b in current.bases)
            current = scanned[0]
        return False


def check_action(classes: Classes, cls: ClassInfo, callback: bool) -> str:
    """The ``hookbridge check`` command for a scanned hook or callback class: the class, else
    the scanned zero-argument function that builds it, else a placeholder for one."""
    flag = "--callback " if callback else ""
    if not classes.needs_arguments(cls):
        return f"hookbridge check {flag}{cls.module.module}:{cls.name}"
    factory = classes.factories.get(cls.qualname)
    if factory is not None:
        return f"hookbridge check {flag}{factory} (a zero-argument function returning {cls.name})"
    return (
        f"hookbridge check {flag}{cls.module.module}:<factory> (a zero-argument function "
        f"returning {cls.name}(...): its constructor needs arguments)"
    )
