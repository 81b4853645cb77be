"""Lazy re-exports: a package's public names, imported from their modules on first access.

``import hookbridge`` (and the CLI, and the pytest plugin, which import through it) must not
import TensorFlow, which takes seconds: the names that need it are resolved by the package's
module ``__getattr__`` (PEP 562) the first time they are used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Returns the ``__getattr__`` and ``__dir__`` of ``package`` for ``{name: module}``.

    Args:
        package: the package's ``__name__``.
        exports: each public name mapped to the module defining it (a submodule of the same
            name maps to itself).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's module level. A resolved name is
        cached in the package's namespace, so later lookups are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        importlib.import_module(package).__dict__[name] = value
        return value

    def __dir__() -> list[str]:
        namespace = importlib.import_module(package).__dict__
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__
