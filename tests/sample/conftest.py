import os
import sys

# Shared synthetic-run helpers live beside the tests (tests/ is a package, so add this folder).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
