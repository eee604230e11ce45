"""The probe ABI that instrumented code calls (docs/internals.md section 1).

    define(module_name, module_globals, relpath, regions, abi=1, build=None) -> bool
    enter(rid) / exit(rid)       a region visit on the current thread
    mark(rid)                    one iteration of loop region rid
    left() / back()              a generator or coroutine left its regions at a suspension / whether
                                 it did and has not come back yet (then forgotten)
    iterate(rid, iterable)       epoch/step loops: per-iteration records with data wait
    async_iter(rids, aiterable)  `async for`: leave regions `rids` while awaiting each `__anext__`
    async_ctx(rids, cm)          `async with`: the same around `__aenter__` and `__aexit__`
    reserve(n) -> int            a fresh base of n region ids (on-the-fly instrumentation)
    ABI                          the probe ABI's number; define refuses code written for another

enter/exit/mark/left/back are the backend's own functions (C when built, else pure Python), so a probe
call is one call into them and nothing more. Importing this module loads no torch, nvtx, numpy
or json.
"""

from __future__ import annotations

import builtins
import functools
import sys
from types import CoroutineType as _CoroutineType, GeneratorType as _GeneratorType
from typing import Any, AsyncIterator, NoReturn, Sequence

from . import _backend
from . import linemap as _linemap
from . import recorder as _recorder
from . import series as _series
from ._partial313 import GET as _PARTIAL_GET, WARNS as _PARTIAL_WARNS, warn_explicit as _warn_explicit
from ._partial313 import warning as _partial_warning

try:  # the awaitable the wrappers of `async for`/`async with` return (runtime/_asyncwrap.c)
    from ._asyncwrap import around as _around
except ImportError:  # not built: the wrappers are coroutines (a frame of ours above the awaited one)
    _around = None
try:  # a type's name as the interpreter's messages print it (review 107 MED-1; an older build lacks it)
    from ._asyncwrap import tp_name as _c_tp_name
except ImportError:
    _c_tp_name = None

#: The probe ABI: what instrumented code may call here and what it means (docs/internals.md section 1).
#: Bumped with instrumentor/revision.py's PROBE_ABI when emitted code needs another runtime (a probe
#: added, or one whose arguments or meaning changed); `define` refuses code written for another one.
ABI = 1

enter = _backend.impl.enter
exit = _backend.impl.exit
mark = _backend.impl.mark
left = _backend.impl.left
back = _backend.impl.back
_back_of = _backend.impl.back_of
BACKEND = _backend.NAME

_ENTER_NAME = "__sp_enter__"
_EXIT_NAME = "__sp_exit__"

#: What instrumented code finds when it runs with globals that lack the probes (review 41:
#: `types.FunctionType(f.__code__, other_globals)`, `exec(f.__code__, {})` raised NameError):
#: probes off, iterables and context managers passed through. They sit in builtins, where a name
#: is looked up last, so a module's own probes always come first.
_builtins_dict = builtins.__dict__
OFF_PROBES = {
    "__sp_on__": False,
    "__sp_enter__": lambda rid: None,
    "__sp_exit__": lambda rid: None,
    "__sp_mark__": lambda rid: None,
    "__sp_left__": lambda inner=0: True,
    "__sp_back__": lambda inner=0: False,
    "__sp_iterate__": lambda rid, iterable: iterable,
    "__sp_tick__": lambda rid: None,
    "__sp_untick__": lambda rid: None,
    "__sp_aiter__": lambda rids, aiterable: aiterable,
    "__sp_actx__": lambda rids, cm: cm,
}


#: relpath -> the build (`<version>.<rewrite revision>`) of each module defined in this process
#: that said it (docs/internals.md section 1)
builds: dict[str, str] = {}


