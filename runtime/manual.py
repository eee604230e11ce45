"""The manual API, for code the instrumentor does not reach.

    from runtime.manual import region, mark, epoch, step, Timer

    @region("load_shard")                 # decorator
    def load(): ...
    with region("allreduce_grads", kind="comm"):   # context manager
        ...
    for e in epoch(range(3)):             # epoch/step boundaries as iterators ...
        for batch in step(loader): ...
    with epoch(): ...                     # ... or as context managers around one epoch/step
    mark("tokens")                        # count one event

Regions made here appear in the run file like instrumented ones (kind `manual` unless given). A
region of kind `comm` is also communication, as a torch.distributed call is: each visit is a call
in a `comm` record (op: its name) and counts in its step's `comm_ns` (`_CommRegion`).
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import types
from threading import get_ident as _get_ident
from time import perf_counter_ns
from typing import Any, Callable, Iterable, Iterator, TypeVar

from . import _backend
from . import recorder as _recorder
from .errors import ScaleprobeRuntimeError

impl = _backend.impl
F = TypeVar("F", bound=Callable[..., Any])
_KINDS = ("manual", "function", "loop", "comm", "epoch", "step")
_ids: dict[tuple[str, str], int] = {}
_ids_lock = threading.Lock()


def _rid(name: str, kind: str, what: str = "region") -> int:
    key = (name, kind)
    try:
        rid = _ids.get(key)
    except TypeError:  # unhashable: not a str
        rid = None
    if rid is None:
        if not isinstance(name, str):
            # else the run file got `"name": 7` (or null, or a list), which the modeler refused, and
            # with it the whole run (review 70 F4)
            raise TypeError(f"{what}: a region name must be a str, not {type(name).__name__}: {name!r}")
        with _ids_lock:
            rid = _ids.get(key)
            if rid is None:
                rec = _recorder.start()
                rid = _ids[key] = rec.new_region(kind, name, "<manual>", 0)
                made = rec
            else:
                made = None
        if made is not None:
            # torch.distributed's calls become communication records as in an instrumented program,
            # also in one that times regions of the manual API alone (review 94 LOW-7: only define()
            # and the epoch and step loops started the watch)
            from . import comm

            comm.watch(made)
    return rid


class region:
    """A timed region: `with region(name):` or `@region(name)`."""

    # `_calls`: set only in a `_CommRegion` (same layout: its class can be switched in __init__)
    __slots__ = ("name", "kind", "_rid", "_opened", "_skipped", "_calls")

    def __init__(self, name: str, kind: str = "manual") -> None:
        if kind != "manual":  # (the common case tests one identical string, as `in _KINDS` did)
            if kind not in _KINDS:
                raise ScaleprobeRuntimeError(f"region({name!r}, kind={kind!r}): kind must be one of {', '.join(_KINDS)}")
            if kind == "comm":
                _load_comm()
                self.__class__ = _CommRegion
                self._calls: dict[int, list] = {}  # per thread, its open calls: [(recorder, call)]
        self.name = name
        self.kind = kind
        self._rid = _rid(name, kind)
        # Per thread, how many times it entered this very object and has not left it yet: with a
        # visit opened, or skipped because probes were off. Only a visit this object opened is
        # ever closed on another thread (a hand-over), never one that another object opened there.
        # A thread changes only its own count, except in a hand-over (under _handover_lock).
        self._opened: dict[int, int] = {}
        self._skipped: dict[int, int] = {}

    def __enter__(self) -> "region":
        rec = _recorder.get()
        me = _get_ident()
        if rec is not None and rec.on:
            if rec is not _plain:  # (see _plain)
                if rec is not _nvtx_only:
                    return _entered(self, rec, me)
                _nvtx(rec)[0](self._rid)
            impl.enter(self._rid)
            self._opened[me] = self._opened.get(me, 0) + 1
        else:
            self._skipped[me] = self._skipped.get(me, 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        me = _get_ident()
        if self._skipped and _forget(self._skipped, me):
            return  # entered with probes off: nothing to end, whatever they are now
        rec = _recorder.get()
        if rec is None or not rec.on:
            # probes went off during the visit: it ends as one left open (no visit counted, no own
            # time: docs/format.md), where instrumented code's stays open until its caller's ends;
            # left open, the thread's later visits were counted as recursion inside it (review 52)
            if _forget(self._opened, me):
                impl.drop(self._rid)
                if rec is not None and rec is not _plain:
                    _dropped(rec, self._rid)
            else:
                _forget_other(self._opened, me)  # entered on another thread: it stays open there
            return
        if rec is _plain:
            if impl.exit(self._rid) is not False:
                opened = self._opened  # _forget(opened, me), inlined: this is every `with` block's exit
                n = opened.get(me)
                if n == 1:
                    opened.pop(me, None)  # a hand-over may have taken it meanwhile
                elif n:
                    opened[me] = n - 1
                return
        # (as above, with what `rec` adds: a traced visit's end read before it ends, the NVTX pop)
        elif (impl.exit(self._rid) if rec is _nvtx_only else _exit(rec, self._rid)) is not False:
            opened = self._opened
            n = opened.get(me)
            if n == 1:
                opened.pop(me, None)
            elif n:
                opened[me] = n - 1
            if rec.cfg.nvtx:
                _nvtx(rec)[1](self._rid)
            return
        # Not open on this thread.
        if _forget(self._opened, me):
            # entered here, but its visit was dropped meanwhile: a region entered before it on this
            # thread was left first (review 70 F7: said nowhere), or the process forked since
            if not _forked:
                _warn_once(self, "after its visit had already ended: a region it was entered inside was left "
                                 "before it, which ends the regions entered inside that one (regions must nest): "
                                 "this visit is not recorded")
            return
        owner = _forget_other(self._opened, me)
        if owner is not None:
            _exit_elsewhere(self, owner, rec)  # entered on another thread (handed over with the work)
        elif _forget_other(self._skipped, me) is None:
            _not_entered(self)

    def __call__(self, fn: F) -> F:
        """The decorator. A generator function, coroutine function or async generator function
        stays one, and each of its resumptions is a visit (its suspended time is not counted), as
        the instrumentor times them (review 70 F3: the creation of the generator or coroutine was
        timed, and frameworks took the coroutine function for a plain one)."""
        import inspect  # (only for decorators: importing this module stays cheap)

        rid = self._rid
        if inspect.isasyncgenfunction(fn):
            return _async_generator_wrapper(rid, fn)  # type: ignore[return-value]
        if inspect.iscoroutinefunction(fn):
            return _coroutine_wrapper(rid, fn)  # type: ignore[return-value]
        if inspect.isgeneratorfunction(fn):
            return _generator_wrapper(rid, fn)  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = _recorder.get()
            if rec is None or not rec.on:
                return fn(*args, **kwargs)
            if rec is not _plain:  # (as in __enter__)
                if rec is not _nvtx_only:
                    return _hooked_call(rec, rid, fn, args, kwargs)
                _nvtx(rec)[0](rid)
            impl.enter(rid)
            try:
                return fn(*args, **kwargs)
            finally:  # _end(rid, rec), inlined: this is every call's
                now = _recorder.get()
                if now is not None and now.on:
                    impl.exit(rid)
                else:  # probes went off meanwhile: as a `with` block's
                    impl.drop(rid)
                if rec is not _plain and rec.cfg.nvtx:
                    _nvtx(rec)[1](rid)

        return wrapper  # type: ignore[return-value]


def _nvtx(rec: Any) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """SCALEPROBE_NVTX=1: push and pop of the manual regions' NVTX ranges, shared with the
    instrumented modules' probes (review 70 F2: manual regions had no ranges)."""
    if not _nvtx_ops:
        from . import nvtx_ranges

        _nvtx_ops.extend(nvtx_ranges.probes(rec)[2:])
    return _nvtx_ops[0], _nvtx_ops[1]


