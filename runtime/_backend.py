"""Chooses the probe backend once per process: the C extension when built, else pure Python.

SCALEPROBE_PURE=1 forces the pure-Python backend (tests run both).
"""

from __future__ import annotations

import os

NAME: str

# the same words as every SCALEPROBE_ flag (runtime.config checks the value at start-up)
if os.environ.get("SCALEPROBE_PURE", "").lower() in ("1", "true", "yes", "on"):
    from . import _pyprobe as impl

    NAME = "python"
else:
    try:
        from . import _cprobe as impl  # type: ignore[no-redef]

        NAME = "c"
    except ImportError:  # not built (no compiler at install time): same API, slower
        from . import _pyprobe as impl  # type: ignore[no-redef]

        NAME = "python"

__all__ = ["impl", "NAME"]