def define(module_name: str, module_globals: dict, relpath: str, regions: Sequence[tuple[int, str, str, int]],
           abi: int = 1, build: str | None = None) -> bool:
    """Register a module's regions; returns whether probes are on now.

    The first call starts the recorder. `module_globals` is kept so that `__sp_on__` can be
    switched in every instrumented module later (schedule, rank selection, end of the run), and
    so that NVTX can swap in its own enter/exit without touching the hot path of everyone else.

    `abi`: the probe ABI the module was instrumented for. Code of another ABI is refused, one line
    and exit 2, before anything is recorded. Builds written before the ABI had a number pass none:
    they are ABI 1 (the default stays 1 when ABI grows). `build`: the scaleprobe and rewrite
    revision that wrote the module (`"0.1.0.15"`), kept in `builds` and named in the errors.
    """
    if abi != ABI:
        made = f" (built by scaleprobe {build})" if build else ""
        _refuse(f"{relpath}{made} was instrumented for probe ABI {abi}, this runtime has ABI {ABI}: "
                "instrument it again with this scaleprobe")
    if module_globals.get("__sp_define__") is define:  # called once: not one of the module's functions (review 100 LOW-3)
        del module_globals["__sp_define__"]
    if module_name == "__main__" and (code := _entry_relined(sys._getframe(1))) is not None:
        # The script at its own lines, ended where it ends (here, not in a function of its own: each
        # frame between is one more above the script's in `inspect.stack()`): `SystemExit` as it
        # would end (exit status 0, atexit handlers, threads joined); its own `SystemExit` as it
        # raised it; an uncaught exception shown by `sys.excepthook` with the script's own traceback,
        # not the two frames above it (review 102 HIGH-1: a program's rich or sentry hook printed
        # them), then raised on past a hook that shows nothing, so that Python ends the process as
        # for any uncaught exception (exit status 1; death by SIGINT for a KeyboardInterrupt).
        from .launch_toplevel import restore_program_limit, run_toplevel

        _linemap.outer_entry = (code.co_filename, sys._getframe(1).f_lineno)  # (what the runtime's printing leaves out)
        try:
            run_toplevel(code, module_globals)  # at a script's depth: the recursion limit's headroom is the same
        except SystemExit:
            raise
        except BaseException as exc:
            tb = exc.__traceback__
            exc.__traceback__ = tb = tb.tb_next if tb is not None and tb.tb_frame is sys._getframe() else tb
            _show_uncaught(exc, tb)
            sys.excepthook = _shown
            raise
        finally:
            restore_program_limit()
        raise SystemExit
    if build is not None:
        builds[relpath] = build
    if "__sp_on__" not in _builtins_dict:
        for name, probe in OFF_PROBES.items():
            _builtins_dict.setdefault(name, probe)
    # Before the recorder's own excepthook: that one notes the exception, then ours shows it.
    _linemap.register(module_globals.get("__file__"), relpath)
    rec = _recorder.start()
    if not rec.enabled:
        return False
    with rec.lock:
        clash = _clash(rec.regions, relpath, regions)
        if clash is not None:
            _refuse(clash)
        rec.add_regions(module_name, relpath, regions)
        if not rec.finished:  # (after the end, probes stay off: nothing to switch, nothing to keep)
            rec.modules.append(module_globals)
    if rec.cfg.nvtx:
        from . import nvtx_ranges

        nvtx_ranges.install(rec, module_globals)
    if rec.tracer is not None:
        rec.tracer.install(module_globals)
    if rec.gpu_rotation is not None:
        rec.gpu_rotation.install(module_globals)
    if module_name == "__main__":
        rec.watch_main(sys._getframe(1).f_code)  # the module's own code: how it ends is the exit code
    from . import comm

    comm.watch(rec)
    return rec.on


def _show_uncaught(exc: BaseException, tb: Any) -> None:
    """What Python does with an uncaught exception before it ends: `sys.excepthook`, and where that
    fails, both tracebacks through Python's own printing."""
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    if hasattr(sys, "last_exc"):  # 3.12+
        sys.last_exc = exc
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        print("sys.excepthook is missing", file=sys.stderr)
        sys.__excepthook__(type(exc), exc, tb)
        return
    try:
        hook(type(exc), exc, tb)
    except BaseException as failed:  # noqa: BLE001 - as Python: say both
        print("Error in sys.excepthook:", file=sys.stderr)
        sys.__excepthook__(type(failed), failed, failed.__traceback__)
        print("\nOriginal exception was:", file=sys.stderr)
        sys.__excepthook__(type(exc), exc, tb)