_nvtx_ops: list = []

# What the recorder in use adds to a manual region's visit, known by its identity: the hot paths
# test `rec is _plain` (nothing: the backend's probes alone) where they tested `rec.cfg.nvtx`, then
# `rec is _nvtx_only` (SCALEPROBE_NVTX=1: its ranges pushed and popped inline, as before); any
# other recorder (a traced one, SCALEPROBE_TRACE=1, or one not seen yet) goes through `_enter` (which
# sets these two) and `_exit`, so that runs without tracing pay nothing for it.
_plain: Any = None
_nvtx_only: Any = None


def _enter(rec: Any, rid: int) -> None:
    """`impl.enter(rid)` of a manual region's visit with what `rec` adds to it, in the order the
    instrumented modules' probes have: the NVTX push (SCALEPROBE_NVTX=1), the visit, its trace
    entry (SCALEPROBE_TRACE=1: `Tracer.enter`, the same wrapper as a module's)."""
    global _plain, _nvtx_only
    nvtx = rec.cfg.nvtx
    if nvtx:
        _nvtx(rec)[0](rid)
    tracer = rec.tracer
    if tracer is not None:
        tracer.enter(rid)
        return
    impl.enter(rid)
    if nvtx:
        _nvtx_only = rec
    else:
        _plain = rec


