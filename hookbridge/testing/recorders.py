"""``hookbridge.testing.recorders`` is ``hookbridge._conform.recorders`` (the engine that runs a scenario natively and
bridged, shared with ``hookbridge check``): this name is kept for users' imports, as the same module."""

import sys

from hookbridge._conform import recorders as _engine

sys.modules[__name__] = _engine
