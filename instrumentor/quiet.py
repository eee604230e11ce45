"""`quiet_warnings(filename)`: parse or compile a user's file without showing what Python warns
about it (SyntaxWarning: `"is" with a literal`, `invalid escape sequence`). Those are Python's to
show when the program compiles the file, under the program's own warning filters.

`warnings.catch_warnings` would do it, but entering and leaving it bumps the filters' version,
which empties every module's `__warningregistry__`: under the import hook (`--instrument`), where
files are rewritten inside the user's program, a warning shown once at a line (the default filter)
would show again after every import. This adds one filter in place, for the module that Python
derives from `filename` (what a compile-time warning names), and takes it out again, which does
not. (runtime/original_lines.py has the same for the runtime, which must not import this package.)
"""

from __future__ import annotations

import re
import warnings
from typing import Any


class quiet_warnings:
    def __init__(self, filename: str) -> None:
        module = filename[:-3] if filename.endswith(".py") else filename or "<unknown>"
        self._entry = ("ignore", None, Warning, re.compile(re.escape(module) + r"\Z"), 0)

    def __enter__(self) -> None:
        self._filters = warnings.filters  # the list the C code reads now
        self._filters.insert(0, self._entry)

    def __exit__(self, *exc: Any) -> None:
        for index, item in enumerate(self._filters):
            if item is self._entry:
                del self._filters[index]
                break
