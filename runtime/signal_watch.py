"""Make sure a process dies of a signal that scaleprobe handles in place of the default action.

Where the program leaves SIGTERM (or SIGINT) to its default action, the launcher's and the
recorder's handlers stand in for it: they write the process's data, then end it as the kernel
would have. But a Python handler runs only in the main thread, at its next bytecode boundary or
when a blocking call returns EINTR, and C code that restarts its wait never returns it:

- a forked child (a `multiprocessing` or DataLoader worker): a signal that arrives in the few
  instructions between the interpreter's last check and the blocking call (glibc's `sem_wait`
  loop under a `multiprocessing` lock) is taken by CPython's C handler and never reaches Python:
  the thread sleeps on. A Pool worker stopped by `terminate()` hit this about once in 500
  signals, and its parent waited for it forever;
- a rank whose main thread is blocked in C: a collective waiting for a peer that never joins
  (gloo, NCCL), `.item()` or a stream synchronize behind a hung NCCL kernel; the usual state of
  the surviving ranks when one rank died (review 33 M1). Uninstrumented, SIGTERM ends it at once;
  with only the Python handler it lived on until torchrun or Slurm sent SIGKILL, and its run file
  lost its end record and its last interval.

Under the default action the kernel ends the process at once in both cases. So a C handler in
front of CPython's counts the signal's arrivals (`runtime/_sigwatch.c`; per process, reset at
fork), and the recorder's flush thread, which is never blocked with the program, looks at the
count every POLL_S: a stand-in signal that arrived and has not reached Python within the grace
period (GRACE_S in a forked child, MAIN_GRACE_S in the process that started recording) is taken
from there: the recorder writes the end record (`signal`), then the signal's default action ends
the process, which the parent sees killed by that signal, as without scaleprobe. A handler that
does run in time behaves exactly as without the watch; if it runs while the flush thread is
writing the end record, it waits for that write before it ends the process (one end record, no
cut line).

Nothing the program can see changes: no file descriptor, no wakeup fd, no extra thread; with no
signal the flush thread wakes every POLL_S for a few C calls, and the probes are untouched. Not
armed without the C extension (today's behaviour then: the Python handler runs when the blocking
call returns), nor without the flush thread (`SCALEPROBE_FLUSH_INTERVAL=0`). A program that
handles the signal itself takes it over: its handler, installed before recording started (the
recorder chains to it) or after (it replaces the recorder's), runs when the main thread gets back
to Python, as without scaleprobe, and the watch never ends the process for it. In the process
that started recording, only the recorder's own handler is watched, since only it tells the watch
that it ran (the launcher's, alone, lets the program unwind for however long its `finally` blocks
take).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable

from .fork_signals import stands_in
from .signal_disguise import real_getsignal

try:
    from . import _sigwatch
except ImportError:  # built without a C compiler
    _sigwatch = None

#: how long a stand-in signal may stay unseen by Python before the flush thread takes it, in a
#: forked child (whose main thread is then asleep for good)
GRACE_S = 0.5
#: the same in the process that started recording (a rank): its main thread may be in a long C
#: call that returns soon enough for its own handler to run, as today
MAIN_GRACE_S = 1.0
#: how often the flush thread looks at the counts while armed
POLL_S = 0.2
#: the signals whose default action ends the process, that scaleprobe's handlers stand in for where
#: the program leaves them to it (recorder._chain_signal), and that the watch takes: SIGTERM and
#: SIGINT, and those that end a run too (review 65 F3: they lost up to a flush interval, the file a
#: header alone): a terminal or ssh session that closes (SIGHUP), Slurm's warning before its time
#: limit to a program that does not take it (`--signal=USR1@T`), a CPU-time limit (SIGXCPU), an
#: alarm that nobody handles, SIGQUIT (its core dump stays), and the profiling timers' SIGVTALRM and
#: SIGPROF where nothing takes them (`setitimer` with no handler; review 83 LOW-6), whose handler,
#: where there is one, is never wrapped (`DEFAULT_ONLY`). Not the others whose default action ends
#: the process (SIGPWR, SIGSYS, SIGPOLL/SIGIO, SIGSTKFLT, the real-time signals): nothing sends
#: those to a training job
STAND_IN_SIGNALS = tuple(getattr(signal, name) for name in
                         ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGXCPU",
                          "SIGVTALRM", "SIGPROF")
                         if hasattr(signal, name))
#: of those, the ones stood in for only at their default action: a handler the program installed
#: before recording started is left alone, not chained (a sampling profiler's, which its timer calls
#: hundreds of times a second: the chained handler would flush the run file at every tick)
DEFAULT_ONLY = tuple(getattr(signal, name) for name in ("SIGVTALRM", "SIGPROF") if hasattr(signal, name))
_noting: list[Callable[..., object]] = []  # handlers that call Watch.note_seen first (the recorder's)


def notes_arrivals(handler: Callable[..., object]) -> None:
    """`handler` calls `note_seen` of the recorder's watch as soon as it runs."""
    _noting.append(handler)


