"""Pure-Python probe backend: per-thread call stacks and call-path trees.

The C extension `runtime._cprobe` implements the same functions faster; this module is the
fallback when it is not built (no compiler) or when SCALEPROBE_PURE=1. Both expose:
enter, exit, mark, left, back, back_of, ensure_capacity, set_off, take_deltas, take_iterations, current_path,
open_visits, reset_after_fork, dropped, threads, exit_seen, set_exit_seen, take_final_deltas, exit_elsewhere,
set_gpu_hooks, set_gpu_target, gpu_target.

The hot path is bytecode-bound, so every choice below saves bytecodes or allocations
(benchmarks/probe_overhead.py measures it):
- Times are float seconds from `perf_counter()`: float arithmetic is specialised by the
  interpreter and allocates from a free list, whereas nanosecond ints above 2**30 take the slow
  multi-digit path on every operation. Deltas are converted to integer nanoseconds at flush
  time; the float keeps sub-nanosecond resolution for ~50 days of uptime, a few ns after that.
- A call-tree node is a list (index access is the cheapest field access in CPython):
  [visits, incl, excl, min, max, sumsq, recursive, kids, rid, parent, snapshot, t0, x, lent].
- The node is its own stack frame: a node is one call path of one thread, so at most one of its
  visits is open at a time, and `t0`/`x` of that visit live in the node. Entering a region
  allocates nothing. `x` starts at t0 and every closed child adds its inclusive time to it, so
  the exclusive time of the visit is simply `t - x`.
- Direct recursion (a region entering itself) pushes the same node again: exit recognises it by
  identity (`stack[-1] is node`), counts nothing and adds no time, so inclusive time is never
  counted twice and no fold counter is checked on every exit.
- Indirect recursion (`a -> b -> a`) folds too. The first visit of a call path whose region is
  open further up (found once, when the path's node would be made) records a back edge to that
  node in `kids`. A node that is open already (its `t0` is not 0; exit sets it back to 0) is not
  entered again: a fold frame is pushed instead,
  [0, 0.0, 0.0, inf, 0.0, 0.0, 0, the node's kids, _FOLD, the node, None, t0, x, 0.0]. Its children are
  the node's (`a -> b -> a -> c` is recorded as `a -> c`), so a tree holds only call paths without
  a repeated region, however the program recurses (review 44: five functions calling each other
  in a data-dependent order made 849,489 call paths); it counts as a recursive visit. Its rid
  `_FOLD` sends its exit to the slow path (`_lend`), which takes its own time off the `x` of the
  node's previous frame (the node's exclusive time gets it when that visit ends; inclusive time
  and visits are the outer visit's), and has the frames in between lend it its time: their `t0`
  moves later by it (so their inclusive time leaves out what a region further up did inside them,
  which counts there), and their parents' `x` earlier by it (their exclusive time stays whole).
  A frame begun before note_on() keeps its `t0`, which the note_on checks compare, and keeps what
  it lent in a slot of its own, `lent` (as C's Frame.lent; review 76 MED-1): such a visit always
  ends dropped, where `lent` is taken off; moving the `t0` of a frame begun after the last
  note_on() changes no note_on check (it stays at or after it, and before any later note_on()).
  So every call path's inclusive time is its exclusive time plus its children's, and every
  nanosecond is some call path's own, once, as in C (the modeler's parts checks rely on it). Only
  the pure backend pays for folding on the hot path: one test in enter, one store in exit.
- The GPU rotation's target region (runtime/gpu.py) is a bit in `_off`: enter finds it where it
  checks `_off` anyway, exit with one index on its way out; only that region calls the hooks.
"""

from __future__ import annotations

import sys
import threading
import weakref
from time import perf_counter

_V, _INCL, _EXCL, _MIN, _MAX, _SQ, _REC, _KIDS, _RID, _PARENT, _SNAP, _T0, _X, _LENT = range(14)
_NSTATS = 7
_INF = float("inf")
_NS = 1e9
_ROOT_RID = -(1 << 40)  # never equal to a region id, valid or not: exit() can never close the root
_FOLD = -(1 << 41)  # the rid of a fold frame (indirect recursion): never a region id, so its exit takes the slow path

