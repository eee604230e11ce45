"""SCALEPROBE_NVTX=1: push every region as an NVTX range too, so an nsys capture shows them.

Uses nvtx's domain API with attributes registered once per region id. The module's
`__sp_enter__`/`__sp_exit__` globals are replaced by variants that push/pop and then call the
normal probes, so programs run without NVTX pay nothing for it. The manual API (runtime.manual)
pushes and pops its regions through `push`/`pop` here.

NVTX keeps one stack of ranges per thread, and a pop ends the innermost range whatever it is. So
each thread keeps here the region ids it pushed, and an exit pops only a range its region pushed
(review 70 F1: a function entered with probes off and left with them on popped its caller's
range). An exit whose range has ranges above it that were never popped (regions left while probes
were off) pops those first: NVTX ranges nest, so they cannot outlive it. A manual region whose
visit another thread ended (a hand-over) cannot be popped from there: it is noted for the thread
that pushed it, which pops it at its next manual push where it is on top, or with a range around it.
"""

from __future__ import annotations

import threading
from typing import Any

from . import _backend

impl = _backend.impl
_state: dict[str, Any] = {}


class _Pushed:
    """One thread's ranges: the region ids it pushed (innermost last), and of those, per region id,
    how many visits another thread ended (their ranges to pop here when they come on top)."""

    __slots__ = ("rids", "ended")

    def __init__(self) -> None:
        self.rids: list[int] = []
        self.ended: dict[int, int] = {}


_local = threading.local()  # .pushed: this thread's _Pushed
_threads: dict[int, _Pushed] = {}  # by thread ident (the latest thread of that ident): for hand-overs
_ended_lock = threading.Lock()  # for every _Pushed.ended


def _mine() -> _Pushed:
    try:
        return _local.pushed
    except AttributeError:  # this thread's first range
        p = _local.pushed = _Pushed()
        _threads[threading.get_ident()] = p
        return p


def ended_elsewhere(thread: int, rid: int) -> None:
    """The visit of `rid` that thread `thread` pushed a range for ended on this thread (a manual
    region handed over): that thread pops the range when it can."""
    p = _threads.get(thread)
    if p is not None and p is not getattr(_local, "pushed", None):
        with _ended_lock:
            p.ended[rid] = p.ended.get(rid, 0) + 1


def _domain() -> tuple[Any, dict]:
    if "domain" not in _state:
        import nvtx

        _state["domain"] = nvtx.get_domain("scaleprobe")
        _state["attrs"] = {}
    return _state["domain"], _state["attrs"]


def _make(rec: Any) -> tuple[Any, Any, Any, Any]:
    """The probes (push, then the backend's enter; its exit, then pop) and the bare push and pop,
    made once per process: every module, and the manual API, share one per-thread record."""
    domain, attrs = _domain()
    push_range, pop_range = domain.push_range, domain.pop_range
    enter, exit = impl.enter, impl.exit
    local = _local

    def settle(p: _Pushed) -> None:
        """Pop the ranges on top whose visits ended on another thread."""
        with _ended_lock:
            rids, ended = p.rids, p.ended
            while rids and ended.get(rids[-1]):
                r = rids.pop()
                pop_range()
                ended[r] -= 1
                if not ended[r]:
                    del ended[r]

    def push(rid: int, _attrs: dict = attrs) -> None:
        a = _attrs.get(rid)
        if a is None:
            name = rec.regions.get(rid, ("", f"region {rid}"))[1]
            a = _attrs[rid] = domain.get_event_attributes(message=name)
        p = _mine()
        if p.ended:
            settle(p)
        push_range(a)
        p.rids.append(rid)

    def pop(rid: int) -> None:
        p = getattr(local, "pushed", None)
        rids = p.rids if p is not None else None
        if not rids:
            return  # this thread pushed nothing that is still open: nothing of ours to end
        if rids[-1] == rid:
            rids.pop()
            pop_range()
            return
        if rid not in rids:
            return  # entered while probes were off (or on another thread): never pushed here
        while rids:  # the ranges above it were left while probes were off: they end with it
            popped = rids.pop()
            pop_range()
            if popped == rid:
                return
            if p.ended:  # one handed over: its note goes with its range
                with _ended_lock:
                    n = p.ended.get(popped)
                    if n:
                        if n == 1:
                            del p.ended[popped]
                        else:
                            p.ended[popped] = n - 1

    def nvtx_enter(rid: int, _attrs: dict = attrs) -> None:
        a = _attrs.get(rid)  # push(rid), its common case inlined: this is every region's entry
        p = getattr(local, "pushed", None)
        if a is None or p is None or p.ended:
            push(rid)
        else:
            push_range(a)
            p.rids.append(rid)
        enter(rid)

    def nvtx_exit(rid: int) -> None:
        exit(rid)
        p = getattr(local, "pushed", None)  # pop(rid), its common case inlined
        if p is not None:
            rids = p.rids
            if rids and rids[-1] == rid:
                rids.pop()
                pop_range()
            elif rids:
                pop(rid)

    from .dynamo import hide

    hide(nvtx_enter, nvtx_exit)
    return nvtx_enter, nvtx_exit, push, pop


def probes(rec: Any) -> tuple[Any, Any, Any, Any]:
    """(nvtx_enter, nvtx_exit, push, pop) for this process; registers the recorder's regions."""
    made = _state.get("probes")
    if made is None:
        made = _state["probes"] = _make(rec)
    domain, attrs = _domain()
    for rid, (kind, name, *_rest) in list(rec.regions.items()):
        if rid not in attrs:
            attrs[rid] = domain.get_event_attributes(message=name)
    return made


def install(rec: Any, module_globals: dict) -> None:
    nvtx_enter, nvtx_exit, _push, _pop = probes(rec)
    if "__sp_enter__" in module_globals:
        module_globals["__sp_enter__"] = nvtx_enter
    if "__sp_exit__" in module_globals:
        module_globals["__sp_exit__"] = nvtx_exit
