"""What the program sees of scaleprobe's signal handlers: what it would see without them.

Where the program leaves SIGTERM or SIGINT to its default action, the launcher's and the
recorder's handlers stand in for it (they write the run's data, then end the process as the kernel
would); where the program's own handler was there first, the recorder's calls it after a flush.
A program that asks `signal.getsignal` would get ours, though, and may act on it: one that chains
to the handler before its own (`if callable(prev): prev(signum, frame) else: sys.exit(3)`) called
our stand-in, which ended the process by the signal, without its `finally` blocks, its atexit
handlers or its exit status 3 (review 64 F2).

So each of our handlers is shown as the one it stands for (`show_as`): `signal.getsignal` and the
value `signal.signal` returns give `SIG_DFL` (or the program's handler) where ours is installed,
and a program that puts back what it was given (`signal.signal(SIGTERM, prev)`, or `SIG_DFL`)
gets ours back, so the run's data are still written when the signal comes. Both functions are
then C functions (`runtime/_sigwatch.c`): an error of a call shows no frame of scaleprobe's.
scaleprobe's own calls go to the functions as they were (`real_signal`, `real_getsignal`).
Without the C extension the program sees our handlers, as before.
"""

from __future__ import annotations

import signal
from typing import Any, Callable

try:
    from . import _sigwatch
except ImportError:  # built without a C compiler
    _sigwatch = None

#: signal.signal and signal.getsignal as they were when scaleprobe's runtime was imported: what its
#: own calls use (the program's calls may give ours back for what it was shown)
real_signal: Callable[..., Any] = signal.signal
real_getsignal: Callable[[int], Any] = signal.getsignal


def available() -> bool:
    return _sigwatch is not None and hasattr(_sigwatch, "disguise")


def at_default(signum: int) -> bool:
    """Whether `signum`'s disposition is the default action itself, not a C handler that
    `signal.getsignal` reports as SIG_DFL or None (True where that cannot be told: no C extension)."""
    if _sigwatch is None or not hasattr(_sigwatch, "at_default"):
        return True
    try:
        return bool(_sigwatch.at_default(int(signum)))
    except (OSError, ValueError):
        return True


def show_as(signum: int, ours: Callable[..., Any], shown: Any) -> None:
    """From now on the program sees `ours`, installed for `signum`, as `shown` (`signal.SIG_DFL`,
    or the handler that was there before ours and that ours calls)."""
    if not available():
        return
    _sigwatch.hide(real_signal, real_getsignal)
    _sigwatch.disguise(int(signum), ours, shown)
    if signal.signal is real_signal:  # not a wrapper someone put in since (it calls ours): theirs stays
        signal.signal = _sigwatch.signal
    if signal.getsignal is real_getsignal:
        signal.getsignal = _sigwatch.getsignal


def forget(signum: int) -> None:
    """`signum`'s handler is shown as it is again (ours is gone: the default action is back)."""
    if available():
        _sigwatch.disguise(int(signum), None, None)