_local = threading.local()
# (root node, weak reference to a marker that lives in the thread's local storage, the thread's
# stack): when the thread ends its locals go, the reference dies, and the tree is dropped after its
# last deltas.
_roots: list[tuple[list, weakref.ref, list]] = []
_roots_lock = threading.Lock()
# Per region id, bits: _OFF = not timed (throttled or filtered out), _TARGET = the GPU rotation's
# target (its enter/exit call the hooks in _gpu). Extended in place, never rebound, because the
# hot-path functions hold it as a default argument.
_off: list[int] = [0] * 1024  # a list indexes faster than a bytearray here
_OFF, _TARGET = 1, 2
# `_off` with the _OFF bits only: what the target's own enter/exit take as their `_off` once
# _enter_target/_exit_target have called the hooks (a further parameter would cost every probe).
_off_only: list[int] = [0] * 1024
# The GPU rotation (runtime/gpu.py Rotation): [on_enter, on_exit, target rid or -1], as in C.
_gpu: list = [None, None, -1]
# Per region id, then as many slots again, where mark(negative id) lands (`_iters[-k]`): those
# count as dropped, as in C (review 76 LOW-1), at no cost to mark().
_iters: list[int] = [0] * 2048
_iters_snap: list[int] = [0] * 1024  # (its length is the number of region slots in `_iters`)
_dropped = [0]
# When probes were last switched on (note_on; 0: never): a visit begun before it is open across a
# window in which they were off, and ends as one left open does (as in C: `last_on`).
_last_on = [0.0]
# (code,) of the SystemExit in flight when the main thread last left its outermost region, or
# None: atexit cannot see how a program ended, so this is how `raise SystemExit(n)` is seen.
_exit_seen: list[tuple | None] = [None]
# The exception being handled (in a `finally` during unwinding: the one in flight).
_handled = getattr(sys, "exception", None) or (lambda: sys.exc_info()[1])  # sys.exception: 3.11+


def _new_node(rid: int, parent: list | None) -> list:
    return [0, 0.0, 0.0, _INF, 0.0, 0.0, 0, {}, rid, parent, None, 0.0, 0.0, 0.0]


def _new_thread() -> list:
    root = _new_node(_ROOT_RID, None)
    stack = [root]
    _local.stack = stack
    marker = _local.marker = _Marker()
    with _roots_lock:
        _roots.append((root, weakref.ref(marker), stack))
    return stack


class _Marker:
    __slots__ = ("__weakref__", "ident")

    def __init__(self) -> None:
        self.ident = threading.get_ident()


def _new_child(stack: list, parent: list, rid: int) -> list | None:
    """First visit of `rid` under the frame `parent` (on top of `stack`); None where nothing is to be
    entered: a negative id (counted as dropped), or `parent` a fold frame of `rid` itself (direct
    recursion: pushed again, as a node is)."""
    if rid < 0:
        _dropped[0] += 1
        return None
    if parent[_RID] == _FOLD:
        owner = parent[_PARENT]
        if owner[_RID] == rid:
            if parent[_T0] >= _last_on[0] or stack[-2] is parent:
                owner[_REC] += 1
                stack.append(parent)
                return None
            # open across a window with probes off and entered again: as enter() has it (and C)
            _drop_top(stack)
            parent = stack[-1]
            node = parent[_KIDS].get(rid)
            return node if node is not None else _new_child(stack, parent, rid)
        parent = owner  # the fold frame's children are its node's
    up = parent
    while up[_RID] != _ROOT_RID:  # `rid` further up (indirect recursion): its node is open, and folds
        if up[_RID] == rid:
            parent[_KIDS][rid] = up  # a back edge, which take_deltas skips
            return up
        up = up[_PARENT]
    node = parent[_KIDS][rid] = _new_node(rid, parent)
    return node


def _fold(stack: list, node: list) -> None:
    """enter() of a node that is open already (indirect recursion): a fold frame (see the module)."""
    t = perf_counter()
    node[_REC] += 1
    stack.append([0, 0.0, 0.0, _INF, 0.0, 0.0, 0, node[_KIDS], _FOLD, node, None, t, t, 0.0])


def _rid_of(frame: list) -> int:
    """The region of a stack frame: a node's, or a fold frame's node's."""
    return frame[_PARENT][_RID] if frame[_RID] == _FOLD else frame[_RID]


# The hot path indexes nodes with literal numbers (layout above: 6 recursive, 7 kids, 8 rid,
# 11 t0, 12 x) and takes its globals as default arguments: a named constant or a global is a
# dictionary lookup on every call, a literal or a local is not.
def enter(rid: int, _perf=perf_counter, _local=_local, _off=_off, _on=_last_on) -> None:
    try:
        if _off[rid]:
            if _off[rid] & 2 and rid >= 0:  # _TARGET (a negative index is no region of ours)
                _enter_target(rid)
            return
        stack = _local.stack
    except AttributeError:
        if _off[rid] & 2:  # raised by the GPU target's hook: the program's (as in C)
            raise
        stack = _new_thread()
    except (IndexError, TypeError):  # an id never defined: ignored (as in C) rather than failing the program
        if _valid(rid) and _off[rid] & 2:  # (or raised by the GPU target's hook)
            raise
        _dropped[0] += 1
        return
    top = stack[-1]
    if top[8] == rid:
        if top[11] >= _on[0] or stack[-2] is top:
            top[6] += 1
            stack.append(top)
            return
        # open across a window with probes off and entered again: the visit of a call that
        # returned while they were off, not recursion (as in C: enter_timed)
        _drop_top(stack)
        top = stack[-1]
    try:
        node = top[7][rid]
    except KeyError:
        node = _new_child(stack, top, rid)
        if node is None:
            return
    if node[11]:  # open already: indirect recursion
        if node[9] is not top:
            return _fold(stack, node)
        _lost(node)  # (its parent's frame is on top: no frame of it is on the stack)
    node[11] = node[12] = _perf()  # no call between marking it open and pushing it (review 76 MED-2)
    stack.append(node)


