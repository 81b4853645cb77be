"""The conformance engine: a scenario run natively and under the bridge, traced event by event.

Used by ``hookbridge check`` (``hookbridge/_migrate/check.py``) and by the public kit
``hookbridge.testing``, which re-exports it; it imports the bridges, never the layers above.
"""
