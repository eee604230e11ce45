import sys
from pathlib import Path

# instr_helpers.py sits next to the tests (tests/ has no packages); removed again at the end
_HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, _HERE)


def pytest_unconfigure(config):
    if _HERE in sys.path:
        sys.path.remove(_HERE)