def _enter_target(rid: int) -> None:
    """enter() of the GPU target: the visit as for any region (unless throttled), then the hook,
    so that its start event falls inside the visit. When the hook raises (a signal handler's
    KeyboardInterrupt, a CUDA error), the visit just entered is undone before the exception goes on
    to the program (review 76 MED-3): the program's `finally` does not run for an enter that raised,
    and a visit left open would make every later visit of the region a recursive one."""
    timed = not _off[rid] & _OFF
    if timed:
        enter(rid, perf_counter, _local, _off_only)
    hook = _gpu[0]
    if hook is not None:
        try:
            hook(rid)
        except BaseException:
            if timed:
                _undo_enter(rid)
            raise


def _undo_enter(rid: int) -> None:
    """The visit of `rid` that enter() just began on this thread (on top) ends as one left open (as
    drop(rid) has it: no visit counted, counted in `dropped`); a folded recursive one is no
    recursive visit either."""
    stack = getattr(_local, "stack", None)
    if not stack or len(stack) < 2 or _rid_of(stack[-1]) != rid:
        return
    n = stack[-1]
    if n is stack[-2]:  # a folded direct-recursive visit
        (n[_PARENT] if n[_RID] == _FOLD else n)[_REC] -= 1
        del stack[-1]
        return
    if n[_RID] == _FOLD:
        n[_PARENT][_REC] -= 1
    _drop_above(stack, len(stack) - 2)


def exit(rid: int, _perf=perf_counter, _local=_local, _root=_ROOT_RID, _exc=_handled, _seen=_exit_seen, _off=_off,
         _on=_last_on) -> None:
    t = _perf()
    try:
        stack = _local.stack
    except AttributeError:  # nothing entered on this thread yet
        if not _valid(rid):
            _dropped[0] += 1
            return None
        if _off[rid] & _TARGET:
            return _exit_target(rid)
        return False if not _off[rid] & _OFF else None  # not open on this thread (the manual API says so)
    # From here on no call until the visit is closed and off the stack (review 76 MED-2): an
    # exception raised between the steps (a signal handler's, run by the eval breaker after a
    # CALL) would leave a frame taken off the stack and still open, or closed and still on it.
    n = stack[-1]
    if n[8] != rid:
        return _exit_other(stack, rid, t, _off)
    if _off[rid]:  # the GPU target, or a visit begun before its region was throttled
        if _off[rid] & 2:  # _TARGET
            return _exit_target(rid)
    p = stack[-2]
    if p is n:  # a folded direct-recursive visit
        del stack[-1]
        return
    if n[11] < _on[0]:  # open across a window with probes off (note_on)
        return _drop_top(stack)
    dt = t - n[11]
    p[12] += dt
    n[0] += 1
    n[1] += dt
    n[2] += t - n[12]
    n[11] = 0.0  # closed (see enter)
    del stack[-1]  # (a statement, not a call: no eval-breaker check between closing and popping)
    if dt < n[3]:
        n[3] = dt
    if dt > n[4]:
        n[4] = dt
    n[5] += dt * dt
    if p[8] is _root and (_exc() is not None or _seen[0] is not None):
        _note_outermost()


def _exit_target(rid: int) -> bool | None:
    """exit() of the GPU target: the hook first (its end event falls inside the visit), then the
    visit ends, at the time read after the hook; also when the hook raised (the exception then
    goes on to the program)."""
    hook = _gpu[1]
    try:
        if hook is not None:
            hook(rid)
    finally:
        result = exit(rid, perf_counter, _local, _ROOT_RID, _handled, _exit_seen, _off_only)
    return result


def _close_top(stack: list, t: float) -> None:
    """exit() of the frame on top, for the rare paths. As in exit(), a node is closed before it
    comes off the stack, with no call in between (review 76 MED-2)."""
    n = stack[-1]
    if n[_RID] is _ROOT_RID:  # the final flush took this thread's visits meanwhile (_close_open)
        return
    p = stack[-2]
    if p is n:
        del stack[-1]
        return
    if n[_T0] < _last_on[0]:
        _drop_top(stack)
        return
    if n[_RID] == _FOLD:
        p[_X] += t - n[_T0]
        if stack[-1] is n:  # (else the final flush took it meanwhile: _close_open)
            del stack[-1]
        _lend(stack, n, t)
    else:
        _count_visit(n, t, 0.0)
        if stack[-1] is not n:  # the final flush took it meanwhile (_close_open)
            return
        p[_X] += t - n[_T0]
        n[_T0] = 0.0  # closed (see enter)
        del stack[-1]
    if p[_RID] is _ROOT_RID:
        _note_outermost()


