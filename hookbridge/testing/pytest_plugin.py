"""pytest plugin (entry point ``hookbridge``): conformance fixtures for your own hooks/callbacks.

Installed with hookbridge (``[project.entry-points.pytest11]``), so in a test suite::

    def test_my_hook(hook_conforms):
        hook_conforms(lambda: MyHook(every_n_iter=2), steps=6, steps_per_epoch=3)

Fixtures:
    hook_conforms: :func:`hookbridge.testing.assert_hook_conforms`.
    callback_conforms: :func:`hookbridge.testing.assert_callback_conforms`.

TensorFlow is imported when a fixture is first used, not when pytest starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def hook_conforms() -> Callable[..., Any]:
    """``hook_conforms(make_hook, *, steps, steps_per_epoch=None, losses=None)``."""
    from hookbridge.testing import assert_hook_conforms

    return assert_hook_conforms


@pytest.fixture
def callback_conforms() -> Callable[..., Any]:
    """``callback_conforms(make_callback, *, steps, steps_per_epoch=None, losses=None, **kw)``."""
    from hookbridge.testing import assert_callback_conforms

    return assert_callback_conforms