def _shown(*args: Any) -> None:
    """`sys.excepthook` once `define` has shown the relined script's uncaught exception: Python calls
    it as the exception leaves the script, and nothing is shown twice."""


def _entry_relined(frame: Any) -> Any:
    """`python OUT/main.py`: Python compiled the entry script itself, at OUT's lines, before the
    runtime was imported. Its code compiled with its original lines (`original_lines.entry_code`,
    as `runtime.launch` runs it), which `define` runs in the same module from its header on (nothing
    of the program ran before it), ending the script where that run ends: TorchScript, `inspect`,
    `logging` and the tracebacks the program formats see SRC's lines, as without scaleprobe (review
    100 HIGH-1: `torch.jit.script` of a function of the entry script raised `try blocks aren't
    supported`). None where the interpreter does not run the file itself (a frame above: runpy, pdb,
    cProfile), under `-i`, or where `entry_code` has no such code (SRC gone or edited)."""
    if frame.f_back is not None or frame.f_code.co_name != "<module>" or sys.flags.inspect:
        return None
    path = frame.f_code.co_filename
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    import warnings

    from .original_lines import entry_code

    with warnings.catch_warnings():  # what compiling the script warns of, Python said compiling it
        warnings.simplefilter("ignore")
        return entry_code(path, data)