def _drop_top(stack: list) -> None:
    """The frame on top of `stack` was open across a window with probes off (`_last_on`): it ends
    as a visit left open does (`_end_frame_left_open`, counted in `dropped`), and then comes off
    the stack (closed first: review 76 MED-2)."""
    n = stack[-1]
    _end_frame_left_open(stack, len(stack) - 1, n)
    if stack[-1] is n:  # (else the final flush took it meanwhile: _close_open)
        del stack[-1]
    _dropped[0] += 1
    if stack[-1][_RID] is _ROOT_RID and (_handled() is not None or _exit_seen[0] is not None):
        _note_outermost()


def _lost(node: list) -> None:
    """enter() found `node` open while its parent's frame is on top, so no frame of it is on the
    stack: its visit was lost (taken off the stack and never closed, by an exception raised between
    the steps of a rare path: review 76 MED-2). It counts as dropped and is closed now, rather than
    turning every later visit of its call path into a recursive one."""
    node[_T0] = 0.0
    node[_LENT] = 0.0
    _dropped[0] += 1


def _lend(below: list, fold: list, t: float | None, inner: float = 0.0) -> None:
    """A fold frame ends at `t` (`below`: the frames under it; `inner`: time of an open visit inside
    it): its own time goes to its node's previous frame, and the frames in between lend it its
    time (see the module). `t` None: the fold frame is dropped (left open: `_end_left_open`); its own
    time stays where the dropped visits' does, and the frames in between lend it what its closed
    children took, which is recorded under its node."""
    node = fold[_PARENT]
    try:
        j = len(below) - 1
        while j > 0 and below[j] is not node and not (below[j][_RID] == _FOLD and below[j][_PARENT] is node):
            j -= 1
        if j == 0:  # (not found: another thread's stack taken as it changed, _close_open)
            return
        if t is None:
            lent = fold[_X] - fold[_T0] - fold[_LENT]
        else:
            lent = t - fold[_T0] - fold[_LENT]
            below[j][_X] -= t - fold[_X] - inner
        last_on = _last_on[0]
        for m in range(j + 1, len(below)):
            y = below[m]
            if y is below[m - 1]:  # a folded direct-recursive visit: the same frame again
                continue
            if y[_T0] < last_on:  # begun before note_on: its start stays, for the note_on checks
                y[_LENT] += lent  # (review 76 MED-1; such a visit ends dropped: _end_frame_left_open)
            else:
                y[_T0] += lent
            below[m - 1][_X] += lent
    except IndexError:  # the final flush took this thread's visits meanwhile (_close_open)
        return


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


def _valid(rid: object) -> bool:
    return type(rid) is int and 0 <= rid < len(_off)  # noqa: E721 - what the hot path can index


def _exit_other(stack: list, rid: int, t: float, off=_off) -> bool | None:
    """`rid` is not on top. Either its enter pushed nothing (region not timed, invalid id), or
    visits above it were left open (probes switched off mid-visit): those are dropped and the
    visit of `rid` itself is closed. (A visit that began before its region was throttled is on
    top and closes normally, so it never stays behind as a stale parent.) False: `rid` is timed
    but not open on this thread."""
    if not _valid(rid):
        _dropped[0] += 1
        return None
    if off[rid] & _TARGET:
        return _exit_target(rid)
    top = stack[-1]
    if top[_RID] == _FOLD and top[_PARENT][_RID] == rid:  # a fold frame (also of a region throttled since)
        # closed here, not by _close_top: a frame fewer at a program's recursion limit
        p = stack[-2]
        if p is top:  # a folded direct-recursive visit of it
            del stack[-1]
            return None
        if top[_T0] < _last_on[0]:
            _drop_top(stack)
            return None
        p[_X] += t - top[_T0]
        del stack[-1]
        _lend(stack, top, t)
        return None
    if off[rid] & _OFF:
        return None
    i = _innermost(stack, rid)
    if not i:
        return False
    _drop_above(stack, i)
    _close_top(stack, t)
    return None


def _drop_above(stack: list, i: int) -> None:
    """The visits above `stack[i]` were left open: each ends as in `_end_left_open`, innermost
    first, counted in `dropped`, and comes off the stack right after it is closed, with no call in
    between (review 76 MED-2: an exception raised in the middle leaves no closed frame on the stack
    and no open one off it)."""
    while len(stack) > i + 1:
        n = stack[-1]
        if n is stack[-2]:  # a folded direct-recursive visit: the same frame again
            del stack[-1]
            continue
        _end_frame_left_open(stack, len(stack) - 1, n)
        if stack[-1] is not n:  # the final flush took it meanwhile (_close_open)
            return
        del stack[-1]
        _dropped[0] += 1