def _entered(r: region, rec: Any, me: int) -> region:
    """`region.__enter__` with `_enter`."""
    _enter(rec, r._rid)
    r._opened[me] = r._opened.get(me, 0) + 1
    return r


def _exit(rec: Any, rid: int) -> Any:
    """`impl.exit(rid)` (its result) of a visit `_enter` began, less its NVTX pop: traced, through
    `Tracer.exit`, which reads its end before the visit ends, as a module's wrapper does."""
    tracer = rec.tracer
    return impl.exit(rid) if tracer is None else tracer.exit(rid)


def _hooked_call(rec: Any, rid: int, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """A call of a function `@region` decorates, with `_enter` and `_end`."""
    _enter(rec, rid)
    try:
        return fn(*args, **kwargs)
    finally:
        _end(rid, rec)


def _dropped(rec: Any, rid: int) -> None:
    """After `impl.drop(rid)` (the visit left while probes were off): its trace entry comes off
    (`Tracer.drop`: no event, counted in `trace_unmatched`) and its NVTX range is popped."""
    if rec.tracer is not None:
        rec.tracer.drop(rid)
    if rec.cfg.nvtx:
        _nvtx(rec)[1](rid)


def _begin(rid: int) -> Any:
    """One visit of `rid` begins when probes are on: the recorder (for `_end`), else None."""
    rec = _recorder.get()
    if rec is None or not rec.on:
        return None
    if rec is not _plain:  # (as in region.__enter__)
        if rec is not _nvtx_only:
            _enter(rec, rid)
            return rec
        _nvtx(rec)[0](rid)
    impl.enter(rid)
    return rec


def _end(rid: int, rec: Any) -> None:
    """The visit `_begin` began ends; as a dropped one when probes went off meanwhile. Traced:
    `Tracer.exit` reads its end before the visit ends, as a module's wrapper does."""
    if rec is None:
        return
    now = _recorder.get()
    if now is not None and now.on:
        if rec is _plain or rec is _nvtx_only:
            impl.exit(rid)
        else:
            _exit(rec, rid)
    else:  # probes went off meanwhile: as a `with` block's
        impl.drop(rid)
        if rec is not _plain:
            _dropped(rec, rid)
        return
    if rec is not _plain and rec.cfg.nvtx:
        _nvtx(rec)[1](rid)


_comm: Any = None  # runtime.comm, loaded by the first comm region (importing this module stays cheap)
_comm_names: dict[int, str] = {}  # rid -> name of the comm regions used as decorators


def _load_comm() -> None:
    global _comm
    if _comm is None:
        from . import comm

        _comm = comm


def _comm_path(rid: int) -> tuple[int, ...]:
    """The call path of the visit of `rid` just entered, as the profile has it (where the probes
    do not time it, excluded or throttled: its caller's, with it)."""
    path = impl.current_path()
    return path if path and path[-1] == rid else path + (rid,)


class _CommRegion(region):
    """`region(name, kind="comm")`: each visit is also a communication call, as a torch.distributed
    collective's: a `comm` record (op: the name; bytes 0, not known; group size null; no GPU time)
    and its interval in the communication time (`comm_ns`) of the steps it overlaps, through
    runtime/comm.py (`begin_manual`/`end_manual`). A block that raises is a failed call (a
    signal's SystemExit/KeyboardInterrupt: cut short), and one still open at the end of the run
    counts up to then (`unfinished`). Its own class, so that other regions pay nothing for it."""

    __slots__ = ()

    def __enter__(self) -> "region":
        rec = _recorder.get()
        me = _get_ident()
        if rec is not None and rec.on:
            rid = self._rid
            if rec is _plain:
                impl.enter(rid)
            else:  # (its visits cost microseconds: one call more for NVTX is nothing)
                _enter(rec, rid)
            self._opened[me] = self._opened.get(me, 0) + 1
            self._calls.setdefault(me, []).append((rec, _comm.begin_manual(self.name, _comm_path(rid))))
        else:
            self._skipped[me] = self._skipped.get(me, 0) + 1
        return self

    def __exit__(self, *exc: object) -> None:
        me = _get_ident()
        if not (self._skipped and me in self._skipped):  # (else entered with probes off: no call)
            taken = _take_call(self._calls, me)
            if taken is not None:  # its call ends before its visit, whose time holds it
                _comm.end_manual(taken[0], taken[1], exc[1] if len(exc) > 1 else None)  # type: ignore[arg-type]
        region.__exit__(self, *exc)

    def __call__(self, fn: F) -> F:
        import inspect

        rid = self._rid
        _comm_names[rid] = self.name
        if inspect.isasyncgenfunction(fn):
            return _async_generator_wrapper(rid, fn, _CommAwaiting)  # type: ignore[return-value]
        if inspect.iscoroutinefunction(fn):
            return _coroutine_wrapper(rid, fn, _CommAwaiting)  # type: ignore[return-value]
        if inspect.isgeneratorfunction(fn):
            return _generator_wrapper(rid, fn, _comm_resumptions)  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            visit = _comm_begin(rid)
            if visit is None:
                return fn(*args, **kwargs)
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                visit[2] = exc
                raise
            finally:
                _comm_end(rid, visit)

        return wrapper  # type: ignore[return-value]


def _take_call(calls: dict[int, list], me: int) -> tuple | None:
    """The call of a comm region's visit that ends on thread `me`: its own innermost, else one
    opened on another thread (a region handed over with its work, as `_forget_other`)."""
    mine = calls.get(me)
    if mine:
        try:
            call = mine.pop()
        except IndexError:  # a hand-over on another thread took it meanwhile
            return None
        if not mine:
            calls.pop(me, None)  # (only this thread adds to its own list)
        return call
    with _handover_lock:
        for thread in list(calls):
            theirs = calls.get(thread)
            if thread != me and theirs:
                call = theirs.pop()
                if not theirs:
                    calls.pop(thread, None)
                return call
    return None


def _comm_begin(rid: int) -> Any:
    """`_begin` of a `_CommRegion`'s resumption: with the call it makes, [recorder, call, the
    exception that ended it] (None: probes are off)."""
    rec = _begin(rid)
    if rec is None:
        return None
    return [rec, _comm.begin_manual(_comm_names[rid], _comm_path(rid)), None]


def _comm_end(rid: int, visit: Any) -> None:
    """`_end` of a `_CommRegion`'s resumption: its call ends, then its visit."""
    if visit is None:
        return
    rec, call, exc = visit
    _comm.end_manual(rec, call, exc)
    _end(rid, rec)


def _raised(visit: Any, exc: BaseException) -> None:
    """The resumption `visit` (what the begin function gave) raised `exc`: a call of a comm region
    (`_comm_begin`) ends failed or cut short by it."""
    if type(visit) is list:
        visit[2] = exc


def _resumptions_with(begin: Callable[[int], Any], end: Callable[[int, Any], None]) -> Callable[[int, Any], Any]:
    """The driver of a region's generator or coroutine whose resumptions' visits `begin` and `end`
    (`_begin`/`_end`; a comm region's `_comm_begin`/`_comm_end`, whose resumptions are its calls):
    made once for each, so that the ordinary one pays nothing for the other."""

    def resumptions(rid: int, it: Any) -> Any:
        """Run the generator or coroutine `it` for its consumer (what `send`/`throw`/`close` of the
        generator this is do to it), each resumption of it inside one visit of `rid`."""
        value: Any = None
        error: BaseException | None = None
        while True:
            rec = begin(rid)
            try:
                item = it.send(value) if error is None else it.throw(error)
            except StopIteration as stop:
                return stop.value
            except BaseException as exc:  # (costs nothing unless it raises)
                _raised(rec, exc)
                raise
            finally:
                end(rid, rec)
            error = None
            try:
                value = yield item
            except GeneratorExit:
                rec = begin(rid)  # its `finally:` blocks run now: part of its time
                try:
                    it.close()
                except BaseException as exc:
                    _raised(rec, exc)
                    raise
                finally:
                    end(rid, rec)
                raise
            except BaseException as exc:  # thrown in by the consumer: into `it`, at its suspension
                value, error = None, exc

    return resumptions


_resumptions = _resumptions_with(_begin, _end)
_comm_resumptions = _resumptions_with(_comm_begin, _comm_end)


class _Awaiting:
    """`await _Awaiting(rid, coro)`: awaits `coro`, each of its resumptions one visit of `rid`."""

    __slots__ = ("_rid", "_it")

    def __init__(self, rid: int, it: Any) -> None:
        self._rid, self._it = rid, it

    def __await__(self) -> Any:
        return _resumptions(self._rid, self._it)


class _CommAwaiting(_Awaiting):
    """`_Awaiting` of a comm region: each resumption is also a call."""

    __slots__ = ()

    def __await__(self) -> Any:
        return _comm_resumptions(self._rid, self._it)


def _generator_wrapper(rid: int, fn: Callable[..., Any], resumptions: Callable[[int, Any], Any] = _resumptions
                       ) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return (yield from resumptions(rid, fn(*args, **kwargs)))

    if getattr(getattr(fn, "__code__", None), "co_flags", 0) & 0x100:  # inspect.CO_ITERABLE_COROUTINE
        return types.coroutine(wrapper)  # a @types.coroutine generator: still awaitable
    return wrapper


def _coroutine_wrapper(rid: int, fn: Callable[..., Any], awaiting: type[_Awaiting] = _Awaiting) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await awaiting(rid, fn(*args, **kwargs))

    return wrapper


def _async_generator_wrapper(rid: int, fn: Callable[..., Any],
                             awaiting: type[_Awaiting] = _Awaiting) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        agen = fn(*args, **kwargs)
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                step = agen.asend(value) if error is None else agen.athrow(error)
                error = None
                item = await awaiting(rid, step)
            except StopAsyncIteration:
                return
            try:
                value = yield item
            except GeneratorExit:
                await awaiting(rid, agen.aclose())  # its `finally:` blocks: part of its time
                raise
            except BaseException as exc:  # thrown in by the consumer (athrow): into `agen`
                value, error = None, exc

    return wrapper


_warned: set[int] = set()
# Set in a child this process forks: the child's probes have no open visits (they are the parent's),
# so a region entered before the fork finds its visit gone there, which is no nesting mistake.
_forked: list[bool] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forked.append(True) if not _forked else None)


