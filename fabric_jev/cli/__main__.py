"""`python -m fabric_jev.cli` (also `python -m fabric_jev`)."""

import sys

from . import main

sys.exit(main())