def _innermost(stack: list, rid: int) -> int:
    """The index of the innermost frame of `rid` on `stack`, 0 where none (the root is none)."""
    for i in range(len(stack) - 1, 0, -1):
        if _rid_of(stack[i]) == rid:
            return i
    return 0


def _end_left_open(stack: list, i: int) -> int:
    """The visits above `stack[i]` were left open: each ends, innermost first, as one with no time
    of its own and no visit counted (returns how many): `_end_frame_left_open`. The dropped visits'
    own time stays in `stack[i]`'s, and every call path's inclusive time stays its exclusive time
    plus its children's (review 48 F1: crediting nothing, a path that also had whole visits had
    children adding up to more than that; lending only a dropped fold's own closed children, not
    those of the visits dropped above it, counted those twice)."""
    count = 0
    for j in range(len(stack) - 1, i, -1):
        if stack[j] is stack[j - 1]:  # a folded direct-recursive visit: the same frame again
            continue
        count += 1
        _end_frame_left_open(stack, j, stack[j])
    return count


def _end_frame_left_open(frames: list, j: int, n: list) -> None:
    """The frame `n`, `frames[j]` (the frames under it: `frames[:j]`), left open, ends: what its
    closed children took (recorded under it) is its node's inclusive time and no own time of the
    frame under it; a fold frame's goes to its node, and the frames in between lend it, as when a
    fold ends."""
    took = n[_X] - n[_T0] - n[_LENT]  # (_LENT: what it lent while its start stayed, see _lend)
    if n[_RID] == _FOLD:
        _lend(frames[:j], n, None)
    else:
        n[_INCL] += took
        n[_T0] = 0.0  # closed (see enter)
        n[_LENT] = 0.0
    frames[j - 1][_X] += took


def _count_frame(below: list, n: list, t: float, inner: float) -> None:
    """The frame `n` ends at `t` (`below`: the frames under it; `inner`: time of an open visit inside
    it): a visit of its node, or a fold frame's `_lend`."""
    if n[_RID] == _FOLD:
        _lend(below, n, t, inner)
    else:
        _count_visit(n, t, inner)
        n[_T0] = 0.0  # closed (see enter)


def _count_visit(n: list, t: float, inner: float) -> None:
    """One visit of node `n` ending at `t`; `inner`: time of an open visit inside it."""
    dt = t - n[_T0]
    n[_V] += 1
    n[_INCL] += dt
    n[_EXCL] += t - n[_X] - inner
    if dt < n[_MIN]:
        n[_MIN] = dt
    if dt > n[_MAX]:
        n[_MAX] = dt
    n[_SQ] += dt * dt


def _other_stacks(own: bool = False) -> list[list]:
    mine = getattr(_local, "stack", None)
    with _roots_lock:
        return [stack for _, alive, stack in _roots if (own or stack is not mine) and alive() is not None]


def take_final_deltas(own: bool = False, left: bool = False) -> tuple[int, list[tuple]]:
    """take_deltas() of the final flush, with the visits still open on other threads counted as
    ending now: (how many, deltas). As in C, a visit is never counted twice, however the threads
    switch meanwhile: each open visit is taken off its thread's stack by one atomic `list.pop`, so
    either `_close_open` counts it or the thread's own exit does, never both (see _close_open). With
    `own`, this thread's open visits too (a signal's default action ends the process where it
    stands); else they were left open and end as dropped visits do (counted in `dropped`). With
    `left` (probes are off at the end: a schedule's window, set_enabled(False)), every thread's
    visits do: they were left open, and their time since the probes went off is no time of theirs
    (review 52 F4, F5)."""
    closed = _close_open(own=own, left=left)
    mine = getattr(_local, "stack", None)
    if not own and mine:
        _dropped[0] += _end_left_open(mine, 0)  # its frames stay: nothing is flushed after the final flush
    return closed, take_deltas()


