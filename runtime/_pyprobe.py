"""Pure-Python probe backend: per-thread call stacks and call-path trees.

The C extension `runtime._cprobe` implements the same functions faster; this module is the
fallback when it is not built (no compiler) or when SCALEPROBE_PURE=1. Both expose:
enter, exit, mark, ensure_capacity, set_off, take_deltas, take_iterations, current_path,
reset_after_fork, dropped, threads, exit_seen, set_exit_seen.

The hot path is bytecode-bound, so every choice below saves bytecodes or allocations
(benchmarks/probe_overhead.py measures it):
- Times are float seconds from `perf_counter()`: float arithmetic is specialised by the
  interpreter and allocates from a free list, whereas nanosecond ints above 2**30 take the slow
  multi-digit path on every operation. Deltas are converted to integer nanoseconds at flush
  time; the float keeps sub-nanosecond resolution for ~50 days of uptime, a few ns after that.
- A call-tree node is a list (index access is the cheapest field access in CPython):
  [visits, incl, excl, min, max, sumsq, recursive, kids, rid, parent, snapshot].
- A stack frame is a list [node, rid, t0, x]. `x` starts at t0 and every closed child adds its
  inclusive time to it, so the exclusive time of the visit is simply `t - x`.
- Direct recursion (a region entering itself) pushes the same frame object again instead of a
  new one: exit recognises it by identity (`stack[-1] is frame`), counts nothing and adds no
  time, so inclusive time is never counted twice and no fold counter is checked on every exit.
"""

from __future__ import annotations

import sys
import threading
import weakref
from time import perf_counter

_V, _INCL, _EXCL, _MIN, _MAX, _SQ, _REC, _KIDS, _RID, _PARENT, _SNAP = range(11)
_NSTATS = 7
_INF = float("inf")
_NS = 1e9
_ROOT_RID = -(1 << 40)  # never equal to a region id, valid or not: exit() can never close the root

_local = threading.local()
# (root node, weak reference to a marker that lives in the thread's local storage): when the
# thread ends its locals go, the reference dies, and the tree is dropped after its last deltas.
_roots: list[tuple[list, weakref.ref]] = []
_roots_lock = threading.Lock()
# Per region id: 1 = not timed (throttled or filtered out). Extended in place, never rebound,
# because the hot-path functions hold it as a default argument.
_off: list[int] = [0] * 1024  # a list indexes faster than a bytearray here
_iters: list[int] = [0] * 1024
_iters_snap: list[int] = [0] * 1024
_dropped = [0]
# (code,) of the SystemExit in flight when the main thread last left its outermost region, or
# None: atexit cannot see how a program ended, so this is how `raise SystemExit(n)` is seen.
_exit_seen: list[tuple | None] = [None]
# The exception being handled (in a `finally` during unwinding: the one in flight).
_handled = getattr(sys, "exception", None) or (lambda: sys.exc_info()[1])  # sys.exception: 3.11+


def _new_node(rid: int, parent: list | None) -> list:
    return [0, 0.0, 0.0, _INF, 0.0, 0.0, 0, {}, rid, parent, None]


def _new_thread() -> list:
    root = _new_node(_ROOT_RID, None)
    stack = [[root, _ROOT_RID, 0.0, 0.0]]
    _local.stack = stack
    marker = _local.marker = _Marker()
    with _roots_lock:
        _roots.append((root, weakref.ref(marker)))
    return stack


class _Marker:
    __slots__ = ("__weakref__",)


def _new_child(parent: list, rid: int) -> list | None:
    """First visit of `rid` under `parent`; None (and counted as dropped) for a negative id."""
    if rid < 0:
        _dropped[0] += 1
        return None
    node = parent[_KIDS][rid] = _new_node(rid, parent)
    return node


def enter(rid: int, _perf=perf_counter, _local=_local, _off=_off) -> None:
    try:
        if _off[rid]:
            return
        stack = _local.stack
    except AttributeError:
        stack = _new_thread()
    except (IndexError, TypeError):  # an id never defined: ignored (as in C) rather than failing the program
        _dropped[0] += 1
        return
    top = stack[-1]
    if top[1] == rid:
        stack.append(top)
        top[0][6] += 1
        return
    try:
        node = top[0][7][rid]
    except KeyError:
        node = _new_child(top[0], rid)
        if node is None:
            return
    t = _perf()
    stack.append([node, rid, t, t])


def exit(rid: int, _perf=perf_counter, _local=_local, _off=_off, _root=_ROOT_RID, _exc=_handled,
         _seen=_exit_seen) -> None:
    try:
        if _off[rid]:  # checked first: throttled regions are the most visited ones
            _exit_untimed(rid)
            return
    except (IndexError, TypeError):  # an id never defined
        _dropped[0] += 1
        return
    t = _perf()
    try:
        stack = _local.stack
    except AttributeError:
        return
    f = stack.pop()
    if f[1] != rid:
        stack.append(f)
        _exit_slow(stack, rid, t)
        return
    p = stack[-1]
    if p is f:  # a folded direct-recursive visit
        return
    dt = t - f[2]
    p[3] += dt
    n = f[0]
    n[0] += 1
    n[1] += dt
    n[2] += t - f[3]
    if dt < n[3]:
        n[3] = dt
    if dt > n[4]:
        n[4] = dt
    n[5] += dt * dt
    if p[1] is _root and (_exc() is not None or _seen[0] is not None):
        _note_outermost()


def _close_top(stack: list, t: float) -> None:
    """The hot path of exit() for the frame on top, for the rare paths."""
    f = stack.pop()
    p = stack[-1]
    if p is f:
        return
    dt = t - f[2]
    p[3] += dt
    n = f[0]
    n[0] += 1
    n[1] += dt
    n[2] += t - f[3]
    if dt < n[3]:
        n[3] = dt
    if dt > n[4]:
        n[4] = dt
    n[5] += dt * dt
    if p[1] is _ROOT_RID:
        _note_outermost()


