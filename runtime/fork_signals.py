"""Keep a signal sent to a freshly forked child from being lost.

Where the program leaves SIGTERM (or SIGINT) to its default action, scaleprobe may handle it in
Python instead: the launcher, to unwind the rank and write its data; the recorder, to flush first.
A Python handler is run by the interpreter some time after the C-level signal arrives, and CPython
clears every such arrived signal in a forked child before resuming it (`PyOS_AfterFork_Child` ->
`_PySignal_AfterFork`, meant for signals the parent had not handled yet). A signal that reaches the
child in that window is dropped. `Pool.terminate()` sends SIGTERM to workers the moment they exist,
often before the scheduler has run them once: each such worker survived, blocked on a lock its
parent holds, and the parent waited on it forever. With the default action the kernel would have
ended the worker.

So these "stand-in" handlers' signals are blocked across `fork()`: in the child a signal sent early
stays pending, and arrives once the after-fork callbacks unblock it, past the clearing. A signal
whose handler is the program's own is left as it is: the program would lose it the same way.
"""

from __future__ import annotations

import os
import signal
from _thread import get_ident
from typing import Any, Callable

from .signal_disguise import real_getsignal, show_as

_stand_ins: dict[int, list[Callable[..., Any]]] = {}  # signal number -> handlers standing in for SIG_DFL
_saved: dict[int, Any] = {}  # forking thread -> its mask before _before blocked
_registered = [False]


def stand_in(signum: int, handler: Callable[..., Any], shown: Any = signal.SIG_DFL) -> None:
    """Record that `handler`, just installed for `signum` with `signal.signal`, stands in for the
    default action; the program is shown `shown` for it (`signal_disguise`: SIG_DFL, or None where
    `signal.getsignal` said None before)."""
    show_as(signum, handler, shown)
    try:
        from . import _sigwatch  # the C handler installed now is CPython's: signal_watch watches it

        _sigwatch.remember(signum)
    except (ImportError, OSError, ValueError):
        pass
    _stand_ins.setdefault(signum, []).append(handler)
    if not _registered[0] and hasattr(os, "register_at_fork") and hasattr(signal, "pthread_sigmask"):
        os.register_at_fork(before=_before, after_in_parent=_after, after_in_child=_after)
        _registered[0] = True


def stands_in(signum: int, handler: object) -> bool:
    """Whether `handler` is one of ours that stands in for `signum`'s default action."""
    return any(h is handler for h in _stand_ins.get(signum, ()))


def _before() -> None:
    block = set()
    for signum in _stand_ins:
        try:
            if stands_in(signum, real_getsignal(signum)):
                block.add(signum)
        except (ValueError, OSError):
            pass
    if block:
        try:
            _saved[get_ident()] = signal.pthread_sigmask(signal.SIG_BLOCK, block)
        except (ValueError, OSError):
            pass


def _after() -> None:
    mask = _saved.pop(get_ident(), None)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