def _close_open(_tries: int = 100000, own: bool = False, left: bool = False) -> int:
    """The end of the run: the visits still open on other threads (daemon threads that run for the
    whole program; with `own`, this thread's too) are counted as ending now, or with `left` end as
    visits left open do (`_end_frame_left_open`, counted in `dropped`), and taken off their stacks:
    a thread that leaves one of them later finds it not open (exit() returns False) and counts
    nothing, so it is not counted twice whatever happens between this and take_deltas(). Nothing
    is flushed after the final flush. Returns how many visits were counted as ending now.

    The thread may go on meanwhile. Each frame is removed with one `stack.pop(i)`, which is atomic,
    at the index it had in a copy taken just before: if the thread left that visit first, the pop
    fails (or takes what the thread pushed since, which is open too) and the copy is taken again.
    The index is never 0, so the thread's root stays."""
    t = perf_counter()
    count = 0
    for stack in _other_stacks(own):
        inner = 0.0
        for _ in range(_tries):  # bounded: a thread that enters and leaves without pause cannot hold us
            frames = list(stack)  # one copy, atomic
            i = len(frames) - 1
            if i < 1:
                break
            try:
                n = stack.pop(i)
            except IndexError:  # the thread left a visit meanwhile: look again
                continue
            if n is frames[i - 1]:  # a folded direct-recursive visit: one visit with the outer one
                continue
            if left or n[_T0] < _last_on[0]:  # (or open across a window with probes off: note_on)
                n[_X] += inner  # the visit counted above it, if any, is a closed child of it
                inner = 0.0
                _end_frame_left_open(frames, i, n)
                _dropped[0] += 1
                continue
            begun = n[_T0]  # (_count_frame sets a node's back to 0)
            _count_frame(frames[:i], n, t, inner)
            inner = t - begun
            count += 1
    return count


def exit_elsewhere(rid: int) -> bool:
    """exit(rid) on a thread where rid is not open (a manual region entered on one thread, left on
    another): close the visit on the thread where rid is the innermost open region, if exactly
    one thread has it there. True if closed."""
    t = perf_counter()
    found = [s for s in _other_stacks() if len(s) > 1 and _rid_of(s[-1]) == rid]
    if len(found) != 1:
        return False
    stack = found[0]
    n = stack.pop()
    p = stack[-1]
    if p is not n:  # else a folded recursive visit: nothing to count
        if n[_T0] < _last_on[0]:  # open across a window with probes off (note_on)
            _end_frame_left_open(stack, len(stack), n)
            _dropped[0] += 1
            return True
        p[_X] += t - n[_T0]
        _count_frame(stack, n, t, 0.0)
    return True


def drop(rid: int) -> bool:
    """The innermost visit of `rid` on this thread ends as one left open (`_end_left_open`: no
    visit counted, no own time), and the visits above it with it, counted in `dropped`; a folded
    direct-recursive one is its outer visit's. For a manual region left while probes are off (as
    in C). False: `rid` is not open on this thread."""
    stack = getattr(_local, "stack", None)
    if stack is None or not _valid(rid):
        return False
    if len(stack) > 1 and stack[-1] is stack[-2] and stack[-1][_RID] == rid:  # a folded direct-recursive visit
        stack.pop()
        return True
    i = _innermost(stack, rid)
    if not i:
        return False
    _drop_above(stack, i - 1)
    return True


def _stack_of(ident: int) -> list | None:
    """The stack of the running thread `ident` (None: no such thread has had a visit)."""
    with _roots_lock:
        found = [stack for _, alive, stack in _roots if getattr(alive(), "ident", None) == ident]
    return found[0] if len(found) == 1 else None


def push_stale(ident: int, rids: tuple[int, ...]) -> int:
    """On thread `ident`, visits of the regions `rids` (outermost first) begin now, while probes are
    off: the functions it runs that were entered while probes were off get a visit, so that what
    they call once probes are on is recorded under them (runtime/stale_visits.py); begun before
    note_on(), each ends as a dropped visit. Regions not timed are passed over. What enter() does,
    on that thread's stack (enter() keeps its own copy: a call more would cost every probe).
    Returns how many began."""
    stack = _stack_of(ident)
    if stack is None:
        return 0
    n = 0
    for rid in rids:
        if not _valid(rid) or _off[rid]:
            continue
        n += 1
        top = stack[-1]
        if top[_RID] == rid:
            if top[_T0] >= _last_on[0] or stack[-2] is top:  # direct recursion: folded
                top[_REC] += 1
                stack.append(top)
                continue
            _drop_top(stack)  # (as enter does)
            top = stack[-1]
        node = top[_KIDS].get(rid)
        if node is None:
            node = _new_child(stack, top, rid)
            if node is None:
                continue
        if node[_T0]:  # open already: indirect recursion
            _fold(stack, node)
            continue
        node[_T0] = node[_X] = perf_counter()
        stack.append(node)
    return n


def note_on() -> None:
    """Probes are switched on now: the visits open now end as dropped ones (`_last_on`)."""
    _last_on[0] = perf_counter()


def open_stacks() -> list[tuple[int, tuple]]:
    """[(thread ident, ((rid, t0), ...)), ...]: the visits open on each running thread that has had
    one (none open: an empty tuple), outermost first, as in C (a folded direct-recursive visit is a position of its own here), for the check
    of visits whose function returned while probes were off (runtime/stale_visits.py)."""
    with _roots_lock:
        roots = list(_roots)
    out = []
    for _, alive, stack in roots:
        marker = alive()
        frames = list(stack)  # one copy, atomic
        if marker is not None and frames:
            out.append((marker.ident, tuple((_rid_of(n), n[_T0]) for n in frames[1:])))
    return out


