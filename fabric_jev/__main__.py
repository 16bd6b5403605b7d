"""`python -m fabric_jev`: the `fabric-jev` command."""

import sys

from .cli import main

sys.exit(main())