_handover_lock = threading.Lock()


def _forget(counts: dict[int, int], thread: int) -> bool:
    """Count one entry of `thread` as left; False if it has none. Only `thread` itself calls this
    for its own count (or a hand-over, under the lock): no other thread writes that key."""
    n = counts.get(thread)
    if not n:
        return False
    if n == 1:
        counts.pop(thread, None)  # no entry left behind: the dict does not grow with threads
    else:
        counts[thread] = n - 1
    return True


def _forget_other(counts: dict[int, int], me: int) -> int | None:
    """Count one entry of any thread but `me` as left (a region handed over between threads): that
    thread, None if there is none."""
    with _handover_lock:
        for thread in list(counts):  # a snapshot: list() of a dict does not let other threads in
            if thread != me and _forget(counts, thread):
                return thread
    return None


def _warn_once(r: region, text: str) -> None:
    if r._rid in _warned:
        return
    _warned.add(r._rid)
    import sys

    print(f"scaleprobe: region {r.name!r} left on thread {threading.current_thread().name!r}, {text}", file=sys.stderr)


def _exit_elsewhere(r: region, owner: int, rec: Any) -> None:
    """`with`-exit of a region on a thread where it is not open, whose visit this region object
    opened on another thread. If exactly one other thread has it as its innermost open region, that
    visit ends now (a region entered on one thread and left on another). Else nothing can be closed:
    said once per region, and the visit stays open where it was entered (it ends with its enclosing
    region there, or with the run)."""
    t = perf_counter_ns()
    if not impl.exit_elsewhere(r._rid):
        _warn_once(r, "where it is not open, and it is not the innermost open region of exactly one other "
                      "thread: this visit is not recorded")
        return
    if rec.tracer is not None:  # its trace event is the owner's, as its visit
        rec.tracer.exit_elsewhere(owner, r._rid, t)
    if rec.cfg.nvtx:  # its NVTX range can only be popped on the thread that pushed it
        from . import nvtx_ranges

        nvtx_ranges.ended_elsewhere(owner, r._rid)


