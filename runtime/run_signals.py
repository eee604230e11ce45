"""Whether a stop signal came to this process while it ran the program.

A program may handle SIGTERM or SIGINT itself: a Slurm job that checkpoints and exits 0 when it is
preempted, a loop that catches KeyboardInterrupt and saves. Such a run was cut short, yet its end
record said `ok` and the launcher recorded it `ok`: the modeler took it for a whole run (review
38 #1). Where scaleprobe's own handlers run (the signal's default action, or the launcher's
SIGTERM) they say so; where the program's own handler took the signal, this module does.

`signal_watch`'s C handler counts each arrival ahead of CPython's own. A handler that the program
installs with `signal.signal` puts CPython's C handler back in place of the counter, so once
counting starts `signal.signal` is a C function (`_sigwatch.signal`) that makes the same call and
then puts the counter back in front. Nothing else changes: the program's handler is the one
installed and runs as before, `signal.getsignal` returns it, and an error of the call shows no
frame of scaleprobe's. Counts are per process (a fork starts its child at 0). Without the C
extension nothing is counted.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Callable

from .signal_disguise import real_getsignal, real_signal

try:
    from . import _sigwatch
except ImportError:  # built without a C compiler
    _sigwatch = None

#: the signals that stop a run
STOP_SIGNALS = tuple(int(getattr(signal, name)) for name in ("SIGTERM", "SIGINT") if hasattr(signal, name))
_original: list[Callable[..., Any]] = []  # signal.signal before start()


def start() -> None:
    """Count the arrivals of STOP_SIGNALS in this process from now on, and in the processes it
    forks. In the main thread; again is harmless."""
    if _sigwatch is None or not hasattr(_sigwatch, "keep_counting"):
        return
    if not _original:
        _original.append(real_signal)  # (signal.signal may be ours already: signal_disguise)
    for signum in STOP_SIGNALS:
        _sigwatch.keep_counting(_original[0], signum)
        try:
            if callable(real_getsignal(signum)):  # a Python handler: CPython's C one is installed
                _sigwatch.remember(signum)
            _sigwatch.watch(signum)  # only in front of CPython's: never of SIG_DFL, SIG_IGN, a C one
        except (OSError, ValueError):
            pass
    if signal.signal is _original[0]:  # not a wrapper someone put in since (it calls ours): theirs stays
        signal.signal = _sigwatch.signal


Mark = tuple  # (pid, {signal: arrivals})


def mark() -> Mark:
    """The counts now: `since(mark())` tells what comes after."""
    if _sigwatch is None:
        return (os.getpid(), {})
    return (os.getpid(), {s: _sigwatch.arrivals(s) for s in STOP_SIGNALS})


def since(m: Mark) -> int | None:
    """A stop signal that arrived in this process after `m` (SIGTERM before SIGINT), or None. In a
    forked child, whose counts started at 0, every arrival of its own counts."""
    if _sigwatch is None or not _original:
        return None
    pid, counts = m
    for signum in STOP_SIGNALS:
        before = counts.get(signum, 0) if pid == os.getpid() else 0
        if _sigwatch.arrivals(signum) > before:
            return signum
    return None


def arrived(m: Mark, signum: int) -> bool | None:
    """Whether `signum` arrived in this process after `m` (as `since`, for one signal); None where
    arrivals are not counted (no C extension, or `start()` not called): it cannot be told."""
    if _sigwatch is None or not _original:
        return None
    pid, counts = m
    before = counts.get(signum, 0) if pid == os.getpid() else 0
    return _sigwatch.arrivals(signum) > before
