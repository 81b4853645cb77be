"""``python -m hookbridge``: same as the ``hookbridge`` command."""

import sys

from hookbridge.cli import main

sys.exit(main())
