"""The probe ABI that instrumented code calls (docs/internals.md section 1).

    define(module_name, module_globals, relpath, regions) -> bool
    enter(rid) / exit(rid)       a region visit on the current thread
    mark(rid)                    one iteration of loop region rid
    iterate(rid, iterable)       epoch/step loops: per-iteration records with data wait
    reserve(n) -> int            a fresh base of n region ids (on-the-fly instrumentation)

enter/exit/mark are the backend's own functions (C when built, else pure Python), so a probe
call is one call into them and nothing more. Importing this module loads no torch, nvtx, numpy
or json.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Iterator, Sequence

from . import _backend
from . import linemap as _linemap
from . import recorder as _recorder

enter = _backend.impl.enter
exit = _backend.impl.exit
mark = _backend.impl.mark
BACKEND = _backend.NAME

_ENTER_NAME = "__sp_enter__"
_EXIT_NAME = "__sp_exit__"


def define(module_name: str, module_globals: dict, relpath: str, regions: Sequence[tuple[int, str, str, int]]) -> bool:
    """Register a module's regions; returns whether probes are on now.

    The first call starts the recorder. `module_globals` is kept so that `__sp_on__` can be
    switched in every instrumented module later (schedule, rank selection, end of the run), and
    so that NVTX can swap in its own enter/exit without touching the hot path of everyone else.
    """
    # Before the recorder's own excepthook: that one notes the exception, then ours shows it.
    _linemap.register(module_globals.get("__file__"), relpath)
    rec = _recorder.start()
    if not rec.enabled:
        return False
    with rec.lock:
        rec.add_regions(module_name, relpath, regions)
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


def iterate(rid: int, iterable: Iterable[Any]) -> Iterator[Any]:
    from .series import iterate as _iterate

    return _iterate(rid, iterable)


def reserve(n: int) -> int:
    """Base of `n` fresh region ids that no instrumented module uses; define them before use."""
    if n < 0:
        raise ValueError(f"reserve(n): n must not be negative, got {n}")
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