def _notes(handler: object) -> bool:
    return any(h is handler for h in _noting)


class Watch:
    def __init__(self, signals: tuple[int, ...], grace: float = GRACE_S, noting_only: bool = False) -> None:
        self.signals = signals
        self.grace = grace
        self.noting_only = noting_only  # act only while the handler is one that notes (the recorder's)
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
            elif not (_sigwatch.watching(signum) and self._stands_in(signum)):
                self.unseen_since.pop(signum, None)  # the program took the signal over
            elif now - self.unseen_since.setdefault(signum, now) >= self.grace:
                return signum
        return None

    def _stands_in(self, signum: int) -> bool:
        handler = _handler(signum)
        return stands_in(signum, handler) and (not self.noting_only or _notes(handler))


def prepare() -> None:
    """Before a fork, in the parent: put the counting handler in front of the stand-in signals'
    handlers, so that the child counts from its first instruction (it inherits the handler; the
    counts start at 0 there)."""
    if _sigwatch is None:
        return
    for signum in STAND_IN_SIGNALS:
        if stands_in(signum, _handler(signum)):
            try:
                _sigwatch.watch(signum)
            except OSError:
                pass


def arm(main: bool = False) -> Watch | None:
    """In a forked child, or (`main`) in the process that started recording, once the recorder's
    handlers are installed: watch the stand-in signals (None where there is none, or no C
    extension). In the main process only the recorder's own handlers (see `notes_arrivals`)."""
    if _sigwatch is None:
        return None
    signals = []
    for signum in STAND_IN_SIGNALS:
        handler = _handler(signum)
        if stands_in(signum, handler) and (not main or _notes(handler)):
            try:
                if _sigwatch.watch(signum):
                    signals.append(signum)
            except OSError:
                pass
    if not signals:
        return None
    return Watch(tuple(signals), MAIN_GRACE_S, noting_only=True) if main else Watch(tuple(signals))


#: what else is to be written before the watch ends the process (`at_default_action`); this
#: process's own: a forked child (a Pool or DataLoader worker) starts with none (review 37: a
#: worker ended by its watch rewrote the launcher's record of the whole run)
_last_words: list[Callable[[int], object]] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_last_words.clear)


def at_default_action(callback: Callable[[int, bool], object]) -> Callable[[], None]:
    """Have `callback(signum, blocked)` run when the watch (`blocked`: the main thread never took
    the signal) or the recorder's stand-in handler ends this process by a signal's default action,
    after the recorder's end record (the launcher, running the program in its own process, ends
    its run's record). Returns what takes it back."""
    _last_words.append(callback)

    def remove() -> None:
        try:
            _last_words.remove(callback)
        except ValueError:
            pass

    return remove


def last_words(signum: int, blocked: bool) -> None:
    """Run the `at_default_action` callbacks: this process is about to end by `signum`'s default action."""
    for callback in list(_last_words):
        try:
            callback(signum, blocked)
        except Exception:  # the process ends as the signal would have ended it, whatever fails here
            pass


def take_default(signum: int, before: Callable[[], object]) -> None:
    """From any thread: run `before` (write the data) and the `at_default_action` callbacks, then
    end the process by `signum`'s default action. `signal.signal` is for the main thread only, so
    the disposition is reset in C; the signal is then sent to this very thread, unblocked here (the
    flush thread runs with the program's signals blocked, and the main thread may block it too)."""
    try:
        try:
            before()
        finally:
            last_words(signum, blocked=True)
    finally:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.signal.restype = ctypes.c_void_p
            libc.signal(ctypes.c_int(signum), ctypes.c_void_p(0))  # SIG_DFL
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
                signal.pthread_kill(threading.get_ident(), signum)
            except (AttributeError, OSError, ValueError):
                pass
            os.kill(os.getpid(), signum)  # where that is not available: any thread that does not block it
            time.sleep(1.0)
        finally:
            os._exit(128 + signum)


def _handler(signum: int) -> object:
    try:
        return real_getsignal(signum)
    except (ValueError, OSError):
        return None