def drop_stale(ident: int, pos: int, t0: float, _tries: int = 100000) -> int:
    """On thread `ident`, the visit at position `pos` of open_stacks()'s list (1: the outermost)
    and those above it end as visits left open do (`_end_frame_left_open`, counted in `dropped`),
    if that position still holds the visit open_stacks() saw (begun at t0). Each frame is taken off
    with one atomic `stack.pop(i)`, as `_close_open` does: the thread may go on meanwhile. Returns
    how many ended (a folded direct-recursive visit counts with its outer one)."""
    stack = _stack_of(ident)
    if stack is None:
        return 0
    count = 0
    for _ in range(_tries):
        frames = list(stack)
        i = len(frames) - 1
        if pos < 1 or i < pos or frames[pos][_T0] != t0:
            break
        try:
            n = stack.pop(i)
        except IndexError:  # the thread left a visit meanwhile: look again
            continue
        if n is not frames[i - 1]:
            _end_frame_left_open(frames, i, n)
            count += 1
    _dropped[0] += count
    return count


def mark(rid: int, _iters=_iters) -> None:
    # A negative id lands in the slots after the regions' (from -len(_iters_snap) on; below that it
    # raises IndexError): counted as dropped by dropped() and ensure_capacity(), as in C. Not
    # checked here: a check costs every iteration.
    try:
        _iters[rid] += 1
    except (IndexError, TypeError):
        _dropped[0] += 1


# The generators and coroutines that left their regions at a suspension and have not come back yet
# (see left): id of the frame -> the frame, held so that a stale note (no back() came: a generator
# that ignores GeneratorExit) cannot be taken by a later frame at the same address; since 3.11 only,
# where that reference keeps no reference cycle through a suspended generator alive (see _cprobe.c).
# One dict for the process: a generator may be resumed on another thread; a dict item is set and
# popped atomically under the GIL.
_held: dict[int, object] = {}
_HOLD = sys.version_info >= (3, 11)


def _owner(frame):
    """The function's frame for a frame of a comprehension (its own before Python 3.12)."""
    while frame.f_code.co_name[-5:] == "comp>" and frame.f_back is not None:  # <listcomp>, <setcomp>, <dictcomp>
        frame = frame.f_back
    return frame


def left(inner: int = 0, _frame=sys._getframe, _held=_held, _id=id, _hold=_HOLD) -> bool:
    """The calling generator or coroutine left its regions at a yield/await (after its operand).

    Keyed by its frame, which is the same object from this call to the matching back(). Every
    suspension that calls left() is followed by back() in the same frame, also when it raised or
    the generator was closed there (the statement's guard). `inner`: called from a comprehension's
    element, conditions or inner iterables, which may run in a frame of their own (before Python
    3.12): the key is the function's frame, where its guard runs."""
    f = _owner(_frame(1)) if inner else _frame(1)
    _held[_id(f)] = f if _hold else True
    return True


def back(inner: int = 0, _frame=sys._getframe, _held=_held, _forget=_held.pop, _id=id) -> bool:
    """Whether the calling generator or coroutine left its regions and has not come back yet; forgets it."""
    if not _held:
        return False
    return _forget(_id(_owner(_frame(1)) if inner else _frame(1)), None) is not None


def back_of(frame, _held=_held, _forget=_held.pop, _id=id) -> bool:
    """back() on behalf of `frame` (the `async with` wrapper's __aexit__, for the coroutine that awaits it)."""
    return bool(_held) and _forget(_id(frame), None) is not None


def release_held() -> None:
    """Every note is forgotten, at the end of the run (as in C: a generator that ignored
    GeneratorExit left one that no back() takes, and its frame kept what it held alive for good).
    The dict is emptied before the frames go: dropping one may run code that notes again."""
    notes = list(_held.values())
    _held.clear()
    del notes


def _left_count() -> int:
    """Frames noted by left() and not yet by back() (for tests)."""
    return len(_held)


def ensure_capacity(n: int) -> None:
    """Make region ids below `n` valid for the hot path."""
    have = len(_off)
    if n > have:
        grow = max(n, have * 2) - have
        _off_only.extend([0] * grow)  # first: a valid id (below len(_off)) is valid in both
        _off.extend([0] * grow)
        # region slots for the new ids, then a tail of negative ids' slots as long as the regions';
        # what the old tail counted is dropped (one slice read and one slice store, with no call
        # in between: no thread runs a mark() between them)
        tail = _iters[have:]
        _iters[have:] = [0] * (grow + have + grow)
        _dropped[0] += sum(tail)
        _iters_snap.extend([0] * grow)


