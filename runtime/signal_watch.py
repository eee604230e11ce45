"""Make sure a forked child dies of a signal that scaleprobe handles in place of the default action.

In a forked child (a `multiprocessing` or DataLoader worker) the launcher's and the recorder's
SIGTERM handlers stand in for the default action: they write the child's data, then end it as the
kernel would have. But a Python handler runs only in the main thread, at its next bytecode
boundary or when a blocking call returns EINTR. A signal that arrives in the few instructions
between the interpreter's last check and the blocking call (glibc's `sem_wait` loop under a
`multiprocessing` lock) is taken by the C-level handler and never reaches Python: the thread
sleeps on. A Pool worker stopped by `terminate()` hit this about once in 500 signals, and its
parent waited for it forever; under the default action the kernel ends the worker at once.

The C-level handler also writes the signal's number to the wakeup fd (`signal.set_wakeup_fd`).
In a forked child whose SIGTERM or SIGINT handler stands in for the default action, the recorder's
flush thread watches that fd: a stand-in signal that has not reached Python within GRACE_S is
taken from there (the recorder writes the child's end record, then the default action).

Not armed where the program has a wakeup fd of its own (asyncio), nor without the flush thread
(`SCALEPROBE_FLUSH_INTERVAL=0`); a program that sets a wakeup fd later takes it over.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

from .fork_signals import stands_in

#: how long a stand-in signal may stay unseen by Python before the flush thread takes it
GRACE_S = 0.5
#: how often the flush thread looks at the fd while armed
POLL_S = 0.1
_WATCHED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT") if hasattr(signal, name))


class Watch:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.unseen: dict[int, float] = {}  # signal -> when the flush thread first read it
        self.seen: set[int] = set()  # signals whose Python handler ran: no longer watched

    def note_seen(self, signum: int) -> None:
        """A Python handler for `signum` ran: the interpreter takes it from here."""
        self.seen.add(signum)
        self.unseen.pop(signum, None)

    def lost(self, now: float | None = None) -> int | None:
        """Read the fd; a stand-in signal unseen by Python for GRACE_S, or None."""
        try:
            data = os.read(self.read_fd, 512)
        except (BlockingIOError, InterruptedError):
            data = b""
        except OSError:
            return None
        now = time.monotonic() if now is None else now
        for signum in data:
            if signum in _WATCHED and signum not in self.seen:
                self.unseen.setdefault(signum, now)
        for signum, since in list(self.unseen.items()):
            if signum in self.seen or not stands_in(signum, signal.getsignal(signum)):
                del self.unseen[signum]  # the program took the signal over
            elif now - since >= GRACE_S:
                return signum
        return None

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def arm(inherited: Watch | None = None) -> Watch | None:
    """In the main thread of a forked child: watch its stand-in signals (None where not armed).
    `inherited` is the parent's Watch, when the parent was a forked child itself."""
    ours = -1 if inherited is None else inherited.write_fd
    want = any(stands_in(s, _handler(s)) for s in _WATCHED)
    r = w = -1
    if want:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
    try:
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except (ValueError, OSError):  # not the main thread
            return _closed(r, w)
        if old not in (-1, ours):
            signal.set_wakeup_fd(old)  # the program's own (asyncio): leave it be
            return _closed(r, w)
        return Watch(r, w) if want else None
    finally:
        if inherited is not None:
            inherited.close()  # the parent's pipe, after the wakeup fd left it


def _closed(*fds: int) -> None:
    for fd in fds:
        if fd != -1:
            os.close(fd)
    return None


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
