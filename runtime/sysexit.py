"""What the interpreter makes of an uncaught `SystemExit(code)`: the exit status and the message.

Shared by the recorder (the end record's exit code) and the launcher, which runs a script in its
own process and must end it as `python script.py` would (CPython's `_Py_HandleSystemExit`).
"""

from __future__ import annotations

import os
import sys

# The interpreter converts the code with PyLong_AsLong: a C long (32 bits on Windows).
_LONG_BITS = 32 if os.name == "nt" or sys.maxsize <= 2**32 else 64


def exit_status(code: object) -> int:
    """The process exit status of `sys.exit(code)`: None 0, an int its low 8 bits (one that does not
    fit a C long fails to convert: -1, so 255), anything else 1 (after the message)."""
    if code is None:
        return 0
    if isinstance(code, int):
        if -(1 << (_LONG_BITS - 1)) <= code < (1 << (_LONG_BITS - 1)):
            return code & 0xFF
        return 255
    return 1


def print_message(code: object) -> None:
    """Print `code` as the interpreter does for a SystemExit that is no int or None: str(code) and a
    newline on sys.stderr (the newline alone when str() fails), on file descriptor 2 when
    sys.stderr is None. Printing errors are ignored, as they are there."""
    if code is None or isinstance(code, int):
        return
    try:
        text: str | None = str(code)
    except Exception:  # noqa: BLE001 - the interpreter prints the newline alone
        text = None
    stream = sys.stderr
    if stream is None:
        data = ("" if text is None else text) + "\n"
        try:
            os.write(2, data.encode("utf-8", "backslashreplace"))
        except OSError:
            pass
        return
    for part in (text, "\n"):
        if part is None:
            continue
        try:
            stream.write(part)
        except Exception:  # noqa: BLE001
            pass
