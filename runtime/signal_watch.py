"""Make sure a forked child dies of a signal that scaleprobe handles in place of the default action.

In a forked child (a `multiprocessing` or DataLoader worker) the launcher's and the recorder's
SIGTERM handlers stand in for the default action: they write the child's data, then end it as the
kernel would have. But a Python handler runs only in the main thread, at its next bytecode
boundary or when a blocking call returns EINTR. A signal that arrives in the few instructions
between the interpreter's last check and the blocking call (glibc's `sem_wait` loop under a
`multiprocessing` lock) is taken by CPython's C handler and never reaches Python: the thread
sleeps on. A Pool worker stopped by `terminate()` hit this about once in 500 signals, and its
parent waited for it forever; under the default action the kernel ends the worker at once.

So in a forked child whose SIGTERM or SIGINT handler stands in for the default action, a C handler
in front of CPython's counts the signal's arrivals (`runtime/_sigwatch.c`; per process, reset at
fork), and the recorder's flush thread looks at the count every POLL_S: a stand-in signal that
arrived and has not reached Python within GRACE_S is taken from there (the recorder writes the
child's end record, then the default action). Nothing the program can see changes: no file
descriptor, no wakeup fd. Not armed without the C extension, nor without the flush thread
(`SCALEPROBE_FLUSH_INTERVAL=0`); a program that installs its own handler takes the signal over.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from .fork_signals import stands_in

try:
    from . import _sigwatch
except ImportError:  # built without a C compiler
    _sigwatch = None

#: how long a stand-in signal may stay unseen by Python before the flush thread takes it
GRACE_S = 0.5
#: how often the flush thread looks at the counts while armed
POLL_S = 0.2
_WATCHED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT") if hasattr(signal, name))


class Watch:
    def __init__(self, signals: tuple[int, ...]) -> None:
        self.signals = signals
        self.seen: dict[int, int] = {s: 0 for s in signals}  # arrivals that reached Python
        self.unseen_since: dict[int, float] = {}

    def note_seen(self, signum: int) -> None:
        """A Python handler for `signum` runs: it takes every arrival so far."""
        if signum in self.seen and _sigwatch is not None:
            self.seen[signum] = _sigwatch.arrivals(signum)
            self.unseen_since.pop(signum, None)

    def lost(self, now: float | None = None) -> int | None:
        """A stand-in signal that arrived and has not reached Python for GRACE_S, or None."""
        now = time.monotonic() if now is None else now
        for signum in self.signals:
            if _sigwatch.arrivals(signum) <= self.seen[signum]:
                self.unseen_since.pop(signum, None)
            elif not (_sigwatch.watching(signum) and stands_in(signum, _handler(signum))):
                self.unseen_since.pop(signum, None)  # the program took the signal over
            elif now - self.unseen_since.setdefault(signum, now) >= GRACE_S:
                return signum
        return None


def prepare() -> None:
    """Before a fork, in the parent: put the counting handler in front of the stand-in signals'
    handlers, so that the child counts from its first instruction (it inherits the handler; the
    counts start at 0 there)."""
    if _sigwatch is None:
        return
    for signum in _WATCHED:
        if stands_in(signum, _handler(signum)):
            try:
                _sigwatch.watch(signum)
            except OSError:
                pass


def arm() -> Watch | None:
    """In a forked child: watch its stand-in signals (None where there is none, or no C extension)."""
    if _sigwatch is None:
        return None
    signals = []
    for signum in _WATCHED:
        if stands_in(signum, _handler(signum)):
            try:
                if _sigwatch.watch(signum):
                    signals.append(signum)
            except OSError:
                pass
    return Watch(tuple(signals)) if signals else None


def take_default(signum: int, before: Callable[[], object]) -> None:
    """From any thread: run `before` (write the data), then end the process by `signum`'s default
    action. `signal.signal` is for the main thread only, so the disposition is reset in C."""
    try:
        before()
    finally:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal.restype = ctypes.c_void_p
            libc.signal(ctypes.c_int(signum), ctypes.c_void_p(0))  # SIG_DFL
            os.kill(os.getpid(), signum)
            time.sleep(1.0)  # delivered to a thread that does not block it
        finally:
            os._exit(128 + signum)


def _handler(signum: int) -> object:
    try:
        return signal.getsignal(signum)
    except (ValueError, OSError):
        return None
