import os
import sys

# Shared synthetic-run helpers live beside the tests (tests/ is a package, so add this folder).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
# The benchmark's synthetic functions (benchmarks/_synthetic.py) serve the engine's recovery tests too.
_BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "benchmarks")
if _BENCHMARKS not in sys.path:
    sys.path.insert(0, _BENCHMARKS)
