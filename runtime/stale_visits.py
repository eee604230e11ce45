"""Visits whose function returned while probes were off, found when they come back on.

A probe that finds probes off costs a flag check and nothing more, so a function entered while
they were on that returns while they are off (a background thread's, under a schedule or
`set_enabled`) stays open on its thread's stack: the thread's later visits of it were counted as
recursion inside it, and those of other functions as its children, with its time running on across
the window that was off (a producer's `work()` showed about twice its time per visit under a
schedule on half the time).

When probes come back on, every thread's open visits are checked against the functions that thread
is running now (`sys._current_frames()`): the open visits of functions, outermost first, must each
find a frame of a function of that name, in the same order, on the thread's stack. The first one
that finds none returned while probes were off; it and the visits above it (its loops and callees,
all ended with it) end as visits left open do: no visit counted, no time of their own, counted in
the end record's `dropped` ([format.md](../docs/format.md), `profile`), the same as the visits the
end of a run finds left so. The check runs while probes are still off, so no probe moves the stacks
meanwhile. A loop has no frame of its own: its visit ends so where its function's frame is at a
line before the loop's first (the next round of an enclosing loop); a loop that ended while probes
were off, its function's frame now after it, cannot be told from a running one, and a later visit
of it counts as recursion inside it until the function returns.

The functions a thread runs above the last one whose visit was kept, entered while probes were
off (or resumed then: a generator, a coroutine), get a visit when they come back on (`push_stale`),
begun before the switch, so dropped at its end; what they call is then recorded under them, not
under their caller. A thread the backend has not seen yet (started while probes were off) has no
stack to put them on.

The names are compared as Python's code objects have them (`co_qualname`, 3.11+; before, the last
part of the name), which is how the instrumentor names a function's region (of every kind in
FUNCTIONS): a frame of another function of the same name can only keep a returned visit open (as
before), never end a running one.
"""
from __future__ import annotations

import sys
from types import CodeType
from typing import Any

from . import linemap


def _name_of(code: CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)


def _same(frame_name: str, region_name: str, qualified: bool) -> bool:
    return frame_name == region_name if qualified else frame_name == region_name.rpartition(".")[2]


# the kinds of regions that are a function's visit (docs/instrument.md), and those that are a loop's
FUNCTIONS = frozenset(("function", "method", "generator", "async_generator", "coroutine"))
LOOPS = frozenset(("loop", "epoch", "step"))


def end_stale(impl: Any, regions: dict) -> int:
    """End the open visits of functions that no longer run, and of loops that their function's frame
    has left, and begin visits for the functions each thread runs above its last open one that were
    entered while probes were off (see the module); returns how many visits ended. `regions`: the
    recorder's {rid: (kind, name, file, line, module)}. Call with the collector paused (gc_pause:
    the C backend walks its threads while building the list)."""
    stacks = impl.open_stacks()
    if not stacks:
        return 0
    frames = sys._current_frames()
    qualified = hasattr(CodeType, "co_qualname")
    functions = _functions(regions)
    ended = 0
    for ident, visits in stacks:
        f = frames.get(ident)
        if f is None:  # no Python frame now (ending, or not started): nothing to compare with
            continue
        running = []
        while f is not None:
            running.append(f)
            f = f.f_back
        running.reverse()  # outermost first, as the visits are
        names = [_name_of(f.f_code) for f in running]
        j = kept = 0  # kept: the frames up to the last function that kept its visit
        owner = None  # the frame of the function whose visit was matched last
        for pos, (rid, t0) in enumerate(visits, 1):
            region = regions.get(rid)
            if region is None:
                continue
            kind, name = region[0], region[1]
            if kind in FUNCTIONS:
                while j < len(names) and not _same(names[j], name, qualified):
                    j += 1
                if j == len(names):
                    ended += impl.drop_stale(ident, pos, t0)
                    break
                owner = running[j]
                j += 1
                kept = j
            elif kind in LOOPS and owner is not None and _left_loop(owner, name, region[3], qualified):
                ended += impl.drop_stale(ident, pos, t0)
                break
        entered_off = tuple(rid for rid in (functions.get((f.f_globals.get("__name__"), _name_of(f.f_code)))
                                            for f in running[kept:]) if rid is not None)
        if entered_off:
            impl.push_stale(ident, entered_off)
    return ended


_FUNCTIONS: list = [None, -1, {}]  # the regions dict, its size, and its (module, name) -> rid


def _functions(regions: dict) -> dict:
    """(module, qualified name) -> rid of the function regions in `regions`, for the frames of the
    functions a thread runs; a name defined twice in a module (two `def`s under an `if`) has none."""
    if _FUNCTIONS[0] is not regions or _FUNCTIONS[1] != len(regions):
        found: dict = {}
        for rid, region in list(regions.items()):
            if region[0] in FUNCTIONS:
                key = (region[4], region[1])
                found[key] = None if key in found else rid
        _FUNCTIONS[:] = [regions, len(regions), found]
    return _FUNCTIONS[2]


def _left_loop(frame: Any, loop: str, line: int, qualified: bool) -> bool:
    """Whether `frame`, running the function that the loop `loop` (`<function>:for@<line>`) is in,
    is before the loop's first line: then the loop has ended (its frame runs code before it: the
    next round of an enclosing loop). A loop's end line is not known, so a frame after the loop
    says nothing. The frame's line is the source's (`linemap.source_lineno`: a module that runs
    with the copy's numbering is mapped back), like the loop's."""
    lineno = frame.f_lineno
    if lineno is None or not _same(_name_of(frame.f_code), loop.rpartition(":")[0], qualified):
        return False
    return 0 < linemap.source_lineno(frame.f_code.co_filename, lineno) < line
