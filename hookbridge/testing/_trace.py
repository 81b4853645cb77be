"""``hookbridge.testing._trace`` is ``hookbridge._conform.trace`` (the engine that runs a scenario natively and
bridged, shared with ``hookbridge check``): this name is kept for users' imports, as the same module."""

import sys

from hookbridge._conform import trace as _engine

sys.modules[__name__] = _engine
