"""``hookbridge.testing.scenarios`` is ``hookbridge._conform.scenarios`` (the engine that runs a scenario natively and
bridged, shared with ``hookbridge check``): this name is kept for users' imports, as the same module."""

import sys

from hookbridge._conform import scenarios as _engine

sys.modules[__name__] = _engine