def _note_outermost() -> None:
    """The outermost region of a thread closed: remember whether a SystemExit is leaving it."""
    if threading.get_ident() != threading.main_thread().ident:
        return  # a thread's own SystemExit ends only that thread
    e = _handled()
    _exit_seen[0] = (e.code,) if isinstance(e, SystemExit) else None


def exit_seen() -> tuple | None:
    """(code,) of the SystemExit that last left the main thread's outermost region, or None."""
    return _exit_seen[0]


def set_exit_seen(code: object) -> None:
    """A SystemExit(code) is on its way (the recorder's sys.exit calls this)."""
    _exit_seen[0] = (code,)


def _exit_untimed(rid: int) -> None:
    """exit() of a region that is not timed: its enter pushed nothing, unless the visit began
    before the region was throttled; that one is on top and closes normally, so it never stays
    behind as a stale parent of everything its caller does next."""
    stack = getattr(_local, "stack", None)
    if stack and stack[-1][1] == rid:
        _close_top(stack, perf_counter())


def _exit_slow(stack: list, rid: int, t: float) -> None:
    """`rid` is timed but not on top: frames above it were left open (probes switched off
    mid-visit). They are dropped; the visit of `rid` itself is closed."""
    if rid < 0:
        _dropped[0] += 1
        return
    for i in range(len(stack) - 1, 0, -1):
        if stack[i][1] == rid:
            break
    else:
        return
    # Folded recursion repeats a frame object: count each dropped visit once.
    _dropped[0] += sum(1 for j in range(i + 1, len(stack)) if stack[j] is not stack[j - 1])
    del stack[i + 1 :]
    _close_top(stack, t)


def mark(rid: int, _iters=_iters) -> None:
    # A negative id would count for another region: not checked, because no caller makes one
    # (the instrumentor and reserve() hand out ids from 0 up) and a check costs every iteration.
    try:
        _iters[rid] += 1
    except (IndexError, TypeError):
        _dropped[0] += 1


def ensure_capacity(n: int) -> None:
    """Make region ids below `n` valid for the hot path."""
    have = len(_off)
    if n > have:
        grow = max(n, have * 2) - have
        _off.extend([0] * grow)
        _iters.extend([0] * grow)
        _iters_snap.extend([0] * grow)


def set_off(rid: int, off: bool) -> None:
    if rid < 0:
        raise ValueError(f"region id must not be negative, got {rid}")
    ensure_capacity(rid + 1)
    _off[rid] = 1 if off else 0


_NO_SNAP = (0, 0, 0, 0.0, 0)  # visits, incl_ns, excl_ns, sumsq (float s^2), recursive


def take_deltas() -> list[tuple]:
    """(path, visits, incl, excl, min, max, sumsq, recursive) changed since the last call, in ns.

    Runs in the flushing thread while others keep recording: each node's stats are copied with
    one slice (atomic under the GIL), and the copy becomes the baseline of the next delta. The
    baseline keeps cumulative times already rounded to ns, so the deltas of a run add up to
    exactly its rounded total.
    """
    with _roots_lock:
        roots = list(_roots)
    out: list[tuple] = []
    for root, alive in roots:
        todo = [((), root)]
        while todo:
            path, node = todo.pop()
            for rid, child in list(node[_KIDS].items()):
                p = path + (rid,)
                cur = child[:_NSTATS]
                snap = child[_SNAP] or _NO_SNAP
                if cur[_V] != snap[0] or cur[_REC] != snap[4]:
                    incl = round(cur[_INCL] * _NS)
                    excl = round(cur[_EXCL] * _NS)
                    # sumsq as a float: squared nanoseconds overflow 64 bits after a few seconds.
                    out.append(
                        (
                            p,
                            cur[_V] - snap[0] + cur[_REC] - snap[4],
                            incl - snap[1],
                            excl - snap[2],
                            round(cur[_MIN] * _NS) if cur[_V] else 0,
                            round(cur[_MAX] * _NS),
                            (cur[_SQ] - snap[3]) * 1e18,
                            cur[_REC] - snap[4],
                        )
                    )
                    child[_SNAP] = (cur[_V], incl, excl, cur[_SQ], cur[_REC])
                todo.append((p, child))
        if alive() is None:  # the thread has ended and everything it measured is in `out`
            with _roots_lock:  # by identity: nodes are cyclic lists, == would recurse
                _roots[:] = [r for r in _roots if r[0] is not root]
    return out


def take_iterations() -> list[tuple[int, int]]:
    out = []
    for rid, (c, s) in enumerate(zip(_iters, _iters_snap)):
        if c != s:
            out.append((rid, c - s))
            _iters_snap[rid] = c
    return out


def current_path() -> tuple[int, ...]:
    stack = getattr(_local, "stack", None)
    if not stack:
        return ()
    return tuple(stack[i][1] for i in range(1, len(stack)) if stack[i] is not stack[i - 1])


def reset_after_fork() -> None:
    """In a forked child: forget everything the parent measured (the parent reports it)."""
    global _roots_lock
    _roots_lock = threading.Lock()
    _roots.clear()
    for i in range(len(_iters)):
        _iters[i] = 0
        _iters_snap[i] = 0
    _dropped[0] = 0
    _exit_seen[0] = None
    if hasattr(_local, "stack"):
        del _local.stack


def dropped() -> int:
    return _dropped[0]


def threads() -> int:
    """Call trees kept: threads that recorded, minus ended ones already flushed."""
    return len(_roots)