def _not_entered(r: region) -> None:
    """`with`-exit of a region object that was never entered: no visit of anyone's is closed."""
    _warn_once(r, "but this region object was never entered: nothing is recorded")


def mark(name: str) -> None:
    """Count one occurrence of `name` (an `iterations` record in the run file)."""
    impl.mark(_rid(name, "loop", "mark"))


class _Boundary:
    """epoch()/step(): an iterator wrapper like the instrumented loops, or a context manager."""

    def __init__(self, kind: str, name: str, iterable: Iterable[Any] | None) -> None:
        self._rid = _rid(name, kind, kind)
        self._kind = kind
        self._iterable = iterable
        self._one: Any = None  # the series of `with epoch():`/`with step():`, while its block runs

    def __iter__(self) -> Iterator[Any]:
        if self._iterable is None:
            raise ScaleprobeRuntimeError(f"{self._kind}() without an iterable is a context manager: use `with {self._kind}():`")
        from .series import iterate

        return iterate(self._rid, self._iterable)

    def __enter__(self) -> "_Boundary":
        if self._iterable is not None:  # (review 70 F8: the iterable was ignored, one record written)
            raise ScaleprobeRuntimeError(f"{self._kind}(iterable) is an iterator: use `for x in {self._kind}(...)`, "
                                         f"or `with {self._kind}():` without an iterable for one {self._kind}")
        from .series import begin_one

        # no loader: its data wait is null, not the few hundred ns of our own bookkeeping that
        # iterating `(None,)` timed as one (review 83 LOW-7)
        self._one = begin_one(self._rid)
        return self

    def __exit__(self, *exc: object) -> None:
        one, self._one = self._one, None
        if one is not None:
            from .series import end_one

            end_one(one)