def set_off(rid: int, off: bool) -> None:
    if rid < 0:
        raise ValueError(f"region id must not be negative, got {rid}")
    ensure_capacity(rid + 1)
    _off_only[rid] = _OFF if off else 0
    _off[rid] = (_off[rid] & _TARGET) | _off_only[rid]


def set_gpu_hooks(on_enter, on_exit) -> None:
    """on_enter(rid) runs after enter(rid), on_exit(rid) before exit(rid), for the GPU target
    region only (set_gpu_target). None, None: no hooks, and no target."""
    if on_enter is None and on_exit is None:
        _clear_target()
        _gpu[0] = _gpu[1] = None
        return
    if not callable(on_enter) or not callable(on_exit):
        raise TypeError("set_gpu_hooks(on_enter, on_exit): two callables, or None, None")
    _gpu[0], _gpu[1] = on_enter, on_exit


def _clear_target() -> None:
    rid = _gpu[2]
    if 0 <= rid < len(_off):
        _off[rid] &= ~_TARGET
    _gpu[2] = -1


def set_gpu_target(rid: int) -> None:
    """The region whose enter/exit call the GPU hooks; -1: none (and none while no hooks are set)."""
    rid = int(rid)
    if rid >= 0:
        ensure_capacity(rid + 1)
    _clear_target()
    if rid >= 0 and _gpu[0] is not None:
        _off[rid] |= _TARGET
        _gpu[2] = rid


def gpu_target() -> int:
    """The GPU target region, or -1."""
    return _gpu[2]


_NO_SNAP = (0, 0, 0, 0.0, 0, 0.0)  # visits, incl_ns, excl_ns, sumsq (float s^2), recursive, incl (float s)


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
    gone: set[int] = set()  # the ended threads' roots, taken out of `_roots` in one pass (review 54 F3)
    for root, alive, stack in roots:
        dead = alive() is None  # read first: an ended thread's stack changes no more
        if dead and len(stack) > 1:  # it ended with visits left open (review 52 F5)
            _dropped[0] += _end_left_open(stack, 0)
            del stack[1:]
        todo = [((), root)]
        while todo:
            path, node = todo.pop()
            for rid, child in list(node[_KIDS].items()):
                if child[_PARENT] is not node:  # a back edge to an ancestor (indirect recursion)
                    continue
                p = path + (rid,)
                cur = child[:_NSTATS]
                snap = child[_SNAP] or _NO_SNAP
                if cur[_V] != snap[0] or cur[_REC] != snap[4] or cur[_INCL] != snap[5]:  # (incl alone: a visit dropped)
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
                    child[_SNAP] = (cur[_V], incl, excl, cur[_SQ], cur[_REC], cur[_INCL])
                todo.append((p, child))
        if dead:  # the thread has ended and everything it measured is in `out`
            gone.add(id(root))
    if gone:
        with _roots_lock:  # by identity: nodes are cyclic lists, == would recurse (`roots` keeps them alive)
            _roots[:] = [r for r in _roots if id(r[0]) not in gone]
    return out


def take_iterations() -> list[tuple[int, int]]:
    out = []
    for rid, (c, s) in enumerate(zip(_iters, _iters_snap)):
        if c != s:
            out.append((rid, c - s))
            _iters_snap[rid] = c
    return out


def current_path() -> tuple[int, ...]:
    """The call path of this thread's innermost open visit, as the profile records it (folded)."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return ()
    n = stack[-1]
    if n[_RID] == _FOLD:
        n = n[_PARENT]
    path = []
    while n[_RID] != _ROOT_RID:
        path.append(n[_RID])
        n = n[_PARENT]
    return tuple(reversed(path))


def open_visits() -> int:
    """Visits open on this thread (a folded direct-recursive one counts with its outer visit)."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return 0
    return sum(1 for i in range(1, len(stack)) if stack[i] is not stack[i - 1])


def reset_after_fork() -> None:
    """In a forked child: forget everything the parent measured (the parent reports it)."""
    global _roots_lock
    _roots_lock = threading.Lock()
    _roots.clear()
    for i in range(len(_iters)):
        _iters[i] = 0
    for i in range(len(_iters_snap)):
        _iters_snap[i] = 0
    _dropped[0] = 0
    _last_on[0] = 0.0  # (no visit is open in the child)
    _clear_target()  # CUDA does not survive fork: the rotation's hooks are the parent's
    _gpu[0] = _gpu[1] = None
    _exit_seen[0] = None
    if hasattr(_local, "stack"):
        del _local.stack


def dropped() -> int:
    return _dropped[0] + sum(_iters[len(_iters_snap):])  # (mark of a negative id: see mark)


def threads() -> int:
    """Call trees kept: threads that recorded, minus ended ones already flushed."""
    return len(_roots)
