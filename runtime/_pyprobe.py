"""Pure-Python probe backend: per-thread call stacks and call-path trees, integers only.

The C extension `runtime._cprobe` implements the same functions faster; this module is the
fallback when it is not built (no compiler) or when SCALEPROBE_PURE=1. Both expose:
enter, exit, mark, ensure_capacity, set_off, take_deltas, take_iterations, current_path,
reset_after_fork, dropped.

A call-tree node is a list (index access is the cheapest field access in CPython):
  [visits, incl, excl, min, max, sumsq, recursive, kids, rid, parent, snapshot]
A stack frame is a list: [node, rid, child_ns, folded_depth, t0].
Direct recursion (a region entering itself) is folded into the running frame: it counts a visit
in `recursive` but adds no time, so inclusive time is never counted twice.
"""

from __future__ import annotations

import threading
import weakref
from time import perf_counter_ns

_V, _INCL, _EXCL, _MIN, _MAX, _SQ, _REC, _KIDS, _RID, _PARENT, _SNAP = range(11)
_NSTATS = 7
_BIG = 1 << 62

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


def _new_node(rid: int, parent: list | None) -> list:
    return [0, 0, 0, _BIG, 0, 0, 0, {}, rid, parent, None]


def _new_thread() -> list:
    root = _new_node(-1, None)
    stack = [[root, -1, 0, 0, 0]]
    _local.stack = stack
    marker = _local.marker = _Marker()
    with _roots_lock:
        _roots.append((root, weakref.ref(marker)))
    return stack


class _Marker:
    __slots__ = ("__weakref__",)


def enter(rid: int, _perf=perf_counter_ns, _local=_local, _off=_off) -> None:
    if _off[rid]:
        return
    try:
        stack = _local.stack
    except AttributeError:
        stack = _new_thread()
    top = stack[-1]
    if top[1] == rid:
        top[3] += 1
        top[0][6] += 1
        return
    parent = top[0]
    node = parent[7].get(rid)
    if node is None:
        node = parent[7][rid] = _new_node(rid, parent)
    stack.append([node, rid, 0, 0, _perf()])


def exit(rid: int, _perf=perf_counter_ns, _local=_local, _off=_off) -> None:
    t = _perf()
    try:
        stack = _local.stack
    except AttributeError:
        return
    f = stack[-1]
    if f[1] != rid:
        # An untimed region's enter pushed nothing. A visit that began before its region was
        # throttled is on top and closes normally, so it never stays behind as a stale parent.
        if not _off[rid]:
            _exit_slow(stack, rid, t)
        return
    if f[3]:
        f[3] -= 1
        return
    del stack[-1]
    dt = t - f[4]
    n = f[0]
    n[0] += 1
    n[1] += dt
    n[2] += dt - f[2]
    if dt < n[3]:
        n[3] = dt
    if dt > n[4]:
        n[4] = dt
    n[5] += dt * dt
    stack[-1][2] += dt


def _exit_slow(stack: list, rid: int, t: int) -> None:
    """`rid` is not on top: frames above it were left open (probes switched off mid-visit,
    a region throttled while active). They are dropped; the visit of `rid` itself is closed."""
    for i in range(len(stack) - 1, 0, -1):
        if stack[i][1] == rid:
            break
    else:
        return
    _dropped[0] += len(stack) - 1 - i
    del stack[i + 1 :]
    exit(rid)
    # exit() took its own timestamp; the difference is a few tens of ns and not worth a variant.


def mark(rid: int, _iters=_iters) -> None:
    _iters[rid] += 1


def ensure_capacity(n: int) -> None:
    """Make region ids below `n` valid for the hot path."""
    have = len(_off)
    if n > have:
        grow = max(n, have * 2) - have
        _off.extend([0] * grow)
        _iters.extend([0] * grow)
        _iters_snap.extend([0] * grow)


def set_off(rid: int, off: bool) -> None:
    ensure_capacity(rid + 1)
    _off[rid] = 1 if off else 0


def take_deltas() -> list[tuple]:
    """(path, visits, incl, excl, min, max, sumsq, recursive) changed since the last call.

    Runs in the flushing thread while others keep recording: each node's stats are copied with
    one slice (atomic under the GIL), and the copy becomes the baseline of the next delta.
    """
    with _roots_lock:
        roots = list(_roots)
    out: list[tuple] = []
    for root, alive in roots:
        todo = [((), root)]
        while todo:
            path, node = todo.pop()
            for rid, child in list(node[7].items()):
                p = path + (rid,)
                cur = child[:_NSTATS]
                snap = child[_SNAP]
                if snap is None:
                    snap = (0, 0, 0, 0, 0, 0, 0)
                if cur[0] != snap[0] or cur[6] != snap[6]:
                    # sumsq as a float: squared nanoseconds overflow 64 bits after a few seconds.
                    out.append(
                        (
                            p,
                            cur[0] - snap[0] + cur[6] - snap[6],
                            cur[1] - snap[1],
                            cur[2] - snap[2],
                            cur[3] if cur[0] else 0,
                            cur[4],
                            float(cur[5] - snap[5]),
                            cur[6] - snap[6],
                        )
                    )
                    child[_SNAP] = cur
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
    return tuple(f[1] for f in stack[1:])


def reset_after_fork() -> None:
    """In a forked child: forget everything the parent measured (the parent reports it)."""
    global _roots_lock
    _roots_lock = threading.Lock()
    _roots.clear()
    for i in range(len(_iters)):
        _iters[i] = 0
        _iters_snap[i] = 0
    _dropped[0] = 0
    if hasattr(_local, "stack"):
        del _local.stack


def dropped() -> int:
    return _dropped[0]


def threads() -> int:
    """Call trees kept: threads that recorded, minus ended ones already flushed."""
    return len(_roots)
