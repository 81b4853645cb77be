"""Loading a fixture directory's generator script as a module of its own name.

Several fixture directories hold a ``make_fixture.py``; imported as ``make_fixture`` through
``sys.path`` they are one module to Python, and whichever test file imports first wins for the
whole run (tests/test_twin_matrix.py read tests/fixtures/twin_build's cases in a full run).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def fixture_script(directory: Path, script: str = "make_fixture") -> ModuleType:
    """``directory/script.py`` as the module ``<directory name>_<script>``, loaded once."""
    name = f"{directory.name}_{script}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, directory / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