def _refuse(message: str) -> NoReturn:
    """What an instrumented module cannot run with: one line and exit 2, as a bad SCALEPROBE_*
    variable at start-up (recorder._refuse_to_start), not a traceback through its import."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    print(f"scaleprobe: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None


def __getattr__(name: str) -> Any:
    """PEP 562, called only for a name this module lacks: a module instrumented for a later probe
    ABI imports a probe this runtime does not have, in its header's `from runtime.probe import`,
    before its `define` could name the ABI. Said in one line, exit 2, as define says it (else a
    bare ImportError at line 1 of the module); any other lookup is the usual AttributeError."""
    if not name.startswith("_"):
        frame = sys._getframe(1)
        if _importing_probes(frame):
            where = frame.f_globals.get("__file__") or frame.f_globals.get("__name__") or "a module"
            _refuse(f"{where} imports the probe {name!r}, which this runtime (probe ABI {ABI}) does not have: "
                    "it was instrumented by another scaleprobe; instrument it again with this scaleprobe")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _importing_probes(frame: Any) -> bool:
    """Whether `frame` runs an instrumented module's top level (it defines its regions) and is in a
    `from ... import` of a name now (IMPORT_FROM) that it binds to a reserved `__sp_*__` name: the
    header's import, not one of the program's own (review 94 LOW-2: a program's `try: from
    runtime.probe import x / except ImportError` exited 2 instead of taking its fallback)."""
    code = frame.f_code
    if code.co_name != "<module>" or "__sp_define__" not in code.co_names:
        return False
    import dis

    found = False
    for ins in dis.get_instructions(code):  # (only on this error path)
        if found:
            return ins.opname in ("STORE_NAME", "STORE_GLOBAL") and str(ins.argval).startswith("__sp_")
        found = ins.offset == frame.f_lasti and ins.opname == "IMPORT_FROM"
    return False


def _clash(known: dict, relpath: str, regions: Sequence[tuple[int, str, str, int]]) -> str | None:
    """Why `regions` cannot be defined beside the regions `known` (recorder.regions: id ->
    (kind, qualname, relpath, line, module)): an id another module's region has. `instrument`
    gives ids unique in its build (also past the ids of a module it carries over already
    instrumented), so modules of two builds were mixed."""
    for reg in regions:
        old = known.get(int(reg[0]))
        if old is None or (old[1], old[2]) == (reg[2], relpath):
            continue
        if _recorder.RESERVED_BASE <= int(reg[0]) < _recorder.RESERVED_END:  # (review 94 LOW-3)
            return (f"region id {reg[0]} of {relpath}:{reg[3]} {reg[2]} is in the runtime's own range "
                    f"({_recorder.RESERVED_BASE} to {_recorder.RESERVED_END - 1}: the manual API's, communication's), "
                    f"where {old[2]}:{old[3]} {old[1]} has it: the module was instrumented by an earlier scaleprobe, "
                    "or carried over already instrumented with ids that large (and a build gives the others ids "
                    "above a carried module's); instrument the original sources in one build")
        first, second = builds.get(old[2]), builds.get(relpath)
        which = (f"builds {first} and {second}" if first and second and first != second else "separate builds")
        return (f"region id {reg[0]} defined twice: {old[2]}:{old[3]} {old[1]} and {relpath}:{reg[3]} {reg[2]}: "
                f"the program mixes modules instrumented by {which} (a module instrumented elsewhere, or "
                "an older build's file left on sys.path); instrument the project's original sources in one "
                "build and run that")
    return None


# The loop header `for x in __sp_iterate__(rid, it):` calls series.loop directly: an exception of the
# user's iterator must not pass through a frame of ours (see series.loop).
iterate = _series.loop
# A `while` epoch or step loop: `__sp_tick__(rid)` at the top of its body, `__sp_untick__(rid)` in its `finally:`.
tick = _series.tick
untick = _series.untick


def _leave(g: dict, rids: tuple[int, ...]) -> None:
    # Read from the module's globals on every call: the flag changes at run time, and NVTX, tracing
    # and GPU sampling swap in their own __sp_enter__/__sp_exit__ there.
    if g.get("__sp_on__"):
        leave = g["__sp_exit__"]
        for rid in rids:
            leave(rid)


def _resume(g: dict, rids: tuple[int, ...]) -> None:
    if g.get("__sp_on__"):
        enter = g["__sp_enter__"]
        for rid in reversed(rids):
            enter(rid)


class _AsyncIterBase:
    """What `async for` sees: the inner async iterator, with the regions left while `__anext__` awaits."""

    __slots__ = ("_rids", "_g", "_it")

    def __init__(self, rids: tuple[int, ...], it: Any, g: dict) -> None:
        self._rids, self._it, self._g = rids, it, g

    def __aiter__(self) -> "_AsyncIterBase":
        return self


class _AsyncIterCoro(_AsyncIterBase):
    """Without runtime._asyncwrap: `__anext__` is a coroutine that awaits the step (its frame is the
    awaited one's caller)."""

    __slots__ = ()

    async def __anext__(self) -> Any:
        g, rids = self._g, self._rids
        _leave(g, rids)
        try:
            # the builtin anext() calls the type's __anext__ slot on every step, as `async for` does
            # (a method in __slots__, a staticmethod or a partial are bound the way Python binds them)
            step = anext(self._it)
            try:
                awaited = _anext_awaitable(step)
            except BaseException as exc:  # noqa: BLE001 - whatever it raised (review 107 MED-1, see _anext_error)
                raise _anext_error(step, exc) from exc  # (raised here: a shown traceback leaves __anext__ out)
            return await awaited  # the item is returned, never kept
        finally:
            _resume(g, rids)


class _AsyncIterFrameless(_AsyncIterBase):
    """With runtime._asyncwrap: `__anext__` is a plain method that leaves the regions and returns the
    step wrapped by `_around`, a C awaitable that re-enters them when the step is done. No frame of
    ours is left between the user's `async for` and the awaited step (warnings' stacklevel,
    sys._getframe(1) and tracebacks in it see the user's line)."""

    __slots__ = ()

    def __anext__(self) -> Any:
        g, rids = self._g, self._rids
        _leave(g, rids)
        try:
            step = anext(self._it)  # (as in _AsyncIterCoro)
            return _around_step(step, g, rids)  # the item is returned, never kept
        except BaseException:  # noqa: BLE001 - what the coroutine's `finally:` did before the await
            _resume(g, rids)
            raise


def _around_step(step: Any, g: dict, rids: tuple[int, ...]) -> Any:
    """`_around(step)` for `async for`: where getting the iterator to await from `step` fails (no
    `__await__`, one that returns no iterator or a coroutine, review 56 F9; one that raises anything,
    review 107 MED-1: the built program let a ZeroDivisionError or a StopAsyncIteration, which ended
    the loop, through), the error `async for` itself raises (_anext_error), returned as an awaitable
    whose first step raises it: only C code runs between the statement and the raise, so it shows
    at the statement, as without probes, and the regions are re-entered when it is raised."""
    try:
        return _around(step, g, rids)
    except BaseException as exc:  # noqa: BLE001 - the interpreter wraps whatever it was
        err = _anext_error(step, exc)
    return _around(_raising(err), g, rids)


def _anext_error(step: Any, cause: BaseException) -> TypeError:
    """What `async for` raises where getting the iterator to await from the step `__anext__` returned
    fails (GET_ANEXT, _PyErr_FormatFromCause): a TypeError naming the step's type as the interpreter
    does, whose __cause__ and __context__ are the failure, whatever it was (a KeyboardInterrupt
    too), the context suppressed; the failure without our frames in its traceback (review 107 MED-1)."""
    tb = cause.__traceback__
    while tb is not None and tb.tb_frame.f_code in _AWAIT_CODE:
        tb = tb.tb_next
    cause.__traceback__ = tb
    err = TypeError(f"'async for' received an invalid object from __anext__: {_tp_name(type(step), 100)}")
    err.__cause__ = cause  # (suppresses the context, as `raise ... from` does)
    err.__context__ = cause
    return err


def _raising(exc: BaseException) -> Any:
    """An awaitable whose first step raises `exc` from C code (series._raiser's way, a step later:
    raised by `__await__` itself, `async for` would wrap it again): a finished generator's throw(),
    called by the iterator `__await__` returns, with `exc`'s own traceback and __context__."""
    throw = functools.partial(_series._dead_generator().throw, exc)
    await_ = staticmethod(functools.partial(iter, throw, _MISSING))
    return type("anext_error", (), {"__slots__": (), "__await__": await_})()


class _Awaiting:
    """Awaited by the pure fallback in place of a step that is no coroutine: `await` gets the
    iterator the step's `__await__` returned already (it is called once, as `async for` calls it)."""

    __slots__ = ("_it",)

    def __init__(self, it: Any) -> None:
        self._it = it

    def __await__(self) -> Any:
        return self._it


def _anext_awaitable(step: Any) -> Any:
    """What the pure fallback awaits for a step of `async for`: the step itself where it is a
    coroutine, else the iterator its `__await__` returns, checked as the interpreter checks it
    (_PyCoro_GetAwaitableIter); raises what that raises (the caller wraps it, review 107 MED-1)."""
    if _is_coroutine(step):
        return step
    kind = type(step)
    if _lookup(kind, "__await__") is _MISSING:
        raise TypeError(f"object {_tp_name(kind, 100)} can't be used in 'await' expression")
    it = _special(step, "__await__")()  # bound as the slot binds it (a C type's: its own slot)
    if _is_coroutine(it):
        del it  # dropped here, as the interpreter drops it (its "never awaited" warning)
        raise TypeError("__await__() returned a coroutine")
    if _lookup(type(it), "__next__") is _MISSING:
        raise TypeError(f"__await__() returned non-iterator of type '{_tp_name(type(it), 100)}'")
    return _Awaiting(it)


def _is_coroutine(obj: Any) -> bool:
    """A coroutine or a generator marked by types.coroutine (what `await` iterates as it is)."""
    kind = type(obj)
    return kind is _CoroutineType or (kind is _GeneratorType and bool(obj.gi_code.co_flags & _ITERABLE_COROUTINE))


_AsyncIter = _AsyncIterCoro if _around is None else _AsyncIterFrameless


class _AsyncIterPartial(_AsyncIter):  # type: ignore[valid-type,misc]
    """Python 3.13, an iterator whose type's `__anext__` is a functools.partial when the loop starts:
    its FutureWarning (runtime/_partial313.py) names the user's `async for` (the frame awaiting
    us, or calling us with runtime._asyncwrap), not ours. Looked up again at every step, as `async
    for` does (the type's `__anext__` may change). Other iterators take _AsyncIter's path, whose
    anext() does the lookup in C at no cost of ours: one that only becomes a partial during the
    loop warns naming runtime/probe.py."""

    __slots__ = ()

    if _around is None:
        async def __anext__(self) -> Any:
            g, rids = self._g, self._rids
            _leave(g, rids)
            try:
                step = _partial_step(self._it, sys._getframe(1))
                if step is _MISSING:
                    step = anext(self._it)
                try:
                    awaited = _anext_awaitable(step)
                except BaseException as exc:  # noqa: BLE001 - as in _AsyncIterCoro (review 107 MED-1)
                    raise _anext_error(step, exc) from exc
                return await awaited
            finally:
                _resume(g, rids)
    else:
        def __anext__(self) -> Any:
            g, rids = self._g, self._rids
            _leave(g, rids)
            try:
                step = _partial_step(self._it, sys._getframe(1))  # (our caller: the user's frame)
                # the statement's error for a step it cannot await, as for any other step (review 107 MED-1)
                return _around_step(anext(self._it) if step is _MISSING else step, g, rids)
            except BaseException:  # noqa: BLE001 - as in _AsyncIterFrameless
                _resume(g, rids)
                raise


def _partial_step(it: Any, caller: Any) -> Any:
    """_AsyncIterPartial's step, where the type's `__anext__` is a functools.partial now: its
    FutureWarning naming `caller`'s line (the user's `async for`), then the partial's call (what
    its __get__ returns: itself); _MISSING where it is no partial now (anext() takes the step)."""
    attr = _lookup(type(it), "__anext__")
    if _lookup(type(attr), "__get__") is not _PARTIAL_GET:
        return _MISSING
    failed = False
    try:
        _warn_explicit(*_partial_warning(caller))
    except BaseException:  # noqa: BLE001 - an error filter: the slot raises its own error
        failed = True
    if failed:  # raised outside the handler: its context is the program's, as the slot's
        raise AttributeError(f"object {_tp_name(type(it))} does not have __anext__ method")
    return attr()  # (one that cannot be awaited: the caller raises the statement's error, with its cause)


def async_iter(rids: tuple[int, ...], aiterable: Any) -> AsyncIterator[Any]:
    """`async for x in it:` becomes `async for x in async_iter(rids, it):`.

    `rids` are the regions open at the loop, innermost first (the loop's own, then outer loops,
    then the function's): each `__anext__` leaves them before awaiting and re-enters them after it
    returns or raises (StopAsyncIteration included), so suspended time is not counted as compute.
    """
    kind = type(aiterable)
    try:
        try:
            aiter_ = _special(aiterable, "__aiter__")
        except BaseException:  # noqa: BLE001 - binding it failed (its __get__ raised): the slot
            aiter_ = _UNBOUND  # replaces the error with its own, as for __anext__
        if aiter_ is _UNBOUND:
            raise AttributeError(f"object {_tp_name(kind)} does not have __aiter__ method")
        if aiter_ is _MISSING:
            raise TypeError(f"'async for' requires an object with __aiter__ method, got {_tp_name(kind, 100)}")
        it = aiter_()
    except BaseException as exc:  # noqa: BLE001 - raised by the `async for` statement itself
        return _series.raise_at_statement(_without_special(exc), "__aiter__")
    anext_ = _lookup(type(it), "__anext__")
    if anext_ is _MISSING:  # found, not bound: anext() binds it at each step
        return _series.raise_at_statement(TypeError(
            "'async for' received an object from __aiter__ that does not implement __anext__: "
            f"{_tp_name(type(it), 100)}"),
            "__aiter__")
    partial = _PARTIAL_WARNS and _lookup(type(anext_), "__get__") is _PARTIAL_GET
    wrapper = _AsyncIterPartial if partial else _AsyncIter
    return wrapper(rids, it, sys._getframe(1).f_globals)


_MISSING = object()
_UNBOUND = object()
_ITERABLE_COROUTINE = 0x100  # inspect.CO_ITERABLE_COROUTINE: a generator marked by types.coroutine


def _awaitable(obj: Any) -> bool:
    """Whether `await obj` gets an iterator, as the interpreter decides (a coroutine, a generator
    of types.coroutine, or a type with __await__): what it says of other objects names the
    statement (review 44), where a plain `await` in our wrapper would say "can't be used in 'await'
    expression"."""
    kind = type(obj)
    if kind is _CoroutineType:
        return True
    if kind is _GeneratorType:
        return bool(obj.gi_code.co_flags & _ITERABLE_COROUTINE)
    return _lookup(kind, "__await__") not in (_MISSING, None)


def _not_awaitable(method: str, obj: Any) -> str:
    """What `async with` says of a manager whose `method` returned `obj`, which cannot be awaited."""
    return (f"'async with' received an object from {method} that does not implement __await__: "
            f"{_tp_name(type(obj), 100)}")


def _tp_name(kind: type, limit: int = 50) -> str:
    """`%.<limit>s` of the type's tp_name, as the interpreter names a type in its errors (the
    `__aiter__`/`__anext__` slots `%.50s`, `async for` and `async with` `%.100s`): a class's
    __name__, a C type's with its module, `collections.deque` (review 107 MED-1)."""
    if _c_tp_name is not None:
        name = _c_tp_name(kind)
    elif kind.__flags__ & _HEAPTYPE or kind.__module__ == "builtins":
        name = kind.__name__  # (a heap type made from a C spec has its module too: only the extension knows)
    else:
        name = f"{kind.__module__}.{kind.__name__}"
    return name.encode("utf-8", "surrogatepass")[:limit].decode("utf-8", "replace")


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class, whose tp_name is its __name__


# Python 3.11+: a manager without __aenter__ or __aexit__ is a TypeError naming the protocol
_PROTOCOL_ERRORS = sys.version_info >= (3, 11)


def _lookup(kind: type, name: str) -> Any:
    """`name` in the dicts of `kind`'s MRO, as the interpreter looks special methods up (never on
    the instance, never through __getattr__); _MISSING when none has it (None is a value)."""
    for base in kind.__mro__:
        found = base.__dict__.get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def _special(obj: Any, name: str) -> Any:
    """A special method as the interpreter finds it: on the type, bound through the attribute's
    `__get__` when it has one (a function, a staticmethod, a member of `__slots__`), else as it is
    (a `functools.partial`, None); _MISSING when the type has none."""
    kind = type(obj)
    attr = _lookup(kind, name)
    get = getattr(type(attr), "__get__", None) if attr is not _MISSING else None
    if get is _PARTIAL_GET:  # Python 3.13 (_partial313): the statement warns (our caller's caller)
        _warn_explicit(*_partial_warning(sys._getframe(2)))
        return attr
    return attr if get is None else get(attr, obj, kind)


def _without_special(exc: BaseException) -> BaseException:
    """`exc` without the frames of _special/_lookup after the caller's (a `__get__` that raised
    shows the statement and the `__get__`, as without the wrapper)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_next.tb_frame.f_code in _OWN_CODE:
        tb.tb_next = tb.tb_next.tb_next
    return exc


class _AsyncCtxBase:
    """What `async with` sees: the inner manager, with the regions left while its methods await."""

    __slots__ = ("_rids", "_g", "_cm", "_aenter", "_aexit")

    def __init__(self, rids: tuple[int, ...], cm: Any, aenter: Any, aexit: Any, g: dict) -> None:
        self._rids, self._cm, self._aenter, self._aexit, self._g = rids, cm, aenter, aexit, g


class _AsyncCtxCoro(_AsyncCtxBase):
    """Without runtime._asyncwrap: coroutines that await the manager's methods."""

    __slots__ = ()

    async def __aenter__(self) -> Any:
        g, rids = self._g, self._rids
        _leave(g, rids)
        try:
            step = self._aenter()
            if not _awaitable(step):
                raise TypeError(_not_awaitable("__aenter__", step))
            return await step
        finally:
            _resume(g, rids)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        g, rids = self._g, self._rids
        if exc_type is not None and _back_of(sys._getframe(1)):
            # what the body raised came from a suspension of the awaiting coroutine, which left
            # these regions and had not re-entered them yet (a one-line body, a later item that
            # awaits): re-entered here, so that they are open while __aexit__ runs and after it
            _resume(g, rids)
        _leave(g, rids)
        try:
            # returned as is: its truth value decides whether the exception is suppressed
            step = self._aexit(exc_type, exc, tb)
            if not _awaitable(step):
                raise TypeError(_not_awaitable("__aexit__", step))
            return await step
        finally:
            _resume(g, rids)


class _AsyncCtxFrameless(_AsyncCtxBase):
    """With runtime._asyncwrap: plain methods returning the manager's awaitable wrapped by `_around`
    (see _AsyncIterFrameless)."""

    __slots__ = ()

    def __aenter__(self) -> Any:
        g, rids = self._g, self._rids
        _leave(g, rids)
        try:
            step = self._aenter()
            if not _awaitable(step):
                raise TypeError(_not_awaitable("__aenter__", step))
            return _around(step, g, rids)
        except BaseException:  # noqa: BLE001 - as in _AsyncIterFrameless
            _resume(g, rids)
            raise

    def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        g, rids = self._g, self._rids
        # our caller is the awaiting coroutine, as it is the coroutine's caller in _AsyncCtxCoro
        if exc_type is not None and _back_of(sys._getframe(1)):
            _resume(g, rids)  # (as in _AsyncCtxCoro)
        _leave(g, rids)
        try:
            step = self._aexit(exc_type, exc, tb)  # its value returned as is, through _around
            if not _awaitable(step):
                raise TypeError(_not_awaitable("__aexit__", step))
            return _around(step, g, rids)
        except BaseException:  # noqa: BLE001 - as in _AsyncIterFrameless
            _resume(g, rids)
            raise


_AsyncCtx = _AsyncCtxCoro if _around is None else _AsyncCtxFrameless


def async_ctx(rids: tuple[int, ...], cm: Any) -> Any:
    """`async with cm as v:` becomes `async with async_ctx(rids, cm) as v:` (`rids` as for async_iter)."""
    kind = type(cm)
    # bound once, at entry, as BEFORE_ASYNC_WITH does
    try:
        aenter = _special(cm, "__aenter__")
        aexit = _special(cm, "__aexit__") if aenter is not _MISSING else _MISSING
        if aenter is _MISSING or aexit is _MISSING:
            if not _PROTOCOL_ERRORS:  # Python 3.10: the name of the first one missing
                raise AttributeError("__aenter__" if aenter is _MISSING else "__aexit__")
            missed = " (missed __aexit__ method)" if aenter is not _MISSING else ""
            raise TypeError(f"'{_tp_name(kind, 200)}' object does not support the asynchronous context manager "
                            f"protocol{missed}")
    except BaseException as exc:  # noqa: BLE001 - raised by the `async with` statement itself
        return _series.raise_at_statement(_without_special(exc), "__aenter__", "__aexit__")
    return _AsyncCtx(rids, cm, aenter, aexit, sys._getframe(1).f_globals)


_OWN_CODE = frozenset((_special.__code__, _lookup.__code__))
#: the frames getting the iterator of a step of `async for` passes (_anext_error leaves them out)
_AWAIT_CODE = frozenset((_AsyncIterCoro.__anext__.__code__, _AsyncIterPartial.__anext__.__code__,
                         _around_step.__code__, _anext_awaitable.__code__, _special.__code__))


def reserve(n: int, relpath: str | None = None, build: str | None = None) -> int:
    """Base of `n` fresh region ids that no instrumented module uses; define them before use.
    `relpath`, `build`: the module they are for and the instrumentor that rewrote it (the import
    hook's), kept as `define` keeps them, before this starts the recorder, whose header names the
    first build (review 94 MED-1: under `--instrument` it was always null)."""
    if n < 0:
        raise ValueError(f"reserve(n): n must not be negative, got {n}")
    if build is not None:
        builds.setdefault(relpath or "<reserved>", build)
    return _recorder.start().reserve(n)


def is_on() -> bool:
    rec = _recorder.get()
    return bool(rec is not None and rec.on)


def set_enabled(on: bool) -> None:
    """Switch probes on or off in every instrumented module (a flag check is all they cost off)."""
    rec = _recorder.start()
    rec.set_on(on)


def finish(status: str | None = None, exit_code: int | None = None) -> None:
    """Final flush and end record now (the launcher calls it with the script's exit code)."""
    rec = _recorder.get()
    if rec is not None:
        rec.finish(status=status, exit_code=exit_code)


def flush() -> None:
    rec = _recorder.get()
    if rec is not None:
        rec.flush()


def run_file() -> str | None:
    """Path of this process's run file, or None when nothing is recorded."""
    rec = _recorder.get()
    return rec.path if rec is not None and rec.enabled else None
