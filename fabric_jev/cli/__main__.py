"""`python -m fabric_jev.cli`."""

import sys

from . import main

sys.exit(main())
