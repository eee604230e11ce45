"""The launcher runs a script at the recursion depth `python script.py` gives it.

`python -m runtime.launch` reaches the script's module some ten levels deep (runpy, then its own
functions), and Python counts those levels against the program's recursion limit. The C
extension's `run_toplevel(code, globals)` is `exec(code, globals)` with this thread's depth count
set back to zero while the code runs, so `sys.getrecursionlimit()`, `sys.setrecursionlimit(n)`
and the depth a RecursionError happens at are the program's own. Without the C extension it is
plain `exec` (docs/runtime.md says what that costs).

A program may set a limit below the launcher's own depth. The launcher's levels count again once
the code has returned, so `run_toplevel` then raises the limit to what the launcher needs to show
an error and finish its records; `restore_program_limit()` gives the program's value back as the
launcher returns.
"""

from __future__ import annotations

import sys

try:
    from runtime._cprobe import run_toplevel as run_toplevel
    from runtime._cprobe import take_program_limit as _take_program_limit
except ImportError:  # not built: the script runs as deep as the launcher is
    run_toplevel = exec

    def _take_program_limit() -> int | None:
        return None


def restore_program_limit() -> None:
    """Give back the limit the program set, if `run_toplevel` raised it (call where the stack is
    shallow again); when it is below even that depth, at exit, before the program's atexit
    handlers (they run last in, first out)."""
    limit = _take_program_limit()
    if limit is not None and not _set_limit(limit):
        import atexit

        atexit.register(_set_limit, limit)


def _set_limit(limit: int) -> bool:
    try:
        sys.setrecursionlimit(limit)
        return True
    except (RecursionError, ValueError):
        return False
