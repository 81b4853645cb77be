"""``hookbridge.testing.conform`` is ``hookbridge._conform.conform`` (the engine that runs a scenario natively and
bridged, shared with ``hookbridge check``): this name is kept for users' imports, as the same module."""

import sys

from hookbridge._conform import conform as _engine

sys.modules[__name__] = _engine
