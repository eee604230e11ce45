"""`python -m modeler`: the same as the `modeler` console script."""

import sys

from .cli import main

sys.exit(main())