def epoch(iterable: Iterable[Any] | None = None, name: str = "epoch") -> _Boundary:
    return _Boundary("epoch", name, iterable)


def step(iterable: Iterable[Any] | None = None, name: str = "step") -> _Boundary:
    return _Boundary("step", name, iterable)


# ----- Timer ------------------------------------------------------------------------------------------

KEYS = ("EPOCH", "BATCH", "FORWARD", "BACKWARD", "COMM", "IO", "OTHER")


class Timer:
    """A benchmark-suite style timer: named intervals and their summary statistics.

        t = Timer()
        with t("FORWARD"): ...
        t.start("IO"); ...; t.stop("IO")
        print(t.format()); t.save("timings.json")

    Keys are the standard ones (KEYS) unless `keys=None` allows any name. Independent of the
    recorder: it works with probes off and without a run file. Thread-safe: each thread has its
    own open intervals (a key may be open on several threads at once; an interval ends on the
    thread that started it), and all of them add to the same samples (review 70 F11).
    """

    def __init__(self, keys: Iterable[str] | None = KEYS) -> None:
        self._keys = None if keys is None else tuple(keys)
        self._open: dict[tuple[int, str], int] = {}  # (thread, key): start
        self._lock = threading.Lock()  # for samples (stop, summary)
        self.samples: dict[str, list[int]] = {}

    def _check(self, key: str) -> None:
        if self._keys is not None and key not in self._keys:
            raise ScaleprobeRuntimeError(f"Timer: unknown key {key!r}; use one of {', '.join(self._keys)} or Timer(keys=None)")

    def start(self, key: str) -> None:
        self._check(key)
        at = (_get_ident(), key)  # only this thread writes its own entries
        if at in self._open:
            raise ScaleprobeRuntimeError(f"Timer: {key!r} started twice without stop() on this thread")
        self._open[at] = perf_counter_ns()

    def stop(self, key: str) -> int:
        t = perf_counter_ns()
        try:
            t0 = self._open.pop((_get_ident(), key))
        except KeyError:
            raise ScaleprobeRuntimeError(f"Timer: stop({key!r}) without start() on this thread") from None
        with self._lock:
            self.samples.setdefault(key, []).append(t - t0)
        return t - t0

    def __call__(self, key: str) -> "_TimerSpan":
        self._check(key)
        return _TimerSpan(self, key)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per key, in seconds: count, min, mean, median, max, stdev (0 for one sample), total."""
        out = {}
        with self._lock:  # a copy: other threads may add samples meanwhile
            samples = [(key, list(xs)) for key, xs in self.samples.items()]
        for key, xs in samples:
            s = [x / 1e9 for x in xs]
            out[key] = {
                "count": len(s), "min": min(s), "mean": statistics.fmean(s), "median": statistics.median(s),
                "max": max(s), "stdev": statistics.stdev(s) if len(s) > 1 else 0.0, "total": sum(s),
            }
        return out

    def format(self) -> str:
        rows = [f"{'key':<10}{'count':>7}{'min':>11}{'mean':>11}{'median':>11}{'max':>11}{'stdev':>11}  (ms)"]
        for key, st in self.summary().items():
            rows.append(f"{key:<10}{st['count']:>7}" + "".join(f"{st[k] * 1e3:>11.3f}" for k in ("min", "mean", "median", "max", "stdev")))
        return "\n".join(rows)

    def save(self, path: str) -> None:
        import json

        with self._lock:
            samples = {key: list(xs) for key, xs in self.samples.items()}
        with open(path, "w") as f:
            json.dump({"unit": "s", "summary": self.summary(), "samples_ns": samples}, f, indent=1)


class _TimerSpan:
    __slots__ = ("_t", "_key")

    def __init__(self, timer: Timer, key: str) -> None:
        self._t = timer
        self._key = key

    def __enter__(self) -> None:
        self._t.start(self._key)

    def __exit__(self, *exc: object) -> None:
        self._t.stop(self._key)
